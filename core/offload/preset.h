// Presets: what a user picks ("laptop-8gb") and what the planner obeys — memory budgets, the
// staging ring, look-ahead, chunking and the VAE tile. Built-in presets are the JSON files of
// resources/presets/, compiled in; users may add their own to <user data>/presets/. Every preset
// is validated on load, and an invalid one is refused with a message naming the file and field.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/backend/device.h"
#include "core/offload/plan.h"
#include "core/tensor/tensor.h"

namespace ferry::offload {

struct Preset {
  std::string name;
  std::string description;  // one line a user understands
  Device device = Device::kCuda;
  std::uint64_t vram_budget_bytes = 0;
  std::uint64_t vram_headroom_bytes = 0;  // kept free below what the driver reports
  std::uint64_t ram_budget_bytes = 0;
  double max_pinned_fraction_of_ram = 0.35;  // pinned memory above ≈ 40 % destabilises Windows
  std::size_t staging_slots = 4;
  std::uint64_t staging_slot_bytes = 64ull << 20;
  std::size_t look_ahead = 1;
  ReadMethod read_method = ReadMethod::kDirect;
  // The DiT block's per-token work (norms, projections, attention queries, FFN) runs in chunks
  // of this many tokens, bounding its working memory; 0: no chunking.
  std::int64_t chunk_tokens = 0;
  int vae_tile_px = 0;                // 0: untiled
  // The VAE's activations and frame caches: kF32 (the reference) or kBF16 (half the decode's
  // arena, so larger tiles fit; within 0.1 of f32 on the tiny test VAEs).
  DType vae_activations = DType::kF32;
  std::string source;  // "built-in" or the file it came from
};

// The machine the plan is for.
struct MachineInfo {
  bool has_gpu = false;
  std::uint64_t total_vram_bytes = 0;
  std::uint64_t free_vram_bytes = 0;
  std::uint64_t total_ram_bytes = 0;
  std::uint64_t available_ram_bytes = 0;
  // What the GPU can do, as the device registry lists it (core/offload/machine.h); a discrete
  // GPU's for a machine described by hand.
  DeviceCapabilities gpu_capabilities = kDiscreteGpuCapabilities;

  // The capabilities of the device a preset names (the CPU's are the host's).
  DeviceCapabilities capabilities(Device device) const {
    return device == Device::kCpu ? kHostCapabilities : gpu_capabilities;
  }
};

// Parses and validates one preset; Error(kBadArgument) naming `source` and the problem.
Preset parse_preset(std::string_view json, const std::string& source);

// The built-in presets, in order from the smallest machine to the largest, then `cpu`.
const std::vector<Preset>& builtin_presets();

// Built-ins plus every *.json in `user_dir` (if it exists). A user preset may not reuse a
// built-in name or "auto".
std::vector<Preset> load_presets(const std::filesystem::path& user_dir);

// `auto`: budgets from this machine (free VRAM less headroom; a share of available RAM).
Preset auto_preset(const MachineInfo& machine);

// By name, "auto" included; Error(kBadArgument) listing the names when unknown.
Preset find_preset(const std::vector<Preset>& presets, std::string_view name,
                   const MachineInfo& machine);

}  // namespace ferry::offload
