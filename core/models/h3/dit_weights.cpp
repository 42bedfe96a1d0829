#include "core/models/h3/dit_weights.h"

#include <algorithm>
#include <string_view>

#include "core/error.h"
#include "core/io/shape_text.h"
#include "core/memory/arena.h"
#include "core/models/weight_scaling.h"

namespace ferry::models::h3::dit {
namespace {

using Dims = std::vector<std::uint64_t>;

// Block tensor names after the block's prefix, per key layout (empty: the layout has none).
constexpr std::string_view kDiffusersBlock[kBlockTensorCount] = {"norm1.weight",
                                                                 "attn.to_q.weight",
                                                                 "attn.to_k.weight",
                                                                 "attn.to_v.weight",
                                                                 "attn.norm_q.weight",
                                                                 "attn.norm_k.weight",
                                                                 "attn.to_out.0.weight",
                                                                 "norm2.weight",
                                                                 "ff.net.0.proj.weight",
                                                                 "ff.net.2.weight",
                                                                 "adaln_proj.linear.weight",
                                                                 "adaln_proj.linear.bias"};
constexpr std::string_view kOriginalBlock[kBlockTensorCount] = {"norm1.weight",
                                                                "attn.qkv_proj.weight",
                                                                "",
                                                                "",
                                                                "attn.q_norm.weight",
                                                                "attn.k_norm.weight",
                                                                "attn.out_proj.weight",
                                                                "norm2.weight",
                                                                "mlp.fc1.weight",
                                                                "mlp.fc2.weight",
                                                                "adaln_proj.linear.weight",
                                                                "adaln_proj.linear.bias"};

constexpr std::string_view kDiffusersOuter[kOuterTensorCount] = {"proj_in.weight",
                                                                 "proj_in.bias",
                                                                 "audio_proj_in.weight",
                                                                 "audio_proj_in.bias",
                                                                 "context_embedder.weight",
                                                                 "context_embedder.bias",
                                                                 "time_embedder.linear_1.weight",
                                                                 "time_embedder.linear_1.bias",
                                                                 "time_embedder.linear_2.weight",
                                                                 "time_embedder.linear_2.bias",
                                                                 "adaln_t_table",
                                                                 "token_refiner.final_norm.weight",
                                                                 "norm_out.norm.weight",
                                                                 "norm_out.linear.weight",
                                                                 "norm_out.linear.bias",
                                                                 "proj_out.weight",
                                                                 "proj_out.bias",
                                                                 "audio_proj_out.weight",
                                                                 "audio_proj_out.bias"};
constexpr std::string_view kOriginalOuter[kOuterTensorCount] = {
    "video_patch_proj.weight",
    "video_patch_proj.bias",
    "audio_patch_proj.weight",
    "audio_patch_proj.bias",
    "condition_proj.weight",
    "condition_proj.bias",
    "time_embedder.proj_in.weight",
    "time_embedder.proj_in.bias",
    "time_embedder.proj_out.weight",
    "time_embedder.proj_out.bias",
    "adaln_t_table",
    "token_refiner.final_norm.weight",
    "final_layer.norm.weight",
    "final_layer.adaln_proj.linear.weight",
    "final_layer.adaln_proj.linear.bias",
    "final_layer.video_out.weight",
    "final_layer.video_out.bias",
    "final_layer.audio_out.weight",
    "final_layer.audio_out.bias"};

bool is_float(DType d) {
  return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16 || d == DType::kF8E4M3 ||
         d == DType::kF8E5M2;
}

bool outer_is_linear(OuterTensor t) {
  switch (t) {
    case kVideoInWeight:
    case kAudioInWeight:
    case kTextInWeight:
    case kTime1Weight:
    case kTime2Weight:
    case kFinalAdaWeight:
    case kVideoOutWeight:
    case kAudioOutWeight:
      return true;
    default:
      return false;
  }
}

[[noreturn]] void bad(const io::TensorSet& set, const std::string& what) {
  throw Error(ErrorCode::kBadModelFile,
              set.path().string() + ": not a usable MiniMax-H3 DiT: " + what);
}

const io::TensorSet::Entry& require_tensor(const io::TensorSet& set, const std::string& name) {
  const auto* e = set.find(name);
  if (e == nullptr) {
    throw Error(ErrorCode::kMissingTensor,
                set.path().string() + ": the MiniMax-H3 DiT has no tensor '" + name + "'");
  }
  return *e;
}

// Linears may be float (fp8 with its scale), GGUF blocks, bitsandbytes 4-bit or Comfy-Org's int8
// ConvRot (its `.weight_scale` and `.comfy_quant` checked by WeightScalingSource::find); the
// rest float.
void check_tensor(const io::TensorSet& set, const io::TensorSet::Entry& e, const Dims& expected,
                  bool linear) {
  const DType d = e.tensor->dtype;
  const bool ok =
      is_float(d) || (linear && (d == DType::kBnb4 || d == DType::kI8 || dtype_is_blocked(d)));
  if (!ok) {
    bad(set, "tensor '" + e.tensor->name + "' has dtype " + std::string(dtype_name(d)) +
                 (linear ? ", not a float or quantized type" : ", not a float type"));
  }
  if (e.tensor->shape != expected) {
    bad(set, "tensor '" + e.tensor->name + "' has shape " + io::shape_text(e.tensor->shape) +
                 ", expected " + io::shape_text(expected));
  }
}

// Whether any Linear of the file carries Comfy-Org's quantization sidecars.
bool has_comfy_sidecars(const io::TensorSet& set) {
  for (const auto& e : set.entries()) {
    const std::string& n = e.tensor->name;
    if (n.ends_with(".comfy_quant") || n.ends_with(".weight_scale")) return true;
  }
  return false;
}

}  // namespace

bool is_linear(BlockTensor t) {
  return t == kQ || t == kK || t == kV || t == kOut || t == kFc1 || t == kFc2 || t == kAdaWeight;
}

std::string block_tensor_name(DitKeyLayout layout, bool refiner, std::int64_t i, BlockTensor t) {
  const std::string_view suffix =
      layout == DitKeyLayout::kDiffusers ? kDiffusersBlock[t] : kOriginalBlock[t];
  if (suffix.empty() || (refiner && (t == kAdaWeight || t == kAdaBias))) return {};
  std::string prefix;
  if (layout == DitKeyLayout::kDiffusers) {
    prefix = refiner ? "token_refiner.refiner_blocks." : "transformer_blocks.";
  } else {
    prefix = refiner ? "token_refiner.blocks." : "blocks.";
  }
  return prefix + std::to_string(i) + "." + std::string(suffix);
}

std::string outer_tensor_name(DitKeyLayout layout, OuterTensor t) {
  return std::string(layout == DitKeyLayout::kDiffusers ? kDiffusersOuter[t] : kOriginalOuter[t]);
}

DitWeights DitWeights::from(const io::TensorSet& set, QkvLayout qkv) {
  DitWeights w;
  w.set_ = &set;
  // Some third-party saves put ComfyUI's "model.diffusion_model." before every name.
  bool found = false;
  for (const char* prefix : {"", kComfyPrefix}) {
    for (DitKeyLayout layout : {DitKeyLayout::kDiffusers, DitKeyLayout::kOriginal}) {
      if (!found && set.find(prefix + outer_tensor_name(layout, kVideoInWeight)) != nullptr) {
        w.layout_ = layout;
        w.prefix_ = prefix;
        found = true;
      }
    }
  }
  if (!found) {
    bad(set, "it has no video patch projection (proj_in.weight or video_patch_proj.weight)");
  }
  const DitKeyLayout L = w.layout_;
  const std::string& P = w.prefix_;
  const auto find = [&](const std::string& name) { return set.find(P + name); };
  const auto require = [&](const std::string& name) -> const io::TensorSet::Entry& {
    return require_tensor(set, P + name);
  };
  DitConfig& c = w.config_;
  c.pruned = find("adaln_t_table") != nullptr;
  if (L == DitKeyLayout::kDiffusers) {
    w.qkv_ = QkvLayout::kSplit;
  } else if (qkv != QkvLayout::kSplit) {
    w.qkv_ = qkv;
  } else {
    w.qkv_ = c.pruned || has_comfy_sidecars(set) ? QkvLayout::kStacked : QkvLayout::kInterleaved;
  }

  const auto two_dims = [&](OuterTensor t) {
    const auto& e = require(outer_tensor_name(L, t));
    if (e.tensor->shape.size() != 2) {
      bad(set, "'" + e.tensor->name + "' has shape " + io::shape_text(e.tensor->shape));
    }
    return std::pair{static_cast<std::int64_t>(e.tensor->shape[0]),
                     static_cast<std::int64_t>(e.tensor->shape[1])};
  };
  std::tie(c.hidden, c.patch_dim) = two_dims(kVideoInWeight);
  c.audio_channels = two_dims(kAudioInWeight).second;
  c.text_dim = two_dims(kTextInWeight).second;
  if (c.pruned) {
    std::tie(c.curve_rows, c.time_dim) = two_dims(kCurveTable);
    if (c.curve_rows < 2) bad(set, "its adaln_t_table has fewer than 2 rows");
  } else {
    std::tie(c.time_hidden, c.freq_dim) = two_dims(kTime1Weight);
    c.time_dim = two_dims(kTime2Weight).first;
    if (c.freq_dim % 2 != 0)
      bad(set, "its sinusoid width " + std::to_string(c.freq_dim) + " is odd");
  }
  while (find(block_tensor_name(L, false, c.layers, kNorm1)) != nullptr) ++c.layers;
  while (find(block_tensor_name(L, true, c.refiner_layers, kNorm1)) != nullptr) {
    ++c.refiner_layers;
  }
  if (c.layers == 0) bad(set, "it has no transformer blocks");
  const auto& q_norm = require(block_tensor_name(L, false, 0, kQNorm));
  const auto& q = require(block_tensor_name(L, false, 0, kQ));
  const auto& fc1 = require(block_tensor_name(L, false, 0, kFc1));
  if (q_norm.tensor->shape.size() != 1 || q.tensor->shape.size() != 2 ||
      fc1.tensor->shape.size() != 2) {
    bad(set, "block 0 has shapes q " + io::shape_text(q.tensor->shape) + ", q norm " +
                 io::shape_text(q_norm.tensor->shape));
  }
  c.head_dim = static_cast<std::int64_t>(q_norm.tensor->shape[0]);
  const auto q_rows = static_cast<std::int64_t>(q.tensor->shape[0]);
  const std::int64_t fused = w.qkv_ == QkvLayout::kSplit ? 1 : 3;
  if (c.head_dim == 0 || c.head_dim % 2 != 0 || q_rows % (fused * c.head_dim) != 0) {
    bad(set, "the query projection " + io::shape_text(q.tensor->shape) +
                 " does not split into heads of " + std::to_string(c.head_dim));
  }
  c.heads = q_rows / (fused * c.head_dim);
  c.ffn = static_cast<std::int64_t>(fc1.tensor->shape[0]) / 2;
  // The original files keep the rotary frequencies (rope.inv_freq, [16] in the release).
  if (const auto* inv = find("rope.inv_freq"); inv != nullptr) {
    if (inv->tensor->shape.size() != 1 || inv->tensor->shape[0] == 0) {
      bad(set, "rope.inv_freq has shape " + io::shape_text(inv->tensor->shape));
    }
    c.rope_freq_dim = static_cast<std::int64_t>(inv->tensor->shape[0]);
  }

  // Every tensor's expected shape.
  const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  const std::uint64_t hid = u(c.hidden), inner = u(c.inner()), hd = u(c.head_dim), ff = u(c.ffn),
                      td = u(c.time_dim);
  const Dims block_shapes[kBlockTensorCount] = {
      {hid},
      {w.qkv_ == QkvLayout::kSplit ? inner : 3 * inner, hid},
      {inner, hid},
      {inner, hid},
      {hd},
      {hd},
      {hid, inner},
      {hid},
      {2 * ff, hid},
      {hid, ff},
      {u(c.modulation_width()), td},
      {u(c.modulation_width())}};

  const auto add_block = [&](bool refiner, std::int64_t i, const std::string& name) {
    offload::LayerGroup group;
    group.name = name;
    GroupIndex index;
    index.at.assign(kBlockTensorCount, -1);
    std::vector<const io::TensorSet::Entry*> linears;
    for (std::size_t t = 0; t < kBlockTensorCount; ++t) {
      const std::string n = block_tensor_name(L, refiner, i, BlockTensor(t));
      if (n.empty()) continue;
      const auto& e = require(n);
      check_tensor(set, e, block_shapes[t], is_linear(BlockTensor(t)));
      index.at[t] = static_cast<int>(group.weights.size());
      group.weights.push_back({e.file, e.tensor});
      if (is_linear(BlockTensor(t))) linears.push_back(&e);
    }
    for (const auto* e : linears) add_side_tensors(set, *e, group);
    index.scaling.assign(kBlockTensorCount, WeightScalingSource{});
    for (std::size_t t = 0; t < kBlockTensorCount; ++t) {
      if (is_linear(BlockTensor(t))) {
        index.scaling[t] = WeightScalingSource::find(group, index.at[t]);
      }
    }
    w.groups_.push_back(std::move(group));
    w.index_.push_back(std::move(index));
  };

  const std::uint64_t mod_out = 2 * hid;
  const Dims outer_shapes[kOuterTensorCount] = {{hid, u(c.patch_dim)},
                                                {hid},
                                                {hid, u(c.audio_channels)},
                                                {hid},
                                                {hid, u(c.text_dim)},
                                                {hid},
                                                {u(c.time_hidden), u(c.freq_dim)},
                                                {u(c.time_hidden)},
                                                {td, u(c.time_hidden)},
                                                {td},
                                                {u(c.curve_rows), td},
                                                {hid},
                                                {hid},
                                                {mod_out, td},
                                                {mod_out},
                                                {u(c.patch_dim), hid},
                                                {u(c.patch_dim)},
                                                {u(c.audio_channels), hid},
                                                {u(c.audio_channels)}};
  const auto add_outer = [&](const std::string& name, std::initializer_list<OuterTensor> tensors) {
    offload::LayerGroup group;
    group.name = name;
    group.always_resident = true;
    GroupIndex index;
    index.at.assign(kOuterTensorCount, -1);
    std::vector<const io::TensorSet::Entry*> linears;
    for (OuterTensor t : tensors) {
      const auto& e = require(outer_tensor_name(L, t));
      check_tensor(set, e, outer_shapes[t], outer_is_linear(t));
      index.at[t] = static_cast<int>(group.weights.size());
      group.weights.push_back({e.file, e.tensor});
      if (outer_is_linear(t)) linears.push_back(&e);
    }
    for (const auto* e : linears) add_side_tensors(set, *e, group);
    index.scaling.assign(kOuterTensorCount, WeightScalingSource{});
    for (OuterTensor t : tensors) {
      if (outer_is_linear(t)) index.scaling[t] = WeightScalingSource::find(group, index.at[t]);
    }
    w.groups_.push_back(std::move(group));
    w.index_.push_back(std::move(index));
  };

  if (c.pruned) {
    add_outer("embeddings", {kVideoInWeight, kVideoInBias, kAudioInWeight, kAudioInBias,
                             kTextInWeight, kTextInBias, kCurveTable});
  } else {
    add_outer("embeddings",
              {kVideoInWeight, kVideoInBias, kAudioInWeight, kAudioInBias, kTextInWeight,
               kTextInBias, kTime1Weight, kTime1Bias, kTime2Weight, kTime2Bias});
  }
  for (std::int64_t j = 0; j < c.refiner_layers; ++j) {
    add_block(true, j, "refiner." + std::to_string(j));
  }
  add_outer("refiner.norm", {kRefinerNorm});
  for (std::int64_t i = 0; i < c.layers; ++i) add_block(false, i, "blocks." + std::to_string(i));
  add_outer("head", {kFinalNorm, kFinalAdaWeight, kFinalAdaBias, kVideoOutWeight, kVideoOutBias,
                     kAudioOutWeight, kAudioOutBias});
  return w;
}

void DitWeights::set_rope_freq_dim(std::int64_t n) {
  if (n <= 0 || 6 * n > config_.head_dim) {
    throw Error(ErrorCode::kBadArgument, std::to_string(n) +
                                             " rotary frequencies per axis do not fit heads of " +
                                             std::to_string(config_.head_dim));
  }
  config_.rope_freq_dim = n;
}

std::uint64_t dit_activation_bytes(const DitConfig& c, bool fused, std::int64_t tokens,
                                   std::int64_t text_rows, std::int64_t chunk_tokens,
                                   std::int64_t distinct_timesteps, std::int64_t lora_rank) {
  const auto bytes = [](std::int64_t rows, std::int64_t cols, std::size_t size) {
    return static_cast<std::uint64_t>(
        memory::Arena::footprint(static_cast<std::size_t>(rows * cols) * size));
  };
  const auto bf16 = [&](std::int64_t r, std::int64_t k) { return bytes(r, k, 2); };
  const auto f32 = [&](std::int64_t r, std::int64_t k) { return bytes(r, k, 4); };
  const std::int64_t nt = distinct_timesteps;
  const std::int64_t media = tokens - text_rows;

  // What a block (or refiner block) on `rows` rows in chunks allocates besides the kept tensors.
  const auto block = [&](std::int64_t rows, bool modulated) {
    const std::int64_t chunk = chunk_tokens > 0 ? std::min(chunk_tokens, rows) : rows;
    const std::uint64_t mod = modulated ? bf16(nt, c.modulation_width()) : 0;
    const std::uint64_t qkv = 3 * bf16(rows, c.inner());
    const std::uint64_t project = bf16(chunk, c.hidden) + (fused ? bf16(chunk, 3 * c.inner()) : 0);
    const std::uint64_t attend_ffn =
        bf16(chunk, c.hidden) +
        std::max(bf16(chunk, c.inner()), bf16(chunk, 2 * c.ffn) + 2 * bf16(chunk, c.ffn));
    return mod + qkv + std::max(project, attend_ffn);
  };

  // Through the pass: the residual stream, the rotary tables, the AdaLN input per timestep.
  // With LoRAs, their scratch too (dit.cpp, Forward::run).
  const std::uint64_t loras =
      lora_rank > 0 ? f32(std::max(tokens, nt), lora_rank) + f32(3 * c.inner(), lora_rank) : 0;
  const std::uint64_t kept =
      bf16(tokens, c.hidden) + 2 * bf16(tokens, c.rotary_dims() / 2) + f32(nt, c.time_dim) + loras;
  const std::uint64_t time = c.pruned ? 0 : f32(nt, c.freq_dim) + f32(nt, c.time_hidden);
  const std::uint64_t text = bf16(text_rows, c.text_dim);
  const std::uint64_t embed_media =
      f32(media, std::max(c.patch_dim, c.audio_channels)) + f32(media, c.hidden);
  const std::uint64_t head = bf16(nt, 2 * c.hidden) + bf16(media, c.hidden) + f32(media, c.hidden) +
                             f32(media, std::max(c.patch_dim, c.audio_channels));
  return kept + std::max({time, text, c.refiner_layers > 0 ? block(text_rows, false) : 0,
                          embed_media, block(tokens, true), head});
}

std::uint64_t DitWeights::activation_bytes(std::int64_t tokens, std::int64_t text_rows,
                                           std::int64_t chunk_tokens,
                                           std::int64_t distinct_timesteps,
                                           std::int64_t lora_rank) const {
  return dit_activation_bytes(config_, qkv_ != QkvLayout::kSplit, tokens, text_rows, chunk_tokens,
                              distinct_timesteps, lora_rank);
}

offload::ModelLayout DitWeights::model_layout(std::int64_t tokens, std::int64_t text_rows,
                                              std::int64_t chunk_tokens) const {
  offload::ModelLayout layout;
  layout.name = std::string("MiniMax-H3 DiT (") + std::to_string(config_.layers) +
                " blocks, hidden " + std::to_string(config_.hidden) +
                (config_.pruned ? ", AdaLN curves)" : ")");
  layout.groups = groups_;
  // Keyframe rows, text and video, target audio: at most 4 distinct timesteps a step (§C.2).
  layout.activation_bytes = activation_bytes(tokens, text_rows, chunk_tokens, 4);
  return layout;
}

}  // namespace ferry::models::h3::dit
