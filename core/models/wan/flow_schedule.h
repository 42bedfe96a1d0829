// The official Wan flow-matching schedule (wan.md §D.1): the shifted sigma grid the solvers step
// on and the integer timesteps the DiT is called with, computed as FlowUniPCMultistepScheduler
// (num_train_timesteps 1000, shift 1 at construction, set_timesteps(steps, shift)) computes them.
// The step-distilled schedule (flow_distill.h) fills the same struct.
#pragma once

#include <vector>

namespace ferry::models::wan {

inline constexpr int kNumTrainTimesteps = 1000;
// Shifts outside (0, kMaxFlowShift] are refused: Wan uses 1–20, and a larger shift rounds the
// first fp32 sigma up to 1, where the solvers' log-SNR is -inf.
inline constexpr double kMaxFlowShift = 100.0;

struct FlowSchedule {
  std::vector<float> sigmas;  // steps + 1 values, decreasing, the last exactly 0
  // steps values, the DiT's timesteps. Official: trunc(σ_i · 1000) of the fp64 σ_i, an integer
  // held exactly in fp32 (what the DiT's fp32 timestep tensor holds); distilled: fp32 σ_i · 1000.
  std::vector<float> timesteps;
};

// Throws Error(kBadArgument) when steps < 1 or shift is not in (0, kMaxFlowShift].
FlowSchedule flow_schedule(int steps, double shift);

}  // namespace ferry::models::wan
