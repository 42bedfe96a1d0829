// The built-in demo model set behind `ferry-cli demo` (architecture.md §7): a tiny Wan 2.2 TI2V
// model with random weights, written as the three single files ComfyUI users download — a umT5
// text encoder with its SentencePiece tokenizer inside (`spiece_model`), a TI2V DiT and a Wan 2.2
// VAE — so that find_model_set, the loaders and the whole generation path treat it like a real
// model folder. Real names, layouts and dtypes; only the widths are small.
//
// The weights come from a fixed-seed generator of Ferry's own (no standard-library
// distributions), so the files are the same bytes on every run and every platform.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

#include "core/io/safetensors_writer.h"
#include "core/models/umt5/encoder_weights.h"
#include "core/models/wan/dit_layout.h"

namespace ferry::models::wan {

struct DemoModel {
  // Bumped whenever anything below or the generator changes: a demo folder written by another
  // version is rebuilt.
  static constexpr std::string_view kFormatVersion = "1";

  // umT5: 4 heads × 16, gated-GELU FFN, per-layer relative-position tables. The embedding table
  // has more rows than the built-in tokenizer's 1200 pieces, as umT5-XXL's does.
  static constexpr umt5::EncoderConfig kTextEncoder{1280, 64, 4, 16, 96, 2};
  // The TI2V DiT: 48 latent channels in and out, heads of 128 (2 of them), reading the umT5's
  // 64-wide output.
  static constexpr DitConfig kDit{"ti2v-demo", 256, 512, 2, 48, 48, 64, 256};
  // The Wan 2.2 VAE with its base widths cut from 160 (encoder) and 256 (decoder).
  static constexpr std::uint64_t kVaeEncoderDim = 8;
  static constexpr std::uint64_t kVaeDecoderDim = 8;

  static constexpr std::string_view kTextEncoderFile = "umt5_demo.safetensors";
  static constexpr std::string_view kDitFile = "wan2.2_ti2v_demo.safetensors";
  static constexpr std::string_view kVaeFile = "wan2.2_vae_demo.safetensors";
};

// Writes the demo model set into `folder` (created if needed) and returns `folder`, ready for
// find_model_set. A file already there with the current version and exactly the expected content
// is kept as it is (not rewritten); anything else — missing, truncated, corrupt, or from another
// version — is rewritten through "<name>.partial" and a rename. Error(kIo) when a file cannot be
// written.
std::filesystem::path write_demo_model(const std::filesystem::path& folder);

// The SentencePiece model the demo's text encoder carries (resources/demo/spiece.model, compiled
// into the library).
std::span<const std::byte> demo_tokenizer_model();

}  // namespace ferry::models::wan
