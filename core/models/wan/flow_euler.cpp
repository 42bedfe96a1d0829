#include "core/models/wan/flow_euler.h"

#include <string>

#include "core/error.h"
#include "core/models/wan/no_fp_contraction.h"  // last: it applies to what follows

namespace ferry::models::wan {

FlowEuler::FlowEuler(std::span<const float> sigmas) : sigmas_(sigmas.begin(), sigmas.end()) {
  if (sigmas_.size() < 2) throw Error(ErrorCode::kBadArgument, "Euler needs at least two sigmas");
}

void FlowEuler::step(std::span<const float> velocity, std::span<float> sample) {
  if (step_index_ >= steps()) {
    throw Error(ErrorCode::kBadArgument, "Euler step: every step has already been taken");
  }
  if (velocity.size() != sample.size()) {
    throw Error(ErrorCode::kBadArgument,
                "Euler step: the velocity has " + std::to_string(velocity.size()) +
                    " elements, the sample " + std::to_string(sample.size()));
  }
  const std::size_t i = static_cast<std::size_t>(step_index_);
  const float dt = sigmas_[i + 1] - sigmas_[i];
  for (std::size_t k = 0; k < sample.size(); ++k) {
    const float delta = dt * velocity[k];
    sample[k] = sample[k] + delta;
  }
  ++step_index_;
}

}  // namespace ferry::models::wan
