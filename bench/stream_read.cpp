// stream_read: shows that the weight store reads at disk speed with bounded RAM.
//
// Every tensor of a Wan-sized safetensors file travels into the slots of one StagingRing, with
// the file dropped from the page cache before each run:
//   raw  plain buffered ::pread of the whole file in slot-sized chunks: the floor;
//   (a)  MappedView -> slot, one view of look-ahead (prefetch), each view released once copied
//        (and evicted from the resident set every --evict-mib while it is being copied);
//   (b)  DirectReader::read_cover straight into the slot (O_DIRECT, no extra copy).
// A consumer thread checksums each slot and signals the CpuFence the slot was retired with, as
// an upload on a copy stream would. Prints GB/s, the ratio to raw measured in the same pass and
// the peak RSS against the bound "ring + 64 MiB". Linux-only: posix_fadvise drops the cache,
// mincore checks that it did.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench/bench_support.h"
#include "core/error.h"
#include "core/io/direct_reader.h"
#include "core/io/mapped_file.h"
#include "core/io/tensor_file.h"
#include "core/io/safetensors_writer.h"
#include "core/memory/aligned_buffer.h"
#include "core/memory/fence.h"
#include "core/memory/process_memory.h"
#include "core/memory/staging_ring.h"

namespace fs = std::filesystem;
using ferry::Error;
using ferry::ErrorCode;
using ferry::bench::Clock;
using ferry::bench::median;

namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
// The RSS a method may use beyond the ring.
constexpr std::uint64_t kRssAllowance = 64 * kMiB;
constexpr double kTargetRatio = 0.9;
// The checksum samples one byte at every file offset that is a multiple of this.
constexpr std::uint64_t kSampleStride = 4096;

struct Options {
  fs::path file = "bench-data/stream_read.safetensors";
  double size_gib = 4;
  std::size_t slot_mib = 64;
  std::size_t slots = 4;
  int passes = 3;
  // (a) copies each view in windows of this many MiB and evicts the view's pages after each, so
  // at most one window of the mapping is resident; 0 copies the whole view, then releases it.
  std::size_t evict_mib = 16;
  bool keep = false;
};

void print_usage() {
  std::printf(
      "usage: stream_read [--file PATH] [--size-gib N] [--slot-mib M] [--slots K] [--passes P] "
      "[--evict-mib W] [--keep]\n"
      "  --file PATH    the safetensors file (default bench-data/stream_read.safetensors);\n"
      "                 generated when missing or of the wrong size\n"
      "  --size-gib N   file size to generate, GiB (default 4)\n"
      "  --slot-mib M   staging slot size, MiB (default 64)\n"
      "  --slots K      staging slots (default 4)\n"
      "  --passes P     repeat every method P times, report medians (default 3)\n"
      "  --evict-mib W  (a): copy each view in W-MiB windows, evicting its pages after each\n"
      "                 (default 16; 0: copy the whole view, then release it)\n"
      "  --keep         keep the file this run generated (a file found in place is never "
      "deleted)\n");
}

std::optional<Options> parse_options(int argc, char** argv) {
  Options o;
  ferry::bench::Args args(argc, argv, print_usage);
  while (args.next()) {
    const std::string_view arg = args.option();
    auto number = [&](double low) {
      const std::string text = args.value();
      char* end = nullptr;
      const double v = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0' || !(v >= low)) {
        throw Error(ErrorCode::kBadArgument, std::string(arg) + ": bad value '" + text + "'");
      }
      return v;
    };
    if (arg == "--file") {
      o.file = args.value();
    } else if (arg == "--size-gib") {
      o.size_gib = number(0.01);
    } else if (arg == "--slot-mib") {
      o.slot_mib = static_cast<std::size_t>(number(1));
    } else if (arg == "--slots") {
      o.slots = static_cast<std::size_t>(number(1));
    } else if (arg == "--passes") {
      o.passes = static_cast<int>(number(1));
    } else if (arg == "--evict-mib") {
      o.evict_mib = static_cast<std::size_t>(number(0));
    } else if (arg == "--keep") {
      o.keep = true;
    } else {
      args.unknown();
    }
  }
  if (args.help_asked()) return std::nullopt;
  return o;
}

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// ---- the test file ----

// Blocks of the Wan 2.2 TI2V-5B DiT (D = 3072, F = 14336; 312 MiB a block in bf16), repeated
// until the data reaches `target_bytes`.
std::vector<ferry::io::TensorSpec> wan_like_tensors(std::uint64_t target_bytes) {
  constexpr std::uint64_t kD = 3072;
  constexpr std::uint64_t kF = 14336;
  struct Entry {
    const char* name;
    std::vector<std::uint64_t> shape;
  };
  // clang-format off
  const std::vector<Entry> block = {
      {"modulation", {1, 6, kD}},
      {"self_attn.q.weight", {kD, kD}},   {"self_attn.q.bias", {kD}},
      {"self_attn.k.weight", {kD, kD}},   {"self_attn.k.bias", {kD}},
      {"self_attn.v.weight", {kD, kD}},   {"self_attn.v.bias", {kD}},
      {"self_attn.o.weight", {kD, kD}},   {"self_attn.o.bias", {kD}},
      {"self_attn.norm_q.weight", {kD}},  {"self_attn.norm_k.weight", {kD}},
      {"norm3.weight", {kD}},             {"norm3.bias", {kD}},
      {"cross_attn.q.weight", {kD, kD}},  {"cross_attn.q.bias", {kD}},
      {"cross_attn.k.weight", {kD, kD}},  {"cross_attn.k.bias", {kD}},
      {"cross_attn.v.weight", {kD, kD}},  {"cross_attn.v.bias", {kD}},
      {"cross_attn.o.weight", {kD, kD}},  {"cross_attn.o.bias", {kD}},
      {"cross_attn.norm_q.weight", {kD}}, {"cross_attn.norm_k.weight", {kD}},
      {"ffn.0.weight", {kF, kD}},         {"ffn.0.bias", {kF}},
      {"ffn.2.weight", {kD, kF}},         {"ffn.2.bias", {kD}},
  };
  // clang-format on
  std::vector<ferry::io::TensorSpec> tensors;
  std::uint64_t total = 0;
  for (int b = 0; total < target_bytes; ++b) {
    for (const Entry& e : block) {
      if (total >= target_bytes) break;
      ferry::io::TensorSpec spec{"blocks." + std::to_string(b) + "." + e.name, ferry::DType::kBF16,
                                 e.shape};
      total += spec.bytes();
      tensors.push_back(std::move(spec));
    }
  }
  return tensors;
}

const std::map<std::string, std::string> kMetadata = {{"format", "pt"},
                                                      {"ferry_bench", "stream_read"}};

// The size write_safetensors gives these tensors: prefix, header padded to 8 bytes, data.
std::uint64_t expected_file_size(const std::vector<ferry::io::TensorSpec>& tensors) {
  const std::uint64_t header = ferry::io::safetensors_header_json(tensors, kMetadata).size();
  std::uint64_t size = 8 + header + (8 - (8 + header) % 8) % 8;
  for (const ferry::io::TensorSpec& t : tensors) size += t.bytes();
  return size;
}

// Cheap pseudo-random bytes (xorshift64, seeded per tensor and chunk).
void fill_pseudo_random(std::size_t index, std::uint64_t offset, std::span<std::byte> out) {
  std::uint64_t state = splitmix64((std::uint64_t{index} << 40) ^ offset) | 1;
  auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  std::size_t i = 0;
  for (; i + 8 <= out.size(); i += 8) {
    const std::uint64_t word = next();
    std::memcpy(out.data() + i, &word, 8);
  }
  for (; i < out.size(); ++i) out[i] = static_cast<std::byte>(next());
}

void fsync_path(const fs::path& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) throw ferry::posix_error(ErrorCode::kIo, "cannot open " + path.string(), errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw ferry::posix_error(ErrorCode::kIo, "fsync " + path.string(), err);
}

// Generates the file unless one of the expected size is in place; true when it generated it.
bool ensure_file(const fs::path& path, const std::vector<ferry::io::TensorSpec>& tensors) {
  const std::uint64_t want = expected_file_size(tensors);
  std::error_code ec;
  const std::uint64_t have = fs::file_size(path, ec);
  if (!ec && have == want) {
    std::printf("file: %s (found in place, %.3f GiB)\n", path.string().c_str(),
                static_cast<double>(have) / kGiB);
    return false;
  }
  ferry::bench::create_parent_directories(path);
  std::printf("file: %s: generating %.3f GiB (%zu tensors)...\n", path.string().c_str(),
              static_cast<double>(want) / kGiB, tensors.size());
  std::fflush(stdout);
  const auto t0 = Clock::now();
  ferry::io::write_safetensors(path, tensors, kMetadata, fill_pseudo_random);
  // Dirty pages cannot be dropped from the cache: put the data on disk first.
  fsync_path(path, O_RDONLY);
  fsync_path(path.has_parent_path() ? path.parent_path() : fs::path("."), O_RDONLY | O_DIRECTORY);
  const double s = ferry::bench::seconds_since(t0);
  std::printf("      written and fsynced in %.1f s (%.2f GB/s)\n", s, want / s / 1e9);
  return true;
}

// ---- the page cache ----

struct CacheState {
  bool advised = false;          // posix_fadvise(DONTNEED) returned 0
  double resident_percent = -1;  // pages of the file in the page cache (mincore); -1: unknown
};

double resident_percent(const ferry::io::MappedFile& file) {
  if (file.size() == 0) return 0;
  const ferry::io::MappedView view = file.map(0, file.size());
  const std::size_t page = ferry::memory::host_page_size();
  std::vector<unsigned char> pages((view.size() + page - 1) / page);
  // Offset 0: the view starts on a page boundary, as mincore needs.
  if (::mincore(const_cast<std::byte*>(view.bytes().data()), view.size(), pages.data()) != 0) {
    return -1;
  }
  std::size_t resident = 0;
  for (unsigned char p : pages) resident += p & 1u;
  return 100.0 * static_cast<double>(resident) / static_cast<double>(pages.size());
}

CacheState drop_from_page_cache(const ferry::io::MappedFile& file) {
  CacheState state;
  const int fd = ::open(file.path().c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    state.advised = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
    ::close(fd);
  }
  state.resident_percent = resident_percent(file);
  return state;
}

// The block device's queue settings, for reading the numbers (empty when not found).
std::string queue_settings(const fs::path& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return {};
  const std::string dev =
      "/sys/dev/block/" + std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
  std::string out;
  for (const char* key : {"read_ahead_kb", "max_sectors_kb", "nr_requests"}) {
    for (const std::string& dir : {dev + "/queue/", dev + "/../queue/"}) {
      std::ifstream in(dir + key);
      std::string v;
      if (in >> v) {
        out += std::string(out.empty() ? "" : ", ") + key + " " + v;
        break;
      }
    }
  }
  return out;
}

// ---- the ring pipeline ----

struct Chunk {
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

// Every tensor in slot-sized chunks. A chunk that starts inside an alignment block ends
// slot_bytes after the boundary below its start, so its aligned cover (DirectReader) or its
// mapping (MappedView, whose region starts at that boundary) still fits one slot.
std::vector<Chunk> tensor_chunks(const std::vector<ferry::io::TensorInfo>& tensors,
                                 std::uint64_t slot_bytes, std::uint64_t alignment) {
  std::vector<Chunk> chunks;
  for (const ferry::io::TensorInfo& t : tensors) {
    for (std::uint64_t offset = t.offset, end = t.offset + t.bytes; offset < end;) {
      const std::uint64_t length = std::min(end - offset, slot_bytes - offset % alignment);
      chunks.push_back({offset, length});
      offset += length;
    }
  }
  return chunks;
}

std::vector<Chunk> file_chunks(std::uint64_t file_size, std::uint64_t slot_bytes) {
  std::vector<Chunk> chunks;
  for (std::uint64_t offset = 0; offset < file_size; offset += slot_bytes) {
    chunks.push_back({offset, std::min(slot_bytes, file_size - offset)});
  }
  return chunks;
}

// One byte of every kSampleStride-aligned file offset inside the tensor data, mixed with its
// offset and summed: the same for any chunking of the same bytes.
std::uint64_t checksum(std::uint64_t file_offset, std::span<const std::byte> bytes,
                       std::uint64_t data_offset) {
  const std::uint64_t begin = std::max(file_offset, data_offset);
  std::uint64_t sum = 0;
  for (std::uint64_t p = (begin + kSampleStride - 1) / kSampleStride * kSampleStride;
       p < file_offset + bytes.size(); p += kSampleStride) {
    sum += splitmix64(p * 257 + std::to_integer<std::uint64_t>(bytes[p - file_offset]));
  }
  return sum;
}

// Stands in for the copy stream: takes filled slots in order, reads them (the checksum) and
// signals the fence each slot was retired with.
class Consumer {
 public:
  struct Item {
    std::uint64_t file_offset = 0;
    std::span<const std::byte> bytes;
    std::shared_ptr<ferry::memory::CpuFence> fence;  // nullptr: stop
  };

  explicit Consumer(std::uint64_t data_offset)
      : data_offset_(data_offset), thread_([this] { run(); }) {}
  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;
  ~Consumer() { finish(); }

  void push(Item item) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(item));
    }
    cv_.notify_one();
  }

  // Drains the queue, stops the thread and returns the checksum of everything it read.
  std::uint64_t finish() {
    if (thread_.joinable()) {
      push({});
      thread_.join();
    }
    return sum_;
  }

 private:
  void run() {
    for (;;) {
      Item item;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [this] { return !queue_.empty(); });
        item = std::move(queue_.front());
        queue_.pop_front();
      }
      if (!item.fence) return;
      sum_ += checksum(item.file_offset, item.bytes, data_offset_);
      item.fence->signal();
    }
  }

  std::uint64_t data_offset_;
  std::uint64_t sum_ = 0;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  std::thread thread_;
};

// Producer: acquires slots in ring order, has `fill(i, slot)` put chunk i in the slot (it
// returns where the chunk's bytes are), hands the slot to the consumer and retires it with the
// consumer's fence. Returns the checksum.
template <typename Fill>
std::uint64_t stream_through_ring(ferry::memory::StagingRing& ring,
                                  const std::vector<Chunk>& chunks, std::uint64_t data_offset,
                                  Fill&& fill) {
  Consumer consumer(data_offset);
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    ferry::memory::StagingRing::Lease slot = ring.lease();  // given back even if fill throws
    const std::span<const std::byte> bytes = fill(i, slot.bytes());
    auto fence = std::make_shared<ferry::memory::CpuFence>();
    consumer.push({chunks[i].offset, bytes, fence});
    slot.retire(fence);
  }
  return consumer.finish();
}

// ---- the methods ----

enum class Method { kRaw, kMapped, kDirect };
constexpr Method kMethods[] = {Method::kRaw, Method::kMapped, Method::kDirect};
constexpr std::size_t kMethodCount = std::size(kMethods);

const char* method_name(Method m) {
  switch (m) {
    case Method::kRaw:
      return "raw pread (floor)";
    case Method::kMapped:
      return "(a) MappedView->ring";
    case Method::kDirect:
      return "(b) DirectReader->ring";
  }
  return "?";
}

struct Bench {
  const ferry::io::TensorFile& file;
  const ferry::io::DirectReader& reader;
  ferry::memory::StagingRing& ring;
  std::vector<Chunk> raw_chunks;
  std::vector<Chunk> chunks;
  std::uint64_t tensor_bytes = 0;
  std::uint64_t evict_window = 0;  // (a): bytes copied between evictions; 0: no eviction
};

std::uint64_t read_raw(const Bench& b) {
  const int fd = ::open(b.file.path().c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw ferry::posix_error(ErrorCode::kIo, "cannot open " + b.file.path().string(), errno);
  }
  struct Closer {
    int handle;
    ~Closer() { ::close(handle); }
  } closer{fd};
  auto fill = [&](std::size_t i, std::span<std::byte> slot) {
    const Chunk& c = b.raw_chunks[i];
    for (std::uint64_t done = 0; done < c.length;) {
      const ssize_t n =
          ::pread(fd, slot.data() + done, c.length - done, static_cast<off_t>(c.offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw ferry::posix_error(ErrorCode::kIo, "pread", n < 0 ? errno : EIO);
      done += static_cast<std::uint64_t>(n);
    }
    return std::span<const std::byte>(slot.first(c.length));
  };
  return stream_through_ring(b.ring, b.raw_chunks, b.file.data_offset(), fill);
}

std::uint64_t read_mapped(const Bench& b) {
  const ferry::io::MappedFile& mapped = b.file.mapped_file();
  auto map = [&](std::size_t i) {
    ferry::io::MappedView view = mapped.map(b.chunks[i].offset, b.chunks[i].length);
    view.prefetch();
    return view;
  };
  ferry::io::MappedView next;
  if (!b.chunks.empty()) next = map(0);
  auto fill = [&](std::size_t i, std::span<std::byte> slot) {
    ferry::io::MappedView current = std::move(next);
    // One chunk of look-ahead: at most two views live, the next one being read ahead.
    if (i + 1 < b.chunks.size()) next = map(i + 1);
    const std::size_t n = static_cast<std::size_t>(current.size());
    const std::size_t window = b.evict_window == 0 ? n : static_cast<std::size_t>(b.evict_window);
    for (std::size_t done = 0; done < n; done += window) {
      const std::size_t len = std::min(window, n - done);
      current.copy_to(done, slot.subspan(done, len));
      // The copied pages leave our resident set; the page cache keeps them.
      if (len < n) current.evict(done, len);
    }
    current.release();  // the lease ends as soon as its bytes are copied
    return std::span<const std::byte>(slot.first(n));
  };
  return stream_through_ring(b.ring, b.chunks, b.file.data_offset(), fill);
}

std::uint64_t read_direct(const Bench& b) {
  auto fill = [&](std::size_t i, std::span<std::byte> slot) {
    return b.reader.read_cover(b.chunks[i].offset, b.chunks[i].length, slot);
  };
  return stream_through_ring(b.ring, b.chunks, b.file.data_offset(), fill);
}

// Follows the process's resident set while a method runs, in case VmHWM cannot be reset.
class RssSampler {
 public:
  RssSampler()
      : thread_([this](std::stop_token stop) {
          while (!stop.stop_requested()) {
            sample();
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
          }
        }) {}

  void stop() {
    thread_.request_stop();
    thread_.join();
    sample();
  }
  std::uint64_t peak() const { return peak_.load(); }
  std::uint64_t peak_file() const { return peak_file_.load(); }

 private:
  void sample() {
    const ferry::memory::ProcessMemory m = ferry::memory::sample_process_memory();
    peak_.store(std::max(peak_.load(), m.resident_bytes));
    peak_file_.store(std::max(peak_file_.load(), m.resident_file_bytes));
  }

  std::atomic<std::uint64_t> peak_{0};
  std::atomic<std::uint64_t> peak_file_{0};
  std::jthread thread_;
};

struct Measurement {
  CacheState cache;
  double seconds = 0;
  double cpu_seconds = 0;  // user + system time of the whole process while the method ran
  std::uint64_t bytes = 0;
  std::uint64_t checksum = 0;
  std::uint64_t peak_rss = 0;       // max(VmHWM since reset, sampled VmRSS)
  std::uint64_t peak_file_rss = 0;  // sampled RssFile: mapped file pages
  bool hwm_reset = false;

  double gbps() const { return static_cast<double>(bytes) / seconds / 1e9; }
};

double process_cpu_seconds() {
  struct rusage u {};
  ::getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

Measurement measure(const Bench& b, Method method) {
  Measurement m;
  m.cache = drop_from_page_cache(b.file.mapped_file());
  m.hwm_reset = ferry::memory::reset_peak_resident();
  RssSampler sampler;
  const double cpu0 = process_cpu_seconds();
  const auto t0 = Clock::now();
  switch (method) {
    case Method::kRaw:
      m.checksum = read_raw(b);
      m.bytes = b.file.file_size();
      break;
    case Method::kMapped:
      m.checksum = read_mapped(b);
      m.bytes = b.tensor_bytes;
      break;
    case Method::kDirect:
      m.checksum = read_direct(b);
      m.bytes = b.tensor_bytes;
      break;
  }
  m.seconds = ferry::bench::seconds_since(t0);
  m.cpu_seconds = process_cpu_seconds() - cpu0;
  sampler.stop();
  const ferry::memory::ProcessMemory after = ferry::memory::sample_process_memory();
  m.peak_rss = std::max(m.hwm_reset ? after.peak_resident_bytes : 0, sampler.peak());
  m.peak_file_rss = sampler.peak_file();
  return m;
}

double mib(std::uint64_t bytes) { return static_cast<double>(bytes) / kMiB; }

std::string cache_text(const CacheState& c) {
  char text[64];
  if (c.resident_percent < 0) {
    std::snprintf(text, sizeof text, "%s, mincore failed", c.advised ? "dropped" : "NOT dropped");
  } else {
    std::snprintf(text, sizeof text, "%5.1f %% resident%s", c.resident_percent,
                  c.advised ? "" : "!");
  }
  return text;
}

int run(const Options& o) {
  const std::vector<ferry::io::TensorSpec> specs =
      wan_like_tensors(static_cast<std::uint64_t>(o.size_gib * static_cast<double>(kGiB)));
  const bool generated = ensure_file(o.file, specs);
  const ferry::bench::ScratchFile scratch(o.file, !generated || o.keep,
                                          ferry::bench::ScratchFile::Report::kPrinted);

  const ferry::memory::ProcessMemory before_ring = ferry::memory::sample_process_memory();
  const ferry::io::TensorFile file = ferry::io::TensorFile::open(o.file);
  const ferry::io::DirectReader reader = ferry::io::DirectReader::open(o.file);
  ferry::memory::StagingRing ring(o.slots, o.slot_mib * kMiB);

  const std::uint64_t alignment =
      std::max<std::uint64_t>(reader.alignment(), ferry::io::MappedFile::granularity());
  if (ring.slot_bytes() % alignment != 0) {
    throw Error(ErrorCode::kBadArgument,
                "the slot size must be a multiple of " + std::to_string(alignment) + " bytes");
  }
  Bench b{file,
          reader,
          ring,
          file_chunks(file.file_size(), ring.slot_bytes()),
          tensor_chunks(file.tensors(), ring.slot_bytes(), alignment),
          0,
          o.evict_mib * kMiB};
  for (const ferry::io::TensorInfo& t : file.tensors()) b.tensor_bytes += t.bytes;

  // Touch every slot once, through the ring, so no method pays the first-touch faults.
  for (std::size_t i = 0; i < ring.slot_count(); ++i) {
    const std::size_t slot = ring.acquire();
    std::memset(ring.slot(slot).data(), 0, ring.slot(slot).size());
    ring.retire(slot, nullptr);
  }

  const std::uint64_t bound = ring.total_bytes() + kRssAllowance;
  const std::string queue = queue_settings(o.file);
  std::printf(
      "file size: %.3f GiB (%llu bytes), %zu tensors (%.3f GiB of tensor data), "
      "%zu chunks of up to %zu MiB\n",
      static_cast<double>(file.file_size()) / kGiB,
      static_cast<unsigned long long>(file.file_size()), file.tensors().size(),
      static_cast<double>(b.tensor_bytes) / kGiB, b.chunks.size(), o.slot_mib);
  std::printf("ring: %zu slots x %.0f MiB = %.0f MiB (%s); RSS bound = ring + 64 MiB = %.0f MiB\n",
              ring.slot_count(), mib(ring.slot_bytes()), mib(ring.total_bytes()),
              ring.pinned() ? "pinned" : "pageable", mib(bound));
  std::printf("process RSS before opening the file and the ring: %.1f MiB\n",
              mib(before_ring.resident_bytes));
  std::printf("direct reader: %s, alignment %zu bytes%s%s\n",
              reader.unbuffered() ? "O_DIRECT" : "buffered (O_DIRECT refused)", reader.alignment(),
              queue.empty() ? "" : "; block queue: ", queue.c_str());
  std::printf(
      "page cache: dropped before every run with posix_fadvise(DONTNEED); "
      "'cache before' is what mincore then finds resident\n");
  if (o.evict_mib == 0) {
    std::printf("(a): each view copied whole, then released\n");
  } else {
    std::printf("(a): each view copied in %zu MiB windows, its pages evicted after each window\n",
                o.evict_mib);
  }

  std::vector<std::vector<Measurement>> results(kMethodCount);
  std::optional<std::uint64_t> reference_sum;
  bool sums_match = true;
  for (int pass = 0; pass < o.passes; ++pass) {
    // The starting method rotates from pass to pass, so load from other processes that comes
    // and goes does not always fall on the same method.
    std::vector<Measurement> pass_results(kMethodCount);
    for (std::size_t j = 0; j < kMethodCount; ++j) {
      const std::size_t k = (static_cast<std::size_t>(pass) + j) % kMethodCount;
      pass_results[k] = measure(b, kMethods[k]);
    }
    std::printf("\npass %d/%d (run order: %s first)\n", pass + 1, o.passes,
                method_name(kMethods[static_cast<std::size_t>(pass) % kMethodCount]));
    std::printf("  %-24s %-17s %7s %7s %6s %6s %9s %9s %7s  %s\n", "method", "cache before",
                "seconds", "cpu s", "GB/s", "ratio", "peak RSS", "file RSS", "bound", "checksum");
    const double raw_gbps = pass_results[0].gbps();
    for (std::size_t k = 0; k < kMethodCount; ++k) {
      const Measurement& m = pass_results[k];
      if (!reference_sum) reference_sum = m.checksum;
      const bool match = m.checksum == *reference_sum;
      sums_match = sums_match && match;
      std::printf("  %-24s %-17s %7.2f %7.2f %6.3f %6.3f %5.0f MiB %5.0f MiB %7s  %016llx%s%s\n",
                  method_name(kMethods[k]), cache_text(m.cache).c_str(), m.seconds, m.cpu_seconds,
                  m.gbps(), m.gbps() / raw_gbps, mib(m.peak_rss), mib(m.peak_file_rss),
                  m.peak_rss <= bound ? "within" : "OVER",
                  static_cast<unsigned long long>(m.checksum), match ? "" : " MISMATCH",
                  m.cache.advised ? "" : " (! = fadvise failed)");
      results[k].push_back(m);
    }
    std::fflush(stdout);
  }

  std::printf(
      "\nsummary: median over %d pass(es); peak RSS is the largest of any pass; "
      "ratio = GB/s / raw GB/s of the same pass\n",
      o.passes);
  std::printf("  %-24s %7s %13s %13s %20s\n", "method", "GB/s", "ratio to raw", "peak RSS MiB",
              "within ring+64 MiB");
  std::vector<std::string> missed;
  for (std::size_t k = 0; k < kMethodCount; ++k) {
    std::vector<double> gbps;
    std::vector<double> ratios;
    std::uint64_t peak = 0;
    for (int pass = 0; pass < o.passes; ++pass) {
      const Measurement& m = results[k][static_cast<std::size_t>(pass)];
      gbps.push_back(m.gbps());
      ratios.push_back(m.gbps() / results[0][static_cast<std::size_t>(pass)].gbps());
      peak = std::max(peak, m.peak_rss);
    }
    const double ratio = median(ratios);
    const bool within = peak <= bound;
    std::printf("  %-24s %7.3f %13.3f %13.0f %20s\n", method_name(kMethods[k]), median(gbps), ratio,
                mib(peak), within ? "yes" : "NO");
    if (kMethods[k] == Method::kRaw) continue;
    char line[160];
    if (ratio < kTargetRatio) {
      std::snprintf(line, sizeof line, "TARGET MISSED: %s reads at %.3f of raw (target >= %.2f)",
                    method_name(kMethods[k]), ratio, kTargetRatio);
      missed.push_back(line);
    }
    if (!within) {
      std::snprintf(line, sizeof line,
                    "TARGET MISSED: %s peak RSS %.0f MiB > ring + 64 MiB = %.0f MiB",
                    method_name(kMethods[k]), mib(peak), mib(bound));
      missed.push_back(line);
    }
  }
  std::printf("checksums: %s (%016llx)\n", sums_match ? "all equal" : "DIFFER",
              static_cast<unsigned long long>(reference_sum.value_or(0)));
  if (!results.empty() && !results[0].empty() && !results[0][0].hwm_reset) {
    std::printf("note: VmHWM could not be reset; peak RSS comes from 5 ms samples only\n");
  }
  for (const std::string& line : missed) std::printf("%s\n", line.c_str());
  if (missed.empty()) {
    std::printf("targets met: (a) and (b) >= %.2f of raw, peak RSS within bound\n", kTargetRatio);
  }
  return sums_match ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // Besides a ferry::Error, what the standard library throws (std::filesystem, allocation).
  try {
    return ferry::bench::report_errors("stream_read", [&] {
      const std::optional<Options> options = parse_options(argc, argv);
      if (!options) return 0;
      return run(*options);
    });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stream_read: %s\n", e.what());
    return 1;
  }
}
