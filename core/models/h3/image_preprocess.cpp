#include "core/models/h3/image_preprocess.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"

namespace ferry::models::h3 {
namespace {

// Python's round(n / f) * f for a whole n: halves go to the even multiple.
std::size_t round_to_factor(std::size_t n, std::size_t f) {
  std::size_t q = n / f;
  const std::size_t r = n % f;
  if (r * 2 > f || (r * 2 == f && q % 2 == 1)) ++q;
  return q * f;
}

// PIL's Resample.c, 8 bits per channel.
constexpr int kPrecisionBits = 32 - 8 - 2;

double bicubic(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// One axis's taps: for output pixel i, `size[i]` input pixels from `first[i]`, weights
// k[i * ksize + j] in fixed point (precompute_coeffs + normalize_coeffs_8bpc).
struct Taps {
  int ksize = 0;
  std::vector<int> first, size;
  std::vector<std::int32_t> k;
};

Taps taps(int in_size, int out_size) {
  constexpr double kSupport = 2.0;  // the bicubic filter's
  const double scale = static_cast<double>(static_cast<float>(in_size)) / out_size;
  const double filterscale = std::max(scale, 1.0);
  const double support = kSupport * filterscale;
  Taps t;
  t.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  t.first.resize(static_cast<std::size_t>(out_size));
  t.size.resize(t.first.size());
  t.k.assign(t.first.size() * static_cast<std::size_t>(t.ksize), 0);
  std::vector<double> w(static_cast<std::size_t>(t.ksize));
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    const int xmin = std::max(static_cast<int>(center - support + 0.5), 0);
    const int xmax = std::min(static_cast<int>(center + support + 0.5), in_size) - xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      w[static_cast<std::size_t>(x)] = bicubic((x + xmin - center + 0.5) * ss);
      ww += w[static_cast<std::size_t>(x)];
    }
    for (int x = 0; x < xmax; ++x) {
      double v = w[static_cast<std::size_t>(x)];
      if (ww != 0.0) v /= ww;
      const double fixed = v * (1 << kPrecisionBits);
      t.k[static_cast<std::size_t>(xx * t.ksize + x)] =
          static_cast<std::int32_t>(v < 0 ? -0.5 + fixed : 0.5 + fixed);
    }
    t.first[static_cast<std::size_t>(xx)] = xmin;
    t.size[static_cast<std::size_t>(xx)] = xmax;
  }
  return t;
}

std::uint8_t clip8(std::int32_t v) {
  return static_cast<std::uint8_t>(std::clamp(v >> kPrecisionBits, 0, 255));
}

// out[y][x][c] = Σ_j in[...] k_j along one axis; `horizontal` picks which.
media::RgbImage resample(const media::RgbImage& in, int out_w, int out_h, bool horizontal) {
  const Taps t = horizontal ? taps(in.width, out_w) : taps(in.height, out_h);
  media::RgbImage out;
  out.width = out_w;
  out.height = out_h;
  out.rgb.resize(static_cast<std::size_t>(out_w) * static_cast<std::size_t>(out_h) * 3);
  const auto at = [&](int y, int x, int c) {
    return static_cast<std::int32_t>(
        in.rgb[(static_cast<std::size_t>(y) * static_cast<std::size_t>(in.width) +
                static_cast<std::size_t>(x)) *
                   3 +
               static_cast<std::size_t>(c)]);
  };
  for (int y = 0; y < out_h; ++y) {
    for (int x = 0; x < out_w; ++x) {
      const int o = horizontal ? x : y;
      const std::int32_t* k = t.k.data() + static_cast<std::size_t>(o * t.ksize);
      const int first = t.first[static_cast<std::size_t>(o)];
      const int n = t.size[static_cast<std::size_t>(o)];
      for (int c = 0; c < 3; ++c) {
        std::int32_t ss = 1 << (kPrecisionBits - 1);
        for (int j = 0; j < n; ++j) {
          ss += (horizontal ? at(y, first + j, c) : at(first + j, x, c)) * k[j];
        }
        out.rgb[(static_cast<std::size_t>(y) * static_cast<std::size_t>(out_w) +
                 static_cast<std::size_t>(x)) *
                    3 +
                static_cast<std::size_t>(c)] = clip8(ss);
      }
    }
  }
  return out;
}

}  // namespace

ImageSize smart_resize(std::size_t height, std::size_t width, const ImageProcessorConfig& config) {
  if (height == 0 || width == 0 || std::max(height, width) > 200 * std::min(height, width)) {
    throw Error(ErrorCode::kBadArgument, "an image of " + std::to_string(width) + "x" +
                                             std::to_string(height) +
                                             " pixels cannot be resized for the vision tower");
  }
  const auto factor = static_cast<std::size_t>(config.factor());
  const double h = static_cast<double>(height), w = static_cast<double>(width);
  const double f = static_cast<double>(factor);
  ImageSize out{round_to_factor(height, factor), round_to_factor(width, factor)};
  const double area = static_cast<double>(out.height) * static_cast<double>(out.width);
  if (area > config.max_pixels) {
    const double beta = std::sqrt(h * w / config.max_pixels);
    out.height = std::max(factor, static_cast<std::size_t>(std::floor(h / beta / f)) * factor);
    out.width = std::max(factor, static_cast<std::size_t>(std::floor(w / beta / f)) * factor);
  } else if (area < config.min_pixels) {
    const double beta = std::sqrt(config.min_pixels / (h * w));
    out.height = static_cast<std::size_t>(std::ceil(h * beta / f)) * factor;
    out.width = static_cast<std::size_t>(std::ceil(w * beta / f)) * factor;
  }
  return out;
}

media::RgbImage resize_bicubic(const media::RgbImage& image, int width, int height) {
  if (image.empty() || width <= 0 || height <= 0 ||
      image.rgb.size() !=
          static_cast<std::size_t>(image.width) * static_cast<std::size_t>(image.height) * 3) {
    throw Error(ErrorCode::kBadArgument, "cannot resize a " + std::to_string(image.width) + "x" +
                                             std::to_string(image.height) + " image to " +
                                             std::to_string(width) + "x" + std::to_string(height));
  }
  // Horizontal first, as PIL does: the 8-bit rounding between the passes is part of the result.
  media::RgbImage out = image;
  if (width != out.width) out = resample(out, width, out.height, /*horizontal=*/true);
  if (height != out.height) out = resample(out, out.width, height, /*horizontal=*/false);
  return out;
}

VisionPatches preprocess_image(const media::RgbImage& image, const ImageProcessorConfig& config) {
  const ImageSize size = smart_resize(static_cast<std::size_t>(image.height),
                                      static_cast<std::size_t>(image.width), config);
  const media::RgbImage resized =
      resize_bicubic(image, static_cast<int>(size.width), static_cast<int>(size.height));
  // rescale: the byte times 1/255 in double, stored as f32; normalize: (v - 0.5) / 0.5 in f32.
  float value[256];
  for (int v = 0; v < 256; ++v) {
    const auto scaled = static_cast<float>(static_cast<double>(v) * (1.0 / 255.0));
    value[v] = (scaled - 0.5f) / 0.5f;
  }
  const std::int64_t p = config.patch, m = config.merge, tp = config.temporal_patch;
  VisionPatches out;
  out.grid = {1, static_cast<std::int64_t>(size.height) / p,
              static_cast<std::int64_t>(size.width) / p};
  out.patch_values = config.patch_values();
  out.values.resize(static_cast<std::size_t>(out.patches() * out.patch_values));
  float* dst = out.values.data();
  const std::int64_t width = resized.width;
  // Patches in merge-block order (block row, block column, row in block, column in block); in a
  // patch, channel, then the temporal copy, then the pixel rows and columns.
  for (std::int64_t br = 0; br < out.grid.h / m; ++br) {
    for (std::int64_t bc = 0; bc < out.grid.w / m; ++bc) {
      for (std::int64_t ir = 0; ir < m; ++ir) {
        for (std::int64_t ic = 0; ic < m; ++ic) {
          const std::int64_t y0 = (br * m + ir) * p, x0 = (bc * m + ic) * p;
          for (std::int64_t c = 0; c < 3; ++c) {
            for (std::int64_t t = 0; t < tp; ++t) {
              for (std::int64_t y = 0; y < p; ++y) {
                for (std::int64_t x = 0; x < p; ++x) {
                  *dst++ = value[resized.rgb[static_cast<std::size_t>(
                      ((y0 + y) * width + x0 + x) * 3 + c)]];
                }
              }
            }
          }
        }
      }
    }
  }
  return out;
}

}  // namespace ferry::models::h3
