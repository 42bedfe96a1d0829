// BigVGAN's anti-aliased SnakeBeta activation (minimax_h3.md §F.2: alias-free-torch's
// Activation1d with ratio 2 and 12 taps) on one channel's samples: the arithmetic every backend
// shares (the CPU backend runs it per row; Backend's default runs it on the host).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferry {

// Taps of the Kaiser-sinc filters of the 2× upsampler and downsampler.
inline constexpr int kSnakeFilterTaps = 12;

// Floats of work memory one row of `samples` needs.
inline std::size_t snake_beta_work_floats(std::int64_t samples) {
  return static_cast<std::size_t>(2 * samples);
}

// y[T] = down(snake(up(x[T]))):
// - up: x replicate-padded by 5 on each side, transposed-convolved at stride 2 with `up`, × 2,
//   15 samples cropped from each end (2T samples);
// - snake: u + sin²(e^alpha · u) / (e^beta + 1e-9) (alpha, beta in log space, as stored);
// - down: replicate-padded by 5 left and 6 right, convolved with `down` at stride 2 (T samples).
// In f32, in the reference's operation order. `y` may be `x`; `work` holds
// snake_beta_work_floats(samples).
void snake_beta_alias_free_row(const float* x, std::int64_t samples, float alpha, float beta,
                               const float* up, const float* down, float* work, float* y);

}  // namespace ferry
