// Ferry's per-user data folder (architecture.md §7): settings, history, user presets, the demo
// model, logs — never next to the executable. %LOCALAPPDATA%\Ferry on Windows,
// $XDG_DATA_HOME/Ferry (else ~/.local/share/Ferry) elsewhere; the environment variable
// FERRY_DATA_DIR overrides both (tests, portable setups).
#pragma once

#include <filesystem>

namespace ferry::io {

// The folder (not created). Error(kIo) when the platform gives no place for it.
std::filesystem::path user_data_dir();

// user_data_dir() / name, created with its parents. Error(kIo) when it cannot be created.
std::filesystem::path user_data_subdir(const char* name);

}  // namespace ferry::io
