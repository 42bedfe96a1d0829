#include "core/models/wan/i2v.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace ferry::models::wan {
namespace {

// torch's cubic convolution weights (upsample.h get_cubic_upsample_coefficients, A = -0.75) for
// the four taps around a sample at fractional offset t.
void cubic_weights(float t, float w[4]) {
  constexpr float A = -0.75f;
  const auto near = [](float x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };
  const auto far = [](float x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };
  w[0] = far(t + 1.0f);
  w[1] = near(t);
  w[2] = near(1.0f - t);
  w[3] = far(2.0f - t);
}

// One axis of the resize: for each output position, its first source tap and the four weights
// (align_corners=False: src = scale·(dst + 0.5) - 0.5, not clamped before the floor).
struct Taps {
  std::vector<std::int64_t> first;
  std::vector<float> weights;  // 4 per output position
};

Taps axis_taps(std::int64_t in, std::int64_t out) {
  Taps taps;
  taps.first.resize(static_cast<std::size_t>(out));
  taps.weights.resize(static_cast<std::size_t>(out) * 4);
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  for (std::int64_t o = 0; o < out; ++o) {
    const float real = scale * (static_cast<float>(o) + 0.5f) - 0.5f;
    const float floor = std::floor(real);
    taps.first[static_cast<std::size_t>(o)] = static_cast<std::int64_t>(floor) - 1;
    cubic_weights(real - floor, &taps.weights[static_cast<std::size_t>(o) * 4]);
  }
  return taps;
}

}  // namespace

std::vector<float> i2v_mask(int frames, std::int64_t latent_height, std::int64_t latent_width,
                            bool end_frame) {
  if (frames < 1 || (frames - 1) % 4 != 0) {
    throw Error(ErrorCode::kBadArgument, "i2v_mask: frames must be 4k+1");
  }
  const std::int64_t latent_frames = (frames - 1) / 4 + 1;
  const std::size_t plane = static_cast<std::size_t>(latent_height * latent_width);
  const auto given = [&](std::int64_t f) { return f == 0 || (end_frame && f == frames - 1); };
  std::vector<float> mask(4 * static_cast<std::size_t>(latent_frames) * plane);
  for (std::int64_t c = 0; c < 4; ++c) {
    for (std::int64_t t = 0; t < latent_frames; ++t) {
      const std::int64_t pixel_frame = t == 0 ? 0 : 4 * t + c - 3;
      const float value = given(pixel_frame) ? 1.0f : 0.0f;
      float* out = &mask[(static_cast<std::size_t>(c * latent_frames + t)) * plane];
      std::fill(out, out + plane, value);
    }
  }
  return mask;
}

std::vector<float> bicubic_resize(const media::RgbImage& image, int width, int height) {
  const std::int64_t in_w = image.width, in_h = image.height;
  const Taps xs = axis_taps(in_w, width), ys = axis_taps(in_h, height);
  const auto clamp_x = [&](std::int64_t x) { return std::clamp<std::int64_t>(x, 0, in_w - 1); };
  const auto clamp_y = [&](std::int64_t y) { return std::clamp<std::int64_t>(y, 0, in_h - 1); };
  const std::size_t plane = static_cast<std::size_t>(width) * static_cast<std::size_t>(height);
  std::vector<float> out(3 * plane);
  for (int c = 0; c < 3; ++c) {
    const auto source = [&](std::int64_t y, std::int64_t x) {
      const std::uint8_t v =
          image.rgb[static_cast<std::size_t>((clamp_y(y) * in_w + clamp_x(x)) * 3 + c)];
      return (static_cast<float>(v) / 255.0f - 0.5f) / 0.5f;
    };
    for (int oy = 0; oy < height; ++oy) {
      const std::int64_t y0 = ys.first[static_cast<std::size_t>(oy)];
      const float* wy = &ys.weights[static_cast<std::size_t>(oy) * 4];
      for (int ox = 0; ox < width; ++ox) {
        const std::int64_t x0 = xs.first[static_cast<std::size_t>(ox)];
        const float* wx = &xs.weights[static_cast<std::size_t>(ox) * 4];
        // Rows first, then the column, as torch's cubic_interp1d nests them.
        float rows[4];
        for (int i = 0; i < 4; ++i) {
          rows[i] = source(y0 + i, x0) * wx[0] + source(y0 + i, x0 + 1) * wx[1] +
                    source(y0 + i, x0 + 2) * wx[2] + source(y0 + i, x0 + 3) * wx[3];
        }
        out[c * plane + static_cast<std::size_t>(oy) * width + ox] =
            rows[0] * wy[0] + rows[1] * wy[1] + rows[2] * wy[2] + rows[3] * wy[3];
      }
    }
  }
  return out;
}

std::vector<float> i2v_conditioning_video(std::span<const float> start, std::span<const float> end,
                                          int frames, int width, int height) {
  const std::size_t plane = static_cast<std::size_t>(width) * static_cast<std::size_t>(height);
  if (start.size() != 3 * plane || (!end.empty() && end.size() != 3 * plane) || frames < 2) {
    throw Error(ErrorCode::kInternal, "i2v_conditioning_video: images do not match the size");
  }
  const std::size_t channel = static_cast<std::size_t>(frames) * plane;
  std::vector<float> video(3 * channel, 0.0f);
  for (std::size_t c = 0; c < 3; ++c) {
    std::copy_n(&start[c * plane], plane, &video[c * channel]);
    if (!end.empty()) {
      std::copy_n(&end[c * plane], plane,
                  &video[c * channel + static_cast<std::size_t>(frames - 1) * plane]);
    }
  }
  return video;
}

std::vector<float> i2v_condition(std::span<const float> mask, std::span<const float> latent) {
  std::vector<float> y(mask.begin(), mask.end());
  y.insert(y.end(), latent.begin(), latent.end());
  return y;
}

}  // namespace ferry::models::wan
