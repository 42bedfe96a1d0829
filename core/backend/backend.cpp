#include "core/backend/backend.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"

namespace ferry {

int t5_relative_bucket(std::int64_t relative_position) {
  // wan.md §A.2: 16 buckets a direction, exact below 8, logarithmic up to 128, in float32.
  const int base = relative_position > 0 ? 16 : 0;
  const std::int64_t a = relative_position < 0 ? -relative_position : relative_position;
  if (a < 8) return base + static_cast<int>(a);
  const float scaled = std::log(static_cast<float>(a) / 8.0f) / static_cast<float>(std::log(16.0)) * 8.0f;
  return base + std::min(15, 8 + static_cast<int>(scaled));
}

}  // namespace ferry
