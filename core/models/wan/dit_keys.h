// The Wan DiT's tensor names in the layouts Ferry reads (wan.md §F.1): official (= ComfyUI's
// repackaged files, optionally prefixed "model.diffusion_model.") and diffusers'
// WanTransformer3DModel. Models work with the official names.
#pragma once

#include <string>
#include <string_view>

namespace ferry::models::wan {

// The official name for a name in any supported layout (names already official come back
// unchanged, ComfyUI's prefix removed).
std::string official_dit_name(std::string_view name);

// The diffusers name for an official one (for synthetic checkpoints and tests).
std::string diffusers_dit_name(std::string_view official);

}  // namespace ferry::models::wan
