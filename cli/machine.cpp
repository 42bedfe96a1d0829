#include "cli/machine.h"

#include "core/error.h"
#include "core/io/user_data.h"
#include "core/offload/machine.h"

namespace ferry::cli {

pipeline::SessionOptions session_options(const Args& args) {
  pipeline::SessionOptions options;
  options.user_presets = user_presets_dir();
  const long long vram_mib = args.integer_or("vram-mib", -1, 0, 1 << 22);
  const long long ram_mib = args.integer_or("ram-mib", -1, 1024, 1 << 24);
  if (vram_mib < 0 && ram_mib < 0) return options;  // this machine, as the session probes it
  offload::MachineInfo m = offload::probe_machine();
  if (ram_mib >= 0) {
    m.total_ram_bytes = m.available_ram_bytes = static_cast<std::uint64_t>(ram_mib) << 20;
  }
  if (vram_mib >= 0) {
    m.has_gpu = vram_mib > 0;
    m.total_vram_bytes = m.free_vram_bytes = static_cast<std::uint64_t>(vram_mib) << 20;
  }
  options.machine = m;
  return options;
}

std::filesystem::path user_presets_dir() {
  try {
    return io::user_data_dir() / "presets";
  } catch (const Error&) {
    return {};  // no data folder: the built-in presets only
  }
}

}  // namespace ferry::cli
