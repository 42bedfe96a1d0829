#include "core/offload/plan.h"

#include <algorithm>

namespace ferry::offload {

namespace {

// The alignment a tensor's bytes need: its element size; for block types, that of the f16 scales
// GGUF blocks start with, and bytes for bitsandbytes' packed codes.
std::uint64_t storage_alignment(DType dtype) {
  if (dtype == DType::kBnb4) return 1;
  return dtype_is_blocked(dtype) ? 2 : dtype_size(dtype);
}

}  // namespace

std::uint64_t tensor_slot_offset(std::uint64_t used, const io::TensorInfo& tensor,
                                 SlotLayout layout) {
  // A tensor whose file offset does not suit its element type keeps the packed alignment (its
  // read then goes through a bounce buffer): a slot never holds a misaligned tensor.
  if (layout == SlotLayout::kPacked || tensor.offset % storage_alignment(tensor.dtype) != 0) {
    return slot_align(used);
  }
  return used + (tensor.offset + kFileAlignment - used % kFileAlignment) % kFileAlignment;
}

std::uint64_t group_slot_bytes(const LayerGroup& group, SlotLayout layout) {
  std::uint64_t used = 0;
  for (const WeightRef& w : group.weights) {
    used = tensor_slot_offset(used, *w.tensor, layout) + w.tensor->bytes;
  }
  const std::uint64_t block = layout == SlotLayout::kFileAligned ? kFileAlignment : 256;
  return (used + block - 1) / block * block;
}

std::size_t Plan::count(Placement p) const {
  return static_cast<std::size_t>(std::count(placement.begin(), placement.end(), p));
}

}  // namespace ferry::offload
