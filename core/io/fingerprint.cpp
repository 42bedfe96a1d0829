#include "core/io/fingerprint.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <vector>

#include "core/error.h"
#include "core/io/detail/os_file.h"

namespace ferry::io {
namespace {

constexpr std::uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr std::uint64_t kFnvPrime = 0x100000001b3ull;
constexpr std::uint64_t kHeadBytes = 1ull << 20;
constexpr std::uint64_t kSampleBytes = 64ull << 10;
constexpr int kSamples = 15;

void mix(std::uint64_t& hash, const char* bytes, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    hash ^= static_cast<unsigned char>(bytes[i]);
    hash *= kFnvPrime;
  }
}

}  // namespace

std::string file_fingerprint(const std::filesystem::path& path) {
  std::error_code ec;
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  std::ifstream in(path, std::ios::binary);
  if (ec || !in) throw Error(ErrorCode::kIo, "cannot read " + detail::display(path));
  std::uint64_t hash = kFnvOffset;
  mix(hash, reinterpret_cast<const char*>(&size), sizeof size);
  std::vector<char> buffer(static_cast<std::size_t>(kHeadBytes));
  const auto read_at = [&](std::uint64_t offset, std::uint64_t bytes) {
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(buffer.data(), static_cast<std::streamsize>(bytes));
    if (in.gcount() != static_cast<std::streamsize>(bytes)) {
      throw Error(ErrorCode::kIo, "cannot read " + detail::display(path) + " (it changed size)");
    }
    mix(hash, buffer.data(), static_cast<std::size_t>(bytes));
  };
  read_at(0, std::min(size, kHeadBytes));
  if (size > kHeadBytes + kSampleBytes) {
    const std::uint64_t span = size - kHeadBytes - kSampleBytes;
    for (int i = 1; i <= kSamples; ++i) read_at(kHeadBytes + span * i / kSamples, kSampleBytes);
  }
  char text[32];
  std::snprintf(text, sizeof text, "fp1:%016llx", static_cast<unsigned long long>(hash));
  return text;
}

}  // namespace ferry::io
