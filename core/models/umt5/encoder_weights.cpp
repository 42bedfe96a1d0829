#include "core/models/umt5/encoder_weights.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <string_view>

#include "core/error.h"
#include "core/io/shape_text.h"
#include "core/memory/arena.h"

namespace ferry::models::umt5 {
namespace {

constexpr std::string_view kOfficialSuffix[kBlockTensorCount] = {
    "norm1.weight",  "attn.q.weight",     "attn.k.weight",
    "attn.v.weight", "attn.o.weight",     "pos_embedding.embedding.weight",
    "norm2.weight",  "ffn.gate.0.weight", "ffn.fc1.weight",
    "ffn.fc2.weight"};
constexpr std::string_view kHfSuffix[kBlockTensorCount] = {
    "layer.0.layer_norm.weight",          "layer.0.SelfAttention.q.weight",
    "layer.0.SelfAttention.k.weight",     "layer.0.SelfAttention.v.weight",
    "layer.0.SelfAttention.o.weight",     "layer.0.SelfAttention.relative_attention_bias.weight",
    "layer.1.layer_norm.weight",          "layer.1.DenseReluDense.wi_0.weight",
    "layer.1.DenseReluDense.wi_1.weight", "layer.1.DenseReluDense.wo.weight"};

// llama.cpp's T5 encoder names, which city96's umt5-xxl-encoder GGUFs use
// (formats_lora_moe.md §1.5). Its ffn_gate is the GELU branch (wi_0), ffn_up the linear one.
constexpr std::string_view kGgufSuffix[kBlockTensorCount] = {
    "attn_norm.weight", "attn_q.weight",   "attn_k.weight",  "attn_v.weight",
    "attn_o.weight",    "attn_rel_b.weight", "ffn_norm.weight", "ffn_gate.weight",
    "ffn_up.weight",    "ffn_down.weight"};

bool is_float(DType d) {
  return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16 || d == DType::kF8E4M3 ||
         d == DType::kF8E5M2;
}
bool is_f8(DType d) {
  return d == DType::kF8E4M3 || d == DType::kF8E5M2;
}

[[noreturn]] void bad(const io::TensorSet& set, const std::string& what) {
  throw Error(ErrorCode::kBadModelFile,
              set.path().string() + ": not a usable umT5 text encoder: " + what);
}

const io::TensorSet::Entry& require_tensor(const io::TensorSet& set,
                                                const std::string& name) {
  const auto* e = set.find(name);
  if (e == nullptr) {
    throw Error(ErrorCode::kMissingTensor,
                set.path().string() + ": the umT5 text encoder has no tensor '" + name + "'");
  }
  return *e;
}

// `quantizable`: a Linear weight, which may also be stored in a GGUF block type or as
// bitsandbytes 4-bit codes (the backends dequantise those inside the GEMM).
void check_shape(const io::TensorSet& set, const io::TensorSet::Entry& e,
                 std::vector<std::uint64_t> expected, bool quantizable = false) {
  const DType d = e.tensor->dtype;
  if (d == DType::kBnb4) {
    bad(set, "tensor '" + e.tensor->name +
                 "' is bitsandbytes 4-bit, which Ferry reads for DiTs only: use a GGUF, fp8 or "
                 "16-bit text encoder");
  }
  if (!is_float(d) && !(quantizable && dtype_is_blocked(d))) {
    bad(set, "tensor '" + e.tensor->name + "' has dtype " + std::string(dtype_name(d)) +
                 (quantizable ? ", not a float or quantized type" : ", not a float type"));
  }
  if (e.tensor->shape != expected) {
    bad(set, "tensor '" + e.tensor->name + "' has shape " + io::shape_text(e.tensor->shape) +
                 ", expected " + io::shape_text(expected));
  }
}

// The per-tensor scale of a weight named "<base>.weight": 1 unless it is stored as fp8 next to a
// scale. An fp8 weight without one is read as is (ComfyUI's plain fp8 files).
float read_scale(const io::TensorSet& set, const io::TensorSet::Entry& weight) {
  const std::string& name = weight.tensor->name;
  const std::string base = name.substr(0, name.size() - std::strlen(".weight"));
  const io::TensorSet::Entry* scale = set.find(base + ".scale_weight");
  if (scale == nullptr) scale = set.find(base + ".weight_scale");
  if (scale == nullptr) return 1.0f;
  const io::TensorInfo& t = *scale->tensor;
  if (t.dtype != DType::kF32 || t.element_count() != 1) {
    bad(set, "scale '" + t.name + "' is " + std::string(dtype_name(t.dtype)) +
                 io::shape_text(t.shape) + "; only one F32 scale per tensor is supported");
  }
  if (!is_f8(weight.tensor->dtype)) {
    bad(set, "'" + name + "' has a scale but is stored as " +
                 std::string(dtype_name(weight.tensor->dtype)) + ", not fp8");
  }
  float value = 0;
  scale->file->map(t).copy_to(0, std::as_writable_bytes(std::span<float>(&value, 1)));
  if (!(value > 0.0f) || value > 1e30f) {
    bad(set, "scale '" + t.name + "' is " + std::to_string(value));
  }
  return value;
}

}  // namespace

std::string block_tensor_name(KeyLayout layout, std::int64_t layer, BlockTensor t) {
  switch (layout) {
    case KeyLayout::kOfficial:
      return "blocks." + std::to_string(layer) + "." + std::string(kOfficialSuffix[t]);
    case KeyLayout::kHuggingFace:
      return "encoder.block." + std::to_string(layer) + "." + std::string(kHfSuffix[t]);
    case KeyLayout::kGguf:
      return "enc.blk." + std::to_string(layer) + "." + std::string(kGgufSuffix[t]);
  }
  throw Error(ErrorCode::kInternal, "block_tensor_name: unknown key layout");
}

EncoderWeights EncoderWeights::from(const io::TensorSet& set) {
  EncoderWeights w;
  w.set_ = &set;
  const io::TensorSet::Entry* embedding = nullptr;
  if ((embedding = set.find("token_embedding.weight")) != nullptr) {
    w.layout_ = KeyLayout::kOfficial;
  } else if ((embedding = set.find("shared.weight")) != nullptr ||
             (embedding = set.find("encoder.embed_tokens.weight")) != nullptr) {
    w.layout_ = KeyLayout::kHuggingFace;
  } else if ((embedding = set.find("token_embd.weight")) != nullptr) {
    w.layout_ = KeyLayout::kGguf;
  } else {
    bad(set,
        "it has no token embedding (token_embedding.weight, shared.weight, "
        "encoder.embed_tokens.weight or token_embd.weight)");
  }
  if (embedding->tensor->dtype == DType::kBnb4 || embedding->tensor->shape.size() != 2) {
    bad(set, "the token embedding has shape " + io::shape_text(embedding->tensor->shape));
  }
  w.embedding_ = *embedding;
  w.embedding_scale_ = read_scale(set, *embedding);

  EncoderConfig& c = w.config_;
  c.vocab_rows = static_cast<std::int64_t>(embedding->tensor->shape[0]);
  c.dim = static_cast<std::int64_t>(embedding->tensor->shape[1]);
  while (set.find(block_tensor_name(w.layout_, c.layers, kAttnQ)) != nullptr) ++c.layers;
  if (c.layers == 0) bad(set, "it has no blocks");
  const auto& q = require_tensor(set, block_tensor_name(w.layout_, 0, kAttnQ));
  const auto& rel = require_tensor(set, block_tensor_name(w.layout_, 0, kRelativeBias));
  const auto& gate = require_tensor(set, block_tensor_name(w.layout_, 0, kFfnGate));
  if (q.tensor->shape.size() != 2 || rel.tensor->shape.size() != 2 ||
      gate.tensor->shape.size() != 2 ||
      rel.tensor->shape[0] != static_cast<std::uint64_t>(kRelativeBuckets)) {
    bad(set, "block 0 has shapes q " + io::shape_text(q.tensor->shape) + ", relative bias " +
                 io::shape_text(rel.tensor->shape) + ", gate " +
                 io::shape_text(gate.tensor->shape));
  }
  const auto inner = static_cast<std::int64_t>(q.tensor->shape[0]);
  c.heads = static_cast<std::int64_t>(rel.tensor->shape[1]);
  c.ffn_dim = static_cast<std::int64_t>(gate.tensor->shape[0]);
  if (c.heads == 0 || inner % c.heads != 0) {
    bad(set, std::to_string(inner) + " attention channels do not split into " +
                 std::to_string(c.heads) + " heads");
  }
  c.head_dim = inner / c.heads;

  const auto dim = static_cast<std::uint64_t>(c.dim);
  const auto in = static_cast<std::uint64_t>(inner);
  const auto ff = static_cast<std::uint64_t>(c.ffn_dim);
  const std::vector<std::uint64_t> shapes[kBlockTensorCount] = {
      {dim},
      {in, dim},
      {in, dim},
      {in, dim},
      {dim, in},
      {static_cast<std::uint64_t>(kRelativeBuckets), static_cast<std::uint64_t>(c.heads)},
      {dim},
      {ff, dim},
      {ff, dim},
      {dim, ff}};
  for (std::int64_t l = 0; l < c.layers; ++l) {
    auto& entries = w.blocks_.emplace_back();
    auto& scales = w.scales_.emplace_back();
    for (std::size_t t = 0; t < kBlockTensorCount; ++t) {
      const auto& e = require_tensor(set, block_tensor_name(w.layout_, l, BlockTensor(t)));
      const bool linear = t != kNorm1 && t != kNorm2 && t != kRelativeBias;
      check_shape(set, e, shapes[t], linear);
      entries[t] = e;
      scales[t] = read_scale(set, e);
      if (!linear && is_f8(e.tensor->dtype)) {
        bad(set, "'" + e.tensor->name + "' is stored as fp8; only linear weights may be");
      }
    }
  }
  const std::string final_name = w.layout_ == KeyLayout::kOfficial    ? "norm.weight"
                                 : w.layout_ == KeyLayout::kGguf      ? "enc.output_norm.weight"
                                                                      : "encoder.final_layer_norm.weight";
  w.final_norm_ = require_tensor(set, final_name);
  check_shape(set, w.final_norm_, {dim});
  return w;
}

const io::TensorSet::Entry& EncoderWeights::block_tensor(std::int64_t layer,
                                                              BlockTensor t) const {
  return blocks_.at(static_cast<std::size_t>(layer))[t];
}

float EncoderWeights::block_scale(std::int64_t layer, BlockTensor t) const {
  return scales_.at(static_cast<std::size_t>(layer))[t];
}

std::uint64_t EncoderWeights::activation_bytes(std::span<const std::int64_t> prompt_lengths) const {
  const auto bf16 = [](std::int64_t rows, std::int64_t cols) {
    return static_cast<std::uint64_t>(
        memory::Arena::footprint(static_cast<std::size_t>(rows * cols) * 2));
  };
  const EncoderConfig& c = config_;
  std::uint64_t hidden = 0;
  std::int64_t longest = 0;
  for (std::int64_t rows : prompt_lengths) {
    hidden += bf16(rows, c.dim);
    longest = std::max(longest, rows);
  }
  // Attention: normed input, q, k, v, the heads' output, the projection. FFN: normed input, both
  // branches, the projection. The final norm's output needs one [longest, dim] only.
  const std::uint64_t attention = 2 * bf16(longest, c.dim) + 4 * bf16(longest, c.inner());
  const std::uint64_t ffn = 2 * bf16(longest, c.dim) + 2 * bf16(longest, c.ffn_dim);
  return hidden + std::max(attention, ffn);
}

offload::ModelLayout EncoderWeights::model_layout() const {
  offload::ModelLayout layout;
  layout.name = "umT5 text encoder (" + std::to_string(config_.layers) + " blocks, d_model " +
                std::to_string(config_.dim) + ")";
  for (std::int64_t l = 0; l < config_.layers; ++l) {
    offload::LayerGroup group;
    group.name = "blocks." + std::to_string(l);
    for (const auto& e : blocks_[static_cast<std::size_t>(l)]) {
      group.weights.push_back({e.file, e.tensor});
    }
    layout.groups.push_back(std::move(group));
  }
  offload::LayerGroup final_norm;
  final_norm.name = "final_norm";
  final_norm.weights.push_back({final_norm_.file, final_norm_.tensor});
  final_norm.always_resident = true;
  layout.groups.push_back(std::move(final_norm));
  // The prompt and the negative prompt at 512 tokens each.
  constexpr std::int64_t kFullPrompts[] = {512, 512};
  layout.activation_bytes = activation_bytes(kFullPrompts);
  return layout;
}

std::vector<io::TensorSpec> encoder_tensor_specs(const EncoderConfig& c, KeyLayout layout,
                                                 DType dtype) {
  const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  const std::uint64_t dim = u(c.dim), inner = u(c.inner()), ff = u(c.ffn_dim);
  const std::vector<std::uint64_t> shapes[kBlockTensorCount] = {
      {dim},        {inner, dim}, {inner, dim},
      {inner, dim}, {dim, inner}, {u(kRelativeBuckets), u(c.heads)},
      {dim},        {ff, dim},    {ff, dim},
      {dim, ff}};
  const bool official = layout == KeyLayout::kOfficial;
  std::vector<io::TensorSpec> out;
  out.push_back(
      {official ? "token_embedding.weight" : "shared.weight", dtype, {u(c.vocab_rows), dim}});
  for (std::int64_t l = 0; l < c.layers; ++l) {
    for (std::size_t t = 0; t < kBlockTensorCount; ++t) {
      out.push_back({block_tensor_name(layout, l, BlockTensor(t)), dtype, shapes[t]});
    }
  }
  out.push_back({official ? "norm.weight" : "encoder.final_layer_norm.weight", dtype, {dim}});
  return out;
}

}  // namespace ferry::models::umt5
