#include "core/offload/layer_group.h"

namespace ferry::offload {

std::uint64_t LayerGroup::bytes() const {
  std::uint64_t n = 0;
  for (const WeightRef& w : weights) n += w.tensor->bytes;
  return n;
}

std::uint64_t LayerGroup::slot_bytes() const {
  std::uint64_t n = 0;
  for (const WeightRef& w : weights) n = slot_align(n) + w.tensor->bytes;
  return slot_align(n);
}

std::uint64_t ModelLayout::weight_bytes() const {
  std::uint64_t n = 0;
  for (const LayerGroup& g : groups) n += g.bytes();
  return n;
}

}  // namespace ferry::offload
