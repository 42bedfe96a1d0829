// Flow Euler (wan.md §D.3): x_{i+1} = x_i + (σ_{i+1} - σ_i)·v_i in fp32, on the official sigma
// grid. Not an official Wan solver; diffusers' FlowMatchEulerDiscreteScheduler and ComfyUI's
// `euler` take this step, and it needs no history.
#pragma once

#include <span>
#include <vector>

namespace ferry::models::wan {

class FlowEuler {
 public:
  explicit FlowEuler(std::span<const float> sigmas);

  // `sample` holds x_i on entry and x_{i+1} on return. Throws Error(kBadArgument) on a size
  // mismatch and once every step has been taken.
  void step(std::span<const float> velocity, std::span<float> sample);

  int steps() const { return static_cast<int>(sigmas_.size()) - 1; }
  int step_index() const { return step_index_; }

 private:
  std::vector<float> sigmas_;
  int step_index_ = 0;
};

}  // namespace ferry::models::wan
