#include "core/models/weight_scaling.h"

#include <array>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/backend/convrot.h"
#include "core/error.h"
#include "core/io/tensor_file.h"
#include "core/tensor/convert.h"

namespace ferry::models {
namespace {

// A scalar tensor's value (ComfyUI's fp8 scales), read from the file once.
float read_scalar(const io::TensorFile& file, const io::TensorInfo& info) {
  if (info.element_count() != 1 || dtype_is_blocked(info.dtype)) {
    throw Error(ErrorCode::kBadModelFile, "'" + info.name + "' should hold one value, not " +
                                              std::to_string(info.element_count()));
  }
  std::array<std::byte, 8> raw{};
  const io::MappedView view = file.map(info);
  view.copy_to(0, std::span<std::byte>(raw.data(), info.bytes));
  float value = 0;
  convert_to_f32(info.dtype, raw.data(), &value, 1);
  return value;
}

int position_of(const offload::LayerGroup& group, std::string_view name) {
  for (std::size_t i = 0; i < group.weights.size(); ++i) {
    if (group.weights[i].tensor->name == name) return static_cast<int>(i);
  }
  return -1;
}

int side_tensor(const offload::LayerGroup& group, const std::string& name,
                const std::string& weight) {
  const int at = position_of(group, name);
  if (at < 0) {
    throw Error(ErrorCode::kBadModelFile, "the 4-bit weight '" + weight + "' has no '" + name +
                                              "' beside it in " + group.name);
  }
  return at;
}

// An int8 weight's `.comfy_quant` (the uint8 bytes of a JSON object, read from the file once):
// its ConvRot group size, after the checks that the weight can use it.
std::int64_t convrot_group_size(const offload::WeightRef& quant, const io::TensorInfo& weight) {
  const io::TensorInfo& info = *quant.tensor;
  const auto bad = [&](const std::string& why) {
    return Error(ErrorCode::kBadModelFile, "'" + info.name + "' " + why);
  };
  constexpr std::uint64_t kMaxJsonBytes = 4096;  // Comfy's are about 70
  if (info.bytes > kMaxJsonBytes) throw bad("is too large for a quantisation JSON");
  std::string text(info.bytes, '\0');
  quant.file->map(info).copy_to(0,
                                std::as_writable_bytes(std::span<char>(text.data(), text.size())));
  const auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) throw bad("is not a JSON object");
  const auto format = json.find("format");
  const auto convrot = json.find("convrot");
  const bool int8_convrot = format != json.end() && *format == "int8_tensorwise" &&
                            convrot != json.end() && *convrot == true;
  if (!int8_convrot) {
    throw bad("describes " + json.dump() + ", not an int8 ConvRot weight (format " +
              "\"int8_tensorwise\", \"convrot\": true)");
  }
  const auto group = json.find("convrot_groupsize");
  if (group == json.end() || !group->is_number_integer()) {
    throw bad("has no integer convrot_groupsize");
  }
  const std::int64_t in = weight.shape.size() == 2 ? static_cast<std::int64_t>(weight.shape[1]) : 0;
  check_convrot_group(group->get<std::int64_t>(), in, weight.name);
  return group->get<std::int64_t>();
}

// The row scales of an int8 weight [out, in]: F32 [out, 1] (or [out]), checked from the header.
void check_row_scale(const io::TensorInfo& scale, const io::TensorInfo& weight) {
  const std::vector<std::int64_t> dims(scale.shape.begin(), scale.shape.end());
  const std::int64_t out = weight.shape.empty() ? 0 : static_cast<std::int64_t>(weight.shape[0]);
  check_convrot_row_scale(scale.dtype, dims, out, "'" + scale.name + "'");
}

}  // namespace

WeightScalingSource WeightScalingSource::find(const offload::LayerGroup& group, int weight) {
  WeightScalingSource source;
  if (weight < 0) return source;
  const offload::WeightRef& ref = group.weights[static_cast<std::size_t>(weight)];
  const io::TensorInfo& info = *ref.tensor;
  if (info.bnb4 != nullptr) {
    const io::Bnb4Info& b = *info.bnb4;
    source.bnb4_ = &b;
    source.absmax_ = side_tensor(group, b.absmax, info.name);
    source.code_ = side_tensor(group, b.quant_map, info.name);
    if (b.nested) {
      source.nested_absmax_ = side_tensor(group, b.nested_absmax, info.name);
      source.nested_code_ = side_tensor(group, b.nested_quant_map, info.name);
    }
    return source;
  }
  const std::string_view name = info.name;
  if (!name.ends_with(".weight")) return source;
  const std::string base(name.substr(0, name.size() - 7));
  if (info.dtype == DType::kI8) {
    const int quant = position_of(group, base + ".comfy_quant");
    const int scale = position_of(group, base + ".weight_scale");
    if (quant < 0 || scale < 0) {
      throw Error(ErrorCode::kBadModelFile,
                  "the int8 weight '" + info.name + "' has no '" + base +
                      (quant < 0 ? ".comfy_quant" : ".weight_scale") + "' beside it in " +
                      group.name + " (only Comfy-Org's int8 ConvRot weights are supported)");
    }
    source.convrot_group_ =
        convrot_group_size(group.weights[static_cast<std::size_t>(quant)], info);
    check_row_scale(*group.weights[static_cast<std::size_t>(scale)].tensor, info);
    source.row_scale_ = scale;
    return source;
  }
  for (const char* suffix : {".scale_weight", ".weight_scale"}) {
    const int at = position_of(group, base + suffix);
    if (at >= 0) {
      const offload::WeightRef& scale = group.weights[static_cast<std::size_t>(at)];
      source.scale_ = read_scalar(*scale.file, *scale.tensor);
    }
  }
  return source;
}

WeightScaling WeightScalingSource::resolve(std::span<const Tensor> group, Bnb4State& state,
                                           ConvRotState& convrot) const {
  if (convrot_group_ == 0) return resolve(group, state);
  convrot.row_scale = group[static_cast<std::size_t>(row_scale_)];
  convrot.group_size = convrot_group_;
  WeightScaling scaling(scale_);
  scaling.convrot = &convrot;
  return scaling;
}

WeightScaling WeightScalingSource::resolve(std::span<const Tensor> group, Bnb4State& state) const {
  if (convrot_group_ != 0) {
    throw Error(ErrorCode::kInternal, "an int8 ConvRot weight resolved without its ConvRot state");
  }
  WeightScaling scaling(scale_);
  if (bnb4_ == nullptr) return scaling;
  const auto at = [&](int i) { return i < 0 ? Tensor{} : group[static_cast<std::size_t>(i)]; };
  state.absmax = at(absmax_);
  state.code = at(code_);
  state.nested_absmax = at(nested_absmax_);
  state.nested_code = at(nested_code_);
  state.nested_offset = bnb4_->nested_offset;
  state.blocksize = bnb4_->blocksize;
  state.nested_blocksize = bnb4_->nested_blocksize;
  scaling.bnb4 = &state;
  return scaling;
}

void add_side_tensors(const io::TensorSet& set, const io::TensorSet::Entry& weight,
                      offload::LayerGroup& group) {
  const io::TensorInfo& info = *weight.tensor;
  std::vector<std::string> names;
  if (info.bnb4 != nullptr) {
    names = {info.bnb4->absmax, info.bnb4->quant_map};
    if (info.bnb4->nested) {
      names.push_back(info.bnb4->nested_absmax);
      names.push_back(info.bnb4->nested_quant_map);
    }
  } else {
    const std::string base =
        info.name.substr(0, info.name.size() - std::string_view(".weight").size());
    for (const char* suffix : {".scale_weight", ".weight_scale"}) {
      if (set.find(base + suffix) != nullptr) names.push_back(base + suffix);
    }
    // An int8 ConvRot weight's JSON: find reads its group size (from the file, once).
    if (info.dtype == DType::kI8 && set.find(base + ".comfy_quant") != nullptr) {
      names.push_back(base + ".comfy_quant");
    }
  }
  for (const std::string& name : names) {
    const io::TensorSet::Entry* e = set.find(name);
    if (e == nullptr) {
      throw Error(ErrorCode::kMissingTensor, set.path().string() + ": the side tensor '" + name +
                                                 "' of '" + info.name + "' is missing");
    }
    group.weights.push_back({e->file, e->tensor});
  }
}

}  // namespace ferry::models
