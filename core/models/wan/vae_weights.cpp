#include "core/models/wan/vae_weights.h"

#include <algorithm>
#include <array>
#include <vector>

#include "core/error.h"
#include "core/memory/arena.h"
#include "core/tensor/convert.h"

namespace ferry::models::wan {
namespace {

// wan.md §C.5 (official Wan2_1_VAE / Wan2_2_VAE constructors).
constexpr std::array<float, 16> kMean21 = {
    -0.7571f, -0.7089f, -0.9113f, 0.1075f,  -0.1745f, 0.9653f,  -0.1517f, 1.5508f,
    0.4134f,  -0.0715f, 0.5517f,  -0.3632f, -0.1922f, -0.9497f, 0.2503f,  -0.2921f};
constexpr std::array<float, 16> kStd21 = {2.8184f, 1.4541f, 2.3275f, 2.6558f, 1.2196f, 1.7708f,
                                          2.6052f, 2.0743f, 3.2687f, 2.1526f, 2.8652f, 1.5579f,
                                          1.6382f, 1.1253f, 2.8251f, 1.9160f};
constexpr std::array<float, 48> kMean22 = {
    -0.2289f, -0.0052f, -0.1323f, -0.2339f, -0.2799f, 0.0174f,  0.1838f,  0.1557f,
    -0.1382f, 0.0542f,  0.2813f,  0.0891f,  0.1570f,  -0.0098f, 0.0375f,  -0.1825f,
    -0.2246f, -0.1207f, -0.0698f, 0.5109f,  0.2665f,  -0.2108f, -0.2158f, 0.2502f,
    -0.2055f, -0.0322f, 0.1109f,  0.1567f,  -0.0729f, 0.0899f,  -0.2799f, -0.1230f,
    -0.0313f, -0.1649f, 0.0117f,  0.0723f,  -0.2839f, -0.2083f, -0.0520f, 0.3748f,
    0.0152f,  0.1957f,  0.1433f,  -0.2944f, 0.3573f,  -0.0548f, -0.1681f, -0.0667f};
constexpr std::array<float, 48> kStd22 = {
    0.4765f, 1.0364f, 0.4514f, 1.1677f, 0.5313f, 0.4990f, 0.4818f, 0.5013f, 0.8158f, 1.0344f,
    0.5894f, 1.0901f, 0.6885f, 0.6165f, 0.8454f, 0.4978f, 0.5759f, 0.3523f, 0.7135f, 0.6804f,
    0.5833f, 1.4146f, 0.8986f, 0.5659f, 0.7069f, 0.5338f, 0.4889f, 0.4917f, 0.4069f, 0.4999f,
    0.6866f, 0.4093f, 0.5709f, 0.6065f, 0.6415f, 0.4944f, 0.5726f, 1.2042f, 0.5458f, 1.6887f,
    0.3971f, 1.0600f, 0.3943f, 0.5537f, 0.5444f, 0.4089f, 0.7468f, 0.7744f};

struct Planned {
  std::string name;
  Shape shape;
  DType dtype = DType::kF32;
  std::size_t offset = 0;
  const io::TensorSet::Entry* entry = nullptr;  // null: a tensor Ferry computes
};

// The dtype a tensor is kept in on the device. Convolution weights stay 16-bit when the file
// stores them so: conv3d widens weights to f32 exactly (true f32 arithmetic on both backends),
// so the results are those of f32 weights at half the memory. Everything else is f32: norms'
// gammas and biases are small, and the attention projections go through linear, whose 16-bit
// weight paths need not be the f32 one.
DType device_dtype(const std::string& name, const Shape& shape, DType stored) {
  const bool conv = shape.rank() >= 4 && name.ends_with(".weight") &&
                    name.find("to_qkv") == std::string::npos &&
                    name.find(".proj.") == std::string::npos;
  return conv && (stored == DType::kF16 || stored == DType::kBF16) ? stored : DType::kF32;
}

// VAE tensors have 1 to 5 dimensions.
Shape shape_of(const io::TensorInfo& info, const std::string& name) {
  const auto& d = info.shape;
  const auto n = [&](std::size_t i) { return static_cast<std::int64_t>(d[i]); };
  switch (d.size()) {
    case 1:
      return Shape{n(0)};
    case 2:
      return Shape{n(0), n(1)};
    case 3:
      return Shape{n(0), n(1), n(2)};
    case 4:
      return Shape{n(0), n(1), n(2), n(3)};
    case 5:
      return Shape{n(0), n(1), n(2), n(3), n(4)};
    default:
      throw Error(ErrorCode::kBadModelFile,
                  "VAE tensor " + name + " has " + std::to_string(d.size()) + " dimensions");
  }
}

}  // namespace

const float* vae_latent_mean(VaeKind kind) {
  return kind == VaeKind::kWan21 ? kMean21.data() : kMean22.data();
}
const float* vae_latent_std(VaeKind kind) {
  return kind == VaeKind::kWan21 ? kStd21.data() : kStd22.data();
}

const Tensor& VaeWeights::at(std::string_view name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    throw Error(ErrorCode::kMissingTensor, std::string(vae_kind_name(config_.kind)) + " tensor " +
                                               std::string(name) + " is missing");
  }
  return it->second;
}

VaeWeights VaeWeights::load(Backend& backend, const io::TensorSet& set) {
  return build(&backend, set);
}

VaeWeights VaeWeights::shapes_only(const io::TensorSet& set) {
  return build(nullptr, set);
}

VaeWeights VaeWeights::build(Backend* backend, const io::TensorSet& set) {
  VaeWeights out;
  std::vector<std::string_view> names;
  names.reserve(set.entries().size());
  for (const auto& entry : set.entries()) names.push_back(entry.tensor->name);
  VaeConfig& config = out.config_;
  config.kind = detect_vae_kind(names);
  const bool v22 = config.kind == VaeKind::kWan22;
  config.spatial = v22 ? 16 : 8;
  config.patch = v22 ? 2 : 1;
  config.z_dim = v22 ? 48 : 16;

  std::vector<Planned> plan;
  std::size_t offset = 0;
  const auto place = [&](std::string name, Shape shape, const io::TensorSet::Entry* entry) {
    const DType dtype =
        entry == nullptr ? DType::kF32 : device_dtype(name, shape, entry->tensor->dtype);
    const std::size_t bytes = static_cast<std::size_t>(shape.numel()) * dtype_size(dtype);
    plan.push_back({std::move(name), shape, dtype, offset, entry});
    offset += memory::Arena::footprint(bytes);
  };
  for (const auto& entry : set.entries()) {
    std::string name = official_vae_name(entry.tensor->name, config.kind);
    const DType dtype = entry.tensor->dtype;
    if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16) {
      throw Error(ErrorCode::kBadModelFile, "VAE tensor " + name + " has dtype " +
                                                std::string(dtype_name(dtype)) +
                                                " (expected F32, F16 or BF16)");
    }
    place(std::move(name), shape_of(*entry.tensor, entry.tensor->name), &entry);
  }
  const std::int64_t z = config.z_dim;
  for (std::string_view name : {kNormalizeWeight, kDenormalizeWeight})
    place(std::string(name), Shape{z, z, 1, 1, 1}, nullptr);
  for (std::string_view name : {kNormalizeBias, kDenormalizeBias})
    place(std::string(name), Shape{z}, nullptr);
  out.bytes_ = offset;

  std::byte* base = nullptr;
  if (backend != nullptr) {
    out.buffer_ = backend->allocate(offset);
    base = static_cast<std::byte*>(out.buffer_->data());
  }
  for (const Planned& p : plan) {
    Tensor t;
    t.data = base == nullptr ? nullptr : base + p.offset;
    t.dtype = p.dtype;
    t.shape = p.shape;
    t.device = backend == nullptr ? Device::kCpu : backend->device();
    if (!out.tensors_.emplace(p.name, t).second) {
      throw Error(ErrorCode::kBadModelFile,
                  "VAE tensor " + p.name + " appears twice (under two layouts' names)");
    }
  }

  // Structure checks the models rely on.
  config.has_encoder = out.has("encoder.conv1.weight");
  config.has_decoder = out.has("decoder.conv1.weight");
  if (!config.has_encoder && !config.has_decoder) {
    throw Error(ErrorCode::kBadModelFile,
                "the VAE file holds neither encoder.conv1 nor decoder.conv1");
  }
  const std::string_view what = vae_kind_name(config.kind);
  const auto expect = [&](bool ok, const std::string& message) {
    if (!ok) throw Error(ErrorCode::kBadModelFile, std::string(what) + ": " + message);
  };
  const std::int64_t pixels_in = 3 * config.patch * config.patch;
  if (config.has_decoder) {
    expect(out.at("conv2.weight").shape == (Shape{z, z, 1, 1, 1}),
           "conv2 must be [z, z, 1, 1, 1] with z = " + std::to_string(z));
    expect(out.at("decoder.conv1.weight").shape[1] == z, "decoder.conv1 must read z_dim channels");
    expect(out.at("decoder.head.2.weight").shape[0] == pixels_in,
           "decoder.head must give " + std::to_string(pixels_in) + " channels");
  }
  if (config.has_encoder) {
    expect(out.at("conv1.weight").shape == (Shape{2 * z, 2 * z, 1, 1, 1}),
           "conv1 must be [2z, 2z, 1, 1, 1]");
    expect(out.at("encoder.conv1.weight").shape[1] == pixels_in,
           "encoder.conv1 must read " + std::to_string(pixels_in) + " channels");
  }

  if (backend == nullptr) return out;
  std::vector<std::byte> raw;
  std::vector<float> f32;
  for (const Planned& p : plan) {
    const Tensor& t = out.tensors_.at(p.name);
    f32.assign(static_cast<std::size_t>(t.numel()), 0.0f);
    if (p.entry != nullptr) {
      const io::TensorInfo& info = *p.entry->tensor;
      raw.resize(static_cast<std::size_t>(info.bytes));
      const io::MappedView view = p.entry->file->map(info);
      view.copy_to(0, raw);
      if (t.dtype == info.dtype) {
        backend->upload(t, raw.data());
        backend->synchronize();  // `raw` is refilled by the next tensor
        continue;
      }
      convert_to_f32(info.dtype, raw.data(), f32.data(), f32.size());
    } else {
      const float* mean = vae_latent_mean(config.kind);
      const float* stdev = vae_latent_std(config.kind);
      for (std::int64_t c = 0; c < z; ++c) {
        const auto i = static_cast<std::size_t>(c);
        // The official code multiplies by the fp32 reciprocal 1/std when encoding and divides
        // by it when decoding; the same numbers, rounded once here.
        const float inv = 1.0f / stdev[i];
        if (p.name == kNormalizeWeight) f32[i * static_cast<std::size_t>(z) + i] = inv;
        if (p.name == kDenormalizeWeight) f32[i * static_cast<std::size_t>(z) + i] = 1.0f / inv;
        if (p.name == kNormalizeBias) f32[i] = -mean[i] * inv;
        if (p.name == kDenormalizeBias) f32[i] = mean[i];
      }
    }
    backend->upload(t, f32.data());
  }
  backend->synchronize();
  return out;
}

}  // namespace ferry::models::wan
