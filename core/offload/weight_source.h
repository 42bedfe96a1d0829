// Where a forward pass gets each layer group's tensors: the interface models take, so that a
// model never depends on how its weights arrive. The WeightStreamer implements it (groups
// streamed from disk or resident); a model's activation estimate implements it with tensors that
// have shapes and no memory; tests may implement it with tensors of their own.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "core/offload/layer_group.h"
#include "core/tensor/tensor.h"

namespace ferry::offload {

// The tensors of one group while it is acquired, typed and shaped as the model file says, in
// the order of LayerGroup::weights.
class LoadedGroup {
 public:
  LoadedGroup() = default;
  // A table for `group`'s tensors with their dtypes and shapes on `device`, data not yet set.
  LoadedGroup(const LayerGroup& group, Device device);
  // Tensors found by index only (tensor(name) finds none): a shapes-only estimate's groups.
  explicit LoadedGroup(std::vector<Tensor> tensors) : tensors_(std::move(tensors)) {}

  // By the tensor's name in the file ("layers.7.w1") or, when that starts with the group's
  // name and a dot, by the rest ("w1"). Throws Error(kMissingTensor) for a name the group does
  // not have. Never allocates.
  const Tensor& tensor(std::string_view name) const;
  const Tensor& tensor(std::size_t index) const { return tensors_[index]; }
  std::size_t size() const { return tensors_.size(); }
  std::span<const Tensor> tensors() const { return tensors_; }

  // Where tensor `index`'s bytes are now (the streamer points them into a slot per acquire).
  void set_data(std::size_t index, void* data) { tensors_[index].data = data; }

 private:
  std::vector<Tensor> tensors_;
  // (name, index into tensors_), sorted by name; the names point into the layout's TensorInfos.
  std::vector<std::pair<std::string_view, std::size_t>> by_name_;
  std::string_view group_name_;
};

// A pass: begin_pass(), then for each group in order acquire(i), compute that reads it, then
// release(i).
class WeightSource {
 public:
  virtual ~WeightSource() = default;

  virtual std::size_t group_count() const = 0;
  virtual void begin_pass() = 0;
  // The group's tensors, valid until release(group). Error(kCancelled) when the run is cancelled,
  // Error(kIo) when a file could not be read.
  virtual const LoadedGroup& acquire(std::size_t group) = 0;
  // The caller has queued all compute that reads the group.
  virtual void release(std::size_t group) = 0;
};

}  // namespace ferry::offload
