#include "core/models/h3/scheduler.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "core/error.h"

// Every f32 product and sum below is rounded on its own, as torch's separate ops round them (no
// contraction into fused multiply-adds; the two std::fma calls are the ones torch fuses).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace ferry::models::h3 {
namespace {

// torch.linspace(1, 0, n) on the CPU in f32: step = (end − start)/(n − 1) in f32, the first half
// from the start (start + step·i), the second from the end (end − step·(n − 1 − i)), each a fused
// multiply-add (torch's vectorised kernel is built with FMA: a separate product and sum differ in
// the last ulp at 10, 16 and 50 points; the fused one matches every n from 2 to 300).
std::vector<float> linspace_down(int n) {
  const float start = 1.0f, end = 0.0f;
  const float step = (end - start) / static_cast<float>(n - 1);
  const std::int64_t halfway = n / 2;
  std::vector<float> out(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    out[static_cast<std::size_t>(i)] = i < halfway
                                           ? std::fma(step, static_cast<float>(i), start)
                                           : std::fma(-step, static_cast<float>(n - 1 - i), end);
  }
  return out;
}

}  // namespace

H3Schedule h3_schedule(int grid_points, float shift) {
  if (grid_points < 2) {
    throw Error(ErrorCode::kBadArgument,
                "H3's schedule needs at least 2 grid points (the terminal 0 counts), got " +
                    std::to_string(grid_points));
  }
  if (!(shift > 0.0f)) {
    throw Error(ErrorCode::kBadArgument,
                "H3's sigma shift must be positive, got " + std::to_string(shift));
  }
  H3Schedule s;
  const float shift_less_one = shift - 1.0f;
  for (float base : linspace_down(grid_points)) {
    const float sigma = shift * base / (1.0f + shift_less_one * base);
    if (s.sigmas.empty() || s.sigmas.back() != sigma) s.sigmas.push_back(sigma);
  }
  for (std::size_t i = 0; i + 1 < s.sigmas.size(); ++i) {
    s.timesteps.push_back(1.0f - s.sigmas[i]);
  }
  return s;
}

void h3_euler_step(const H3Schedule& schedule, std::size_t step, std::span<const float> v,
                   std::span<float> x) {
  if (step >= schedule.steps() || v.size() != x.size()) {
    throw Error(ErrorCode::kBadArgument, "Euler step " + std::to_string(step) + " of " +
                                             std::to_string(schedule.steps()) + " with " +
                                             std::to_string(v.size()) + " velocities for " +
                                             std::to_string(x.size()) + " values");
  }
  const float sigma_t = 1.0f - schedule.timesteps[step];
  const float ratio = schedule.sigmas[step + 1] / schedule.sigmas[step];
  const float keep = 1.0f - ratio;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float denoised = x[i] + sigma_t * v[i];
    x[i] = ratio * x[i] + keep * denoised;
  }
}

}  // namespace ferry::models::h3
