// What a model needs, for each weight it multiplies by, beyond the weight tensor itself: the
// per-tensor scale of ComfyUI's scaled fp8 files (`<name>.scale_weight` or `.weight_scale`, read
// from the file once), or where a bitsandbytes 4-bit weight's side tensors (absmax, code books)
// sit in the same layer group. Found once when the model is built; resolved into a
// WeightScaling at each call, from the group's tensors as the streamer acquired them.
#pragma once

#include <span>

#include "core/io/tensor_set.h"
#include "core/offload/layer_group.h"
#include "core/tensor/quant.h"
#include "core/tensor/tensor.h"

namespace ferry::models {

class WeightScalingSource {
 public:
  WeightScalingSource() = default;

  // For the weight at position `weight` of `group` (LayerGroup::weights order; -1: absent, the
  // scaling is 1). Error(kBadModelFile) when a scale holds more than one value, a bitsandbytes
  // side tensor is not in the group, or an int8 weight has no `.weight_scale` (F32 [out, 1]) and
  // `.comfy_quant` (int8 ConvRot JSON, a group size it can use) in it.
  static WeightScalingSource find(const offload::LayerGroup& group, int weight);

  // The scaling for one call. `group` is the acquired group's tensors; for a bitsandbytes weight
  // `state` receives the side tensors' views and the result points at it, so it is valid while
  // `state` is and the group stays acquired. An int8 ConvRot weight's row scales go to `convrot`
  // the same way (Error(kInternal) from the overload without it).
  WeightScaling resolve(std::span<const Tensor> group, Bnb4State& state) const;
  WeightScaling resolve(std::span<const Tensor> group, Bnb4State& state,
                        ConvRotState& convrot) const;

  float scale() const { return scale_; }
  bool bnb4() const { return bnb4_ != nullptr; }
  // An int8 ConvRot weight's group size; 0 for any other weight.
  std::int64_t convrot_group() const { return convrot_group_; }

 private:
  float scale_ = 1.0f;
  const io::Bnb4Info* bnb4_ = nullptr;  // owned by the model's TensorSet
  int absmax_ = -1, code_ = -1, nested_absmax_ = -1, nested_code_ = -1;
  int row_scale_ = -1;              // int8 ConvRot: `.weight_scale`'s position in the group
  std::int64_t convrot_group_ = 0;  // int8 ConvRot: `.comfy_quant`'s convrot_groupsize
};

// Adds to `group` the tensors WeightScalingSource::find looks for beside a Linear's `weight` (an
// entry of `set`): a bitsandbytes weight's absmax and code books (nested ones too), a scaled fp8
// weight's `.scale_weight` / `.weight_scale` when the file has one, an int8 ConvRot weight's
// `.weight_scale` (its row scales, streamed with it) and `.comfy_quant` (its JSON).
// Error(kMissingTensor) naming the file and the tensor when a side tensor the weight's quant state
// names is absent.
void add_side_tensors(const io::TensorSet& set, const io::TensorSet::Entry& weight,
                      offload::LayerGroup& group);

}  // namespace ferry::models
