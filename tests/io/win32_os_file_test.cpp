// Windows-only behaviour of the mapped-file and direct-read code: the 64 KiB mapping granularity,
// our alignment checks in front of FILE_FLAG_NO_BUFFERING (Wine would accept what Windows
// rejects), wide paths, Windows refusing to shrink a mapped file, and the
// EXCEPTION_IN_PAGE_ERROR guard behind MappedView::copy_to.
#ifdef _WIN32

#include <gtest/gtest.h>
#include <windows.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/io/direct_reader.h"
#include "core/io/mapped_file.h"
#include "core/memory/aligned_buffer.h"
#include "tests/io/in_page_error_injector.h"
#include "tests/test_support.h"

namespace ferry::io {
namespace {

using memory::AlignedBuffer;
using test::error_code_of;
using test::InPageErrorInjector;
using test::pattern_bytes;
using test::ScratchDir;
using test::write_file;

std::size_t page_size() {
  SYSTEM_INFO info;
  GetSystemInfo(&info);
  return info.dwPageSize;
}

// ---- mappings ----

TEST(Win32MappedFile, granularity_is_the_allocation_granularity_not_the_page_size) {
  SYSTEM_INFO info;
  GetSystemInfo(&info);
  EXPECT_EQ(MappedFile::granularity(), info.dwAllocationGranularity);
  EXPECT_EQ(MappedFile::granularity(), 64u * 1024);
  EXPECT_GT(MappedFile::granularity(), page_size());
}

TEST(Win32MappedFile, views_at_page_aligned_but_not_granule_aligned_offsets_read_right_bytes) {
  // MapViewOfFile rejects offsets that are page-aligned but not 64 KiB-aligned
  // (ERROR_MAPPED_ALIGNMENT); the view must hide the rounding down.
  ScratchDir dir;
  const std::size_t g = MappedFile::granularity();
  const auto bytes = pattern_bytes(4 * g + 100, 11);
  write_file(dir / "a.bin", bytes);
  const MappedFile file = MappedFile::open(dir / "a.bin");
  const std::size_t p = page_size();
  for (std::uint64_t offset : {std::uint64_t{p}, std::uint64_t{g - p}, std::uint64_t{g + 3 * p + 1},
                               std::uint64_t{3 * g + g / 2}, std::uint64_t{4 * g}}) {
    const std::uint64_t length = std::min<std::uint64_t>(g + 17, bytes.size() - offset);
    const MappedView view = file.map(offset, length);
    ASSERT_EQ(0, std::memcmp(view.bytes().data(), bytes.data() + offset, length))
        << "offset " << offset;
    // The OS mapping starts at the granule below the offset.
    const auto address = reinterpret_cast<std::uintptr_t>(view.bytes().data());
    EXPECT_EQ(address % g, offset % g) << "offset " << offset;
  }
}

// ---- wide paths ----

TEST(Win32Paths, a_non_ascii_path_opens_for_mapping_and_for_direct_reads) {
  ScratchDir dir;
  const std::filesystem::path path = dir.path() / L"\u6a21\u578b-\u00fc.safetensors";  // 模型-ü
  const auto bytes = pattern_bytes(3 * 4096 + 5, 21);
  write_file(path, bytes);
  ASSERT_NE(GetFileAttributesW(path.c_str()), INVALID_FILE_ATTRIBUTES);

  const MappedFile file = MappedFile::open(path);
  const MappedView view = file.map(0, bytes.size());
  EXPECT_EQ(0, std::memcmp(view.bytes().data(), bytes.data(), bytes.size()));

  DirectReader reader = DirectReader::open(path);
  std::vector<std::byte> out(bytes.size());
  reader.read(0, out);
  EXPECT_EQ(out, bytes);
}

TEST(Win32Paths, errors_name_a_missing_wide_path_in_utf8) {
  ScratchDir dir;
  const std::filesystem::path path = dir.path() / L"\u6a21\u578b-missing.safetensors";
  try {
    (void)MappedFile::open(path);
    FAIL() << "opening a missing file succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(e.what()).find("\xe6\xa8\xa1\xe5\x9e\x8b-missing"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("(error 2)"), std::string::npos) << e.what();
  }
}

// ---- unbuffered reads ----

TEST(Win32DirectReader, reads_past_the_end_come_back_short_not_as_errors) {
  // ReadFile at or beyond the end of an unbuffered file fails with ERROR_HANDLE_EOF or returns
  // the bytes up to the end; either is a short read.
  ScratchDir dir;
  const auto bytes = pattern_bytes(3 * 4096 + 10, 8);
  write_file(dir / "a.bin", bytes);
  const DirectReader reader = DirectReader::open(dir / "a.bin");
  const std::size_t a = reader.alignment();
  AlignedBuffer buffer(8 * a, a);
  const std::size_t got = reader.read_aligned(0, buffer.span());
  EXPECT_EQ(got, bytes.size());
  EXPECT_EQ(0, std::memcmp(buffer.data(), bytes.data(), bytes.size()));
  const std::uint64_t beyond = (bytes.size() + a - 1) / a * a;
  EXPECT_EQ(reader.read_aligned(beyond, buffer.span().first(a)), 0u);
}

// ---- shrinking a mapped file, and the in-page-error guard ----

// A second handle that may change the file's length, as another program would open it.
class Shrinker {
 public:
  explicit Shrinker(const std::filesystem::path& path)
      : handle_(CreateFileW(path.c_str(), GENERIC_WRITE,
                            FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr,
                            OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr)) {}
  ~Shrinker() {
    if (handle_ != INVALID_HANDLE_VALUE) CloseHandle(handle_);
  }
  bool opened() const { return handle_ != INVALID_HANDLE_VALUE; }
  // Returns 0 on success, else GetLastError().
  DWORD set_length(std::uint64_t size) {
    FILE_END_OF_FILE_INFO info{};
    info.EndOfFile.QuadPart = static_cast<LONGLONG>(size);
    return SetFileInformationByHandle(handle_, FileEndOfFileInfo, &info, sizeof info)
               ? 0
               : GetLastError();
  }

 private:
  HANDLE handle_;
};

TEST(Win32MappedFile, the_os_refuses_to_shrink_a_file_while_a_view_of_it_is_mapped) {
  // Both Windows and Wine answer ERROR_USER_MAPPED_FILE, so on Windows a lease can never lose
  // its pages to a shrinking file; the in-page-error guard is for I/O failures (network drives,
  // removed disks). The file may shrink once the views and the mapping are gone.
  ScratchDir dir;
  const std::size_t g = MappedFile::granularity();
  const auto bytes = pattern_bytes(4 * g, 13);
  write_file(dir / "model.safetensors", bytes);
  MappedFile file = MappedFile::open(dir / "model.safetensors");
  MappedView view = file.map(g, 2 * g);

  Shrinker other(dir / "model.safetensors");
  ASSERT_TRUE(other.opened()) << "our handles must share write access; error " << GetLastError();
  EXPECT_EQ(other.set_length(g / 2), static_cast<DWORD>(ERROR_USER_MAPPED_FILE));
  std::vector<std::byte> out(2 * g);
  view.copy_to(0, out);
  EXPECT_EQ(0, std::memcmp(out.data(), bytes.data() + g, out.size()));

  view.release();
  file.close();
  EXPECT_EQ(other.set_length(g / 2), 0u);
  EXPECT_EQ(std::filesystem::file_size(dir / "model.safetensors"), g / 2);
}

TEST(Win32MappedFile,
     an_in_page_error_while_copying_becomes_an_io_error_and_the_view_stays_usable) {
  ScratchDir dir;
  const std::size_t g = MappedFile::granularity();
  const std::size_t p = page_size();
  const auto bytes = pattern_bytes(2 * g, 17);
  write_file(dir / "model.safetensors", bytes);
  const MappedFile file = MappedFile::open(dir / "model.safetensors");
  const MappedView view = file.map(0, 2 * g);
  std::vector<std::byte> out(2 * g);
  view.copy_to(0, out);  // installs the guard's handler before the injector's goes in front

  {
    InPageErrorInjector injector(view.bytes().data() + 5 * p, p);
    ASSERT_TRUE(injector.ok());
    try {
      view.copy_to(0, out);
      FAIL() << "copying over an unreadable page succeeded";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kIo);
      EXPECT_NE(std::string(e.what()).find("model.safetensors"), std::string::npos) << e.what();
    }
    EXPECT_EQ(injector.translated(), 1);
    // Pages before the bad one copy fine; the guard catches the next fault again.
    std::vector<std::byte> head(4 * p);
    view.copy_to(0, head);
    EXPECT_EQ(0, std::memcmp(head.data(), bytes.data(), head.size()));
    EXPECT_EQ(error_code_of([&] { view.copy_to(5 * p + 100, head); }), ErrorCode::kIo);
    EXPECT_EQ(injector.translated(), 2);
  }
  // Readable again: the copy works and the bytes are the file's.
  std::fill(out.begin(), out.end(), std::byte{0});
  view.copy_to(0, out);
  EXPECT_EQ(out, bytes);
}

TEST(Win32MappedFile, in_page_errors_are_caught_on_each_copying_thread_independently) {
  ScratchDir dir;
  const std::size_t g = MappedFile::granularity();
  const std::size_t p = page_size();
  const auto bytes = pattern_bytes(2 * g, 19);
  write_file(dir / "model.safetensors", bytes);
  const MappedFile file = MappedFile::open(dir / "model.safetensors");
  const MappedView bad = file.map(0, g);
  const MappedView good = file.map(g, g);
  std::vector<std::byte> warm(p);
  bad.copy_to(0, warm);

  InPageErrorInjector injector(bad.bytes().data() + 2 * p, p);
  ASSERT_TRUE(injector.ok());
  std::atomic<int> io_errors{0};
  std::atomic<int> good_copies{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::byte> out(g);
      for (int i = 0; i < 50; ++i) {
        if (t % 2 == 0) {
          try {
            bad.copy_to(0, out);
          } catch (const Error& e) {
            if (e.code() == ErrorCode::kIo) ++io_errors;
          }
        } else {
          good.copy_to(0, out);
          if (std::memcmp(out.data(), bytes.data() + g, g) == 0) ++good_copies;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(io_errors.load(), 100);
  EXPECT_EQ(good_copies.load(), 100);
}

// The guard takes only in-page errors: an access violation in the same range is left to the
// next handler. Here a handler behind ours makes the page readable again and resumes the copy.
struct RepairingHandler {
  static inline void* page = nullptr;
  static inline std::size_t length = 0;
  static inline std::atomic<DWORD> seen{0};
  static LONG CALLBACK repair(EXCEPTION_POINTERS* pointers) {
    const EXCEPTION_RECORD* record = pointers->ExceptionRecord;
    const auto begin = reinterpret_cast<std::uintptr_t>(page);
    if (record->NumberParameters >= 2 && record->ExceptionInformation[1] >= begin &&
        record->ExceptionInformation[1] < begin + length) {
      seen = record->ExceptionCode;
      DWORD old = 0;
      VirtualProtect(page, length, PAGE_READONLY, &old);
      return EXCEPTION_CONTINUE_EXECUTION;
    }
    return EXCEPTION_CONTINUE_SEARCH;
  }
};

TEST(Win32MappedFile, other_faults_in_a_copy_pass_through_the_guard) {
  ScratchDir dir;
  const std::size_t g = MappedFile::granularity();
  const std::size_t p = page_size();
  const auto bytes = pattern_bytes(g, 23);
  write_file(dir / "model.safetensors", bytes);
  const MappedFile file = MappedFile::open(dir / "model.safetensors");
  const MappedView view = file.map(0, g);
  std::vector<std::byte> out(g);
  view.copy_to(0, out);

  RepairingHandler::page = const_cast<std::byte*>(view.bytes().data()) + 3 * p;
  RepairingHandler::length = p;
  RepairingHandler::seen = 0;
  void* handler = AddVectoredExceptionHandler(0, &RepairingHandler::repair);  // last in line
  ASSERT_NE(handler, nullptr);
  DWORD old = 0;
  ASSERT_TRUE(VirtualProtect(RepairingHandler::page, p, PAGE_NOACCESS, &old));
  std::fill(out.begin(), out.end(), std::byte{0});
  view.copy_to(0, out);  // faults once, repaired by the handler behind the guard's
  RemoveVectoredExceptionHandler(handler);
  EXPECT_EQ(RepairingHandler::seen.load(), static_cast<DWORD>(EXCEPTION_ACCESS_VIOLATION));
  EXPECT_EQ(out, bytes);
}

}  // namespace
}  // namespace ferry::io

#endif  // _WIN32
