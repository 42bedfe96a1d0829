#include "cli/machine.h"

#include "core/error.h"
#include "core/io/user_data.h"
#include "core/offload/machine.h"

namespace ferry::cli {

offload::MachineInfo describe_machine(long long vram_mib, long long ram_mib) {
  offload::MachineInfo m = offload::probe_machine();
  if (ram_mib >= 0)
    m.total_ram_bytes = m.available_ram_bytes = static_cast<std::uint64_t>(ram_mib) << 20;
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
