// The Wan VAEs' tensor names in the layouts Ferry reads (wan.md §F.3): official (= ComfyUI's
// wan_2.1_vae / wan2.2_vae files) and diffusers' AutoencoderKLWan. Models work with the
// official names.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ferry::models::wan {

enum class VaeKind {
  kWan21,  // z = 16, 4×8×8, flat Sequentials
  kWan22,  // z = 48, 4×16×16, patchify 2, nested stages with parameter-free shortcuts
};

std::string_view vae_kind_name(VaeKind kind);

// Which VAE a set of tensor names (any supported layout) belongs to. Throws
// Error(kBadModelFile) when the names are not a Wan VAE's.
VaeKind detect_vae_kind(const std::vector<std::string_view>& names);

// The official name for a name in any supported layout (official names come back unchanged).
// The diffusers layout numbers blocks per stage; the official one of Wan 2.1 numbers them
// through the whole encoder/decoder, so the mapping needs the kind.
std::string official_vae_name(std::string_view name, VaeKind kind);

}  // namespace ferry::models::wan
