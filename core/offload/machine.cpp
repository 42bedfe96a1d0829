#include "core/offload/machine.h"

#include <utility>

#include "core/error.h"
#include "core/memory/process_memory.h"

namespace ferry::offload {

std::optional<DeviceProperties> find_gpu(std::string* why) {
  return find_device(Device::kCuda, why);
}

MachineInfo probe_machine() {
  MachineInfo m;
  try {
    const memory::SystemMemory ram = memory::sample_system_memory();
    m.total_ram_bytes = ram.total_bytes;
    m.available_ram_bytes = ram.available_bytes;
  } catch (const Error&) {
    // Unknown RAM: the presets' own budgets still apply.
  }
  if (const std::optional<DeviceProperties> gpu = find_gpu()) {
    m.has_gpu = true;
    m.total_vram_bytes = gpu->memory.total_bytes;
    m.free_vram_bytes = gpu->memory.free_bytes;
    m.gpu_capabilities = gpu->capabilities;
  }
  return m;
}

BackendChoice choose_backend(const Preset& preset, const MachineInfo& machine) {
  BackendChoice chosen;
  if (preset.device != Device::kCpu) {
    std::string why;
    std::optional<DeviceProperties> device;
    if (!machine.has_gpu) {
      why = "the machine has no GPU for preset '" + preset.name + "'";
    } else {
      device = find_device(preset.device, &why);
    }
    if (device) {
      chosen.backend = create_backend(*device);
      chosen.device = *device;
      if (!device->capabilities.memory_is_host) {
        chosen.device_memory = [d = *device] {
          return DeviceMemorySample{sample_device_memory(d).used_bytes(), 0};
        };
      }
      return chosen;
    }
    chosen.fell_back_to_cpu = true;
    chosen.reason = std::move(why);
  }
  chosen.device = cpu_device();
  chosen.backend = create_backend(chosen.device);
  return chosen;
}

}  // namespace ferry::offload
