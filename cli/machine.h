// The session ferry-cli runs (core/pipeline/session.h): on this machine, or on one described by
// --vram-mib / --ram-mib (plans for another machine), with the user's presets.
#pragma once

#include <filesystem>

#include "cli/args.h"
#include "core/pipeline/session.h"

namespace ferry::cli {

// --vram-mib N (0: no GPU) and --ram-mib N describe the machine; each one not given is measured.
pipeline::SessionOptions session_options(const Args& args);

// <per-user data folder>/presets (core/io/user_data.h); empty when there is no data folder.
std::filesystem::path user_presets_dir();

}  // namespace ferry::cli
