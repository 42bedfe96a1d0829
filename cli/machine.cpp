#include "cli/machine.h"

#include "core/error.h"
#include "core/io/user_data.h"
#include "core/memory/process_memory.h"
#ifdef FERRY_HAVE_CUDA
#include "cuda/device_info.h"
#endif

namespace ferry::cli {

offload::MachineInfo describe_machine(long long vram_mib, long long ram_mib) {
  offload::MachineInfo m;
  const memory::SystemMemory ram = memory::sample_system_memory();
  m.total_ram_bytes = ram.total_bytes;
  m.available_ram_bytes = ram.available_bytes;
  if (ram_mib >= 0)
    m.total_ram_bytes = m.available_ram_bytes = static_cast<std::uint64_t>(ram_mib) << 20;
#ifdef FERRY_HAVE_CUDA
  if (vram_mib < 0) {
    if (const auto device = cuda::query_device()) {
      const cuda::DeviceMemory vram = cuda::sample_device_memory();
      m.has_gpu = true;
      m.total_vram_bytes = vram.total_bytes;
      m.free_vram_bytes = vram.free_bytes;
    }
  }
#endif
  if (vram_mib >= 0) {
    m.has_gpu = vram_mib > 0;
    m.total_vram_bytes = m.free_vram_bytes = static_cast<std::uint64_t>(vram_mib) << 20;
  }
  return m;
}

std::filesystem::path user_presets_dir() {
  try {
    return io::user_data_dir() / "presets";
  } catch (const Error&) {
    return {};  // no data folder: the built-in presets only
  }
}

}  // namespace ferry::cli
