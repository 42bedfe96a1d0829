#include "core/models/wan/dit_keys.h"

#include <array>
#include <utility>

namespace ferry::models::wan {
namespace {

constexpr std::string_view kComfyPrefix = "model.diffusion_model.";

// (official, diffusers) name parts inside "blocks.<i>.", longest diffusers part first where
// one is a prefix of another.
constexpr std::array<std::pair<std::string_view, std::string_view>, 14> kBlockParts = {{
    {"modulation", "scale_shift_table"},
    {"self_attn.q.", "attn1.to_q."},
    {"self_attn.k.", "attn1.to_k."},
    {"self_attn.v.", "attn1.to_v."},
    {"self_attn.o.", "attn1.to_out.0."},
    {"self_attn.norm_", "attn1.norm_"},
    {"norm3.", "norm2."},
    {"cross_attn.q.", "attn2.to_q."},
    {"cross_attn.k.", "attn2.to_k."},
    {"cross_attn.v.", "attn2.to_v."},
    {"cross_attn.o.", "attn2.to_out.0."},
    {"cross_attn.norm_", "attn2.norm_"},
    {"ffn.0.", "ffn.net.0.proj."},
    {"ffn.2.", "ffn.net.2."},
}};

// Top-level parts (official, diffusers).
constexpr std::array<std::pair<std::string_view, std::string_view>, 7> kTopParts = {{
    {"text_embedding.0.", "condition_embedder.text_embedder.linear_1."},
    {"text_embedding.2.", "condition_embedder.text_embedder.linear_2."},
    {"time_embedding.0.", "condition_embedder.time_embedder.linear_1."},
    {"time_embedding.2.", "condition_embedder.time_embedder.linear_2."},
    {"time_projection.1.", "condition_embedder.time_proj."},
    {"head.head.", "proj_out."},
    {"head.modulation", "scale_shift_table"},
}};

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Swaps a leading `from` part of `rest` for `to`, using the table in the given direction.
template <std::size_t N>
bool swap_part(std::string_view rest, const std::array<std::pair<std::string_view, std::string_view>, N>& table,
               bool to_official, std::string& out) {
  for (const auto& [official, diffusers] : table) {
    const std::string_view from = to_official ? diffusers : official;
    const std::string_view to = to_official ? official : diffusers;
    if (starts_with(rest, from)) {
      out += to;
      out += rest.substr(from.size());
      return true;
    }
  }
  return false;
}

std::string convert(std::string_view name, bool to_official) {
  std::string out;
  if (starts_with(name, "blocks.")) {
    const std::size_t dot = name.find('.', 7);
    if (dot != std::string_view::npos) {
      out.assign(name.substr(0, dot + 1));
      if (swap_part(name.substr(dot + 1), kBlockParts, to_official, out)) return out;
    }
    return std::string(name);
  }
  if (swap_part(name, kTopParts, to_official, out)) return out;
  return std::string(name);
}

}  // namespace

std::string official_dit_name(std::string_view name) {
  if (starts_with(name, kComfyPrefix)) name.remove_prefix(kComfyPrefix.size());
  return convert(name, true);
}

std::string diffusers_dit_name(std::string_view official) { return convert(official, false); }

}  // namespace ferry::models::wan
