// Helpers shared by the core tests: a scratch folder per test and small file writers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace ferry::test {

// A fresh, empty folder for the running test, on the same file system as the build (not tmpfs,
// so unbuffered reads work); removed when the object dies.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// The ErrorCode of the ferry::Error that `f` throws; a test failure (and kInternal) when it
// throws nothing.
ErrorCode error_code_of(const std::function<void()>& f);

// tests/data/<relative>.
std::filesystem::path data_path(std::string_view relative);

void write_file(const std::filesystem::path& path, std::span<const std::byte> bytes);
void write_file(const std::filesystem::path& path, std::string_view text);
std::vector<std::byte> read_file(const std::filesystem::path& path);

// How far `ours` is from `theirs`, element by element (a parity test's figures): the largest
// absolute difference (infinite when one is not finite) and the root mean square. Sizes must match.
struct Difference {
  double max = 0, rms = 0;
};
Difference difference(std::span<const float> ours, std::span<const float> theirs);

// Deterministic bytes: byte i of a stream seeded with `seed`.
std::vector<std::byte> pattern_bytes(std::size_t n, std::uint32_t seed = 1);

// Shrinks or grows a file in place (POSIX truncate / Win32 SetEndOfFile). Returns false with
// `error` set when the OS refuses (Windows refuses to shrink a file that has mapped views).
bool resize_file(const std::filesystem::path& path, std::uint64_t size, std::string* error);

}  // namespace ferry::test
