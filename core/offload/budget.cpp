#include "core/offload/budget.h"

#include "core/error.h"
#include "core/offload/planner.h"

namespace ferry::offload {

Budget budget_for(const Preset& preset, const MachineInfo& machine) {
  if (preset.device == Device::kCuda && !machine.has_gpu) {
    throw Error(ErrorCode::kUnsupported, "preset '" + preset.name +
                                             "' needs an NVIDIA GPU and none was found: use the "
                                             "cpu preset (slow) or a machine with a GPU");
  }
  Budget budget;
  budget.preset = preset.name;
  budget.device_bytes = usable_device_bytes(preset, machine);
  budget.ram_bytes = preset.ram_budget_bytes;
  budget.device_is_host = preset.device == Device::kCpu;
  return budget;
}

}  // namespace ferry::offload
