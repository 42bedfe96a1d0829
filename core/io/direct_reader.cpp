#include "core/io/direct_reader.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "core/error.h"

namespace ferry::io {
namespace {

constexpr std::size_t kBounceBytes = std::size_t{4} << 20;

std::uint64_t align_down(std::uint64_t value, std::uint64_t alignment) {
  return value - value % alignment;
}

std::uint64_t align_up(std::uint64_t value, std::uint64_t alignment) {
  return align_down(value + alignment - 1, alignment);
}

}  // namespace

DirectReader DirectReader::open(const std::filesystem::path& path) {
  DirectReader reader;
  reader.path_ = path;
  reader.handle_ = detail::open_direct(path);
  return reader;
}

DirectReader::DirectReader(DirectReader&& other) noexcept
    : path_(std::move(other.path_)),
      handle_(std::exchange(other.handle_, detail::DirectHandle{})),
      bounce_(std::move(other.bounce_)) {}

DirectReader& DirectReader::operator=(DirectReader&& other) noexcept {
  if (this != &other) {
    detail::close_direct(handle_);
    path_ = std::move(other.path_);
    handle_ = std::exchange(other.handle_, detail::DirectHandle{});
    bounce_ = std::move(other.bounce_);
  }
  return *this;
}

DirectReader::~DirectReader() { detail::close_direct(handle_); }

void DirectReader::check_range(std::uint64_t offset, std::uint64_t length) const {
  if (offset > handle_.size || length > handle_.size - offset) {
    throw Error(ErrorCode::kBadArgument,
                "byte range " + std::to_string(offset) + "+" + std::to_string(length) +
                    " lies outside " + detail::display(path_) + " (" +
                    std::to_string(handle_.size) + " bytes)");
  }
}

std::size_t DirectReader::cover_size(std::uint64_t offset, std::uint64_t length) const {
  const std::uint64_t a = handle_.alignment;
  return static_cast<std::size_t>(align_up(offset + length, a) - align_down(offset, a));
}

std::size_t DirectReader::read_aligned(std::uint64_t offset, std::span<std::byte> buffer) const {
  const std::size_t a = handle_.alignment;
  const auto address = reinterpret_cast<std::uintptr_t>(buffer.data());
  if (address % a != 0 || offset % a != 0 || buffer.size() % a != 0) {
    throw Error(ErrorCode::kBadArgument,
                "unbuffered read of " + detail::display(path_) + " is not aligned to " +
                    std::to_string(a) + " bytes (buffer address % " + std::to_string(a) + " = " +
                    std::to_string(address % a) + ", offset % " + std::to_string(a) + " = " +
                    std::to_string(offset % a) + ", length % " + std::to_string(a) + " = " +
                    std::to_string(buffer.size() % a) + ")");
  }
  std::size_t done = 0;
  while (done < buffer.size()) {
    const std::size_t chunk = std::min(buffer.size() - done, kMaxReadBytes);
    const std::size_t n =
        detail::read_direct(handle_, offset + done, buffer.data() + done, chunk, path_);
    done += n;
    if (n < chunk) break;  // end of file
  }
  return done;
}

std::span<const std::byte> DirectReader::read_cover(std::uint64_t offset, std::uint64_t length,
                                                    std::span<std::byte> buffer) const {
  check_range(offset, length);
  const std::uint64_t start = align_down(offset, handle_.alignment);
  const std::size_t cover = cover_size(offset, length);
  if (buffer.size() < cover) {
    throw Error(ErrorCode::kBadArgument, "buffer of " + std::to_string(buffer.size()) +
                                             " bytes is too small for a cover of " +
                                             std::to_string(cover));
  }
  const std::size_t got = read_aligned(start, buffer.first(cover));
  const std::size_t head = static_cast<std::size_t>(offset - start);
  if (got < head + length) {
    throw Error(ErrorCode::kIo, "reading " + detail::display(path_) + ": the file ended at byte " +
                                    std::to_string(start + got) + ", before byte " +
                                    std::to_string(offset + length) +
                                    " (it shrank while in use)");
  }
  return std::span<const std::byte>(buffer.data() + head, static_cast<std::size_t>(length));
}

void DirectReader::read(std::uint64_t offset, std::span<std::byte> dst) {
  check_range(offset, dst.size());
  const std::size_t a = handle_.alignment;
  if (!bounce_.data()) bounce_ = memory::AlignedBuffer(std::max(kBounceBytes, a), a);

  std::uint64_t position = offset;
  const std::uint64_t end = offset + dst.size();
  while (position < end) {
    const std::uint64_t block = align_down(position, a);
    std::byte* out = dst.data() + (position - offset);
    const std::uint64_t aligned_run = align_down(end, a) > position ? align_down(end, a) - position : 0;
    if (position == block && reinterpret_cast<std::uintptr_t>(out) % a == 0 && aligned_run > 0) {
      // Aligned in the file and in memory: read straight into dst.
      const std::size_t got = read_aligned(position, {out, static_cast<std::size_t>(aligned_run)});
      if (got < aligned_run) {
        throw Error(ErrorCode::kIo, "reading " + detail::display(path_) +
                                        ": the file ended early (it shrank while in use)");
      }
      position += aligned_run;
      continue;
    }
    // Head, tail or a misaligned destination: go through the bounce buffer.
    const std::uint64_t want_end = std::min<std::uint64_t>(end, block + bounce_.size());
    const std::size_t span_bytes = static_cast<std::size_t>(align_up(want_end, a) - block);
    const std::size_t got = read_aligned(block, bounce_.span().first(span_bytes));
    if (block + got < want_end) {
      throw Error(ErrorCode::kIo, "reading " + detail::display(path_) +
                                      ": the file ended early (it shrank while in use)");
    }
    std::memcpy(out, bounce_.data() + (position - block),
                static_cast<std::size_t>(want_end - position));
    position = want_end;
  }
}

}  // namespace ferry::io
