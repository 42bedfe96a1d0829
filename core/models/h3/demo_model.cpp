#include "core/models/h3/demo_model.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <iterator>
#include <string>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/io/safetensors_writer.h"
#include "core/models/h3/audio_vae_weights.h"

namespace ferry::models::h3 {

namespace fs = std::filesystem;

SyntheticShapes H3DemoModel::shapes() {
  SyntheticShapes s;
  // DiT: one head of 128 (the release's head width, so the 96 rotary dims fit), 2 blocks.
  s.dit_hidden = 128, s.dit_heads = 1, s.dit_layers = 2, s.dit_ffn = 128, s.refiner_layers = 1;
  s.time_hidden = 64, s.time_dim = 64;
  // Text encoder: 64 wide, 2 query heads and 1 KV head of 128; the real vocabulary and layer count.
  s.text_dim = 64, s.text_heads = 2, s.text_kv_heads = 1, s.text_ffn = 128;
  // Vision tower: 2 heads of 72, a 4 x 4 position table.
  s.vision_dim = 144, s.vision_ffn = 128, s.vision_side = 4;
  // Video VAE: a 64-wide, 2-block decoder; a 32-wide encoder (GroupNorm's 32 groups).
  s.vae_dim = 64, s.vae_ffn = 128, s.vae_blocks = 2;
  s.vae_encoder_channels = {32, 32, 32, 32, 32, 32};
  // Audio VAE: a 64-wide latent projection, BigVGAN from 256 down to 2 channels.
  s.audio_encoder_dim = 2, s.audio_decoder_dim = 256;
  return s;
}

namespace {

// The audio VAE with its weight-norm gains and SnakeBeta parameters at 1 (fill_random's ±0.02
// would scale every convolution by 0.02 and the soundtrack to silence) and the anti-aliasing
// filters the real ones (fill_random leaves f32 tensors zero: silence again), the rest random.
void write_audio_vae(const fs::path& path, const SyntheticPart& part) {
  const auto ends = [&](std::size_t i, std::string_view tail) {
    return part.specs[i].name.ends_with(tail);
  };
  const auto is_unit = [&](std::size_t i) {
    return ends(i, ".weight_g") || ends(i, ".alpha") || ends(i, ".beta");
  };
  const std::array<float, 12> filter = alias_free_filter();
  const auto filter_bytes = std::as_bytes(std::span(filter));
  io::write_safetensors(
      path, part.specs, {{"format", "pt"}, {"ferry.demo", "MiniMax-H3 demo audio VAE"}},
      [&](std::size_t i, std::uint64_t offset, std::span<std::byte> out) {
        if (ends(i, ".filter")) {
          std::copy_n(filter_bytes.begin() + static_cast<std::ptrdiff_t>(offset), out.size(),
                      out.begin());
          return;
        }
        if (!is_unit(i)) return part.fill_random(i, offset, out);
        constexpr std::uint16_t kOneBf16 = 0x3F80;
        for (std::size_t b = 0; b < out.size(); ++b) {
          const std::uint64_t at = offset + b;  // little-endian bf16 1.0: 0x80, 0x3F
          out[b] = static_cast<std::byte>(at % 2 == 0 ? kOneBf16 & 0xFF : kOneBf16 >> 8);
        }
      },
      [](std::size_t) { return false; });
}

bool marker_matches(const fs::path& folder) {
  std::ifstream in(folder / H3DemoModel::kMarkerFile, std::ios::binary);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return in.good() || in.eof() ? text == std::string(H3DemoModel::kFormatVersion) + "\n" : false;
}

}  // namespace

bool is_h3_demo_folder(const fs::path& folder) {
  return marker_matches(folder);
}

void write_h3_demo_model(const fs::path& folder) {
  if (marker_matches(folder)) return;
  std::error_code ec;
  fs::remove(folder / H3DemoModel::kMarkerFile, ec);
  const SyntheticShapes s = H3DemoModel::shapes();
  constexpr bool nf4 = true;
  // The header-only set gives the processor/ folder; its four files are then written with data.
  write_header_only_set(folder, s);
  const auto no_hole = [](const io::TensorSpec&) { return false; };
  write_with_data(folder / SyntheticFiles::kDit, dit_part(s, nf4), no_hole);
  write_with_data(folder / SyntheticFiles::kTextEncoder, text_encoder_part(s, nf4), no_hole);
  write_with_data(folder / SyntheticFiles::kVideoVae, video_vae_part(s, nf4), no_hole);
  write_audio_vae(folder / SyntheticFiles::kAudioVae, audio_vae_part(s, nf4));
  const fs::path marker = folder / H3DemoModel::kMarkerFile;
  std::ofstream out(marker, std::ios::binary | std::ios::trunc);
  out << H3DemoModel::kFormatVersion << "\n";
  if (!out.flush()) {
    throw Error(ErrorCode::kIo, "cannot write " + io::detail::display(marker));
  }
}

}  // namespace ferry::models::h3
