#include "core/models/wan/flow_schedule.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/models/wan/no_fp_contraction.h"  // last: it applies to what follows

namespace ferry::models::wan {

FlowSchedule flow_schedule(int steps, double shift) {
  if (steps < 1) {
    throw Error(ErrorCode::kBadArgument, "the number of sampling steps must be at least 1 (got " +
                                             std::to_string(steps) + ")");
  }
  if (!(shift > 0.0 && shift <= kMaxFlowShift)) {
    throw Error(ErrorCode::kBadArgument,
                "the sampling shift must be in (0, 100] (got " + std::to_string(shift) + ")");
  }
  // The training table's largest sigma, 1 - 1/1000, is stored in fp32 and read back as fp64;
  // the smallest is 0.
  const double sigma_max = static_cast<double>(static_cast<float>(1.0 - 1.0 / kNumTrainTimesteps));
  // numpy.linspace(sigma_max, 0, steps + 1): u_i = i·step + start, step = (stop - start) / n.
  const double step = (0.0 - sigma_max) / static_cast<double>(steps);

  FlowSchedule out;
  out.sigmas.reserve(static_cast<std::size_t>(steps) + 1);
  out.timesteps.reserve(static_cast<std::size_t>(steps));
  for (int i = 0; i < steps; ++i) {
    const double scaled = static_cast<double>(i) * step;
    const double u = scaled + sigma_max;
    const double numerator = shift * u;
    const double shifted = (shift - 1.0) * u;
    const double denominator = 1.0 + shifted;
    const double sigma = numerator / denominator;
    const double t = sigma * kNumTrainTimesteps;
    out.sigmas.push_back(static_cast<float>(sigma));
    // Truncation, as torch's int64 cast; at most 1000, so the fp32 value is the integer.
    out.timesteps.push_back(static_cast<float>(static_cast<std::int64_t>(t)));
  }
  out.sigmas.push_back(0.0f);
  return out;
}

}  // namespace ferry::models::wan
