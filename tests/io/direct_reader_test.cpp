// DirectReader: unbuffered reads with the head and tail of unaligned ranges handled, the
// alignment checked by us before the OS sees the request, and calls capped at 64 MiB.
#include "core/io/direct_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include "core/error.h"
#include "core/memory/aligned_buffer.h"
#include "tests/test_support.h"

namespace ferry::io {
namespace {

using memory::AlignedBuffer;
using test::pattern_bytes;
using test::ScratchDir;
using test::write_file;

TEST(DirectReader, bypasses_the_page_cache_on_a_regular_file_system) {
  ScratchDir dir;
  write_file(dir / "a.bin", pattern_bytes(8192));
  const DirectReader reader = DirectReader::open(dir / "a.bin");
  EXPECT_TRUE(reader.unbuffered());
  EXPECT_GE(reader.alignment(), 512u);
  EXPECT_EQ(reader.alignment() & (reader.alignment() - 1), 0u);
  EXPECT_EQ(reader.size(), 8192u);
}

TEST(DirectReader, read_cover_returns_exact_bytes_of_unaligned_ranges_without_copying) {
  ScratchDir dir;
  const auto bytes = pattern_bytes(5 * 4096 + 333, 3);
  write_file(dir / "a.bin", bytes);
  const DirectReader reader = DirectReader::open(dir / "a.bin");
  const std::size_t a = reader.alignment();
  AlignedBuffer buffer(reader.cover_size(0, bytes.size()) + a, a);
  std::mt19937 rng(42);
  for (int i = 0; i < 300; ++i) {
    const std::uint64_t offset = rng() % bytes.size();
    const std::uint64_t length = rng() % (bytes.size() - offset + 1);
    const auto got = reader.read_cover(offset, length, buffer.span());
    ASSERT_EQ(got.size(), length);
    ASSERT_GE(got.data(), buffer.data());
    ASSERT_LT(static_cast<std::size_t>(got.data() - buffer.data()), a);
    ASSERT_EQ(0, std::memcmp(got.data(), bytes.data() + offset, length))
        << "offset " << offset << " length " << length;
  }
}

TEST(DirectReader, read_fills_destinations_of_any_alignment) {
  ScratchDir dir;
  const auto bytes = pattern_bytes(3 * 4096 * 1024 + 77, 5);  // 12 MiB: beyond the bounce buffer
  write_file(dir / "a.bin", bytes);
  DirectReader reader = DirectReader::open(dir / "a.bin");
  std::vector<std::byte> out(bytes.size() + 16);
  std::mt19937 rng(7);
  for (int i = 0; i < 40; ++i) {
    const std::size_t misalign = rng() % 16;
    const std::uint64_t offset = i == 0 ? 0 : rng() % bytes.size();
    const std::size_t length = i == 0 ? bytes.size() : rng() % (bytes.size() - offset + 1);
    std::span<std::byte> dst(out.data() + misalign, length);
    reader.read(offset, dst);
    ASSERT_EQ(0, std::memcmp(dst.data(), bytes.data() + offset, length))
        << "offset " << offset << " length " << length << " misalign " << misalign;
  }
}

TEST(DirectReader, the_longest_range_a_buffer_takes_has_a_cover_that_fits_it_exactly) {
  ScratchDir dir;
  write_file(dir / "a.bin", pattern_bytes(1 << 20));
  const DirectReader reader = DirectReader::open(dir / "a.bin");
  const std::size_t buffer = 16 * reader.alignment();
  for (std::uint64_t offset : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{4095},
                               std::uint64_t{4096 + 17}, std::uint64_t{300001}}) {
    const std::uint64_t length = reader.max_cover_length(offset, buffer);
    EXPECT_EQ(reader.cover_size(offset, length), buffer) << offset;
    EXPECT_GT(reader.cover_size(offset, length + 1), buffer) << offset;
  }
}

TEST(DirectReader, reads_larger_than_64_mib_are_split_and_complete) {
  ScratchDir dir;
  const std::size_t n = DirectReader::kMaxReadBytes + 3 * 4096 + 100;
  const auto bytes = pattern_bytes(n, 11);
  write_file(dir / "big.bin", bytes);
  const DirectReader reader = DirectReader::open(dir / "big.bin");
  AlignedBuffer buffer(reader.cover_size(0, n), reader.alignment());
  const auto got = reader.read_cover(0, n, buffer.span());
  ASSERT_EQ(got.size(), n);
  EXPECT_EQ(0, std::memcmp(got.data(), bytes.data(), n));
}

TEST(DirectReader, a_read_split_over_several_threads_stops_exactly_at_the_end_of_the_file) {
  // 16 MiB asked of a file of 9 MiB + 100 bytes: four parts read at once, the third short, the
  // fourth empty.
  ScratchDir dir;
  const std::size_t n = (9u << 20) + 100;
  const auto bytes = pattern_bytes(n, 13);
  write_file(dir / "a.bin", bytes);
  const DirectReader reader = DirectReader::open(dir / "a.bin");
  AlignedBuffer buffer(16u << 20, reader.alignment());
  EXPECT_EQ(reader.read_aligned(0, buffer.span()), n);
  EXPECT_EQ(0, std::memcmp(buffer.data(), bytes.data(), n));
  // And from threads at once, as several streamers would.
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      AlignedBuffer own(16u << 20, reader.alignment());
      if (reader.read_aligned(0, own.span()) != n || std::memcmp(own.data(), bytes.data(), n) != 0) {
        ++wrong;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(DirectReader, misaligned_requests_are_refused_before_the_os_sees_them) {
  // Wine performs misaligned FILE_FLAG_NO_BUFFERING reads that Windows fails with
  // ERROR_INVALID_PARAMETER (and Linux O_DIRECT with EINVAL): the check must be ours, so a
  // refused request leaves the buffer exactly as it was, on every platform.
  ScratchDir dir;
  const auto bytes = pattern_bytes(4 * 65536, 4);
  write_file(dir / "a.bin", bytes);
  const DirectReader reader = DirectReader::open(dir / "a.bin");
  const std::size_t a = reader.alignment();
  AlignedBuffer buffer(8 * a, a);
  std::memset(buffer.data(), 0x5a, buffer.size());
  const std::span<std::byte> whole = buffer.span();
  EXPECT_EQ(test::error_code_of([&] { (void)reader.read_aligned(0, whole.subspan(1, 2 * a)); }),
            ErrorCode::kBadArgument);  // buffer address
  EXPECT_EQ(test::error_code_of([&] { (void)reader.read_aligned(512 + 1, whole.first(2 * a)); }),
            ErrorCode::kBadArgument);  // file offset
  EXPECT_EQ(test::error_code_of([&] { (void)reader.read_aligned(0, whole.first(a + 512)); }),
            ErrorCode::kBadArgument);  // length
  EXPECT_TRUE(std::all_of(whole.begin(), whole.end(), [](std::byte b) { return b == std::byte{0x5a}; }))
      << "a refused request still read into the buffer";
  EXPECT_EQ(reader.read_aligned(a, whole.first(2 * a)), 2 * a);
  EXPECT_EQ(0, std::memcmp(buffer.data(), bytes.data() + a, 2 * a));
}

TEST(DirectReader, ranges_outside_the_file_and_short_buffers_are_refused) {
  ScratchDir dir;
  write_file(dir / "a.bin", pattern_bytes(10000));
  DirectReader reader = DirectReader::open(dir / "a.bin");
  AlignedBuffer buffer(reader.cover_size(0, 10000), reader.alignment());
  EXPECT_EQ(test::error_code_of([&] { (void)reader.read_cover(9000, 1001, buffer.span()); }),
            ErrorCode::kBadArgument);
  EXPECT_EQ(test::error_code_of([&] { (void)reader.read_cover(100, 5000, buffer.span().first(4096)); }),
            ErrorCode::kBadArgument);
  std::vector<std::byte> out(10);
  EXPECT_EQ(test::error_code_of([&] { reader.read(9995, out); }), ErrorCode::kBadArgument);
}

TEST(DirectReader, a_file_that_shrank_after_open_is_an_io_error) {
  ScratchDir dir;
  write_file(dir / "a.bin", pattern_bytes(64 * 1024));
  DirectReader reader = DirectReader::open(dir / "a.bin");
  std::string refused;
  ASSERT_TRUE(test::resize_file(dir / "a.bin", 10000, &refused)) << refused;
  AlignedBuffer buffer(reader.cover_size(0, 64 * 1024), reader.alignment());
  EXPECT_EQ(test::error_code_of([&] { (void)reader.read_cover(20000, 30000, buffer.span()); }),
            ErrorCode::kIo);
  std::vector<std::byte> out(30000);
  EXPECT_EQ(test::error_code_of([&] { reader.read(20000, out); }), ErrorCode::kIo);
  // What is still there reads fine.
  const auto head = reader.read_cover(100, 5000, buffer.span());
  EXPECT_EQ(0, std::memcmp(head.data(), pattern_bytes(64 * 1024).data() + 100, 5000));
}

TEST(DirectReader, missing_file_is_an_io_error) {
  ScratchDir dir;
  EXPECT_EQ(test::error_code_of([&] { (void)DirectReader::open(dir / "missing.bin"); }), ErrorCode::kIo);
}

}  // namespace
}  // namespace ferry::io
