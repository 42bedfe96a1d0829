#include "core/models/wan/dit_layout.h"

#include <algorithm>
#include <map>
#include <string>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/models/wan/dit.h"
#include "core/models/wan/dit_keys.h"

namespace ferry::models::wan {
namespace {

void add_linear(std::vector<io::TensorSpec>& out, const std::string& prefix, std::uint64_t rows,
                std::uint64_t cols, DType dtype) {
  out.push_back({prefix + ".weight", dtype, {rows, cols}});
  out.push_back({prefix + ".bias", dtype, {rows}});
}

}  // namespace

const DitConfig* find_dit_config(std::string_view name) {
  for (const DitConfig* config : {&kT2V_1_3B, &kTI2V_5B, &kT2V_14B, &kT2V_A14B, &kI2V_A14B}) {
    if (config->name == name) return config;
  }
  return nullptr;
}

std::vector<io::TensorSpec> dit_block_tensors(const DitConfig& c, std::uint64_t index,
                                              DType dtype) {
  const std::string b = "blocks." + std::to_string(index) + ".";
  const std::uint64_t d = c.dim;
  std::vector<io::TensorSpec> out;
  out.push_back({b + "modulation", dtype, {1, 6, d}});
  for (const char* attn : {"self_attn", "cross_attn"}) {
    for (const char* proj : {"q", "k", "v", "o"}) add_linear(out, b + attn + "." + proj, d, d, dtype);
    out.push_back({b + attn + ".norm_q.weight", dtype, {d}});
    out.push_back({b + attn + ".norm_k.weight", dtype, {d}});
    if (std::string_view(attn) == "self_attn") {
      out.push_back({b + "norm3.weight", dtype, {d}});
      out.push_back({b + "norm3.bias", dtype, {d}});
    }
  }
  add_linear(out, b + "ffn.0", c.ffn_dim, d, dtype);
  add_linear(out, b + "ffn.2", d, c.ffn_dim, dtype);
  return out;
}

std::vector<io::TensorSpec> dit_tensors(const DitConfig& c, DType dtype) {
  const std::uint64_t d = c.dim;
  std::vector<io::TensorSpec> out;
  out.push_back({"patch_embedding.weight", dtype, {d, c.in_dim, 1, 2, 2}});
  out.push_back({"patch_embedding.bias", dtype, {d}});
  add_linear(out, "text_embedding.0", d, c.text_dim, dtype);
  add_linear(out, "text_embedding.2", d, d, dtype);
  add_linear(out, "time_embedding.0", d, c.freq_dim, dtype);
  add_linear(out, "time_embedding.2", d, d, dtype);
  add_linear(out, "time_projection.1", 6 * d, d, dtype);
  for (std::uint64_t i = 0; i < c.layers; ++i) {
    auto block = dit_block_tensors(c, i, dtype);
    out.insert(out.end(), block.begin(), block.end());
  }
  add_linear(out, "head.head", 4 * c.out_dim, d, dtype);
  out.push_back({"head.modulation", dtype, {1, 2, d}});
  return out;
}

namespace {

// The set's entries by official name, whatever layout the file uses.
std::map<std::string, const io::TensorSet::Entry*, std::less<>> by_official_name(
    const io::TensorSet& set) {
  std::map<std::string, const io::TensorSet::Entry*, std::less<>> names;
  for (const io::TensorSet::Entry& e : set.entries()) {
    const auto [it, added] = names.emplace(official_dit_name(e.tensor->name), &e);
    if (!added) {
      throw Error(ErrorCode::kBadModelFile,
                  io::detail::display(set.path()) + " holds '" + it->first + "' twice (as '" +
                      it->second->tensor->name + "' and '" + e.tensor->name + "')");
    }
  }
  return names;
}

using NameMap = std::map<std::string, const io::TensorSet::Entry*, std::less<>>;

const io::TensorInfo& need(const io::TensorSet& set, const NameMap& names,
                           const std::string& name, std::size_t rank) {
  const auto it = names.find(name);
  if (it == names.end() || it->second->tensor->shape.size() != rank) {
    throw Error(ErrorCode::kBadModelFile,
                io::detail::display(set.path()) + " is not a Wan DiT checkpoint: " +
                    (it == names.end() ? "it has no tensor '" + name + "'"
                                       : "'" + name + "' has an unexpected shape"));
  }
  return *it->second->tensor;
}

DitConfig infer_config(const io::TensorSet& set, const NameMap& names) {
  const io::TensorInfo& patch = need(set, names, "patch_embedding.weight", 5);
  const io::TensorInfo& ffn = need(set, names, "blocks.0.ffn.0.weight", 2);
  const io::TensorInfo& head = need(set, names, "head.head.weight", 2);
  const io::TensorInfo& text = need(set, names, "text_embedding.0.weight", 2);
  const io::TensorInfo& time = need(set, names, "time_embedding.0.weight", 2);
  DitConfig c;
  c.name = "wan-dit";
  c.dim = patch.shape[0];
  c.in_dim = patch.shape[1];
  c.ffn_dim = ffn.shape[0];
  c.out_dim = head.shape[0] / 4;
  c.text_dim = text.shape[1];
  c.freq_dim = time.shape[1];
  c.layers = 0;
  while (names.count("blocks." + std::to_string(c.layers) + ".self_attn.q.weight") != 0) ++c.layers;
  for (const DitConfig* known : {&kT2V_1_3B, &kTI2V_5B, &kT2V_14B, &kI2V_A14B}) {
    if (known->dim == c.dim && known->ffn_dim == c.ffn_dim && known->in_dim == c.in_dim) {
      c.name = known->name;
    }
  }
  return c;
}

}  // namespace

std::vector<io::TensorSpec> dit_lora_tensors(const DitConfig& config, std::uint64_t rank,
                                             DType dtype) {
  std::vector<io::TensorSpec> specs;
  for (std::uint64_t b = 0; b < config.layers; ++b) {
    for (const io::TensorSpec& w : dit_block_tensors(config, b, dtype)) {
      if (w.shape.size() != 2 || !w.name.ends_with(".weight")) continue;
      const std::string module = "diffusion_model." + w.name.substr(0, w.name.size() - 7);
      specs.push_back({module + ".lora_down.weight", dtype, {rank, w.shape[1]}});
      specs.push_back({module + ".lora_up.weight", dtype, {w.shape[0], rank}});
      specs.push_back({module + ".alpha", DType::kF32, {}});
    }
  }
  return specs;
}

DitConfig infer_dit_config(const io::TensorSet& set) {
  return infer_config(set, by_official_name(set));
}

std::int64_t dit_tokens(const DitConfig& config, int width, int height, int frames) {
  const std::int64_t stride = config.out_dim == 48 ? 16 : 8;
  const std::int64_t t = (frames - 1) / 4 + 1;
  return t * (height / stride / 2) * (width / stride / 2);
}

std::uint64_t dit_activation_bytes(const DitConfig& c, std::int64_t tokens,
                                   std::int64_t chunk_tokens, std::int64_t branches,
                                   std::int64_t distinct_timesteps, std::int64_t lora_rank) {
  return WanDit::measure_activation_bytes(c, tokens, chunk_tokens, branches, distinct_timesteps,
                                          lora_rank);
}

offload::ModelLayout dit_model_layout(const io::TensorSet& set, int width, int height, int frames,
                                      std::int64_t chunk_tokens) {
  const NameMap names = by_official_name(set);
  const DitConfig config = infer_config(set, names);
  offload::ModelLayout layout;
  layout.name = "Wan DiT " + std::string(config.name) + " (" + std::to_string(config.layers) +
                " blocks, D=" + std::to_string(config.dim) + ")";
  offload::LayerGroup embeddings{"embeddings", {}, true};
  offload::LayerGroup head{"head", {}, true};
  std::vector<offload::LayerGroup> blocks(config.layers);
  for (std::uint64_t i = 0; i < config.layers; ++i) blocks[i].name = "blocks." + std::to_string(i);
  for (const io::TensorSet::Entry& e : set.entries()) {  // file order: sequential reads
    const std::string official = official_dit_name(e.tensor->name);
    const std::string_view name = official;
    const offload::WeightRef ref{e.file, e.tensor};
    if (name.substr(0, 7) == "blocks.") {
      const std::size_t dot = name.find('.', 7);
      std::uint64_t index = 0;
      for (char ch : name.substr(7, dot - 7)) index = index * 10 + static_cast<std::uint64_t>(ch - '0');
      if (dot == std::string_view::npos || index >= config.layers) {
        throw Error(ErrorCode::kBadModelFile, "unexpected DiT tensor '" + std::string(name) + "'");
      }
      blocks[index].weights.push_back(ref);
    } else if (name.substr(0, 5) == "head.") {
      head.weights.push_back(ref);
    } else {
      embeddings.weights.push_back(ref);
    }
  }
  layout.groups.push_back(std::move(embeddings));
  for (auto& b : blocks) layout.groups.push_back(std::move(b));
  layout.groups.push_back(std::move(head));
  layout.activation_bytes =
      dit_activation_bytes(config, dit_tokens(config, width, height, frames), chunk_tokens);
  return layout;
}

}  // namespace ferry::models::wan
