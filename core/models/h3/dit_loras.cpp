#include "core/models/h3/dit_loras.h"

#include <optional>
#include <string>
#include <unordered_map>

#include "core/models/h3/dit.h"
#include "core/models/h3/lora_names.h"

namespace ferry::models::h3 {
namespace {

// `loras` bound to `layout` through H3's names; the model's tensors keep their file names. A
// file's network alpha (lora_names.h) scales its terms by alpha / rank.
lora::LoraBinding bind(std::span<const LoraChoice> loras, const dit::DitWeights& weights,
                       offload::ModelLayout& layout) {
  const H3LoraNames names(weights);
  std::unordered_map<const lora::LoraFile*, std::optional<float>> alphas;
  const auto resolve = [&](const lora::LoraFile& file, const lora::Term& term) {
    std::optional<lora::TermTarget> target = names.target(term);
    auto alpha = alphas.find(&file);
    if (alpha == alphas.end()) alpha = alphas.emplace(&file, network_alpha(file)).first;
    if (target && alpha->second && term.rank > 0) {
      target->scale = *alpha->second / static_cast<float>(term.rank);
    }
    return target;
  };
  return lora::LoraBinding::bind(loras, layout, resolve,
                                 [](std::string_view name) { return std::string(name); });
}

}  // namespace

lora::LoraBinding bind_dit_loras(std::span<const LoraChoice> loras, const dit::DitWeights& weights,
                                 offload::ModelLayout& layout, std::int64_t tokens,
                                 std::int64_t text_rows, std::int64_t chunk_tokens,
                                 std::int64_t distinct_timesteps) {
  if (loras.empty()) return {};
  lora::LoraBinding binding = bind(loras, weights, layout);
  layout.activation_bytes = weights.activation_bytes(
      tokens, text_rows, chunk_tokens, distinct_timesteps, dit::lora_scratch_rank(binding.terms()));
  return binding;
}

LoraReport check_dit_lora(const std::filesystem::path& path, const dit::DitWeights& weights) {
  // The smallest sequence: the layout's groups are what matters, not its activations.
  offload::ModelLayout layout = weights.model_layout(1, 1, 0);
  const LoraChoice choice{path, 1.0f};
  return bind(std::span(&choice, 1), weights, layout).reports().front();
}

}  // namespace ferry::models::h3
