#include "core/offload/weight_source.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace ferry::offload {
namespace {

Shape shape_of(const io::TensorInfo& info) {
  const std::size_t rank = info.shape.size();
  Shape shape;
  switch (rank) {
    case 0: break;
    case 1: shape = Shape{0}; break;
    case 2: shape = Shape{0, 0}; break;
    case 3: shape = Shape{0, 0, 0}; break;
    case 4: shape = Shape{0, 0, 0, 0}; break;
    case 5: shape = Shape{0, 0, 0, 0, 0}; break;
    case 6: shape = Shape{0, 0, 0, 0, 0, 0}; break;
    default:
      throw Error(ErrorCode::kUnsupported, "tensor " + info.name + " has " + std::to_string(rank) +
                                               " dimensions; at most " +
                                               std::to_string(Shape::kMaxRank) + " are supported");
  }
  for (std::size_t i = 0; i < rank; ++i) {
    shape[static_cast<int>(i)] = static_cast<std::int64_t>(info.shape[i]);
  }
  return shape;
}

}  // namespace

LoadedGroup::LoadedGroup(const LayerGroup& group, Device device) : group_name_(group.name) {
  tensors_.reserve(group.weights.size());
  for (const WeightRef& w : group.weights) {
    if (w.tensor == nullptr) {
      throw Error(ErrorCode::kBadArgument, "layer group " + group.name + " has an empty weight");
    }
    tensors_.push_back(Tensor{nullptr, w.tensor->dtype, shape_of(*w.tensor), device});
    // By its full name and, for "<group>.<rest>", by <rest>: a block reads "w1", not
    // "layers.7.w1".
    const std::string_view full = w.tensor->name;
    const std::size_t index = tensors_.size() - 1;
    by_name_.emplace_back(full, index);
    if (full.size() > group.name.size() + 1 && full.starts_with(group.name) &&
        full[group.name.size()] == '.') {
      by_name_.emplace_back(full.substr(group.name.size() + 1), index);
    }
  }
  std::sort(by_name_.begin(), by_name_.end());
}

const Tensor& LoadedGroup::tensor(std::string_view name) const {
  const auto it = std::lower_bound(
      by_name_.begin(), by_name_.end(), name,
      [](const std::pair<std::string_view, std::size_t>& entry, std::string_view key) {
        return entry.first < key;
      });
  if (it == by_name_.end() || it->first != name) {
    throw Error(ErrorCode::kMissingTensor, "layer group " + std::string(group_name_) +
                                               " has no tensor " + std::string(name));
  }
  return tensors_[it->second];
}

}  // namespace ferry::offload
