// Step-distilled sampling (formats_lora_moe.md §5.1–5.2): the schedule a LightX2V / Lightning
// distilled Wan (a 4-step LoRA, say) was trained on, and its x0-form Euler update. A recipe is
// data — a step list on the 1000-entry training table, a shift, an update form — so another
// distilled recipe (an 8-step Turbo LoRA) is another step list, not new code.
//
//   base[i] = linspace(1, 0, 1001)[i] (fp32)      sig[i] = shift·base[i] / (1 + (shift −
//   1)·base[i]) σ_k = sig[1000 − step_list[k]]                 t_k = σ_k · 1000 (fp32, not
//   truncated) x0 = x − σ_k·v;  x ← x0 + σ_{k+1}·v, and x ← x0 at the last step
#pragma once

#include <span>
#include <vector>

#include "core/models/wan/flow_schedule.h"

namespace ferry::models::wan {

// The step list of an N-step distilled run: 1000·(1 − k/N) for k = 0..N−1 (Lightning's
// linspace(1000, 0, N + 1) without its last entry; LightX2V's [1000, 750, 500, 250] for N = 4,
// [1000, 875, …, 125] for N = 8). Where 1000·k/N is not an integer the nearest table entry is
// taken (halves up): the table has integer indices only. Throws Error(kBadArgument) unless
// 1 <= steps <= 1000.
std::vector<int> distill_step_list(int steps);

// The schedule of `step_list` (decreasing values in [1, 1000]) at `shift`, computed as
// LightX2V's WanStepDistillScheduler.set_denoising_timesteps computes it in fp32 torch:
// sigmas = the σ_k then a final 0, timesteps = the t_k. Throws Error(kBadArgument) for an empty
// or non-decreasing list, a value outside [1, 1000], or a shift outside (0, kMaxFlowShift].
FlowSchedule distilled_schedule(std::span<const int> step_list, double shift);

// The x0 form of the Euler update on a distilled schedule (LightX2V's step_post): the same step
// as flow Euler mathematically, rounded as the reference rounds it.
class FlowX0Euler {
 public:
  // `sigmas`: steps + 1 values, the last 0 (distilled_schedule).
  explicit FlowX0Euler(std::span<const float> sigmas);

  // `sample` holds x_k on entry and x_{k+1} on return. Throws Error(kBadArgument) on a size
  // mismatch and once every step has been taken.
  void step(std::span<const float> velocity, std::span<float> sample);

  int steps() const { return static_cast<int>(sigmas_.size()) - 1; }
  int step_index() const { return step_index_; }

 private:
  std::vector<float> sigmas_;
  int step_index_ = 0;
};

}  // namespace ferry::models::wan
