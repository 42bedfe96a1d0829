#include "core/models/h3/video_vae_weights.h"

#include <string_view>

#include "core/error.h"
#include "core/io/shape_text.h"

namespace ferry::models::h3::vae {
namespace {

using Dims = std::vector<std::uint64_t>;

// Block tensor names after "decoder.transformer_blocks.B.", per layout (empty: none).
constexpr std::string_view kDiffusersBlock[kBlockTensorCount] = {
    "norm1.weight",       "attn.to_q.weight", "attn.to_q.bias", "attn.to_k.weight",
    "attn.to_k.bias",     "attn.to_v.weight", "attn.to_v.bias", "attn.to_out.0.weight",
    "attn.to_out.0.bias", "scale1",           "norm2.weight",   "ff.net.0.proj.weight",
    "ff.net.0.proj.bias", "ff.net.2.weight",  "ff.net.2.bias",  "scale2"};
constexpr std::string_view kOriginalBlock[kBlockTensorCount] = {"norm1.weight",
                                                                "attn.to_qkv.weight",
                                                                "attn.to_qkv.bias",
                                                                "",
                                                                "",
                                                                "",
                                                                "",
                                                                "attn.to_out.weight",
                                                                "attn.to_out.bias",
                                                                "scale1",
                                                                "norm2.weight",
                                                                "ff.w1.weight",
                                                                "ff.w1.bias",
                                                                "ff.w2.weight",
                                                                "ff.w2.bias",
                                                                "scale2"};

constexpr std::string_view kDiffusersOuter[kOuterTensorCount] = {
    "post_quant_conv.weight", "post_quant_conv.bias",    "decoder.proj_in.weight",
    "decoder.proj_in.bias",   "decoder.register_tokens", "decoder.norm_out.weight",
    "decoder.norm_out.bias",  "decoder.proj_out.weight", "decoder.proj_out.bias"};
constexpr std::string_view kOriginalOuter[kOuterTensorCount] = {
    "post_quant_conv.weight",  "post_quant_conv.bias",    "decoder.x_embedder.weight",
    "decoder.x_embedder.bias", "decoder.register_tokens", "decoder.norm_out.weight",
    "decoder.norm_out.bias",   "decoder.proj_out.weight", "decoder.proj_out.bias"};

bool is_float(DType d) {
  return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16;
}

bool outer_is_linear(OuterTensor t) {
  return t == kPostQuantWeight || t == kProjInWeight || t == kProjOutWeight;
}

[[noreturn]] void bad(const io::TensorSet& set, const std::string& what) {
  throw Error(ErrorCode::kBadModelFile,
              set.path().string() + ": not a usable MiniMax-H3 video VAE: " + what);
}

const io::TensorSet::Entry& require_tensor(const io::TensorSet& set, const std::string& name) {
  const auto* e = set.find(name);
  if (e == nullptr) {
    throw Error(ErrorCode::kMissingTensor,
                set.path().string() + ": the MiniMax-H3 video VAE has no tensor '" + name + "'");
  }
  return *e;
}

// Linears may be float or bitsandbytes 4-bit (DiffSynth's decoder); the rest float.
void check_tensor(const io::TensorSet& set, const io::TensorSet::Entry& e, const Dims& expected,
                  bool linear) {
  const DType d = e.tensor->dtype;
  if (!(is_float(d) || (linear && d == DType::kBnb4))) {
    bad(set, "tensor '" + e.tensor->name + "' has dtype " + std::string(dtype_name(d)) +
                 (linear ? ", not a float or NF4 type" : ", not a float type"));
  }
  if (e.tensor->shape != expected) {
    bad(set, "tensor '" + e.tensor->name + "' has shape " + io::shape_text(e.tensor->shape) +
                 ", expected " + io::shape_text(expected));
  }
}

std::int64_t dim_of(const io::TensorSet::Entry& e, std::size_t i) {
  return i < e.tensor->shape.size() ? static_cast<std::int64_t>(e.tensor->shape[i]) : 0;
}

constexpr float kReleaseMean[24] = {
    0.858090341091156f,    -0.9606591463088989f, 1.0661640167236328f,   -0.5090325474739075f,
    -0.2727581858634949f,  -1.3675414323806763f, -0.2553254961967468f,  -0.26907554268836975f,
    -0.5376840829849243f,  -0.0464097298681736f, 0.6657370328903198f,   0.19690127670764923f,
    -0.5460608005523682f,  -0.4035342037677765f, -0.23683024942874908f, 0.25928452610969543f,
    -0.30133944749832153f, 0.211341992020607f,   -1.1206848621368408f,  0.3581933379173279f,
    -0.04225143790245056f, 0.2604829967021942f,  0.22864092886447906f,  0.7056031823158264f};
constexpr float kReleaseStd[24] = {
    1.2223774194717407f, 1.2767263650894165f,  1.6831774711608887f, 1.7549455165863037f,
    1.5636216402053833f, 2.194143533706665f,   0.9653137922286987f, 1.0569885969161987f,
    0.841948926448822f,  0.7729952931404114f,  1.8955937623977661f, 0.946841835975647f,
    0.7996809482574463f, 0.44988900423049927f, 0.7197399735450745f, 0.6936293244361877f,
    2.961095094680786f,  2.7694199085235596f,  3.0496184825897217f, 2.1088054180145264f,
    3.276226282119751f,  3.1627357006073f,     2.2816812992095947f, 2.6127843856811523f};

}  // namespace

const std::vector<float>& release_latents_mean() {
  static const std::vector<float> v(std::begin(kReleaseMean), std::end(kReleaseMean));
  return v;
}
const std::vector<float>& release_latents_std() {
  static const std::vector<float> v(std::begin(kReleaseStd), std::end(kReleaseStd));
  return v;
}

bool is_linear(BlockTensor t) {
  return t == kQ || t == kK || t == kV || t == kOut || t == kW1 || t == kW2;
}

std::string VideoVaeWeights::block_tensor_name(std::int64_t i, BlockTensor t) const {
  const std::string_view suffix =
      layout_ == VaeKeyLayout::kDiffusers ? kDiffusersBlock[t] : kOriginalBlock[t];
  if (suffix.empty()) return {};
  std::string name = "decoder.transformer_blocks." + std::to_string(i) + "." + std::string(suffix);
  if (layout_ == VaeKeyLayout::kDiffSynth && (t == kScale1 || t == kScale2)) name += ".weight";
  return name;
}

std::string VideoVaeWeights::outer_tensor_name(OuterTensor t) const {
  std::string name(layout_ == VaeKeyLayout::kDiffusers ? kDiffusersOuter[t] : kOriginalOuter[t]);
  if (layout_ == VaeKeyLayout::kDiffSynth && t == kRegisters) name += ".weight";
  return name;
}

VideoVaeWeights VideoVaeWeights::from(const io::TensorSet& set) {
  VideoVaeWeights w;
  w.set_ = &set;
  if (set.find("decoder.proj_in.weight") != nullptr) {
    w.layout_ = VaeKeyLayout::kDiffusers;
  } else if (set.find("decoder.x_embedder.weight") != nullptr) {
    w.layout_ = set.find("decoder.register_tokens.weight") != nullptr ? VaeKeyLayout::kDiffSynth
                                                                      : VaeKeyLayout::kOriginal;
  } else {
    bad(set, "it has no decoder input projection (decoder.proj_in or decoder.x_embedder)");
  }
  const auto require = [&](const std::string& name) -> const io::TensorSet::Entry& {
    return require_tensor(set, name);
  };
  VideoVaeConfig& c = w.config_;
  const auto& proj_in = require(w.outer_tensor_name(kProjInWeight));
  const auto& registers = require(w.outer_tensor_name(kRegisters));
  const auto& proj_out = require(w.outer_tensor_name(kProjOutWeight));
  c.dim = dim_of(proj_in, 0);
  c.latent_channels = dim_of(proj_in, 1);
  c.has_encoder = set.find("encoder.conv_in.weight") != nullptr;
  c.registers = dim_of(registers, 1);
  const std::int64_t values = dim_of(proj_out, 0);
  for (std::int64_t p = 1; 3 * kTemporalRatio * p * p <= values; ++p) {
    if (3 * kTemporalRatio * p * p == values) c.patch = p;
  }
  if (c.patch == 0) {
    bad(set, "its output projection " + io::shape_text(proj_out.tensor->shape) +
                 " is not 3 colours x 4 frames x p x p pixels");
  }
  while (set.find(w.block_tensor_name(c.layers, kNorm1)) != nullptr) ++c.layers;
  if (c.layers == 0) bad(set, "it has no decoder blocks");
  const auto& q = require(w.block_tensor_name(0, kQ));
  const auto& w1 = require(w.block_tensor_name(0, kW1));
  c.ffn = dim_of(w1, 0) / 2;
  const std::int64_t inner = dim_of(q, 0) / (w.fused_qkv() ? 3 : 1);
  if (c.dim == 0 || inner == 0) bad(set, "its decoder has no width");
  // Heads are not in the weights: the release's 64-wide ones unless set_head_dim says otherwise.
  if (inner % 64 == 0) c.head_dim = 64;
  c.heads = c.head_dim > 0 ? inner / c.head_dim : 0;
  w.inner_ = inner;
  if (c.latent_channels == 24) {
    c.latents_mean = release_latents_mean();
    c.latents_std = release_latents_std();
  } else {
    c.latents_mean.assign(static_cast<std::size_t>(c.latent_channels), 0.0f);
    c.latents_std.assign(static_cast<std::size_t>(c.latent_channels), 1.0f);
  }

  const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  const std::uint64_t d = u(c.dim), in = u(inner), f = u(c.ffn), z = u(c.latent_channels);
  const std::uint64_t qkv_rows = w.fused_qkv() ? 3 * in : in;
  const Dims block_shapes[kBlockTensorCount] = {
      {d}, {qkv_rows, d}, {qkv_rows}, {in, d},    {in},    {in, d}, {in}, {d, in},
      {d}, {d},           {d},        {2 * f, d}, {2 * f}, {d, f},  {d},  {d}};
  const Dims outer_shapes[kOuterTensorCount] = {
      {z, z, 1, 1, 1}, {z},        {d, z}, {d}, {1, u(c.registers), d}, {d}, {d},
      {u(values), d},  {u(values)}};

  const auto add_group = [&](const std::string& name, bool resident, std::size_t count,
                             const auto& name_of, const auto& shape_of, const auto& linear_of) {
    offload::LayerGroup group;
    group.name = name;
    group.always_resident = resident;
    GroupIndex index;
    index.at.assign(count, -1);
    std::vector<const io::TensorSet::Entry*> linears;
    for (std::size_t t = 0; t < count; ++t) {
      const std::string n = name_of(t);
      if (n.empty()) continue;
      const auto& e = require(n);
      check_tensor(set, e, shape_of(t), linear_of(t));
      index.at[t] = static_cast<int>(group.weights.size());
      group.weights.push_back({e.file, e.tensor});
      if (linear_of(t)) linears.push_back(&e);
    }
    for (const auto* e : linears) add_side_tensors(set, *e, group);
    index.scaling.assign(count, WeightScalingSource{});
    for (std::size_t t = 0; t < count; ++t) {
      if (linear_of(t) && index.at[t] >= 0) {
        index.scaling[t] = WeightScalingSource::find(group, index.at[t]);
      }
    }
    w.groups_.push_back(std::move(group));
    w.index_.push_back(std::move(index));
  };
  const auto outer_name = [&](std::size_t t) { return w.outer_tensor_name(OuterTensor(t)); };
  const auto outer_shape = [&](std::size_t t) { return outer_shapes[t]; };
  const auto outer_linear = [](std::size_t t) { return outer_is_linear(OuterTensor(t)); };
  const auto only = [](std::initializer_list<OuterTensor> keep, const auto& name_of) {
    return [keep, name_of](std::size_t t) {
      for (OuterTensor k : keep) {
        if (k == t) return name_of(t);
      }
      return std::string();
    };
  };
  add_group(
      "decoder.embed", true, kOuterTensorCount,
      only({kPostQuantWeight, kPostQuantBias, kProjInWeight, kProjInBias, kRegisters}, outer_name),
      outer_shape, outer_linear);
  for (std::int64_t i = 0; i < c.layers; ++i) {
    add_group(
        "decoder.blocks." + std::to_string(i), false, kBlockTensorCount,
        [&](std::size_t t) { return w.block_tensor_name(i, BlockTensor(t)); },
        [&](std::size_t t) { return block_shapes[t]; },
        [](std::size_t t) { return is_linear(BlockTensor(t)); });
  }
  add_group("decoder.head", true, kOuterTensorCount,
            only({kNormOutWeight, kNormOutBias, kProjOutWeight, kProjOutBias}, outer_name),
            outer_shape, outer_linear);
  return w;
}

void VideoVaeWeights::set_head_dim(std::int64_t head_dim) {
  if (head_dim <= 0 || inner_ % head_dim != 0 || (head_dim * 3 / 4) % 6 != 0) {
    throw Error(ErrorCode::kBadArgument,
                "heads of " + std::to_string(head_dim) + " do not split an attention width of " +
                    std::to_string(inner_) + " with whole rotary frequencies per axis");
  }
  config_.head_dim = head_dim;
  config_.heads = inner_ / head_dim;
}

void VideoVaeWeights::set_latent_stats(std::vector<float> mean, std::vector<float> std) {
  const auto n = static_cast<std::size_t>(config_.latent_channels);
  bool ok = mean.size() == n && std.size() == n;
  for (float s : std) ok = ok && s > 0.0f;
  if (!ok) {
    throw Error(ErrorCode::kBadArgument,
                "latent statistics need " + std::to_string(n) + " means and positive deviations");
  }
  config_.latents_mean = std::move(mean);
  config_.latents_std = std::move(std);
}

std::uint64_t VideoVaeWeights::decoder_bytes() const {
  std::uint64_t bytes = 0;
  for (const auto& g : groups_) bytes += g.bytes();
  return bytes;
}

std::uint64_t VideoVaeWeights::encoder_bytes() const {
  std::uint64_t bytes = 0;
  for (const auto& e : set_->entries()) {
    const std::string& n = e.tensor->name;
    if (n.starts_with("encoder.") || n.starts_with("quant_conv.")) bytes += e.tensor->bytes;
  }
  return bytes;
}

}  // namespace ferry::models::h3::vae
