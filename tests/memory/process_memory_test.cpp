// Process and system memory sampling: the figures move when memory really does.
#include "core/memory/process_memory.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/io/mapped_file.h"

#ifdef _WIN32
#include <windows.h>
#else
#include <sys/mman.h>
#endif
#include "tests/test_support.h"

namespace ferry::memory {
namespace {

constexpr std::uint64_t kMiB = 1 << 20;

// Private memory straight from the OS, so the figures do not depend on what the C++ allocator
// (or a sanitizer's quarantine) keeps after a free.
class OsBlock {
 public:
  explicit OsBlock(std::size_t n) : n_(n) {
#ifdef _WIN32
    p_ = VirtualAlloc(nullptr, n, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
#else
    p_ = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p_ == MAP_FAILED) p_ = nullptr;
#endif
  }
  ~OsBlock() {
#ifdef _WIN32
    VirtualFree(p_, 0, MEM_RELEASE);
#else
    munmap(p_, n_);
#endif
  }
  char* data() const { return static_cast<char*>(p_); }

 private:
  void* p_ = nullptr;
  std::size_t n_;
};

TEST(ProcessMemory, samples_are_consistent) {
  const ProcessMemory m = sample_process_memory();
  EXPECT_GT(m.resident_bytes, 0u);
  EXPECT_GE(m.peak_resident_bytes, m.resident_bytes);
  EXPECT_GT(m.commit_bytes, 0u);
  EXPECT_GE(m.peak_commit_bytes, m.commit_bytes);
  const SystemMemory s = sample_system_memory();
  EXPECT_GT(s.total_bytes, 256 * kMiB);
  EXPECT_GT(s.available_bytes, 0u);
  EXPECT_LE(s.available_bytes, s.total_bytes);
}

TEST(ProcessMemory, touching_memory_raises_resident_and_commit_and_freeing_lowers_commit) {
  const ProcessMemory before = sample_process_memory();
  std::uint64_t commit_during = 0;
  {
    OsBlock block(128 * kMiB);
    ASSERT_NE(block.data(), nullptr);
    std::memset(block.data(), 1, 128 * kMiB);
    const ProcessMemory during = sample_process_memory();
    commit_during = during.commit_bytes;
    EXPECT_GE(during.resident_bytes, before.resident_bytes + 100 * kMiB);
    EXPECT_GE(during.commit_bytes, before.commit_bytes + 100 * kMiB);
    EXPECT_GE(during.peak_resident_bytes, during.resident_bytes);
  }
  const ProcessMemory after = sample_process_memory();
  EXPECT_LE(after.commit_bytes + 100 * kMiB, commit_during);
  EXPECT_GE(after.peak_commit_bytes, commit_during);
}

TEST(ProcessMemory, mapped_file_pages_count_as_resident_until_the_view_is_released) {
  test::ScratchDir dir;
  const std::size_t n = 64 * kMiB;
  test::write_file(dir / "a.bin", test::pattern_bytes(n));
  const io::MappedFile file = io::MappedFile::open(dir / "a.bin");
  const ProcessMemory before = sample_process_memory();
  std::uint64_t during_resident = 0;
  {
    const io::MappedView view = file.map(0, n);
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < n; i += 4096) sum += static_cast<std::uint8_t>(view.bytes()[i]);
    EXPECT_GT(sum, 0u);
    during_resident = sample_process_memory().resident_bytes;
    EXPECT_GE(during_resident, before.resident_bytes + 48 * kMiB);
  }
  EXPECT_LE(sample_process_memory().resident_bytes + 48 * kMiB, during_resident);
}

TEST(ProcessMemory, peak_resident_can_be_restarted_where_the_os_allows) {
  {
    OsBlock block(96 * kMiB);
    ASSERT_NE(block.data(), nullptr);
    std::memset(block.data(), 1, 96 * kMiB);
  }
  if (!reset_peak_resident()) GTEST_SKIP() << "this OS keeps one peak per process";
  const ProcessMemory m = sample_process_memory();
  EXPECT_LT(m.peak_resident_bytes, m.resident_bytes + 32 * kMiB);
}

}  // namespace
}  // namespace ferry::memory
