// Synthetic MiniMax-H3 model sets at the real shapes, in DiffSynth's MiniMax-H3-NF4 layout
// (minimax_h3.md §G.2, §C.11, §B.1, §E, §F): the tensor names, shapes, dtypes and type mix of its
// five files, each quantised Linear as bitsandbytes' six tensors (codes, absmax, NF4 code book,
// nested absmax, the dynamic 8-bit code book, the quant-state JSON), in the order the safetensors
// library writes a file (by dtype, widest first, then by name). What a reader reads when it opens
// a file — the quant-state JSON — and the two code books are written for real; every other tensor
// is left to the caller (a sparse hole for `ferry-cli synth --set`, random bytes for a benchmark).
//
// What the reference does not pin down, and is therefore a plausible layout rather than the
// files': the nesting of the audio VAE's DAC encoder (`encoder.block.N.*`) and the byte order
// within a dtype when two tensors' names sort the same.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/io/safetensors_writer.h"

namespace ferry::models::h3 {

// The real shapes by default; tests shrink them.
struct SyntheticShapes {
  // DiT (§C.1)
  std::int64_t dit_hidden = 5376, dit_heads = 56, dit_layers = 50, dit_ffn = 14336;
  std::int64_t refiner_layers = 2, time_hidden = 5376, time_dim = 2688, freq_dim = 256;
  std::int64_t latents = 24, audio_latents = 32;
  bool pruned = false;
  // Qwen3-VL language model (§B.1): H3's 50 layers
  std::int64_t vocab = 151936, text_dim = 5120, text_heads = 64, text_kv_heads = 8;
  std::int64_t head_dim = 128, text_ffn = 25600, text_layers = 50;
  // Vision tower (§B.1)
  std::int64_t vision_dim = 1152, vision_depth = 27, vision_ffn = 4304, vision_patch = 16;
  std::int64_t vision_temporal_patch = 2, vision_merge = 2, vision_side = 48;
  std::vector<std::int64_t> deepstack_blocks = {8, 16, 24};
  // Video VAE's ViT decoder (§E.3)
  std::int64_t vae_dim = 2048, vae_blocks = 36, vae_ffn = 8192;
  // Video VAE's CNN encoder (§E.2): each level's width (a downsampling after the first four)
  std::vector<std::int64_t> vae_encoder_channels = {128, 256, 256, 512, 512, 1024};
  // Audio VAE (§F): the DAC encoder's first width (doubled by each of its five blocks: the
  // latent width), BigVGAN's first width (halved by each of its seven upsamplers)
  std::int64_t audio_encoder_dim = 64, audio_decoder_dim = 1024;
};

// Whether a tensor of a part is a bitsandbytes weight's codes, side tensor or state, and which.
enum class Bnb4Part { kNone, kCodes, kAbsmax, kQuantMap, kNestedAbsmax, kNestedQuantMap, kState };

// One file's tensors, in file order, with the quant states' JSON.
struct SyntheticPart {
  std::vector<io::TensorSpec> specs;
  std::map<std::string, std::string> states;  // quant-state tensor name -> its JSON

  Bnb4Part bnb4_part(std::size_t index) const;
  // Writes the bytes this module knows of tensor `index` (the quant states, the code books) into
  // `out` (bytes [offset, offset + out.size()) of it); false for a tensor whose bytes it leaves
  // to the caller.
  bool fill_known_bytes(std::size_t index, std::uint64_t offset, std::span<std::byte> out) const;
  // Real data of plausible size for any tensor (for benchmarks and streaming tests: numerics do
  // not matter, finite values do): the known bytes; random NF4 codes and 8-bit scale codes, the
  // nested scales kNestedAbsmax; 1-D bf16 tensors (norms, biases) 1.0; other bf16 tensors uniform
  // in ±0.02; anything else zero. The same bytes for the same tensor and offset on every run.
  void fill_random(std::size_t index, std::uint64_t offset, std::span<std::byte> out) const;
};

// The parts in DiffSynth's layout. `nf4` false: the same names and shapes with bf16 Linears.
SyntheticPart dit_part(const SyntheticShapes& s, bool nf4);
SyntheticPart text_encoder_part(const SyntheticShapes& s, bool nf4);
SyntheticPart video_vae_part(const SyntheticShapes& s, bool nf4);
SyntheticPart audio_vae_part(const SyntheticShapes& s, bool nf4);

// The offset the quant states give the nested (double-quantised) scales: with the nested absmax a
// benchmark writes (kNestedAbsmax, below), every block scale lies in [offset - 0.01, offset +
// 0.01].
inline constexpr double kNestedOffset = 0.02;
inline constexpr float kNestedAbsmax = 0.01f;

// Writes one part as a header-only safetensors file: every tensor a sparse hole but the bytes
// fill_known_bytes knows. The metadata names the files' `layout` ("DiffSynth NF4 layout" by
// default) and the bytes `kept` ("the quant states and code books"). Error(kIo).
void write_header_only(const std::filesystem::path& path, const SyntheticPart& part);
void write_header_only(const std::filesystem::path& path, const SyntheticPart& part,
                       const std::string& layout, const std::string& kept);

// Writes one part with data: fill_random for every tensor but those `hole` names (left sparse
// holes, read as zeros; never the quant states and code books a reader reads at open).
// Error(kIo).
void write_with_data(const std::filesystem::path& path, const SyntheticPart& part,
                     const std::function<bool(const io::TensorSpec&)>& hole);

// The file names of DiffSynth's MiniMax-H3-NF4 repository.
struct SyntheticFiles {
  static constexpr const char* kDit = "minimax-h3-fl2va-nf4.safetensors";
  static constexpr const char* kDitPruned = "minimax-h3-fl2va-pruned-nf4.safetensors";
  static constexpr const char* kTextEncoder = "minimax-h3-text-encoder-nf4.safetensors";
  static constexpr const char* kVideoVae = "video_vae_nf4.safetensors";
  static constexpr const char* kAudioVae = "audio_vae_nf4.safetensors";
};

// Writes a header-only set into `folder`: the five files (every tensor a sparse hole but the
// bytes fill_known_bytes knows) and a processor/ folder with a Qwen2 tokenizer of the byte-level
// alphabet and H3's added tokens at their real ids (a real vocabulary cannot be shipped; the set is
// for plans and inspect). Returns the files written, relative to `folder`. Error(kIo).
std::vector<std::filesystem::path> write_header_only_set(const std::filesystem::path& folder,
                                                         const SyntheticShapes& shapes);

// ---- Comfy-Org's repackaged set (Comfy-Org/MiniMax-H3; minimax_h3.md §G.3, §G.5) ----------------
//
// Original names without a prefix, stacked QKV; every quantised Linear `<p>` as int8 ConvRot:
// `<p>.weight` I8 [out, in], `<p>.weight_scale` F32 [out, 1] (one scale a row despite the name),
// `<p>.comfy_quant` U8, the bytes of its JSON (kept in SyntheticPart::states, so that
// fill_known_bytes writes them and write_header_only leaves them no hole). Which tensors are int8,
// and the other dtypes, follow §G.3's census of the pruned file: the 50 blocks' attention and MLP
// Linears int8 (group 256), the token refiner, condition_proj and the norms bf16, the patch
// projections, heads, time path, adaln_t_table and rope.inv_freq F32; the pruned AdaLN Linears
// F16. The full (non-pruned) file also quantises the AdaLN Linears, as DiffSynth's list does (the
// blocks' and the final layer's): 2688 input features, which 256 does not divide, so group 64
// (kComfyAdalnGroup; UNCONFIRMED by a census, see there). The text encoder: the 50 layers' seven
// Linears int8 (group 256), embed_tokens and the vision tower bf16, names model.embed_tokens,
// model.layers.N.*, visual.*, no final norm, no lm_head. The VAEs: the official names, the video
// VAE fp16, the audio VAE fp32 (the release's `decoder.mask_token` buffer, whose shape the
// reference does not give, is left out).

// Comfy's ConvRot group size (comfy-kitchen's default) and the one chosen for the full DiT's
// AdaLN Linears: the largest power of 4 dividing their 2688 input features (2688 = 2^7 · 21), and
// one of the sizes comfy-kitchen's kernels take (16, 64, 256).
inline constexpr std::int64_t kComfyGroup = 256;
inline constexpr std::int64_t kComfyAdalnGroup = 64;

// A `.comfy_quant` JSON as Comfy's converter writes it (Python's json.dumps of the dict).
std::string comfy_quant_json(std::int64_t group_size);

SyntheticPart comfy_dit_part(const SyntheticShapes& s);
SyntheticPart comfy_text_encoder_part(const SyntheticShapes& s);
SyntheticPart comfy_video_vae_part(const SyntheticShapes& s);
SyntheticPart comfy_audio_vae_part(const SyntheticShapes& s);

// Comfy-Org's file names, in the ComfyUI folders they go to.
struct ComfyFiles {
  static constexpr const char* kDit = "diffusion_models/minimax_h3_fl2va_int8_convrot.safetensors";
  static constexpr const char* kDitPruned =
      "diffusion_models/minimax_h3_fl2va_pruned_int8_convrot.safetensors";
  static constexpr const char* kTextEncoder =
      "text_encoders/qwen3vl_32b_minimax_h3_int8_convrot.safetensors";
  static constexpr const char* kVideoVae = "vae/minimax_h3_video_vae_fp16.safetensors";
  static constexpr const char* kAudioVae = "vae/minimax_h3_audio_vae_fp32.safetensors";
};

// Writes Comfy-Org's set header-only into `folder`: the four files under ComfyUI's folders and, as
// for write_header_only_set, a processor/ folder with the byte-level tokenizer (Comfy-Org's
// repository has none: ComfyUI brings its own; Ferry reads the release's tokenizer/ or
// DiffSynth's processor/ beside the files). Returns the files written, relative to `folder`.
// Error(kIo).
std::vector<std::filesystem::path> write_comfy_header_only_set(const std::filesystem::path& folder,
                                                               const SyntheticShapes& shapes);

}  // namespace ferry::models::h3
