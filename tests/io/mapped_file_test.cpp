// MappedFile / MappedView: leases, their lifetimes, and read errors turned into ferry::Error.
#include "core/io/mapped_file.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/memory/process_memory.h"
#include "tests/test_support.h"

namespace ferry::io {
namespace {

using test::pattern_bytes;
using test::ScratchDir;
using test::write_file;

std::vector<std::byte> copy_out(const MappedView& view) {
  std::vector<std::byte> out(view.size());
  view.copy_to(0, out);
  return out;
}

TEST(MappedFile, view_bytes_equal_file_bytes_at_unaligned_offsets) {
  ScratchDir dir;
  const auto bytes = pattern_bytes(3 * MappedFile::granularity() + 1234);
  write_file(dir / "a.bin", bytes);
  const MappedFile file = MappedFile::open(dir / "a.bin");
  ASSERT_EQ(file.size(), bytes.size());
  const std::uint64_t g = MappedFile::granularity();
  for (std::uint64_t offset : {std::uint64_t{0}, std::uint64_t{1}, g - 1, g, g + 7, 2 * g + 5}) {
    for (std::uint64_t length : {std::uint64_t{1}, std::uint64_t{100}, g, g + 3}) {
      if (offset + length > bytes.size()) continue;
      const MappedView view = file.map(offset, length);
      ASSERT_EQ(view.offset(), offset);
      ASSERT_EQ(view.size(), length);
      ASSERT_EQ(0, std::memcmp(view.bytes().data(), bytes.data() + offset, length))
          << "offset " << offset << " length " << length;
      const auto copied = copy_out(view);
      ASSERT_EQ(0, std::memcmp(copied.data(), bytes.data() + offset, length));
    }
  }
  const MappedView last = file.map(bytes.size() - 1, 1);
  EXPECT_EQ(last.bytes()[0], bytes.back());
}

TEST(MappedFile, empty_file_opens_and_gives_empty_views) {
  ScratchDir dir;
  write_file(dir / "empty.bin", std::string_view());
  const MappedFile file = MappedFile::open(dir / "empty.bin");
  EXPECT_EQ(file.size(), 0u);
  const MappedView view = file.map(0, 0);
  EXPECT_TRUE(view.empty());
  EXPECT_EQ(file.live_views(), 1u);
  EXPECT_EQ(test::error_code_of([&] { (void)file.map(0, 1); }), ErrorCode::kBadArgument);
}

TEST(MappedFile, range_outside_the_file_is_a_bad_argument) {
  ScratchDir dir;
  write_file(dir / "a.bin", pattern_bytes(100));
  const MappedFile file = MappedFile::open(dir / "a.bin");
  EXPECT_EQ(test::error_code_of([&] { (void)file.map(0, 101); }), ErrorCode::kBadArgument);
  EXPECT_EQ(test::error_code_of([&] { (void)file.map(101, 0); }), ErrorCode::kBadArgument);
  EXPECT_EQ(test::error_code_of([&] { (void)file.map(50, UINT64_MAX); }), ErrorCode::kBadArgument);
  EXPECT_EQ(test::error_code_of([&] { (void)file.map(UINT64_MAX, 2); }), ErrorCode::kBadArgument);
  EXPECT_EQ(file.live_views(), 0u);
}

TEST(MappedFile, missing_file_is_an_io_error_naming_the_path) {
  ScratchDir dir;
  try {
    (void)MappedFile::open(dir / "no-such-model.safetensors");
    FAIL() << "opened a missing file";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(e.what()).find("no-such-model.safetensors"), std::string::npos)
        << e.what();
  }
}

TEST(MappedFile, directory_is_refused) {
  ScratchDir dir;
  EXPECT_EQ(test::error_code_of([&] { (void)MappedFile::open(dir.path()); }), ErrorCode::kIo);
}

TEST(MappedFile, close_fails_while_a_view_lives_and_leaves_the_view_valid) {
  ScratchDir dir;
  const auto bytes = pattern_bytes(10000);
  write_file(dir / "a.bin", bytes);
  MappedFile file = MappedFile::open(dir / "a.bin");
  MappedView view = file.map(10, 5000);
  EXPECT_EQ(file.live_views(), 1u);
  EXPECT_EQ(test::error_code_of([&] { file.close(); }), ErrorCode::kBusy);
  EXPECT_TRUE(file.is_open());
  EXPECT_EQ(0, std::memcmp(copy_out(view).data(), bytes.data() + 10, 5000));
  view.release();
  EXPECT_EQ(file.live_views(), 0u);
  file.close();
  EXPECT_FALSE(file.is_open());
}

TEST(MappedFile, reopening_over_a_file_with_live_views_is_refused) {
  // The failure Ferry exists to avoid: replacing a mapping while tensors still read from it.
  ScratchDir dir;
  write_file(dir / "a.bin", pattern_bytes(4096));
  MappedFile file = MappedFile::open(dir / "a.bin");
  const MappedView view = file.map(0, 4096);
  EXPECT_EQ(test::error_code_of([&] { file = MappedFile::open(dir / "a.bin"); }), ErrorCode::kBusy);
  EXPECT_EQ(file.live_views(), 1u);
  EXPECT_EQ(copy_out(view), pattern_bytes(4096));
}

TEST(MappedFile, destroying_the_file_object_defers_the_close_to_the_last_view) {
  ScratchDir dir;
  const auto bytes = pattern_bytes(70000, 7);
  write_file(dir / "a.bin", bytes);
  MappedView view;
  {
    const MappedFile file = MappedFile::open(dir / "a.bin");
    view = file.map(65536, 4000);
  }
  EXPECT_EQ(0, std::memcmp(copy_out(view).data(), bytes.data() + 65536, 4000));
}

TEST(MappedFile, moved_views_keep_one_lease) {
  ScratchDir dir;
  write_file(dir / "a.bin", pattern_bytes(5000));
  MappedFile file = MappedFile::open(dir / "a.bin");
  MappedView a = file.map(0, 100);
  MappedView b = std::move(a);
  EXPECT_EQ(file.live_views(), 1u);
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): moved-from views are empty
  MappedView c = file.map(100, 100);
  EXPECT_EQ(file.live_views(), 2u);
  c = std::move(b);  // releases c's own lease
  EXPECT_EQ(file.live_views(), 1u);
  c.release();
  c.release();
  EXPECT_EQ(file.live_views(), 0u);
  file.close();
}

TEST(MappedFile, copy_outside_the_view_is_a_bad_argument) {
  ScratchDir dir;
  write_file(dir / "a.bin", pattern_bytes(5000));
  const MappedFile file = MappedFile::open(dir / "a.bin");
  const MappedView view = file.map(1000, 100);
  std::vector<std::byte> out(50);
  EXPECT_EQ(test::error_code_of([&] { view.copy_to(51, out); }), ErrorCode::kBadArgument);
  view.copy_to(50, out);
}

TEST(MappedFile, evict_keeps_the_lease_and_the_bytes) {
  ScratchDir dir;
  const auto bytes = pattern_bytes(1 << 20);
  write_file(dir / "a.bin", bytes);
  const MappedFile file = MappedFile::open(dir / "a.bin");
  const MappedView view = file.map(0, bytes.size());
  view.prefetch();
  EXPECT_EQ(copy_out(view), bytes);
  view.evict();
  EXPECT_EQ(file.live_views(), 1u);
  EXPECT_EQ(copy_out(view), bytes);
}

TEST(MappedFile, evicting_a_copied_range_drops_only_its_pages_from_the_resident_set) {
  ScratchDir dir;
  const std::size_t n = 32 << 20;
  const auto bytes = pattern_bytes(n);
  write_file(dir / "a.bin", bytes);
  const MappedFile file = MappedFile::open(dir / "a.bin");
  const MappedView view = file.map(100, n - 100);  // unaligned start
  std::vector<std::byte> out(view.size());
  view.copy_to(0, out);
  const auto resident = [] { return memory::sample_process_memory().resident_file_bytes; };
  const std::uint64_t all = resident();
  view.evict(0, view.size() / 2);
  const std::uint64_t half = resident();
  view.evict(view.size() / 2, view.size() - view.size() / 2);
  const std::uint64_t none = resident();
  if (all == 0) GTEST_SKIP() << "this OS does not report mapped-file residency";
  EXPECT_NEAR(static_cast<double>(all - half), static_cast<double>(n / 2), 1 << 20);
  EXPECT_NEAR(static_cast<double>(half - none), static_cast<double>(n / 2), 1 << 20);
  view.copy_to(0, out);  // the lease still holds: the bytes come back
  EXPECT_EQ(out, std::vector<std::byte>(bytes.begin() + 100, bytes.end()));
}

TEST(MappedFile, views_taken_and_released_on_many_threads_are_counted_exactly) {
  ScratchDir dir;
  const auto bytes = pattern_bytes(1 << 16);
  write_file(dir / "a.bin", bytes);
  MappedFile file = MappedFile::open(dir / "a.bin");
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const std::uint64_t offset = static_cast<std::uint64_t>((t * 977 + i * 131) % 60000);
        const MappedView view = file.map(offset, 1000);
        if (std::memcmp(view.bytes().data(), bytes.data() + offset, 1000) != 0) ++mismatches;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(file.live_views(), 0u);
  file.close();
}

TEST(MappedFile, file_truncated_while_mapped_gives_an_io_error_not_a_crash) {
  ScratchDir dir;
  const std::size_t page = MappedFile::granularity();
  const auto bytes = pattern_bytes(16 * page);
  write_file(dir / "model.safetensors", bytes);
  const MappedFile file = MappedFile::open(dir / "model.safetensors");
  const MappedView view = file.map(0, 16 * page);
  std::string refused;
  if (!test::resize_file(dir / "model.safetensors", 2 * page, &refused)) {
    // Windows refuses to shrink a file with mapped views (ERROR_USER_MAPPED_FILE), so there the
    // file cannot go away under a lease; the in-page-error path is tested in win32 tests.
    GTEST_SKIP() << "the OS refused to shrink a mapped file: " << refused;
  }
  std::vector<std::byte> out(16 * page);
  try {
    view.copy_to(0, out);
    FAIL() << "copying pages beyond the new end of file succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(e.what()).find("model.safetensors"), std::string::npos) << e.what();
  }
  // The part still inside the file reads fine, and later faults are caught again.
  std::vector<std::byte> head(page);
  view.copy_to(0, head);
  EXPECT_EQ(0, std::memcmp(head.data(), bytes.data(), page));
  EXPECT_THROW(view.copy_to(3 * page, head), Error);
}

}  // namespace
}  // namespace ferry::io

namespace ferry::io {
namespace {

#ifndef _WIN32
TEST(MappedFileDeathTest, a_fault_outside_a_guarded_copy_is_not_swallowed) {
  // The guard covers copy_to's source range only: touching lost pages directly still crashes,
  // so a bug elsewhere cannot hide behind it.
  // "fast": the child is forked at the statement, so it does not re-run the test body and
  // leave a second scratch folder behind when it dies.
  GTEST_FLAG_SET(death_test_style, "fast");
  test::ScratchDir dir;
  const std::size_t page = MappedFile::granularity();
  test::write_file(dir / "a.bin", test::pattern_bytes(8 * page));
  const MappedFile file = MappedFile::open(dir / "a.bin");
  const MappedView view = file.map(0, 8 * page);
  std::vector<std::byte> first(page);
  view.copy_to(0, first);  // installs the handler
  ASSERT_TRUE(test::resize_file(dir / "a.bin", page, nullptr));
  EXPECT_DEATH(
      {
        volatile std::byte b = view.bytes()[5 * page];
        (void)b;
      },
      "");
  EXPECT_THROW(view.copy_to(5 * page, first), Error);
}
#endif

}  // namespace
}  // namespace ferry::io
