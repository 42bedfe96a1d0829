// What a stage may use on this machine under a preset, as one figure per memory: the generic
// budget every stage's planner (the DiT's in offload, a VAE's or an audio decoder's in its model
// family's folder) plans against, so model-specific policy never has to know how a preset and a
// machine combine.
#pragma once

#include <cstdint>
#include <string>

#include "core/offload/preset.h"

namespace ferry::offload {

struct Budget {
  std::string preset;  // the preset's name, for refusals ("preset 'laptop-8gb' has ...")
  // The device memory a stage may use: the preset's budget less headroom below what the driver
  // reports free; on a device whose memory is host memory, the RAM budget less the process base.
  std::uint64_t device_bytes = 0;
  // The host memory the whole process may use.
  std::uint64_t ram_bytes = 0;
  // The device's memory is host memory: what a stage puts "on the device" counts against RAM too.
  bool device_is_host = false;
};

// Error(kUnsupported) when the preset needs a GPU that the machine does not have.
Budget budget_for(const Preset& preset, const MachineInfo& machine);

}  // namespace ferry::offload
