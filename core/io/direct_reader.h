// Unbuffered positional reads of model files: Linux O_DIRECT + pread, Windows
// FILE_FLAG_NO_BUFFERING + ReadFile with OVERLAPPED offsets. The page cache is bypassed, so a
// streamed model does not push the rest of the machine out of RAM.
//
// Unbuffered I/O needs the buffer address, the file offset and the length aligned to the
// device's sector size (we use at least the page size). The checks are ours, made before every
// OS call: Wine accepts misaligned unbuffered reads that Windows rejects.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

#include "core/io/detail/os_file.h"
#include "core/memory/aligned_buffer.h"

namespace ferry::io {

class DirectReader {
 public:
  // The most one OS read call asks for.
  static constexpr std::size_t kMaxReadBytes = std::size_t{64} << 20;

  // Throws Error(kIo) when the file cannot be opened.
  static DirectReader open(const std::filesystem::path& path);

  DirectReader() = default;
  DirectReader(DirectReader&& other) noexcept;
  DirectReader& operator=(DirectReader&& other) noexcept;
  DirectReader(const DirectReader&) = delete;
  DirectReader& operator=(const DirectReader&) = delete;
  ~DirectReader();

  const std::filesystem::path& path() const { return path_; }
  std::uint64_t size() const { return handle_.size; }
  // Granularity of buffer addresses, offsets and lengths for unbuffered reads.
  std::size_t alignment() const { return handle_.alignment; }
  // False when the file system refused unbuffered I/O and reads go through the page cache.
  bool unbuffered() const { return handle_.unbuffered; }

  // Bytes a buffer needs to hold the aligned cover of [offset, offset + length).
  std::size_t cover_size(std::uint64_t offset, std::uint64_t length) const;
  // The longest range starting at `offset` whose cover fits a buffer of `buffer_bytes` (a
  // multiple of alignment()): what one staging slot can take of a tensor.
  std::uint64_t max_cover_length(std::uint64_t offset, std::size_t buffer_bytes) const {
    return buffer_bytes - offset % handle_.alignment;
  }

  // Reads the aligned cover of [offset, offset + length) into `buffer` (aligned address, at
  // least cover_size bytes) and returns the requested bytes inside it: no extra copy.
  // Throws kBadArgument for a misaligned or short buffer or a range outside the file, kIo when
  // the read fails or the file turns out shorter than it was.
  std::span<const std::byte> read_cover(std::uint64_t offset, std::uint64_t length,
                                        std::span<std::byte> buffer) const;

  // Reads exactly [offset, offset + dst.size()) into `dst`, which may have any alignment. The
  // unaligned head and tail (and a misaligned middle) go through a small internal bounce buffer.
  void read(std::uint64_t offset, std::span<std::byte> dst);

  // One aligned read, split into calls of at most kMaxReadBytes; returns the bytes read (short
  // only at the end of the file). The alignment of buffer, offset and length is checked here.
  std::size_t read_aligned(std::uint64_t offset, std::span<std::byte> buffer) const;

 private:
  void check_range(std::uint64_t offset, std::uint64_t length) const;

  std::filesystem::path path_;
  detail::DirectHandle handle_;
  memory::AlignedBuffer bounce_;
};

}  // namespace ferry::io
