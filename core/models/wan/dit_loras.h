// Runtime LoRAs on the Wan DiT: the request's LoRA files bound to the DiT's layout through Wan's
// name resolution (lora_names.h), so that their tensors stream with their blocks, the plan counts
// them, and WanDit adds them in every forward (dit.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>

#include "core/io/tensor_set.h"
#include "core/models/family.h"
#include "core/models/lora/lora_binding.h"
#include "core/models/request.h"
#include "core/offload/layer_group.h"

namespace ferry::models::wan {

// Binds `loras` to `layout` (dit_model_layout of `set` for a request of `tokens` DiT tokens) and
// grows the layout's activation bytes by the LoRA scratch. Error(kBadModelFile) as
// lora::LoraBinding::bind says (a file naming the LoRA and what does not fit).
lora::LoraBinding bind_dit_loras(std::span<const LoraChoice> loras, const io::TensorSet& set,
                                 offload::ModelLayout& layout, std::int64_t tokens,
                                 std::int64_t chunk_tokens);

// What the LoRA at `path` adapts in the DiT of `set` (header reads only).
LoraReport check_dit_lora(const std::filesystem::path& path, const io::TensorSet& set);

}  // namespace ferry::models::wan
