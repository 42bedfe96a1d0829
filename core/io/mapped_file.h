// Read-only memory mappings of model files, with explicit view lifetimes.
//
// A MappedView is a lease on a byte range of a MappedFile: its bytes are valid exactly while the
// view lives, and nothing can unmap them early. The file refuses to close while leases exist
// (close() throws ErrorCode::kBusy); destroying a MappedFile object under live leases only drops
// the object's share, and the OS handles close when the last lease ends. There is no re-open, no
// flush and no copy-on-write: every mapping is PAGE_READONLY / PROT_READ + MAP_SHARED.
//
// Platform code: os_file_posix.cpp (mmap) and os_file_win32.cpp (CreateFileMappingW).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>

namespace ferry::io {

class MappedView;

class MappedFile {
 public:
  // Opens `path` for mapping. Throws Error: kIo when the OS refuses (missing file, no access).
  static MappedFile open(const std::filesystem::path& path);

  MappedFile() = default;
  MappedFile(MappedFile&&) noexcept = default;
  MappedFile& operator=(MappedFile&& other);  // closes this file first: kBusy under leases
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  bool is_open() const { return state_ != nullptr; }
  const std::filesystem::path& path() const;
  std::uint64_t size() const;

  // Maps [offset, offset + length). The OS mapping starts at `offset` rounded down to the
  // allocation granularity; the view hides that. Throws kBadArgument for a range outside the
  // file, kIo when the OS call fails. A zero-length range gives an empty, valid view.
  MappedView map(std::uint64_t offset, std::uint64_t length) const;

  // The number of views of this file alive right now.
  std::size_t live_views() const;

  // Closes the file. Throws kBusy while views are alive, and leaves the file open.
  void close();

  // Mapping offsets are rounded down to this (64 KiB on Windows, the page size on POSIX).
  static std::size_t granularity();

  struct State;

 private:
  explicit MappedFile(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

class MappedView {
 public:
  MappedView() = default;
  MappedView(MappedView&& other) noexcept;
  MappedView& operator=(MappedView&& other) noexcept;
  MappedView(const MappedView&) = delete;
  MappedView& operator=(const MappedView&) = delete;
  ~MappedView() { release(); }

  // The file offset and length this view covers.
  std::uint64_t offset() const { return offset_; }
  std::uint64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // The mapped bytes; valid only while this view lives. Reading them directly can fault if the
  // file shrinks underneath: prefer copy_to, which turns such a fault into an Error.
  std::span<const std::byte> bytes() const { return {data_, static_cast<std::size_t>(size_)}; }

  // Copies view bytes [offset, offset + dst.size()) to dst. A read error from the file (truncated
  // after open, drive gone: SIGBUS / EXCEPTION_IN_PAGE_ERROR) throws Error(kIo), never crashes.
  void copy_to(std::uint64_t offset, std::span<std::byte> dst) const;

  // Asks the OS to start reading the view's pages (madvise WILLNEED / PrefetchVirtualMemory).
  void prefetch() const noexcept;

  // Drops the view's pages from this process's resident set while keeping the lease (madvise
  // DONTNEED / VirtualUnlock); touching them again reads them back from the page cache or disk.
  void evict() const noexcept { evict(0, size_); }
  // The same for view bytes [offset, offset + length), shrunk to the whole pages inside it (so
  // bytes next to the range stay resident): a copy can drop what it has copied as it goes.
  void evict(std::uint64_t offset, std::uint64_t length) const noexcept;

  // Ends the lease now; the view becomes empty. Idempotent.
  void release() noexcept;

 private:
  friend class MappedFile;
  std::shared_ptr<MappedFile::State> file_;
  void* region_ = nullptr;  // what the OS mapped (offset rounded down)
  std::size_t region_size_ = 0;
  const std::byte* data_ = nullptr;
  std::uint64_t offset_ = 0;
  std::uint64_t size_ = 0;
};

}  // namespace ferry::io
