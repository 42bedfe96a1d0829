#include "core/models/h3/text_encoder_weights.h"

#include <algorithm>
#include <string_view>

#include "core/error.h"
#include "core/io/shape_text.h"
#include "core/memory/arena.h"
#include "core/models/weight_scaling.h"

namespace ferry::models::h3 {
namespace {

constexpr std::string_view kSuffix[kLayerTensorCount] = {
    "input_layernorm.weight",  "self_attn.q_proj.weight",
    "self_attn.k_proj.weight", "self_attn.v_proj.weight",
    "self_attn.q_norm.weight", "self_attn.k_norm.weight",
    "self_attn.o_proj.weight", "post_attention_layernorm.weight",
    "mlp.gate_proj.weight",    "mlp.up_proj.weight",
    "mlp.down_proj.weight"};

std::string_view prefix(KeyLayout layout) {
  return layout == KeyLayout::kRelease ? "model.language_model." : "model.";
}

bool is_float(DType d) {
  return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16 || d == DType::kF8E4M3 ||
         d == DType::kF8E5M2;
}

[[noreturn]] void bad(const io::TensorSet& set, const std::string& what) {
  throw Error(ErrorCode::kBadModelFile,
              set.path().string() + ": not a usable Qwen3-VL text encoder: " + what);
}

const io::TensorSet::Entry& require_tensor(const io::TensorSet& set, const std::string& name) {
  const auto* e = set.find(name);
  if (e == nullptr) {
    throw Error(ErrorCode::kMissingTensor,
                set.path().string() + ": the Qwen3-VL text encoder has no tensor '" + name + "'");
  }
  return *e;
}

// A Linear weight may be float (fp8 with its scale), a GGUF block type, bitsandbytes 4-bit or
// Comfy-Org's int8 ConvRot (its `.weight_scale` and `.comfy_quant` checked by
// WeightScalingSource::find); norms are float.
void check_tensor(const io::TensorSet& set, const io::TensorSet::Entry& e,
                  const std::vector<std::uint64_t>& expected, bool linear) {
  const DType d = e.tensor->dtype;
  const bool ok =
      is_float(d) || (linear && (d == DType::kBnb4 || d == DType::kI8 || dtype_is_blocked(d)));
  if (!ok) {
    bad(set, "tensor '" + e.tensor->name + "' has dtype " + std::string(dtype_name(d)) +
                 (linear ? ", not a float or quantized type" : ", not a float type"));
  }
  if (!linear && (d == DType::kF8E4M3 || d == DType::kF8E5M2)) {
    bad(set, "'" + e.tensor->name + "' is stored as fp8; only Linear weights may be");
  }
  if (e.tensor->shape != expected) {
    bad(set, "tensor '" + e.tensor->name + "' has shape " + io::shape_text(e.tensor->shape) +
                 ", expected " + io::shape_text(expected));
  }
}

}  // namespace

bool is_linear(LayerTensor t) {
  return t == kQProj || t == kKProj || t == kVProj || t == kOProj || t == kGateProj ||
         t == kUpProj || t == kDownProj;
}

std::string layer_tensor_name(KeyLayout layout, std::int64_t layer, LayerTensor t) {
  return std::string(prefix(layout)) + "layers." + std::to_string(layer) + "." +
         std::string(kSuffix[t]);
}

std::string embedding_name(KeyLayout layout) {
  return std::string(prefix(layout)) + "embed_tokens.weight";
}

TextEncoderWeights TextEncoderWeights::from(const io::TensorSet& set, std::int64_t layers) {
  if (layers < 1 || layers > kOutputLayer) {
    throw Error(ErrorCode::kBadArgument, "the H3 text encoder runs 1 to " +
                                             std::to_string(kOutputLayer) + " layers, not " +
                                             std::to_string(layers));
  }
  TextEncoderWeights w;
  w.config_.layers = layers;
  w.set_ = &set;
  const io::TensorSet::Entry* embedding = nullptr;
  if ((embedding = set.find(embedding_name(KeyLayout::kRelease))) != nullptr) {
    w.layout_ = KeyLayout::kRelease;
  } else if ((embedding = set.find(embedding_name(KeyLayout::kComfy))) != nullptr) {
    w.layout_ = KeyLayout::kComfy;
  } else {
    bad(set, "it has no token embedding (" + embedding_name(KeyLayout::kRelease) + " or " +
                 embedding_name(KeyLayout::kComfy) + ")");
  }
  if (!is_float(embedding->tensor->dtype) || embedding->tensor->shape.size() != 2) {
    bad(set, "the token embedding is " + std::string(dtype_name(embedding->tensor->dtype)) +
                 io::shape_text(embedding->tensor->shape));
  }
  w.embedding_ = *embedding;

  TextEncoderConfig& c = w.config_;
  c.vocab_rows = static_cast<std::int64_t>(embedding->tensor->shape[0]);
  c.dim = static_cast<std::int64_t>(embedding->tensor->shape[1]);
  while (set.find(layer_tensor_name(w.layout_, c.file_layers, kQProj)) != nullptr) ++c.file_layers;
  if (c.file_layers < kOutputLayer) {
    bad(set, "it has " + std::to_string(c.file_layers) +
                 " decoder layers; H3 reads the output of layer " + std::to_string(kOutputLayer));
  }
  const auto& q = require_tensor(set, layer_tensor_name(w.layout_, 0, kQProj));
  const auto& k = require_tensor(set, layer_tensor_name(w.layout_, 0, kKProj));
  const auto& q_norm = require_tensor(set, layer_tensor_name(w.layout_, 0, kQNorm));
  const auto& gate = require_tensor(set, layer_tensor_name(w.layout_, 0, kGateProj));
  if (q.tensor->shape.size() != 2 || k.tensor->shape.size() != 2 ||
      q_norm.tensor->shape.size() != 1 || gate.tensor->shape.size() != 2) {
    bad(set, "layer 0 has shapes q_proj " + io::shape_text(q.tensor->shape) + ", k_proj " +
                 io::shape_text(k.tensor->shape) + ", q_norm " +
                 io::shape_text(q_norm.tensor->shape));
  }
  c.head_dim = static_cast<std::int64_t>(q_norm.tensor->shape[0]);
  const auto q_rows = static_cast<std::int64_t>(q.tensor->shape[0]);
  const auto k_rows = static_cast<std::int64_t>(k.tensor->shape[0]);
  if (c.head_dim == 0 || c.head_dim % 2 != 0 || q_rows % c.head_dim != 0 ||
      k_rows % c.head_dim != 0 || k_rows == 0 ||
      (q_rows / c.head_dim) % (k_rows / c.head_dim) != 0) {
    bad(set, "q_proj " + io::shape_text(q.tensor->shape) + " and k_proj " +
                 io::shape_text(k.tensor->shape) + " do not split into heads of " +
                 std::to_string(c.head_dim) + " with key/value heads shared evenly");
  }
  c.heads = q_rows / c.head_dim;
  c.kv_heads = k_rows / c.head_dim;
  c.ffn_dim = static_cast<std::int64_t>(gate.tensor->shape[0]);

  const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  const std::uint64_t dim = u(c.dim), qw = u(c.q_width()), kvw = u(c.kv_width()), ff = u(c.ffn_dim),
                      hd = u(c.head_dim);
  const std::vector<std::uint64_t> shapes[kLayerTensorCount] = {
      {dim},     {qw, dim}, {kvw, dim}, {kvw, dim}, {hd},     {hd},
      {dim, qw}, {dim},     {ff, dim},  {ff, dim},  {dim, ff}};
  for (std::int64_t l = 0; l < c.layers; ++l) {
    auto& entries = w.layers_.emplace_back();
    offload::LayerGroup group;
    group.name = "layers." + std::to_string(l);
    for (std::size_t t = 0; t < kLayerTensorCount; ++t) {
      const auto& e = require_tensor(set, layer_tensor_name(w.layout_, l, LayerTensor(t)));
      check_tensor(set, e, shapes[t], is_linear(LayerTensor(t)));
      entries[t] = e;
      group.weights.push_back({e.file, e.tensor});
    }
    for (std::size_t t = 0; t < kLayerTensorCount; ++t) {
      if (is_linear(LayerTensor(t))) add_side_tensors(set, entries[t], group);
    }
    auto& scaling = w.scaling_.emplace_back();
    for (std::size_t t = 0; t < kLayerTensorCount; ++t) {
      if (is_linear(LayerTensor(t))) {
        scaling[t] = WeightScalingSource::find(group, static_cast<int>(t));
      }
    }
    w.groups_.push_back(std::move(group));
  }
  return w;
}

void TextEncoderWeights::set_mrope_section(const std::array<std::int64_t, 3>& section) {
  if (section[0] < 0 || section[1] < 0 || section[2] < 0) {
    throw Error(ErrorCode::kBadArgument, "MRoPE sections must not be negative");
  }
  config_.mrope_section = section;
}

const io::TensorSet::Entry& TextEncoderWeights::layer_tensor(std::int64_t layer,
                                                             LayerTensor t) const {
  return layers_.at(static_cast<std::size_t>(layer))[t];
}

const WeightScalingSource& TextEncoderWeights::scaling(std::int64_t layer, LayerTensor t) const {
  return scaling_.at(static_cast<std::size_t>(layer))[t];
}

std::uint64_t TextEncoderWeights::activation_bytes(std::int64_t tokens,
                                                   std::int64_t vision_rows) const {
  const auto bf16 = [](std::int64_t rows, std::int64_t cols) {
    return static_cast<std::uint64_t>(
        memory::Arena::footprint(static_cast<std::size_t>(rows * cols) * 2));
  };
  const TextEncoderConfig& c = config_;
  // The hidden state and the rotary tables live through the pass.
  const std::uint64_t kept = bf16(tokens, c.dim) + 2 * bf16(tokens, c.head_dim / 2);
  // Attention: normed input (reused for the projection), q, k, v, the heads' output. MLP: normed
  // input (reused for the down projection), gate and up. DeepStack: one layer's additions.
  const std::uint64_t attention =
      bf16(tokens, c.dim) + 2 * bf16(tokens, c.q_width()) + 2 * bf16(tokens, c.kv_width());
  const std::uint64_t mlp = bf16(tokens, c.dim) + 2 * bf16(tokens, c.ffn_dim);
  const std::uint64_t deepstack = vision_rows > 0 ? bf16(vision_rows, c.dim) : 0;
  return kept + std::max({attention, mlp, deepstack});
}

offload::ModelLayout TextEncoderWeights::model_layout(std::int64_t tokens) const {
  offload::ModelLayout layout;
  layout.name = "Qwen3-VL text encoder (" + std::to_string(config_.layers) + " of " +
                std::to_string(config_.file_layers) + " layers, hidden " +
                std::to_string(config_.dim) + ")";
  layout.groups = groups_;
  layout.activation_bytes = activation_bytes(tokens, tokens);
  return layout;
}

}  // namespace ferry::models::h3
