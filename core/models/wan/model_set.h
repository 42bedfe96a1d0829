// The parts of a Wan model a generation needs, found in what the user pointed Ferry at
// (architecture.md §7): a diffusers pipeline folder (transformer/, text_encoder/, tokenizer/,
// vae/), a folder of ComfyUI single files (a diffusion model, umt5_xxl_fp16 or
// umt5_xxl_fp8_e4m3fn_scaled with its embedded tokenizer, wan_2.1_vae or wan2.2_vae), or single
// files given one by one. Each safetensors set is recognised by its tensor names and shapes
// (wan.md §F), never by its file name; pickle files are never opened. The one exception: the two
// experts of Wan 2.2 A14B have identical shapes, so which is the high-noise one is read from its
// path as every distribution names it (formats_lora_moe.md §6.5): `high_noise_model/` and
// `low_noise_model/` (official), `transformer/` and `transformer_2/` (diffusers),
// `…_high_noise_…` / `…HighNoise…` (ComfyUI, GGUF).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/io/tensor_set.h"
#include "core/models/part_sketch.h"
#include "core/models/wan/dit_layout.h"
#include "core/models/wan/vae_keys.h"

namespace ferry::models::wan {

// Which expert a diffusion model file is, from its path (see above).
enum class ExpertRole { kUnknown, kHighNoise, kLowNoise };
ExpertRole expert_role(const std::filesystem::path& dit);

struct ModelSet {
  // The safetensors file or shard index of each part. `dit` is the only diffusion model, or the
  // high-noise expert of a two-expert model (then `low_noise_dit` is the other).
  std::filesystem::path dit;
  std::filesystem::path low_noise_dit;
  std::filesystem::path text_encoder;
  std::filesystem::path vae;
  // Where the tokenizer is: a spiece.model file, or empty when the text encoder file carries it
  // (ComfyUI's `spiece_model` tensor).
  std::filesystem::path tokenizer_model;
  // Optional: a TAEHV preview decoder for this model's latent space (taew2_1 for 16 channels,
  // taew2_2 for 48; formats_lora_moe.md §7), recognised by its names among the files given, or
  // found by its file name next to the diffusion model. Empty: previews are a colour projection.
  std::filesystem::path preview_decoder;

  DitConfig dit_config;
  VaeKind vae_kind = VaeKind::kWan22;
  std::int64_t text_dim = 0;  // the text encoder's d_model

  // Safetensors sets that are none of the parts (reported, not used), and pickle files skipped.
  std::vector<std::filesystem::path> ignored;
  std::vector<std::filesystem::path> pickles;

  bool tokenizer_embedded() const { return tokenizer_model.empty(); }
  bool two_experts() const { return !low_noise_dit.empty(); }
  // The built-in demo model (demo_model.h), recognised by its diffusion model's file name.
  bool is_demo() const;
};

// Finds the parts in `paths` (folders are searched recursively; files are taken as they are).
// Error(kBadModelFile) with a message that names what is missing or what disagrees: no diffusion
// model, no text encoder, no VAE, a text encoder without a tokenizer, two candidates for one part,
// a VAE of the wrong kind for the diffusion model (a Wan 2.1 VAE next to TI2V-5B), a text encoder
// whose width is not the diffusion model's text width, one A14B expert without the other, two
// experts of different shapes, a Wan 2.1 I2V model (CLIP image conditioning: not supported).
// Error(kIo) when a folder cannot be read.
ModelSet find_model_set(const std::vector<std::filesystem::path>& paths);

// The same, handing back the parts' sets as it opened them to recognise them (so nothing is
// opened twice).
struct OpenedParts {
  io::TensorSet dit, low_noise_dit, text_encoder, vae;
  io::TensorSet preview_decoder;  // opened only when the set has one
};
ModelSet find_model_set(const std::vector<std::filesystem::path>& paths, OpenedParts* opened);

// What `set` is to Wan, from its names and shapes alone (part_sketch.h): a diffusion model heading
// a set that needs a umT5 text encoder of its text width and the VAE of its latent space (and an
// A14B expert its other expert), a text encoder, a VAE or a preview decoder; nullopt otherwise.
std::optional<PartSketch> sketch_part(const io::TensorSet& set);

// The TAEHV preview decoder's published file name for a latent of `latent_channels` channels:
// taew2_2.safetensors for 48 (TI2V-5B), taew2_1.safetensors otherwise (Wan 2.1, A14B).
std::string_view preview_decoder_file(std::uint64_t latent_channels);

// One line per part, for `ferry-cli inspect`, the GUI's model panel and error reports:
// "diffusion model: ti2v-5b (3072 wide, 30 blocks) in transformer/…".
std::vector<std::string> describe(const ModelSet& set);

}  // namespace ferry::models::wan
