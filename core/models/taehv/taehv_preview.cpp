#include "core/models/taehv/taehv_preview.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "core/error.h"

namespace ferry::models::taehv {

TaehvOptions preview_options() {
  TaehvOptions o;
  o.time_upscale = {false, false, false};
  o.space_upscale = {true, true, false};
  return o;
}

TaehvOptions frames_options() {
  TaehvOptions o;
  o.time_upscale = {false, false, false};
  o.space_upscale = {false, false, false};
  return o;
}

namespace {

// Pixels [3, 1, H, W] in [0, 1] (clamped again: the raw values are not the decoder's business
// here) as an 8-bit picture.
media::RgbImage to_image(const std::vector<float>& pixels, int height, int width) {
  media::RgbImage image;
  image.height = height;
  image.width = width;
  const std::size_t plane = static_cast<std::size_t>(width) * height;
  image.rgb.resize(plane * 3);
  for (std::size_t i = 0; i < plane; ++i) {
    for (std::size_t c = 0; c < 3; ++c) {
      const float v = std::clamp(pixels[c * plane + i], 0.0f, 1.0f);
      image.rgb[i * 3 + c] = static_cast<std::uint8_t>(std::lround(v * 255.0f));
    }
  }
  return image;
}

}  // namespace

struct TaehvPreview::State {
  Backend& backend;
  TaehvWeights weights;
  TaehvDecoder decoder;
  TaehvDecoder small;  // the animated preview's (frames_options)
  std::int64_t channels, frames, h, w;
  std::unique_ptr<DeviceBuffer> memory;
  memory::Arena arena;
  Tensor input;  // [channels, 1, h, w]
  std::optional<TaehvStream> stream;
  std::optional<TaehvStream> small_stream;  // with all_frames: a video, memory kept
  std::vector<float> frame;                 // the chosen latent frame, host
  std::vector<float> pixels;                // [3, 1, H, W], host

  State(Backend& b, const io::TensorSet& set, std::int64_t c, std::int64_t t, std::int64_t hh,
        std::int64_t ww, bool all_frames)
      : backend(b),
        weights(TaehvWeights::load(b, set)),
        decoder(b, weights, preview_options()),
        small(b, weights, frames_options()),
        channels(c),
        frames(t),
        h(hh),
        w(ww) {
    const std::int64_t z = weights.config().latent_channels;
    if (z != c) {
      throw Error(ErrorCode::kBadModelFile,
                  "the preview decoder " + set.path().filename().string() + " decodes " +
                      std::to_string(z) + "-channel latents, but this model's have " +
                      std::to_string(c) + " (Wan 2.2 TI2V-5B: taew2_2; Wan 2.1 and A14B: taew2_1)");
    }
    const std::size_t bytes =
        memory::Arena::footprint(static_cast<std::size_t>(c * h * w) * sizeof(float)) +
        TaehvStream::arena_bytes(weights, decoder.options(), h, w, TaehvStream::Memory::kNone) +
        (all_frames ? TaehvStream::arena_bytes(weights, small.options(), h, w) : 0);
    memory = b.allocate(bytes);
    arena = memory::Arena(memory->data(), bytes, b.device());
    input = arena.allocate(DType::kF32, Shape{c, 1, h, w});
    stream.emplace(decoder, h, w, arena, TaehvStream::Memory::kNone);
    if (all_frames) small_stream.emplace(small, h, w, arena);
    frame.resize(static_cast<std::size_t>(c * h * w));
  }
};

TaehvPreview::TaehvPreview(Backend& backend, const io::TensorSet& set, std::int64_t channels,
                           std::int64_t frames, std::int64_t h, std::int64_t w, bool all_frames)
    : state_(std::make_unique<State>(backend, set, channels, frames, h, w, all_frames)) {}

TaehvPreview::~TaehvPreview() = default;

media::RgbImage TaehvPreview::decode(std::span<const float> latent) {
  State& s = *state_;
  const std::size_t plane = static_cast<std::size_t>(s.h * s.w);
  require(latent.size() == static_cast<std::size_t>(s.channels * s.frames) * plane,
          "TaehvPreview::decode", "latent of ", latent.size(), " values");
  const std::int64_t t = s.frames / 2;
  for (std::int64_t c = 0; c < s.channels; ++c) {
    const auto from = latent.begin() + static_cast<std::ptrdiff_t>((c * s.frames + t) * s.h * s.w);
    std::copy_n(
        from, plane,
        s.frame.begin() + static_cast<std::ptrdiff_t>(c) * static_cast<std::ptrdiff_t>(plane));
  }
  s.backend.upload(s.input, s.frame.data());
  media::RgbImage image;
  s.stream->push(s.input, [&](std::int64_t, const Tensor& pixels) {
    s.pixels.resize(static_cast<std::size_t>(pixels.numel()));
    s.backend.download(pixels, s.pixels.data());
    image =
        to_image(s.pixels, static_cast<int>(pixels.shape[2]), static_cast<int>(pixels.shape[3]));
  });
  return image;
}

std::vector<media::RgbImage> TaehvPreview::decode_all(std::span<const float> latent) {
  State& s = *state_;
  const std::size_t plane = static_cast<std::size_t>(s.h * s.w);
  require(s.small_stream.has_value() &&
              latent.size() == static_cast<std::size_t>(s.channels * s.frames) * plane,
          "TaehvPreview::decode_all", "latent of ", latent.size(), " values");
  std::vector<media::RgbImage> images;
  s.small_stream->reset();
  for (std::int64_t t = 0; t < s.frames; ++t) {
    for (std::int64_t c = 0; c < s.channels; ++c) {
      const auto from =
          latent.begin() + static_cast<std::ptrdiff_t>((c * s.frames + t) * s.h * s.w);
      std::copy_n(
          from, plane,
          s.frame.begin() + static_cast<std::ptrdiff_t>(c) * static_cast<std::ptrdiff_t>(plane));
    }
    s.backend.upload(s.input, s.frame.data());
    s.small_stream->push(s.input, [&](std::int64_t, const Tensor& pixels) {
      s.pixels.resize(static_cast<std::size_t>(pixels.numel()));
      s.backend.download(pixels, s.pixels.data());
      images.push_back(
          to_image(s.pixels, static_cast<int>(pixels.shape[2]), static_cast<int>(pixels.shape[3])));
    });
  }
  return images;
}

std::uint64_t TaehvPreview::device_bytes(const io::TensorSet& set, std::int64_t h, std::int64_t w) {
  const TaehvWeights weights = TaehvWeights::shapes_only(set);
  const std::int64_t z = weights.config().latent_channels;
  return weights.bytes() +
         memory::Arena::footprint(static_cast<std::size_t>(z * h * w) * sizeof(float)) +
         TaehvStream::arena_bytes(weights, preview_options(), h, w, TaehvStream::Memory::kNone) +
         TaehvStream::arena_bytes(weights, frames_options(), h, w);
}

bool PreviewBudget::due(double step_seconds) {
  credit_ += share_ * step_seconds;
  return last_cost_ < 0 || credit_ >= last_cost_;
}

void PreviewBudget::spent(double preview_seconds) {
  credit_ -= preview_seconds;
  last_cost_ = preview_seconds;
}

}  // namespace ferry::models::taehv
