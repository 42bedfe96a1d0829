#include "core/offload/plan.h"

#include <algorithm>

namespace ferry::offload {

std::size_t Plan::count(Placement p) const {
  return static_cast<std::size_t>(std::count(placement.begin(), placement.end(), p));
}

}  // namespace ferry::offload
