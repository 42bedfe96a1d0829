// A cheap content fingerprint of a (possibly many-GB) model file, for a video's metadata: enough
// to tell two files of the same name and size apart (another fine-tune, another quantisation)
// without reading them whole. It hashes the size, the first MiB (a safetensors header and the
// start of the data) and 64 KiB at 15 evenly spaced offsets: about 2 MiB read per file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace ferry::io {

// "fp1:" and 16 hex digits. Error(kIo) when the file cannot be read.
std::string file_fingerprint(const std::filesystem::path& path);

}  // namespace ferry::io
