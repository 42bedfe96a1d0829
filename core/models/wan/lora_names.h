// Which Wan DiT tensor a LoRA term adapts (formats_lora_moe.md §4.3 step 3, §4.4): the term's
// module in official, diffusers or kohya/musubi spelling resolved to the official parameter
// name. Underscored modules are looked up in a table built from the model's own names (module
// names contain underscores — self_attn, k_img, text_embedding — so `_` is never turned back
// into `.`), the way ComfyUI builds its map.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "core/models/lora/lora_file.h"

namespace ferry::models::wan {

class WanLoraNames {
 public:
  // `official_params`: every parameter of the model by its official name ("blocks.0.self_attn.q
  // .weight", "blocks.0.modulation", "head.head.bias", ...; official_dit_name of the checkpoint's
  // keys).
  explicit WanLoraNames(std::span<const std::string> official_params);

  // The official parameter the term adds to: "<module>.weight" for kLowRank and kWeightDiff,
  // "<module>.bias" for kBiasDiff, "blocks.N.modulation" for kModulationDiff; nullopt when the
  // model has no such parameter (a Wan 2.1 I2V `k_img` term on a Wan 2.2 model, a 14B LoRA's
  // block 35 on a 30-block model, a text-encoder key): the caller reports those.
  std::optional<std::string> target(const lora::Term& term) const;

 private:
  std::unordered_set<std::string> params_;
  std::unordered_map<std::string, std::string>
      underscored_;  // "blocks_0_self_attn_q" → official module
};

}  // namespace ferry::models::wan
