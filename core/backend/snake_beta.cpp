#include "core/backend/snake_beta.h"

#include <algorithm>
#include <cmath>

namespace ferry {
namespace {

constexpr std::int64_t kUpPad = kSnakeFilterTaps / 2 - 1;  // replicated input samples
constexpr std::int64_t kUpCrop = kUpPad * 2 + (kSnakeFilterTaps - 2) / 2;  // dropped output samples
constexpr std::int64_t kDownPadLeft = kSnakeFilterTaps / 2 - 1;

}  // namespace

void snake_beta_alias_free_row(const float* x, std::int64_t samples, float alpha, float beta,
                               const float* up, const float* down, float* work, float* y) {
  const std::int64_t t = samples;
  const auto padded_x = [&](std::int64_t i) {
    return x[std::clamp<std::int64_t>(i - kUpPad, 0, t - 1)];
  };
  const float frequency = std::exp(alpha);
  const float inverse_magnitude = 1.0f / (std::exp(beta) + 1e-9f);
  // Upsampled sample n is output n + kUpCrop of the transposed convolution: the taps k of the
  // same parity as that index, reading padded input (n + kUpCrop - k) / 2.
  for (std::int64_t n = 0; n < 2 * t; ++n) {
    const std::int64_t full = n + kUpCrop;
    float sum = 0.0f;
    for (std::int64_t k = full % 2; k < kSnakeFilterTaps; k += 2) {
      sum += up[k] * padded_x((full - k) / 2);
    }
    const float u = 2.0f * sum;
    const float s = std::sin(frequency * u);
    work[n] = u + inverse_magnitude * (s * s);
  }
  // Written after every read of x: y may be x.
  for (std::int64_t m = 0; m < t; ++m) {
    float sum = 0.0f;
    for (std::int64_t k = 0; k < kSnakeFilterTaps; ++k) {
      sum += down[k] * work[std::clamp<std::int64_t>(2 * m + k - kDownPadLeft, 0, 2 * t - 1)];
    }
    y[m] = sum;
  }
}

}  // namespace ferry
