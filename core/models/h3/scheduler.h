// H3's sampler schedule and step (minimax_h3.md §D.1): diffusers' MiniMaxH3Scheduler, the
// rectified-flow Euler scheduler with an exponential sigma shift that H3 runs twice per request
// (video shift 12, audio shift 3, the same grid points, stepped in lockstep by one DiT forward a
// step). No CFG: the weights are CFG-distilled. Everything is f32, op by op as torch rounds it.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace ferry::models::h3 {

inline constexpr float kVideoShift = 12.0f;
inline constexpr float kAudioShift = 3.0f;

struct H3Schedule {
  std::vector<float> sigmas;     // decreasing from 1 to exactly 0
  std::vector<float> timesteps;  // 1 - σ_i for every σ but the last: the model's t (1 = clean)
  std::size_t steps() const { return timesteps.size(); }
};

// set_timesteps(grid_points): base = linspace(1, 0, grid_points) in f32 (torch's two-ended
// formula), σ = s·base / (1 + (s − 1)·base), consecutive duplicates dropped (the shift collapses
// values near 1): grid_points − 1 evaluations at most (50 → 49). Error(kBadArgument) for fewer than
// 2 grid points or a shift that is not positive.
H3Schedule h3_schedule(int grid_points, float shift);

// One Euler step of `x` in place with the model's data-ward velocity v at step `step`:
// x0 = x + (1 − t)·v (σ recovered from the f32 timestep, as the reference does), r = σ_{i+1}/σ_i,
// x ← r·x + (1 − r)·x0, each product and sum rounded to f32 on its own.
void h3_euler_step(const H3Schedule& schedule, std::size_t step, std::span<const float> v,
                   std::span<float> x);

}  // namespace ferry::models::h3
