// Whether a LoRA file is a step-distillation LoRA (formats_lora_moe.md §5.3: LightX2V, Lightning,
// CausVid), told by its file name: such a LoRA is trained for the distilled sampler (a few steps,
// no CFG), and a request that pairs it with anything else gets a warning. The name is all there
// is: the files carry no metadata that says so.
#pragma once

#include <filesystem>

namespace ferry::models::lora {

// The step count the LoRA at `lora` was distilled for, from its file name (case-insensitive):
// 8 for "8step", "8steps", "8-step", "8_step"; 4 for "4step", "4steps", "4-step", "4_step" (the
// digit not part of a longer number), else 4 when the name says "lightx2v", "lightning",
// "causvid" or "distill"; 0 for any other name.
int distilled_steps(const std::filesystem::path& lora);

}  // namespace ferry::models::lora
