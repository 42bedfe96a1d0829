#include "core/models/wan/dit_loras.h"

#include <string>
#include <vector>

#include "core/models/wan/dit.h"
#include "core/models/wan/dit_keys.h"
#include "core/models/wan/dit_layout.h"
#include "core/models/wan/lora_names.h"

namespace ferry::models::wan {

namespace {

// `loras` bound to `layout` through Wan's names (its activation bytes untouched).
lora::LoraBinding bind(std::span<const LoraChoice> loras, const io::TensorSet& set,
                       offload::ModelLayout& layout) {
  std::vector<std::string> official;
  official.reserve(set.entries().size());
  for (const io::TensorSet::Entry& e : set.entries()) {
    official.push_back(official_dit_name(e.tensor->name));
  }
  const WanLoraNames names(official);
  return lora::LoraBinding::bind(
      loras, layout, [&](const lora::Term& term) { return names.target(term); },
      [](std::string_view name) { return official_dit_name(name); });
}

}  // namespace

lora::LoraBinding bind_dit_loras(std::span<const LoraChoice> loras, const io::TensorSet& set,
                                 offload::ModelLayout& layout, std::int64_t tokens,
                                 std::int64_t chunk_tokens) {
  if (loras.empty()) return {};
  lora::LoraBinding binding = bind(loras, set, layout);
  layout.activation_bytes = dit_activation_bytes(infer_dit_config(set), tokens, chunk_tokens, 2, 2,
                                                 WanDit::lora_scratch_rank(binding.terms()));
  return binding;
}

LoraReport check_dit_lora(const std::filesystem::path& path, const io::TensorSet& set) {
  // The smallest size: the layout's groups are what matters, not its activations.
  offload::ModelLayout layout = dit_model_layout(set, 16, 16, 1, 0);
  const LoraChoice choice{path, 1.0f};
  return bind(std::span(&choice, 1), set, layout).reports().front();
}

}  // namespace ferry::models::wan
