#include "tests/test_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <system_error>

#include "core/memory/process_memory.h"

#ifdef _WIN32
#include <windows.h>
#else
#include <unistd.h>
#endif

namespace ferry::test {
namespace {

// The test binaries' allocator behaves as Ferry's programs' does (memory::configure_allocator),
// so that memory measured after a run or a cancel is what the engine holds.
const bool kAllocatorConfigured = (memory::configure_allocator(), true);

}  // namespace

ScratchDir::ScratchDir() {
  static std::atomic<int> counter{0};
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info != nullptr ? std::string(info->test_suite_name()) + "." + info->name()
                                     : std::string("scratch");
  for (char& c : name) {
    if (c == '/') c = '_';
  }
#ifdef _WIN32
  const unsigned long pid = GetCurrentProcessId();
#else
  const long pid = static_cast<long>(getpid());
#endif
  path_ = std::filesystem::current_path() / "scratch" /
          (name + "-" + std::to_string(pid) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

ErrorCode error_code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "no ferry::Error thrown";
  return ErrorCode::kInternal;
}

std::filesystem::path data_path(std::string_view relative) {
  return std::filesystem::path(FERRY_TEST_DATA_DIR) / relative;
}

void write_file(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write test file " + path.string());
}

void write_file(const std::filesystem::path& path, std::string_view text) {
  write_file(path, std::as_bytes(std::span(text.data(), text.size())));
}

std::vector<std::byte> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

std::vector<std::byte> pattern_bytes(std::size_t n, std::uint32_t seed) {
  std::vector<std::byte> out(n);
  std::uint32_t x = seed * 2654435761u + 1;
  for (std::size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    out[i] = static_cast<std::byte>(x & 0xff);
  }
  return out;
}

bool resize_file(const std::filesystem::path& path, std::uint64_t size, std::string* error) {
  std::error_code ec;
  std::filesystem::resize_file(path, size, ec);
  if (ec && error != nullptr) *error = ec.message();
  return !ec;
}

Difference difference(std::span<const float> ours, std::span<const float> theirs) {
  Difference d;
  if (ours.size() != theirs.size()) {
    throw Error(ErrorCode::kInternal, "difference: " + std::to_string(ours.size()) +
                                          " values against " + std::to_string(theirs.size()));
  }
  double sq = 0;
  for (std::size_t i = 0; i < ours.size(); ++i) {
    const double e = std::abs(static_cast<double>(ours[i]) - theirs[i]);
    d.max = std::max(d.max, std::isfinite(e) ? e : INFINITY);
    sq += e * e;
  }
  d.rms = std::sqrt(sq / static_cast<double>(std::max<std::size_t>(ours.size(), 1)));
  return d;
}

}  // namespace ferry::test
