#include "core/offload/machine.h"

#include "core/backend/cpu/cpu_backend.h"
#include "core/memory/process_memory.h"

namespace ferry::offload {

std::optional<GpuInfo> find_gpu(std::string* why) {
  if (why != nullptr) *why = "this build has no GPU backend";
  return std::nullopt;
}

MachineInfo probe_machine() {
  MachineInfo m;
  const memory::SystemMemory ram = memory::sample_system_memory();
  m.total_ram_bytes = ram.total_bytes;
  m.available_ram_bytes = ram.available_bytes;
  return m;
}

BackendChoice choose_backend(const Preset& preset, const MachineInfo&) {
  BackendChoice c;
  c.backend = std::make_unique<cpu::CpuBackend>();
  c.fell_back_to_cpu = preset.device == Device::kCuda;
  c.reason = "this build has no GPU backend";
  return c;
}

}  // namespace ferry::offload
