// Runtime LoRAs on H3's DiT: the request's LoRA files bound to the DiT's layout through H3's name
// resolution (lora_names.h), so that their tensors stream with their blocks, the plan counts
// them, and the forward adds them (dit.h, DitInput::loras). Never merged.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>

#include "core/models/family.h"
#include "core/models/h3/dit_weights.h"
#include "core/models/lora/lora_binding.h"
#include "core/models/request.h"
#include "core/offload/layer_group.h"

namespace ferry::models::h3 {

// Binds `loras` to `layout` (weights.model_layout for a sequence of `tokens` rows of which
// `text_rows` text, chunks of `chunk_tokens`) and sets the layout's activation bytes to the
// forward's arena with their scratch (`distinct_timesteps` as the forward will have).
// Error(kBadModelFile) as lora::LoraBinding::bind says: a term that does not fit the layer it
// names ("a LoRA for another model", naming the layer and both shapes), a file none of whose
// terms adapts this DiT.
lora::LoraBinding bind_dit_loras(std::span<const LoraChoice> loras, const dit::DitWeights& weights,
                                 offload::ModelLayout& layout, std::int64_t tokens,
                                 std::int64_t text_rows, std::int64_t chunk_tokens,
                                 std::int64_t distinct_timesteps);

// What the LoRA at `path` adapts in `weights`' DiT (header reads only): the app's LoRA list, and
// the warning for the modules that adapt nothing.
LoraReport check_dit_lora(const std::filesystem::path& path, const dit::DitWeights& weights);

}  // namespace ferry::models::h3
