#include "core/models/h3/vision_tower_weights.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "core/error.h"
#include "core/io/shape_text.h"
#include "core/memory/arena.h"

namespace ferry::models::h3 {
namespace {

constexpr std::string_view kBlockSuffix[kBlockTensorCount] = {
    "norm1.weight",          "norm1.bias",          "attn.qkv.weight",       "attn.qkv.bias",
    "attn.proj.weight",      "attn.proj.bias",      "norm2.weight",          "norm2.bias",
    "mlp.linear_fc1.weight", "mlp.linear_fc1.bias", "mlp.linear_fc2.weight", "mlp.linear_fc2.bias"};
constexpr std::string_view kMergerSuffix[kMergerTensorCount] = {
    "norm.weight",     "norm.bias",         "linear_fc1.weight",
    "linear_fc1.bias", "linear_fc2.weight", "linear_fc2.bias"};
constexpr std::string_view kPrefixes[] = {"model.visual.", "visual."};

[[noreturn]] void bad(const io::TensorSet& set, const std::string& what) {
  throw Error(ErrorCode::kBadModelFile,
              set.path().string() + ": not a usable Qwen3-VL vision tower: " + what);
}

// Every tensor of the tower is a float the backend's Linear and norms read as they are.
const io::TensorSet::Entry& tensor(const io::TensorSet& set, const std::string& name,
                                   const std::vector<std::uint64_t>& shape) {
  const auto* e = set.find(name);
  if (e == nullptr) {
    throw Error(ErrorCode::kMissingTensor,
                set.path().string() + ": the Qwen3-VL vision tower has no tensor '" + name + "'");
  }
  const DType d = e->tensor->dtype;
  if (d != DType::kF32 && d != DType::kF16 && d != DType::kBF16) {
    throw Error(ErrorCode::kUnsupported,
                set.path().string() + ": '" + name + "' is " + std::string(dtype_name(d)) +
                    "; Ferry runs the vision tower from f32, f16 or bf16 weights");
  }
  if (!shape.empty() && e->tensor->shape != shape) {
    bad(set, "tensor '" + name + "' has shape " + io::shape_text(e->tensor->shape) + ", expected " +
                 io::shape_text(shape));
  }
  return *e;
}

// Dimension `i` of a tensor's shape, or the file is named as not a vision tower.
std::uint64_t dim_of(const io::TensorSet& set, const io::TensorSet::Entry& e, std::size_t i) {
  if (e.tensor->shape.size() <= i) {
    bad(set, "tensor '" + e.tensor->name + "' has shape " + io::shape_text(e.tensor->shape));
  }
  return e.tensor->shape[i];
}

}  // namespace

const std::array<std::int64_t, 3> VisionTowerWeights::kDeepstackBlocks = {8, 16, 24};

bool VisionTowerWeights::present(const io::TensorSet& set) {
  return std::any_of(std::begin(kPrefixes), std::end(kPrefixes), [&](std::string_view p) {
    return set.find(std::string(p) + "patch_embed.proj.weight") != nullptr;
  });
}

VisionTowerWeights VisionTowerWeights::from(const io::TensorSet& set, std::int64_t heads,
                                            std::vector<std::int64_t> deepstack_blocks) {
  VisionTowerWeights w;
  w.set_ = &set;
  for (std::string_view p : kPrefixes) {
    if (set.find(std::string(p) + "patch_embed.proj.weight") != nullptr) w.prefix_ = p;
  }
  if (w.prefix_.empty()) {
    bad(set,
        "it has no patch embedding (model.visual.patch_embed.proj.weight or "
        "visual.patch_embed.proj.weight)");
  }
  const std::string& pre = w.prefix_;
  VisionConfig& c = w.config_;
  const auto& patch = tensor(set, pre + "patch_embed.proj.weight", {});
  const auto& ps = patch.tensor->shape;
  if (ps.size() != 5 || ps[1] != 3 || ps[3] != ps[4] || ps[0] == 0) {
    bad(set, "the patch embedding has shape " + io::shape_text(ps) + ", not [dim, 3, T, P, P]");
  }
  const auto i64 = [](std::uint64_t v) { return static_cast<std::int64_t>(v); };
  const auto u64 = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  c.dim = i64(ps[0]);
  c.temporal_patch = i64(ps[2]);
  c.patch = i64(ps[3]);
  c.heads = heads != 0 ? heads : c.dim / kHeadDim;
  if (c.heads <= 0 || c.dim % c.heads != 0 || c.head_dim() % 4 != 0) {
    bad(set, "a width of " + std::to_string(c.dim) + " does not split into " +
                 std::to_string(c.heads) + " heads whose size is a multiple of 4");
  }
  const auto& table = tensor(set, pre + "pos_embed.weight", {});
  const auto& ts = table.tensor->shape;
  c.position_side = std::lround(std::sqrt(static_cast<double>(dim_of(set, table, 0))));
  if (ts.size() != 2 || c.position_side == 0 || ts[1] != u64(c.dim) ||
      u64(c.position_side * c.position_side) != ts[0]) {
    bad(set, "the position table has shape " + io::shape_text(ts) + ", not [side², " +
                 std::to_string(c.dim) + "]");
  }
  while (set.find(pre + "blocks." + std::to_string(c.depth) + ".attn.qkv.weight") != nullptr) {
    ++c.depth;
  }
  if (c.depth == 0) bad(set, "it has no blocks");
  const auto& fc1 = tensor(set, pre + "blocks.0.mlp.linear_fc1.weight", {});
  c.ffn_dim = i64(dim_of(set, fc1, 0));
  const auto& merger_fc1 = tensor(set, pre + "merger.linear_fc1.weight", {});
  const auto& merger_fc2 = tensor(set, pre + "merger.linear_fc2.weight", {});
  const std::int64_t merged = i64(dim_of(set, merger_fc1, 1));
  c.merge = static_cast<std::int64_t>(std::lround(std::sqrt(double(merged / c.dim))));
  if (c.merge <= 0 || c.merged_dim() != merged) {
    bad(set, "the merger reads " + std::to_string(merged) + " values, not a square number of " +
                 std::to_string(c.dim) + "-wide patches");
  }
  c.out_dim = i64(dim_of(set, merger_fc2, 0));

  std::int64_t mergers = 0;
  while (set.find(pre + "deepstack_merger_list." + std::to_string(mergers) + ".norm.weight") !=
         nullptr) {
    ++mergers;
  }
  if (deepstack_blocks.empty()) {
    deepstack_blocks.assign(kDeepstackBlocks.begin(), kDeepstackBlocks.end());
  }
  if (static_cast<std::int64_t>(deepstack_blocks.size()) != mergers) {
    bad(set, "it has " + std::to_string(mergers) + " DeepStack mergers for " +
                 std::to_string(deepstack_blocks.size()) + " DeepStack blocks");
  }
  for (std::size_t k = 0; k < deepstack_blocks.size(); ++k) {
    if (deepstack_blocks[k] < 0 || deepstack_blocks[k] >= c.depth ||
        (k > 0 && deepstack_blocks[k] <= deepstack_blocks[k - 1])) {
      bad(set, "DeepStack block " + std::to_string(deepstack_blocks[k]) +
                   " is not an ascending block of " + std::to_string(c.depth));
    }
  }
  c.deepstack_blocks = std::move(deepstack_blocks);

  const std::uint64_t d = u64(c.dim), f = u64(c.ffn_dim), m = u64(c.merged_dim());
  const auto add = [&](offload::LayerGroup& g, const std::string& name,
                       const std::vector<std::uint64_t>& shape) {
    const auto& e = tensor(set, name, shape);
    g.weights.push_back({e.file, e.tensor});
  };
  offload::LayerGroup embed;
  embed.name = "visual.embed";
  add(embed, pre + "patch_embed.proj.weight", ps);
  add(embed, pre + "patch_embed.proj.bias", {d});
  add(embed, pre + "pos_embed.weight", ts);
  w.groups_.push_back(std::move(embed));
  const auto add_merger = [&](offload::LayerGroup& g, const std::string& name, bool postshuffle) {
    const std::vector<std::uint64_t> shapes[kMergerTensorCount] = {
        {postshuffle ? m : d}, {postshuffle ? m : d}, {m, m}, {m},
        {u64(c.out_dim), m},   {u64(c.out_dim)}};
    for (std::size_t t = 0; t < kMergerTensorCount; ++t) {
      add(g, name + std::string(kMergerSuffix[t]), shapes[t]);
    }
  };
  const std::vector<std::uint64_t> block_shapes[kBlockTensorCount] = {
      {d}, {d}, {3 * d, d}, {3 * d}, {d, d}, {d}, {d}, {d}, {f, d}, {f}, {d, f}, {d}};
  for (std::int64_t b = 0; b < c.depth; ++b) {
    offload::LayerGroup g;
    g.name = "visual.blocks." + std::to_string(b);
    for (std::size_t t = 0; t < kBlockTensorCount; ++t) {
      add(g, pre + "blocks." + std::to_string(b) + "." + std::string(kBlockSuffix[t]),
          block_shapes[t]);
    }
    const int k = w.deepstack_after(b);
    if (k >= 0) add_merger(g, pre + "deepstack_merger_list." + std::to_string(k) + ".", true);
    w.groups_.push_back(std::move(g));
  }
  offload::LayerGroup merger;
  merger.name = "visual.merger";
  add_merger(merger, pre + "merger.", false);
  w.groups_.push_back(std::move(merger));
  return w;
}

int VisionTowerWeights::deepstack_after(std::int64_t block) const {
  const auto& b = config_.deepstack_blocks;
  const auto it = std::find(b.begin(), b.end(), block);
  return it == b.end() ? -1 : static_cast<int>(it - b.begin());
}

std::uint64_t VisionTowerWeights::activation_bytes(std::int64_t patches, DType activations) const {
  const auto bytes = [](std::int64_t count, DType t) {
    return static_cast<std::uint64_t>(memory::Arena::footprint(
        static_cast<std::size_t>(dtype_storage_bytes(t, static_cast<std::uint64_t>(count)))));
  };
  const VisionConfig& c = config_;
  const std::int64_t n = patches, nd = n * c.dim;
  const DType a = activations;
  // The hidden state and the f32 rotary tables live through the pass.
  const std::uint64_t kept = bytes(nd, a) + 2 * bytes(n * c.head_dim() / 2, DType::kF32);
  // Embedding: the f32 pixels and the position embeddings. Attention: normed input, q, k, v,
  // then the fused projection on top (released before the heads' output takes its place). MLP:
  // normed input, fc1's output. A merger: the norm's output, fc1's, fc2's.
  const std::uint64_t embed = bytes(n * c.patch_values(), DType::kF32) + bytes(nd, a);
  const std::uint64_t attention = 4 * bytes(nd, a) + bytes(3 * nd, a);
  const std::uint64_t mlp = bytes(nd, a) + bytes(n * c.ffn_dim, a);
  const std::uint64_t merger = 2 * bytes(nd, a) + bytes(n / c.merge_unit() * c.out_dim, a);
  return kept + std::max({embed, attention, mlp, merger});
}

offload::ModelLayout VisionTowerWeights::model_layout(std::int64_t patches) const {
  offload::ModelLayout layout;
  layout.name = "Qwen3-VL vision tower (" + std::to_string(config_.depth) + " blocks, width " +
                std::to_string(config_.dim) + ")";
  layout.groups = groups_;
  layout.activation_bytes = activation_bytes(patches);
  return layout;
}

}  // namespace ferry::models::h3
