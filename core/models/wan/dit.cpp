#include "core/models/wan/dit.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/models/wan/dit_keys.h"
#include "core/models/wan/shape_backend.h"
#include "core/tensor/convert.h"

namespace ferry::models::wan {
namespace {

using models::WeightScalingSource;

constexpr float kEps = 1e-6f;

// The tensors of one block (official names after "blocks.<i>."), in the order the forward uses
// them.
enum class BlockTensor : int {
  kModulation,
  kSelfQWeight,
  kSelfQBias,
  kSelfKWeight,
  kSelfKBias,
  kSelfVWeight,
  kSelfVBias,
  kSelfOWeight,
  kSelfOBias,
  kSelfNormQ,
  kSelfNormK,
  kNorm3Weight,
  kNorm3Bias,
  kCrossQWeight,
  kCrossQBias,
  kCrossKWeight,
  kCrossKBias,
  kCrossVWeight,
  kCrossVBias,
  kCrossOWeight,
  kCrossOBias,
  kCrossNormQ,
  kCrossNormK,
  kFfn0Weight,
  kFfn0Bias,
  kFfn2Weight,
  kFfn2Bias,
  kCount,
};

// The tensors of the always-resident groups (official names).
enum class OuterTensor : int {
  kPatchWeight,
  kPatchBias,
  kText0Weight,
  kText0Bias,
  kText2Weight,
  kText2Bias,
  kTime0Weight,
  kTime0Bias,
  kTime2Weight,
  kTime2Bias,
  kProjWeight,
  kProjBias,
  kHeadWeight,
  kHeadBias,
  kHeadModulation,
  kCount,
};

constexpr std::array<std::string_view, static_cast<std::size_t>(BlockTensor::kCount)> kBlockNames =
    {
        "modulation",
        "self_attn.q.weight",
        "self_attn.q.bias",
        "self_attn.k.weight",
        "self_attn.k.bias",
        "self_attn.v.weight",
        "self_attn.v.bias",
        "self_attn.o.weight",
        "self_attn.o.bias",
        "self_attn.norm_q.weight",
        "self_attn.norm_k.weight",
        "norm3.weight",
        "norm3.bias",
        "cross_attn.q.weight",
        "cross_attn.q.bias",
        "cross_attn.k.weight",
        "cross_attn.k.bias",
        "cross_attn.v.weight",
        "cross_attn.v.bias",
        "cross_attn.o.weight",
        "cross_attn.o.bias",
        "cross_attn.norm_q.weight",
        "cross_attn.norm_k.weight",
        "ffn.0.weight",
        "ffn.0.bias",
        "ffn.2.weight",
        "ffn.2.bias",
};

constexpr std::array<std::string_view, static_cast<std::size_t>(OuterTensor::kCount)> kOuterNames =
    {
        "patch_embedding.weight",  "patch_embedding.bias",     "text_embedding.0.weight",
        "text_embedding.0.bias",   "text_embedding.2.weight",  "text_embedding.2.bias",
        "time_embedding.0.weight", "time_embedding.0.bias",    "time_embedding.2.weight",
        "time_embedding.2.bias",   "time_projection.1.weight", "time_projection.1.bias",
        "head.head.weight",        "head.head.bias",           "head.modulation",
};

// The tensors that are Linear weights (the others are biases, norms and modulations).
constexpr bool is_linear_weight(BlockTensor t) {
  switch (t) {
    case BlockTensor::kSelfQWeight:
    case BlockTensor::kSelfKWeight:
    case BlockTensor::kSelfVWeight:
    case BlockTensor::kSelfOWeight:
    case BlockTensor::kCrossQWeight:
    case BlockTensor::kCrossKWeight:
    case BlockTensor::kCrossVWeight:
    case BlockTensor::kCrossOWeight:
    case BlockTensor::kFfn0Weight:
    case BlockTensor::kFfn2Weight:
      return true;
    default:
      return false;
  }
}

constexpr bool is_linear_weight(OuterTensor t) {
  switch (t) {
    case OuterTensor::kPatchWeight:
    case OuterTensor::kText0Weight:
    case OuterTensor::kText2Weight:
    case OuterTensor::kTime0Weight:
    case OuterTensor::kTime2Weight:
    case OuterTensor::kProjWeight:
    case OuterTensor::kHeadWeight:
      return true;
    default:
      return false;
  }
}

constexpr int at(BlockTensor t) {
  return static_cast<int>(t);
}
constexpr int at(OuterTensor t) {
  return static_cast<int>(t);
}

// Rows of a modulation table [values · rows_per_value, D]: row `row` of distinct value `value`.
Tensor table_row(const Tensor& table, std::int64_t value, int row, int rows_per_value) {
  const std::int64_t r = value * rows_per_value + row;
  return table.rows(r, r + 1);
}

// Where each of `names` is among a group's tensors (official names without `strip`, the group's
// "blocks.<i>." prefix): -1 when absent.
template <std::size_t N>
void index_names(std::vector<std::string>& official, std::string_view strip,
                 const std::array<std::string_view, N>& names, std::vector<int>& index) {
  for (std::string& name : official) {
    if (name.compare(0, strip.size(), strip) == 0) name.erase(0, strip.size());
  }
  index.assign(N, -1);
  for (std::size_t n = 0; n < N; ++n) {
    for (std::size_t i = 0; i < official.size(); ++i) {
      if (official[i] == names[n]) index[n] = static_cast<int>(i);
    }
  }
}

// The group's tensors by official name, in `names` order, and for each weight what scales it
// (ComfyUI's fp8 scale, a bitsandbytes weight's side tensors).
template <std::size_t N>
void index_group(const offload::LayerGroup& group, std::string_view strip,
                 const std::array<std::string_view, N>& names, std::vector<int>& index,
                 std::vector<WeightScalingSource>& scaling) {
  std::vector<std::string> official(group.weights.size());
  for (std::size_t i = 0; i < group.weights.size(); ++i) {
    official[i] = official_dit_name(group.weights[i].tensor->name);
  }
  index_names(official, strip, names, index);
  scaling.assign(N, WeightScalingSource{});
  for (std::size_t n = 0; n < N; ++n) {
    if (names[n].ends_with(".weight")) scaling[n] = WeightScalingSource::find(group, index[n]);
  }
}

// An address for tensors that have shapes and no memory (the estimate's): never dereferenced,
// so their pointer arithmetic starts from an object rather than from null.
void* shapes_only_address() {
  alignas(memory::Arena::kAlignment) static std::byte anchor[memory::Arena::kAlignment];
  return anchor;
}

Tensor shapes_only(DType dtype, const Shape& shape) {
  return Tensor{shapes_only_address(), dtype, shape, Device::kCpu};
}

Tensor shapes_only(const io::TensorSpec& spec) {
  // A Shape is made from a list: zeros of the spec's rank (at most 5 for a DiT), then its sizes.
  static const Shape kZeros[] = {Shape{},        Shape{0},          Shape{0, 0},
                                 Shape{0, 0, 0}, Shape{0, 0, 0, 0}, Shape{0, 0, 0, 0, 0}};
  Shape shape = kZeros[spec.shape.size()];
  for (std::size_t i = 0; i < spec.shape.size(); ++i) {
    shape[static_cast<int>(i)] = static_cast<std::int64_t>(spec.shape[i]);
  }
  return shapes_only(spec.dtype, shape);
}

// The official checkpoint's tensors for `config` grouped as dit_model_layout groups them
// (embeddings, each block, head), with shapes and no memory, and their names.
struct ShapeOnlyGroups {
  std::vector<std::vector<Tensor>> tensors;
  std::vector<std::vector<std::string>> names;
};

ShapeOnlyGroups shape_only_groups(const DitConfig& config) {
  const std::size_t blocks = static_cast<std::size_t>(config.layers);
  ShapeOnlyGroups g;
  g.tensors.resize(blocks + 2);
  g.names.resize(blocks + 2);
  const auto add = [&](std::size_t group, const io::TensorSpec& spec) {
    g.tensors[group].push_back(shapes_only(spec));
    g.names[group].push_back(spec.name);
  };
  for (const io::TensorSpec& spec : dit_tensors(config, DType::kBF16)) {
    if (spec.name.starts_with("blocks.")) continue;
    add(spec.name.starts_with("head.") ? blocks + 1 : 0, spec);
  }
  for (std::size_t b = 0; b < blocks; ++b) {
    for (const io::TensorSpec& spec : dit_block_tensors(config, b, DType::kBF16)) add(b + 1, spec);
  }
  return g;
}

}  // namespace

// The estimate's weights: every group always there, with shapes and no memory.
class WanDit::ShapeOnlyWeights final : public offload::WeightSource {
 public:
  explicit ShapeOnlyWeights(const std::vector<std::vector<Tensor>>& groups) {
    for (const std::vector<Tensor>& g : groups) groups_.emplace_back(g);
  }
  std::size_t group_count() const override { return groups_.size(); }
  void begin_pass() override {}
  const offload::LoadedGroup& acquire(std::size_t group) override { return groups_[group]; }
  void release(std::size_t) override {}

 private:
  std::vector<offload::LoadedGroup> groups_;
};

WanDit::WanDit(Backend& backend, const io::TensorSet& set, const offload::ModelLayout& layout,
               std::span<const lora::BoundTerm> loras)
    : backend_(backend), config_(infer_dit_config(set)) {
  const DitConfig& c = config_;
  if (c.dim == 0 || c.dim % kDitHeadDim != 0) {
    throw Error(ErrorCode::kBadModelFile, "a Wan DiT of width " + std::to_string(c.dim) +
                                              " (not a multiple of the 128-channel heads)");
  }
  groups_ = static_cast<std::size_t>(c.layers) + 2;
  if (layout.groups.size() != groups_ || layout.groups.front().name != "embeddings" ||
      layout.groups.back().name != "head") {
    throw Error(ErrorCode::kInternal, "WanDit needs the layout of dit_model_layout");
  }
  const auto need = [&](const Weights& w, std::size_t i, std::string_view name,
                        std::string_view group) {
    if (w.index[i] < 0) {
      throw Error(ErrorCode::kBadModelFile, io::detail::display(set.path()) +
                                                " is not a whole Wan DiT: '" + std::string(group) +
                                                std::string(name) + "' is missing");
    }
  };
  index_group(layout.groups.front(), "", kOuterNames, outer_embed_.index, outer_embed_.scaling);
  index_group(layout.groups.back(), "", kOuterNames, outer_head_.index, outer_head_.scaling);
  for (int i = at(OuterTensor::kPatchWeight); i <= at(OuterTensor::kProjBias); ++i) {
    need(outer_embed_, static_cast<std::size_t>(i), kOuterNames[static_cast<std::size_t>(i)], "");
  }
  for (int i = at(OuterTensor::kHeadWeight); i <= at(OuterTensor::kHeadModulation); ++i) {
    need(outer_head_, static_cast<std::size_t>(i), kOuterNames[static_cast<std::size_t>(i)], "");
  }
  blocks_.resize(static_cast<std::size_t>(c.layers));
  for (std::size_t b = 0; b < blocks_.size(); ++b) {
    const std::string prefix = "blocks." + std::to_string(b) + ".";
    index_group(layout.groups[b + 1], prefix, kBlockNames, blocks_[b].index, blocks_[b].scaling);
    for (std::size_t i = 0; i < kBlockNames.size(); ++i) {
      need(blocks_[b], i, kBlockNames[i], prefix);
    }
  }

  bind_loras(loras);

  // The zero rows that pad every context to 512 (wan.md §A.4), made once.
  const auto pad_rows = static_cast<std::int64_t>(kDitTextLen);
  const auto text_dim = static_cast<std::int64_t>(c.text_dim);
  zeros_memory_ = backend_.allocate(static_cast<std::size_t>(pad_rows * text_dim * 2));
  zeros_ =
      Tensor{zeros_memory_->data(), DType::kBF16, Shape{pad_rows, text_dim}, backend_.device()};
  const std::vector<std::uint16_t> zeros(static_cast<std::size_t>(pad_rows * text_dim), 0);
  backend_.upload(zeros_, zeros.data());
  backend_.synchronize();

  // latent [C, F, Hp, 2, Wp, 2] → patches [F, Hp, Wp, C, 2, 2]: each token's C·2·2 values in
  // the order of the patch embedding's weight [D, C, 1, 2, 2].
  patch_order_ = {1, 2, 4, 0, 3, 5};
  // head output [F, Hp, Wp, 2, 2, C] → velocity [C, F, Hp, 2, Wp, 2] (wan.md §B.6).
  unpatch_order_ = {5, 0, 1, 3, 2, 4};
}

WanDit::WanDit(Backend& backend, const DitConfig& config) : backend_(backend), config_(config) {
  groups_ = static_cast<std::size_t>(config.layers) + 2;
  ShapeOnlyGroups g = shape_only_groups(config);
  index_names(g.names.front(), "", kOuterNames, outer_embed_.index);
  index_names(g.names.back(), "", kOuterNames, outer_head_.index);
  outer_embed_.scaling.assign(kOuterNames.size(), WeightScalingSource{});
  outer_head_.scaling.assign(kOuterNames.size(), WeightScalingSource{});
  outer_embed_.lora.assign(kOuterNames.size(), {});
  outer_head_.lora.assign(kOuterNames.size(), {});
  blocks_.resize(static_cast<std::size_t>(config.layers));
  for (std::size_t b = 0; b < blocks_.size(); ++b) {
    index_names(g.names[b + 1], "blocks." + std::to_string(b) + ".", kBlockNames, blocks_[b].index);
    blocks_[b].scaling.assign(kBlockNames.size(), WeightScalingSource{});
    blocks_[b].lora.assign(kBlockNames.size(), {});
  }
  zeros_ =
      shapes_only(DType::kBF16, Shape{kDitTextLen, static_cast<std::int64_t>(config.text_dim)});
  patch_order_ = {1, 2, 4, 0, 3, 5};
  unpatch_order_ = {5, 0, 1, 3, 2, 4};
}

std::uint64_t WanDit::measure_activation_bytes(const DitConfig& config, std::int64_t tokens,
                                               std::int64_t chunk_tokens, std::int64_t branches,
                                               std::int64_t distinct_timesteps,
                                               std::int64_t lora_rank) {
  ShapeBackend shapes;
  WanDit model(shapes, config);
  model.lora_rank_ = lora_rank;
  const ShapeOnlyGroups groups = shape_only_groups(config);
  ShapeOnlyWeights weights(groups.tensors);
  memory::Arena arena = shapes_only_arena();
  // The latent as one row of 2×2 patches per token: the arena sees only the token count.
  const auto in_dim = static_cast<std::int64_t>(config.in_dim);
  const auto out_dim = static_cast<std::int64_t>(config.out_dim);
  const Tensor latent = shapes_only(DType::kF32, Shape{in_dim, tokens, 2, 2});
  const std::vector<Tensor> contexts(
      static_cast<std::size_t>(branches),
      shapes_only(DType::kBF16, Shape{kDitTextLen, static_cast<std::int64_t>(config.text_dim)}));
  const std::vector<Tensor> velocities(static_cast<std::size_t>(branches),
                                       shapes_only(DType::kF32, Shape{out_dim, tokens, 2, 2}));
  // The timestep values take the time embedding's rows; which tokens have which does not
  // change a byte.
  model.distinct_.assign(static_cast<std::size_t>(std::max<std::int64_t>(distinct_timesteps, 1)),
                         0.0f);
  model.runs_.assign(1, Run{0, tokens, 0});
  const std::int64_t chunk_rows = chunk_tokens > 0 ? std::min(chunk_tokens, tokens) : tokens;
  model.run_pass(weights, arena, latent, contexts, velocities, chunk_rows);
  return arena.peak();
}

std::uint64_t WanDit::activation_bytes(std::int64_t tokens, std::int64_t chunk_tokens,
                                       std::int64_t branches, std::int64_t values) {
  for (const Estimate& e : estimates_) {
    if (e.tokens == tokens && e.chunk_tokens == chunk_tokens && e.branches == branches &&
        e.values == values && e.lora_rank == lora_rank_) {
      return e.bytes;
    }
  }
  Estimate& e = estimates_[next_estimate_];
  next_estimate_ = (next_estimate_ + 1) % estimates_.size();
  e = Estimate{
      tokens,
      chunk_tokens,
      branches,
      values,
      lora_rank_,
      measure_activation_bytes(config_, tokens, chunk_tokens, branches, values, lora_rank_)};
  return e.bytes;
}

const Tensor& WanDit::tensor(GroupTensors w, const Weights& ix, int i) const {
  return w[static_cast<std::size_t>(ix.index[static_cast<std::size_t>(i)])];
}

std::int64_t WanDit::lora_scratch_rank(std::span<const lora::BoundTerm> terms) {
  if (terms.empty()) return 0;
  std::int64_t rank = 1;
  for (const lora::BoundTerm& t : terms) rank = std::max(rank, t.rank);
  return rank;
}

void WanDit::bind_loras(std::span<const lora::BoundTerm> loras) {
  for (Weights* ix : {&outer_embed_, &outer_head_}) ix->lora.assign(kOuterNames.size(), {});
  for (Weights& ix : blocks_) ix.lora.assign(kBlockNames.size(), {});
  for (const lora::BoundTerm& term : loras) {
    const bool outer = term.group == 0 || term.group == groups_ - 1;
    Weights& ix = term.group == 0             ? outer_embed_
                  : term.group == groups_ - 1 ? outer_head_
                                              : blocks_[term.group - 1];
    // index holds only the group's own tensors (the others' roles are -1).
    const auto role = std::find(ix.index.begin(), ix.index.end(), static_cast<int>(term.target));
    const auto n = static_cast<std::size_t>(role - ix.index.begin());
    const bool read = role != ix.index.end();
    const bool linear = read && (outer ? is_linear_weight(static_cast<OuterTensor>(n))
                                       : is_linear_weight(static_cast<BlockTensor>(n)));
    if (!read || (term.kind == lora::TermKind::kLowRank && !linear)) {
      throw Error(ErrorCode::kBadModelFile,
                  std::string("a LoRA term adapts a tensor the Wan DiT ") +
                      (read ? "does not multiply by (a low-rank term on a norm or bias)"
                            : "does not read") +
                      ": group " + std::to_string(term.group) + ", tensor " +
                      std::to_string(term.target));
    }
    ix.lora[n].push_back(term);
  }
  lora_rank_ = lora_scratch_rank(loras);
}

void WanDit::linear(GroupTensors w, const Weights& ix, int weight, const Tensor& x, const Tensor& y,
                    const Tensor* view) {
  const Tensor& wt = view != nullptr ? *view : tensor(w, ix, weight);
  backend_.linear(x, wt, &param(w, ix, weight + 1, 0), y, scaling(w, ix, weight));
  const std::int64_t rows = x.shape.rows(), in = x.shape.cols(), out = y.shape.cols();
  for (const lora::BoundTerm& u : ix.lora[static_cast<std::size_t>(weight)]) {
    const Tensor& up = w[u.up];
    if (u.kind == lora::TermKind::kLowRank) {
      // t = A·x rounded to y's dtype (as the base product's x is), then y += s·B·t, one rounding.
      const Tensor t{lora_t_.data, y.dtype, Shape{rows, u.rank}, lora_t_.device};
      backend_.linear(x, w[u.down].reshaped(Shape{u.rank, in}), nullptr, t);
      backend_.linear_add(t, up.reshaped(Shape{out, u.rank}), y, u.scale);
    } else {  // a full delta of the weight, in the same bypass form
      backend_.linear_add(x, up.reshaped(Shape{out, in}), y, u.scale);
    }
  }
}

const Tensor& WanDit::param(GroupTensors w, const Weights& ix, int i, int slot) {
  const Tensor& p = tensor(w, ix, i);
  const std::vector<lora::BoundTerm>& uses = ix.lora[static_cast<std::size_t>(i)];
  if (uses.empty()) return p;
  Tensor& copy = lora_param_[static_cast<std::size_t>(slot)];
  copy = Tensor{lora_p_.rows(slot, slot + 1).data, DType::kF32, p.shape, lora_p_.device};
  backend_.convert(p, copy);
  for (const lora::BoundTerm& u : uses)
    backend_.add_scaled(copy, w[u.up].reshaped(p.shape), u.scale);
  return copy;
}

WeightScaling WanDit::scaling(GroupTensors w, const Weights& ix, int i) {
  return ix.scaling[static_cast<std::size_t>(i)].resolve(w, bnb4_call_);
}

void WanDit::plan_timesteps(std::span<const float> timesteps, std::int64_t tokens) {
  if (timesteps.size() != 1 && static_cast<std::int64_t>(timesteps.size()) != tokens) {
    throw Error(ErrorCode::kBadArgument, std::to_string(timesteps.size()) + " timesteps for " +
                                             std::to_string(tokens) +
                                             " tokens (give one, or one per token)");
  }
  distinct_.clear();
  runs_.clear();
  for (std::size_t n = 0; n < timesteps.size(); ++n) {
    const float t = timesteps[n];
    if (!runs_.empty() && distinct_[static_cast<std::size_t>(runs_.back().value)] == t) {
      ++runs_.back().end;
      continue;
    }
    const auto found = std::find(distinct_.begin(), distinct_.end(), t);
    const auto value = static_cast<std::int64_t>(found - distinct_.begin());
    if (found == distinct_.end()) distinct_.push_back(t);
    const auto begin = static_cast<std::int64_t>(n);
    runs_.push_back(Run{begin, begin + 1, value});
  }
  if (timesteps.size() == 1) runs_.back().end = tokens;

  // sinusoid(t) = [cos(t·w_k), sin(t·w_k)], w_k = 10000^(-k/half), in f64 (wan.md §B.3).
  const auto half = static_cast<std::size_t>(config_.freq_dim / 2);
  sinusoid_.resize(distinct_.size() * 2 * half);
  for (std::size_t v = 0; v < distinct_.size(); ++v) {
    for (std::size_t k = 0; k < half; ++k) {
      const double w = std::pow(10000.0, -static_cast<double>(k) / static_cast<double>(half));
      const double angle = static_cast<double>(distinct_[v]) * w;
      sinusoid_[v * 2 * half + k] = static_cast<float>(std::cos(angle));
      sinusoid_[v * 2 * half + half + k] = static_cast<float>(std::sin(angle));
    }
  }
}

void WanDit::modulate_runs(const Tensor& x, const Tensor& in, const Tensor& table, int scale_row,
                           int shift_row, int rows_per_value, std::int64_t first) {
  const std::int64_t last = first + x.shape[0];
  for (const Run& run : runs_) {
    const std::int64_t b = std::max(run.begin, first) - first;
    const std::int64_t e = std::min(run.end, last) - first;
    if (b >= e) continue;
    backend_.modulate(in.rows(b, e), table_row(table, run.value, scale_row, rows_per_value),
                      table_row(table, run.value, shift_row, rows_per_value), x.rows(b, e));
  }
}

void WanDit::gated_add_runs(const Tensor& x, const Tensor& y, const Tensor& table, int gate_row,
                            std::int64_t first) {
  const std::int64_t last = first + x.shape[0];
  for (const Run& run : runs_) {
    const std::int64_t b = std::max(run.begin, first) - first;
    const std::int64_t e = std::min(run.end, last) - first;
    if (b >= e) continue;
    const Tensor gate = table_row(table, run.value, gate_row, 6);
    backend_.gated_add(x.rows(b, e), y.rows(b, e), &gate);
  }
}

void WanDit::forward(offload::WeightSource& weights, memory::Arena& arena, const Tensor& latent,
                     std::span<const float> timesteps, std::span<const Tensor> contexts,
                     std::span<const Tensor> velocities, std::int64_t chunk_tokens) {
  const DitConfig& c = config_;
  const auto in_dim = static_cast<std::int64_t>(c.in_dim);
  const auto out_dim = static_cast<std::int64_t>(c.out_dim);
  if (latent.shape.rank() != 4 || latent.shape[0] != in_dim || latent.shape[2] % 2 != 0 ||
      latent.shape[3] % 2 != 0) {
    throw Error(ErrorCode::kBadArgument,
                "the DiT takes a latent [" + std::to_string(in_dim) +
                    ", frames, height, width] with even height and width, not " +
                    latent.shape.str());
  }
  const RopeGrid grid{latent.shape[1], latent.shape[2] / 2, latent.shape[3] / 2};
  const std::int64_t tokens = grid.frames * grid.height * grid.width;
  if (contexts.empty() || contexts.size() != velocities.size()) {
    throw Error(ErrorCode::kBadArgument, "the DiT needs one velocity tensor per context");
  }
  for (const Tensor& ctx : contexts) {
    if (ctx.shape.rank() != 2 || ctx.shape[1] != static_cast<std::int64_t>(c.text_dim) ||
        ctx.shape[0] > kDitTextLen) {
      throw Error(ErrorCode::kBadArgument, "a DiT context is [L <= 512, " +
                                               std::to_string(c.text_dim) + "], not " +
                                               ctx.shape.str());
    }
  }
  const Shape velocity_shape{out_dim, latent.shape[1], latent.shape[2], latent.shape[3]};
  for (const Tensor& v : velocities) {
    if (v.shape != velocity_shape || v.dtype != DType::kF32) {
      throw Error(ErrorCode::kBadArgument,
                  "a DiT velocity is F32" + velocity_shape.str() + ", not " + describe(v));
    }
  }
  plan_timesteps(timesteps, tokens);
  const auto values = static_cast<std::int64_t>(distinct_.size());
  const std::int64_t chunk_rows = chunk_tokens > 0 ? std::min(chunk_tokens, tokens) : tokens;
  // Checked before the pass starts, so a short arena leaves the streamer between passes.
  const std::uint64_t needed =
      activation_bytes(tokens, chunk_tokens, static_cast<std::int64_t>(contexts.size()), values);
  if (arena.capacity() - arena.used() < needed) {
    throw Error(ErrorCode::kOutOfMemory,
                "the DiT forward needs " + std::to_string(needed >> 20) + " MiB of activations, " +
                    "its arena has " + std::to_string((arena.capacity() - arena.used()) >> 20) +
                    " MiB free");
  }

  if (weights.group_count() != groups_) {
    throw Error(ErrorCode::kInternal, "WanDit: the weights have " +
                                          std::to_string(weights.group_count()) +
                                          " groups, the layout " + std::to_string(groups_));
  }
  run_pass(weights, arena, latent, contexts, velocities, chunk_rows);
}

void WanDit::run_pass(offload::WeightSource& weights, memory::Arena& arena, const Tensor& latent,
                      std::span<const Tensor> contexts, std::span<const Tensor> velocities,
                      std::int64_t chunk_rows) {
  const DitConfig& c = config_;
  const auto d = static_cast<std::int64_t>(c.dim);
  const RopeGrid grid{latent.shape[1], latent.shape[2] / 2, latent.shape[3] / 2};
  const std::int64_t tokens = grid.frames * grid.height * grid.width;
  const auto values = static_cast<std::int64_t>(distinct_.size());

  // Held for the whole pass.
  const std::size_t start = arena.mark();
  streams_.resize(contexts.size());
  for (Stream& s : streams_) {
    s.x = arena.allocate(DType::kF32, Shape{tokens, d});
    s.ctx = arena.allocate(DType::kBF16, Shape{kDitTextLen, d});
  }
  const Tensor e = arena.allocate(DType::kF32, Shape{values, d});
  const Tensor e0 = arena.allocate(DType::kF32, Shape{values * 6, d});
  const Tensor mod = arena.allocate(DType::kF32, Shape{values * 6, d});
  const Tensor hm = arena.allocate(DType::kF32, Shape{values * 2, d});
  if (lora_rank_ > 0) {
    const auto widest = std::max(
        {static_cast<std::int64_t>(c.ffn_dim), 6 * d, 4 * static_cast<std::int64_t>(c.out_dim)});
    lora_t_ =
        arena.allocate(DType::kF32, Shape{std::max({tokens, kDitTextLen, values}), lora_rank_});
    lora_p_ = arena.allocate(DType::kF32, Shape{2, widest});
  }

  weights.begin_pass();
  embed(weights.acquire(0).tensors(), arena, latent, contexts, streams_, e, e0);
  weights.release(0);

  const std::size_t block_mark = arena.mark();
  Scratch t;
  t.k = arena.allocate(DType::kBF16, Shape{tokens, d});
  t.v = arena.allocate(DType::kBF16, Shape{tokens, d});
  t.a = arena.allocate(DType::kF32, Shape{chunk_rows, d});
  t.r = arena.allocate(DType::kF32, Shape{chunk_rows, d});
  t.q = arena.allocate(DType::kBF16, Shape{chunk_rows, d});
  t.o = arena.allocate(DType::kBF16, Shape{chunk_rows, d});
  t.ck = arena.allocate(DType::kBF16, Shape{kDitTextLen, d});
  t.cv = arena.allocate(DType::kBF16, Shape{kDitTextLen, d});
  t.cr = arena.allocate(DType::kF32, Shape{kDitTextLen, d});
  t.hidden = arena.allocate(DType::kBF16, Shape{chunk_rows, static_cast<std::int64_t>(c.ffn_dim)});
  for (std::size_t b = 0; b < blocks_.size(); ++b) {
    const GroupTensors w = weights.acquire(b + 1).tensors();
    // m = modulation + e0 per distinct timestep (f32): rows shift, scale, gate (attention),
    // shift, scale, gate (FFN).
    const Tensor& modulation = param(w, blocks_[b], at(BlockTensor::kModulation), 0);
    for (std::int64_t v = 0; v < values; ++v) {
      backend_.add(e0.rows(v * 6, v * 6 + 6), modulation.reshaped(Shape{6, d}),
                   mod.rows(v * 6, v * 6 + 6));
    }
    for (Stream& s : streams_) block(w, blocks_[b], b == 0, s, t, mod, chunk_rows, grid);
    weights.release(b + 1);
  }
  arena.release_to(block_mark);

  {
    const std::size_t last = groups_ - 1;
    const GroupTensors w = weights.acquire(last).tensors();
    // The head's shift and scale: head.modulation + e (not e0), f32.
    const Tensor hmod =
        param(w, outer_head_, at(OuterTensor::kHeadModulation), 0).reshaped(Shape{2, d});
    for (std::int64_t v = 0; v < values; ++v) {
      backend_.add(hmod.rows(0, 1), e.rows(v, v + 1), hm.rows(2 * v, 2 * v + 1));
      backend_.add(hmod.rows(1, 2), e.rows(v, v + 1), hm.rows(2 * v + 1, 2 * v + 2));
    }
    for (std::size_t b = 0; b < streams_.size(); ++b) {
      head(w, arena, streams_[b].x, hm, velocities[b], grid);
    }
    weights.release(last);
  }
  arena.release_to(start);
}

void WanDit::embed(GroupTensors w, memory::Arena& arena, const Tensor& latent,
                   std::span<const Tensor> contexts, std::span<Stream> streams, const Tensor& e,
                   const Tensor& e0) {
  const DitConfig& c = config_;
  const Weights& ix = outer_embed_;
  const auto d = static_cast<std::int64_t>(c.dim);
  const auto in_dim = static_cast<std::int64_t>(c.in_dim);
  const std::int64_t frames = latent.shape[1], hp = latent.shape[2] / 2, wp = latent.shape[3] / 2;
  const std::int64_t tokens = frames * hp * wp;
  const auto values = static_cast<std::int64_t>(distinct_.size());
  const std::size_t mark = arena.mark();

  // Patch embedding as a Linear over 2×2 patches (kernel = stride), bf16 (wan.md §B.2), held
  // by every branch's residual stream as f32 (exactly: it is what block 0 reads).
  const Tensor x0 = arena.allocate(DType::kBF16, Shape{tokens, d});
  const Tensor patches = arena.allocate(DType::kF32, Shape{frames, hp, wp, in_dim, 2, 2});
  backend_.permute(latent.reshaped(Shape{in_dim, frames, hp, 2, wp, 2}), patch_order_, patches);
  const Tensor patch_w =
      tensor(w, ix, at(OuterTensor::kPatchWeight)).reshaped(Shape{d, in_dim * 4});
  linear(w, ix, at(OuterTensor::kPatchWeight), patches.reshaped(Shape{tokens, in_dim * 4}), x0,
         &patch_w);
  for (Stream& s : streams) backend_.convert(x0, s.x);

  // Time embedding and projection, once per distinct timestep, f32 (wan.md §B.3).
  const Tensor sinusoid =
      arena.allocate(DType::kF32, Shape{values, static_cast<std::int64_t>(c.freq_dim)});
  backend_.upload(sinusoid, sinusoid_.data());
  const Tensor hidden = arena.allocate(DType::kF32, Shape{values, d});
  const auto lin = [&](const Tensor& x, OuterTensor weight, const Tensor& y) {
    linear(w, ix, at(weight), x, y);
  };
  lin(sinusoid, OuterTensor::kTime0Weight, hidden);
  backend_.silu(hidden, hidden);
  lin(hidden, OuterTensor::kTime2Weight, e);
  backend_.silu(e, hidden);
  lin(hidden, OuterTensor::kProjWeight, e0.reshaped(Shape{values, 6 * d}));

  // Text embedding of each context padded with zero rows to 512, bf16 (wan.md §A.4, §B.4).
  const auto text_dim = static_cast<std::int64_t>(c.text_dim);
  const Tensor padded = arena.allocate(DType::kBF16, Shape{kDitTextLen, text_dim});
  const Tensor text_hidden = arena.allocate(DType::kBF16, Shape{kDitTextLen, d});
  for (std::size_t b = 0; b < streams.size(); ++b) {
    const std::int64_t rows = contexts[b].shape[0];
    if (rows > 0) backend_.convert(contexts[b], padded.rows(0, rows));
    if (rows < kDitTextLen) {
      backend_.convert(zeros_.rows(0, kDitTextLen - rows), padded.rows(rows, kDitTextLen));
    }
    lin(padded, OuterTensor::kText0Weight, text_hidden);
    backend_.gelu_tanh(text_hidden, text_hidden);
    lin(text_hidden, OuterTensor::kText2Weight, streams[b].ctx);
  }
  arena.release_to(mark);
}

void WanDit::block(GroupTensors w, const Weights& ix, bool first, Stream& s, const Scratch& t,
                   const Tensor& mod, std::int64_t chunk_rows, const RopeGrid& grid) {
  const std::int64_t tokens = s.x.shape[0];
  const std::int64_t heads = this->heads();
  const auto hd = static_cast<std::int64_t>(kDitHeadDim);
  const float attn_scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const auto lin = [&](const Tensor& x, BlockTensor weight, const Tensor& y) {
    linear(w, ix, at(weight), x, y);
  };
  const auto heads_view = [&](const Tensor& x) { return x.reshaped(Shape{x.shape[0], heads, hd}); };

  // The self-attention's input for tokens [r0, r1): LayerNorm and modulation, f32. Block 0's
  // input is the bf16 patch embedding and the official norm returns its input's dtype, so there
  // the norm is rounded to bf16 first (t.q holds it for a moment).
  const auto self_input = [&](std::int64_t r0, std::int64_t r1) {
    const Tensor a = t.a.rows(0, r1 - r0);
    if (first) {
      const Tensor rounded = t.q.rows(0, r1 - r0);
      backend_.layer_norm(s.x.rows(r0, r1), nullptr, nullptr, kEps, rounded);
      modulate_runs(a, rounded, mod, 1, 0, 6, r0);
    } else {
      backend_.layer_norm(s.x.rows(r0, r1), nullptr, nullptr, kEps, a);
      modulate_runs(a, a, mod, 1, 0, 6, r0);
    }
    return a;
  };
  // Self-attention queries or keys of tokens from r0: RMSNorm over all heads (normalised value
  // rounded to bf16, times the weight in f32), RoPE in f64 on the f32 result, then bf16.
  const auto rotated = [&](const Tensor& a, BlockTensor weight, BlockTensor norm, std::int64_t r0,
                           const Tensor& out) {
    lin(a, weight, out);
    const Tensor r = t.r.rows(0, out.shape[0]);
    backend_.rms_norm(out, param(w, ix, at(norm), 0), kEps, r);
    backend_.rope_3d(heads_view(r), RopeGrid{grid.frames, grid.height, grid.width, r0});
    backend_.convert(r, out);
  };

  // Every token's per-token work runs in chunks of chunk_rows tokens; only the self-attention's
  // keys and values are held for all of them, computed first from the block's input.
  for (std::int64_t r0 = 0; r0 < tokens; r0 += chunk_rows) {
    const std::int64_t r1 = std::min(tokens, r0 + chunk_rows);
    const Tensor a = self_input(r0, r1);
    rotated(a, BlockTensor::kSelfKWeight, BlockTensor::kSelfNormK, r0, t.k.rows(r0, r1));
    lin(a, BlockTensor::kSelfVWeight, t.v.rows(r0, r1));
  }
  // The cross-attention's keys and values: the 512 context rows, RMSNorm'd keys, no RoPE.
  lin(s.ctx, BlockTensor::kCrossKWeight, t.ck);
  backend_.rms_norm(t.ck, param(w, ix, at(BlockTensor::kCrossNormK), 0), kEps, t.cr);
  backend_.convert(t.cr, t.ck);
  lin(s.ctx, BlockTensor::kCrossVWeight, t.cv);

  for (std::int64_t r0 = 0; r0 < tokens; r0 += chunk_rows) {
    const std::int64_t r1 = std::min(tokens, r0 + chunk_rows), n = r1 - r0;
    const Tensor x = s.x.rows(r0, r1), q = t.q.rows(0, n), o = t.o.rows(0, n);
    // 1) Self-attention of these tokens' queries over every key. From here the residual stream
    // is f32 (bf16 + f32 gate product).
    Tensor a = self_input(r0, r1);
    rotated(a, BlockTensor::kSelfQWeight, BlockTensor::kSelfNormQ, r0, q);
    backend_.attention(heads_view(q), heads_view(t.k), heads_view(t.v), attn_scale, nullptr,
                       /*causal=*/false, heads_view(o));
    lin(o, BlockTensor::kSelfOWeight, q);
    gated_add_runs(x, q, mod, 2, r0);

    // 2) Cross-attention over the 512 context rows: affine LayerNorm, no modulation, no RoPE.
    backend_.layer_norm(x, &param(w, ix, at(BlockTensor::kNorm3Weight), 0),
                        &param(w, ix, at(BlockTensor::kNorm3Bias), 1), kEps, a);
    lin(a, BlockTensor::kCrossQWeight, q);
    const Tensor r = t.r.rows(0, n);
    backend_.rms_norm(q, param(w, ix, at(BlockTensor::kCrossNormQ), 0), kEps, r);
    backend_.convert(r, q);
    backend_.attention(heads_view(q), heads_view(t.ck), heads_view(t.cv), attn_scale, nullptr,
                       /*causal=*/false, heads_view(o));
    lin(o, BlockTensor::kCrossOWeight, q);
    backend_.gated_add(x, q, nullptr);

    // 3) FFN: bf16 Linear, tanh GELU, bf16 Linear.
    backend_.layer_norm(x, nullptr, nullptr, kEps, a);
    modulate_runs(a, a, mod, 4, 3, 6, r0);
    const Tensor h = t.hidden.rows(0, n);
    lin(a, BlockTensor::kFfn0Weight, h);
    backend_.gelu_tanh(h, h);
    lin(h, BlockTensor::kFfn2Weight, q);
    gated_add_runs(x, q, mod, 5, r0);
  }
}

void WanDit::head(GroupTensors w, memory::Arena& arena, const Tensor& x, const Tensor& hm,
                  const Tensor& velocity, const RopeGrid& grid) {
  const Weights& ix = outer_head_;
  const std::int64_t tokens = x.shape[0];
  const auto out_dim = static_cast<std::int64_t>(config_.out_dim);
  const std::size_t mark = arena.mark();
  // Whole head in f32 (wan.md §B.6): LayerNorm, modulation by head.modulation + e, Linear.
  const Tensor a = arena.allocate(DType::kF32, x.shape);
  const Tensor out = arena.allocate(DType::kF32, Shape{tokens, 4 * out_dim});
  backend_.layer_norm(x, nullptr, nullptr, kEps, a);
  modulate_runs(a, a, hm, 1, 0, 2);
  linear(w, ix, at(OuterTensor::kHeadWeight), a, out);
  backend_.permute(out.reshaped(Shape{grid.frames, grid.height, grid.width, 2, 2, out_dim}),
                   unpatch_order_,
                   velocity.reshaped(Shape{out_dim, grid.frames, grid.height, 2, grid.width, 2}));
  arena.release_to(mark);
}

}  // namespace ferry::models::wan
