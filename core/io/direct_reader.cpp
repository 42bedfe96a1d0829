#include "core/io/direct_reader.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.h"

namespace ferry::io {
namespace {

constexpr std::size_t kBounceBytes = std::size_t{4} << 20;
// Large aligned reads are split into parts read at the same time: one synchronous read in flight
// leaves an NVMe drive (or a virtual disk) mostly idle. Parts of at least kPartBytes, at most
// kParallelParts of them.
constexpr std::size_t kPartBytes = std::size_t{4} << 20;
constexpr std::size_t kParallelParts = 4;

// Reads [offset, offset + length) in calls of at most kMaxReadBytes; short only at end of file.
std::size_t read_all(const detail::DirectHandle& handle, std::uint64_t offset, std::byte* data,
                     std::size_t length, const std::filesystem::path& path) {
  std::size_t done = 0;
  while (done < length) {
    const std::size_t chunk = std::min(length - done, DirectReader::kMaxReadBytes);
    const std::size_t n = detail::read_direct(handle, offset + done, data + done, chunk, path);
    done += n;
    if (n < chunk) break;  // end of file
  }
  return done;
}

// A part of a split read, owned by the caller's stack frame until its latch is released.
struct PartRead {
  const detail::DirectHandle* handle = nullptr;
  const std::filesystem::path* path = nullptr;
  std::uint64_t offset = 0;
  std::byte* data = nullptr;
  std::size_t length = 0;
  std::size_t done = 0;
  std::exception_ptr error;
};

struct Latch {
  std::mutex mutex;
  std::condition_variable cv;
  std::size_t remaining = 0;
};

// The process's read workers: started on the first split read, then reused; jobs live in a
// fixed queue of pointers, so a read allocates nothing once they run.
class ReadWorkers {
 public:
  static ReadWorkers& instance() {
    static ReadWorkers workers;
    return workers;
  }

  // Queues parts (caller-owned) and returns; each releases `latch` when read. A full queue
  // runs the part on the caller's thread.
  void submit(PartRead* part, Latch* latch) {
    {
      std::lock_guard lock(mutex_);
      if (count_ < kQueue) {
        queue_[(head_ + count_) % kQueue] = {part, latch};
        ++count_;
        work_.notify_one();
        return;
      }
    }
    run(part, latch);
  }

 private:
  static constexpr std::size_t kQueue = 64;
  struct Item {
    PartRead* part;
    Latch* latch;
  };

  ReadWorkers() {
    for (auto& t : threads_) t = std::thread([this] { loop(); });
  }
  ~ReadWorkers() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    work_.notify_all();
    for (auto& t : threads_) t.join();
  }

  static void run(PartRead* part, Latch* latch) {
    try {
      part->done = read_all(*part->handle, part->offset, part->data, part->length, *part->path);
    } catch (...) {
      part->error = std::current_exception();
    }
    std::lock_guard lock(latch->mutex);
    if (--latch->remaining == 0) latch->cv.notify_all();
  }

  void loop() {
    for (;;) {
      Item item{};
      {
        std::unique_lock lock(mutex_);
        work_.wait(lock, [this] { return stop_ || count_ > 0; });
        if (count_ == 0) return;  // stopping
        item = queue_[head_];
        head_ = (head_ + 1) % kQueue;
        --count_;
      }
      run(item.part, item.latch);
    }
  }

  std::mutex mutex_;
  std::condition_variable work_;
  Item queue_[kQueue] = {};
  std::size_t head_ = 0;
  std::size_t count_ = 0;
  bool stop_ = false;
  std::thread threads_[kParallelParts - 1];
};

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
  const std::size_t parts = std::min(kParallelParts, buffer.size() / kPartBytes);
  if (parts < 2) return read_all(handle_, offset, buffer.data(), buffer.size(), path_);

  // Parts 1.. go to the workers, part 0 is read here; each part is a multiple of the alignment.
  const std::size_t part = (buffer.size() / parts + a - 1) / a * a;
  PartRead reads[kParallelParts];
  Latch latch;
  latch.remaining = parts - 1;
  for (std::size_t i = 0; i < parts; ++i) {
    const std::size_t begin = std::min(buffer.size(), i * part);
    reads[i] = PartRead{&handle_, &path_, offset + begin, buffer.data() + begin,
                        std::min(part, buffer.size() - begin), 0, nullptr};
  }
  for (std::size_t i = 1; i < parts; ++i) ReadWorkers::instance().submit(&reads[i], &latch);
  std::exception_ptr first_error;
  try {
    reads[0].done = read_all(handle_, reads[0].offset, reads[0].data, reads[0].length, path_);
  } catch (...) {
    first_error = std::current_exception();
  }
  {
    std::unique_lock lock(latch.mutex);
    latch.cv.wait(lock, [&] { return latch.remaining == 0; });
  }
  for (std::size_t i = 1; i < parts && !first_error; ++i) first_error = reads[i].error;
  if (first_error) std::rethrow_exception(first_error);
  // The bytes read are the parts' prefix up to the first short one (the end of the file).
  std::size_t done = 0;
  for (std::size_t i = 0; i < parts; ++i) {
    done += reads[i].done;
    if (reads[i].done < reads[i].length) break;
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
