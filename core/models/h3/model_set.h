// The parts of a MiniMax-H3 model set, found in what the user pointed Ferry at (minimax_h3.md §G):
//   - DiffSynth's MiniMax-H3-NF4 files: minimax-h3-fl2va-nf4 (or -pruned-nf4), minimax-h3-text-
//     encoder-nf4, video_vae_nf4, audio_vae_nf4, with the processor/ (or tokenizer/) folder;
//   - Comfy-Org's repackaged files (original names, int8 ConvRot / fp8 / bf16 Linears);
//   - the MiniMaxAI release: its diffusers root (transformer/, text_encoder/, vae/, audio_vae/,
//     tokenizer/, processor/) or its original FL2VA/ partition.
// Each safetensors set is recognised by its tensor names and shapes, never by its file name. The
// one exception is the task: a Ref2VA diffusion model has the FL2VA model's tensors, so it is told
// by its path as the release names it (Ref2VA/, transformer_ref/, *ref2va* files); it is refused
// (not supported yet) when it is the only one, and set aside next to an FL2VA one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/io/tensor_set.h"
#include "core/models/part_sketch.h"

namespace ferry::models::h3 {

// The diffusion model's configuration, from its shapes (§C.11: hidden from the video patch
// projection, heads from the QKV rows, FFN from fc1, pruned iff the AdaLN table is there).
struct DitInfo {
  enum class Keys { kOriginal, kDiffusers };
  Keys keys = Keys::kOriginal;
  std::string prefix;  // "model.diffusion_model." in some third-party files, else empty
  bool pruned = false;
  std::int64_t hidden = 0;    // 5376
  std::int64_t heads = 0;     // 56 (of 128)
  std::int64_t layers = 0;    // 50
  std::int64_t ffn_dim = 0;   // 14336
  std::int64_t text_dim = 0;  // the conditioning width it reads (5120)
  std::int64_t latents = 0;   // video latent channels (24)
  std::string format;         // "NF4 (double-quantised)", "bf16", "int8 ConvRot", ...
};

struct TextEncoderInfo {
  std::int64_t dim = 0;          // 5120
  std::int64_t file_layers = 0;  // decoder layers in the file (64 in the release, 50 in NF4)
  std::int64_t heads = 0, kv_heads = 0;
  bool vision = false;  // the file holds the vision tower (keyframes need it)
  std::string format;   // of its decoder Linears
};

struct ModelSet {
  // The safetensors file (or shard index) of each part, and the tokenizer's folder.
  std::filesystem::path dit, text_encoder, video_vae, audio_vae, tokenizer;
  DitInfo dit_info;
  TextEncoderInfo text;
  std::string video_vae_format, audio_vae_format;
  // A part recognised from its header alone, because Ferry cannot open it as a whole yet (the
  // audio VAE of DiffSynth's NF4 set: the encoder's 32-wide NF4 Linears straddle 64-value
  // blocks): why, and its tensor bytes. Empty when every part opened.
  std::string audio_vae_unopened;
  std::uint64_t audio_vae_bytes = 0;
  // Sets that are no part (or a part set aside), each with why; pickle files skipped.
  std::vector<std::pair<std::filesystem::path, std::string>> ignored;
  std::vector<std::filesystem::path> pickles;

  // "minimax-h3-fl2va" or "minimax-h3-fl2va-pruned".
  std::string name() const;
};

// The sets as find_model_set opened them (nothing is opened twice).
struct OpenedParts {
  io::TensorSet dit, text_encoder, video_vae, audio_vae;
};

// Whether `set` is one of H3's parts (its DiT, its Qwen3-VL conditioner, its video or audio VAE),
// from names and shapes alone.
bool is_h3_part(const io::TensorSet& set);

// What `set` is to H3, from its names and shapes alone (part_sketch.h): a diffusion model heading a
// set that needs a Qwen3-VL text encoder of the width it reads and the video and audio VAEs, or one
// of those; nullopt otherwise. A Ref2VA model (told by its path) heads a set marked unsupported.
std::optional<PartSketch> sketch_part(const io::TensorSet& set);
// The same from the header alone of a file TensorSet::open refused as unsupported: the audio VAE
// of DiffSynth's NF4 set, which find_model_set also takes by its header (audio_vae_unopened).
std::optional<PartSketch> sketch_unopenable_part(const std::filesystem::path& path);

// Finds the parts in `paths` (folders searched recursively, files taken as they are). Throws
// NotThisFamily (family.h) when nothing there is an H3 part; Error(kBadModelFile) naming what is
// missing or disagrees once something is: no diffusion model (or only a Ref2VA one), no text
// encoder, no video or audio VAE, no tokenizer folder, two candidates for one part, a text encoder
// whose width is not the one the diffusion model reads. Error(kIo) when a folder cannot be read.
ModelSet find_model_set(const std::vector<std::filesystem::path>& paths, OpenedParts* opened);

// One line per part, for `ferry-cli inspect`, the app's model panel and error reports:
// "text encoder: Qwen3-VL-32B, 50 of 64 layers, NF4 (double-quantised) in …".
std::vector<std::string> describe(const ModelSet& set);

}  // namespace ferry::models::h3
