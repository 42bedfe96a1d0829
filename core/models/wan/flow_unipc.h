// Flow UniPC as Wan runs it (wan.md §D.2): multistep UniPC, bh2, solver order 2, data (x0)
// prediction, lower order at the first and the final step, final sigma 0, no thresholding.
// Restated from the official FlowUniPCMultistepScheduler.step: the same fp32 scalar
// coefficients and the same elementwise operation order, so a trajectory matches it to the
// rounding of the log/expm1 of the scalar coefficients (see tests/models/wan_sampler_test.cpp).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace ferry::models::wan {

class FlowUniPC {
 public:
  // `sigmas`: steps + 1 values, the last 0 (flow_schedule). `sample_size`: elements of the latent
  // stepped; the history is allocated here, once.
  FlowUniPC(std::span<const float> sigmas, std::size_t sample_size);

  // One step: `sample` holds x_i (what the model saw) on entry and x_{i+1} on return;
  // `velocity` is the (guided) model output at x_i. Throws Error(kBadArgument) on a size
  // mismatch and once every step has been taken.
  void step(std::span<const float> velocity, std::span<float> sample);

  int steps() const { return static_cast<int>(sigmas_.size()) - 1; }
  int step_index() const { return step_index_; }  // the next step, 0-based

 private:
  void correct(std::span<float> sample) const;
  void predict(std::span<float> sample);

  std::vector<float> sigmas_;
  std::vector<float> m_this_;       // x0 prediction of this step
  std::vector<float> m_prev_;       // x0 prediction of the previous step
  std::vector<float> m_prev2_;      // and the one before
  std::vector<float> last_sample_;  // the corrected sample of the previous step
  int step_index_ = 0;
  int last_order_ = 0;        // the predictor order of the previous step (the corrector's order)
  int lower_order_nums_ = 0;  // steps taken, capped at the solver order (warm-up)
};

}  // namespace ferry::models::wan
