#include "core/models/wan/dit_layout.h"

#include <string>

namespace ferry::models::wan {
namespace {

void add_linear(std::vector<io::TensorSpec>& out, const std::string& prefix, std::uint64_t rows,
                std::uint64_t cols, DType dtype) {
  out.push_back({prefix + ".weight", dtype, {rows, cols}});
  out.push_back({prefix + ".bias", dtype, {rows}});
}

}  // namespace

const DitConfig* find_dit_config(std::string_view name) {
  for (const DitConfig* config : {&kT2V_1_3B, &kTI2V_5B, &kT2V_14B}) {
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

}  // namespace ferry::models::wan
