// The machine ferry-cli plans for: this one (core/offload/machine.h: the GPU from the device
// registry, RAM from the OS), or one described on the command line.
#pragma once

#include <filesystem>

#include "core/offload/preset.h"

namespace ferry::cli {

// vram_mib / ram_mib < 0: measure; otherwise pretend the machine has that much free.
offload::MachineInfo describe_machine(long long vram_mib, long long ram_mib);

// <per-user data folder>/presets (core/io/user_data.h); empty when there is no data folder.
std::filesystem::path user_presets_dir();

}  // namespace ferry::cli
