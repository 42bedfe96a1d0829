// The one file a fuzz target writes each input to before a reader opens it by path: in memory
// where /dev/shm exists, named after the target and the process (parallel runs do not share it),
// removed at exit.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

namespace ferry::fuzz {

class ScratchFile {
 public:
  explicit ScratchFile(std::string_view stem) {
    const char* shm = "/dev/shm";
    const std::filesystem::path dir =
        std::filesystem::is_directory(shm) ? shm : std::filesystem::temp_directory_path();
    path_ = dir / (std::string(stem) + "_" + std::to_string(::getpid()) + ".safetensors");
  }
  ~ScratchFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace ferry::fuzz
