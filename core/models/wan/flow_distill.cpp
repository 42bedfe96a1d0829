#include "core/models/wan/flow_distill.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/models/wan/no_fp_contraction.h"  // last: it applies to what follows

namespace ferry::models::wan {
namespace {

// torch.linspace(1, 0, 1001)[i] in fp32 as torch's CPU kernel computes it: step = (0 − 1)/1000
// in fp32, then start + step·i for the first half and end − step·(1000 − i) for the second, each
// rounded once (the kernel's multiply-add is fused). Checked against torch for all 1001 entries by
// tools/reference/make_distill_reference.py. The exact value is an integer over a power of two,
// rounded to fp32 by the integer conversion: the same on every platform (a C library's fmaf may
// round twice).
float training_base(int i) {
  const float step = (0.0f - 1.0f) / static_cast<float>(kNumTrainTimesteps);
  int exponent = 0;
  const float fraction = std::frexp(-step, &exponent);  // -step = fraction·2^exponent
  const auto mantissa = static_cast<std::int64_t>(std::ldexp(fraction, 24));
  const int scale = 24 - exponent;  // -step = mantissa / 2^scale, exactly
  constexpr int kHalfway = (kNumTrainTimesteps + 1) / 2;
  const std::int64_t numerator = i < kHalfway ? (std::int64_t{1} << scale) - i * mantissa
                                              : (kNumTrainTimesteps - i) * mantissa;
  return std::ldexp(static_cast<float>(numerator), -scale);
}

}  // namespace

std::vector<int> distill_step_list(int steps) {
  if (steps < 1 || steps > kNumTrainTimesteps) {
    throw Error(ErrorCode::kBadArgument,
                "a distilled schedule takes 1 to 1000 steps (got " + std::to_string(steps) + ")");
  }
  std::vector<int> list;
  list.reserve(static_cast<std::size_t>(steps));
  for (int k = 0; k < steps; ++k) {
    // round(1000·k/N), halves up, in integers.
    const std::int64_t twice = 2 * static_cast<std::int64_t>(kNumTrainTimesteps) * k + steps;
    list.push_back(kNumTrainTimesteps - static_cast<int>(twice / (2 * steps)));
  }
  return list;
}

FlowSchedule distilled_schedule(std::span<const int> step_list, double shift) {
  if (step_list.empty()) throw Error(ErrorCode::kBadArgument, "a distilled schedule needs steps");
  if (!(shift > 0.0 && shift <= kMaxFlowShift)) {
    throw Error(ErrorCode::kBadArgument,
                "the sampling shift must be in (0, 100] (got " + std::to_string(shift) + ")");
  }
  // torch rounds a Python scalar to the tensor's fp32 before it multiplies.
  const float shift_f = static_cast<float>(shift);
  const float shift_minus_1 = static_cast<float>(shift - 1.0);
  FlowSchedule out;
  out.sigmas.reserve(step_list.size() + 1);
  out.timesteps.reserve(step_list.size());
  for (std::size_t k = 0; k < step_list.size(); ++k) {
    const int t = step_list[k];
    if (t < 1 || t > kNumTrainTimesteps || (k > 0 && t >= step_list[k - 1])) {
      throw Error(ErrorCode::kBadArgument,
                  "a distilled step list decreases within [1, 1000] (entry " + std::to_string(k) +
                      " is " + std::to_string(t) + ")");
    }
    const float base = training_base(kNumTrainTimesteps - t);
    const float numerator = shift_f * base;
    const float scaled = shift_minus_1 * base;
    const float denominator = 1.0f + scaled;
    const float sigma = numerator / denominator;
    out.sigmas.push_back(sigma);
    out.timesteps.push_back(sigma * static_cast<float>(kNumTrainTimesteps));
  }
  out.sigmas.push_back(0.0f);
  return out;
}

FlowX0Euler::FlowX0Euler(std::span<const float> sigmas) : sigmas_(sigmas.begin(), sigmas.end()) {
  if (sigmas_.size() < 2) {
    throw Error(ErrorCode::kBadArgument, "the x0 Euler step needs at least two sigmas");
  }
}

void FlowX0Euler::step(std::span<const float> velocity, std::span<float> sample) {
  if (step_index_ >= steps()) {
    throw Error(ErrorCode::kBadArgument, "x0 Euler step: every step has already been taken");
  }
  if (velocity.size() != sample.size()) {
    throw Error(ErrorCode::kBadArgument,
                "x0 Euler step: the velocity has " + std::to_string(velocity.size()) +
                    " elements, the sample " + std::to_string(sample.size()));
  }
  const std::size_t k = static_cast<std::size_t>(step_index_);
  const float sigma = sigmas_[k];
  if (step_index_ + 1 == steps()) {
    // The last step lands on x0 itself (the reference adds nothing, not 0·v).
    for (std::size_t i = 0; i < sample.size(); ++i) {
      const float sv = sigma * velocity[i];
      sample[i] = sample[i] - sv;
    }
  } else {
    const float sigma_next = sigmas_[k + 1];
    for (std::size_t i = 0; i < sample.size(); ++i) {
      const float sv = sigma * velocity[i];
      const float x0 = sample[i] - sv;
      const float nv = velocity[i] * sigma_next;
      sample[i] = x0 + nv;
    }
  }
  ++step_index_;
}

}  // namespace ferry::models::wan
