// The weight streamer: obeys a Plan for one stage, so a model sees every layer group's tensors on
// the device exactly when it computes that group, whatever the group's placement.
//
// Three stages, all buffers allocated once by the constructor:
//   IO thread  kDisk groups: each tensor through the staging ring in slot-sized chunks (a
//              MappedView lease copied window by window, its pages evicted as copied and the
//              lease released once copied; or DirectReader::read_cover straight into the slot),
//              each chunk queued on the copy queue at once. kPinnedCache groups are not read:
//              their cache, laid out as a device slot, is queued as one copy. Before the first
//              copy into a device slot, the copy queue is told to wait for the compute fence of
//              the slot's previous group (CopyQueue::wait_for): the IO thread itself never waits
//              for compute, and reads on.
//   copy queue staging slot / cache → device slot. The slot is retired with the fence recorded
//              after the group's last copy, which is also the group's upload fence.
//   compute    acquire() makes compute wait for the upload fence (backend.wait_for: no host
//              wait on CUDA); release() records a compute fence, and the device slot is filled
//              again only after that fence.
// On a device whose memory is host memory (DeviceCapabilities::memory_is_host: the CPU) there is
// nothing to copy: the IO thread reads the file straight into the device slot (mapped views
// copied out window by window; unbuffered reads into a SlotLayout::kFileAligned slot, where each
// tensor sits at its file offset's alignment), without a staging ring or the copy queue. The
// slot's compute fence is then waited for on the IO thread; the CPU's are complete at once.
// Streamed groups take the device slots in turn; while the caller computes one, the next
// `look_ahead` are read and uploaded. The streaming continues across passes (the first groups of
// the next step load while the last ones of this step compute) up to `StreamerOptions::passes`.
//
// A pass: begin_pass(), then for each group in order acquire(i), any number of computations on
// it (CFG's conditional and unconditional passes: each weight crosses once per step), release(i).
// Nothing on that path allocates: tensor tables, fences and queues are fixed after the first pass.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "core/backend/backend.h"
#include "core/io/direct_reader.h"
#include "core/memory/aligned_buffer.h"
#include "core/memory/staging_ring.h"
#include "core/offload/layer_group.h"
#include "core/offload/plan.h"
#include "core/offload/weight_source.h"

namespace ferry::offload {

// Where a test hook is called from.
enum class StreamStage {
  kIo,       // on the IO thread, before each chunk is read
  kCopy,     // on the IO thread, before each copy is queued (reading straight into the device
             // slot: once each chunk is read, its mapped view still leased)
  kCompute,  // on the caller's thread, in acquire() once the group is ready
};

struct StreamerOptions {
  // Passes to stream (steps × streamers per step); the IO thread reads nothing beyond them.
  // 0: as many as the caller runs (it then may read ahead into a pass that never comes).
  std::size_t passes = 0;
  // Bytes of a mapped view copied between evictions of its pages (rounded to whole pages): RSS
  // stays within the ring plus one window.
  std::size_t evict_window_bytes = std::size_t{16} << 20;

  // ---- test hooks ----
  // Called at every stage (from the thread the stage runs on); a test makes it sleep at random.
  void (*stage_hook)(StreamStage stage, void* context) = nullptr;
  void* hook_context = nullptr;
  // Used instead of a queue from the backend when set; must outlive the streamer.
  CopyQueue* copy_queue = nullptr;
};

// Totals since construction; the construction's own loading is not counted.
struct StreamStats {
  std::uint64_t bytes_read = 0;          // from the model files by the IO thread
  std::uint64_t bytes_uploaded = 0;      // queued host → device, or read straight into it
  std::uint64_t groups_uploaded = 0;     // streamed groups uploaded
  std::uint64_t passes_completed = 0;    // passes whose last group was released
  double read_seconds = 0;               // IO thread: reading files into staging slots
  double io_stall_seconds = 0;           // IO thread: waiting for a free staging or device slot
  double acquire_wait_seconds = 0;       // caller: waiting in acquire() for reads and uploads
};

class WeightStreamer final : public WeightSource {
 public:
  // Allocates everything once and loads what the plan keeps: kDevice groups are uploaded to
  // device memory, kPinnedCache groups read into pinned host memory. Throws Error: kBadArgument
  // when the plan does not match the layout (placements, slot sizes) or the device (file-aligned
  // slots on a device with memory of its own), kIo when a file cannot be read, kOutOfMemory when
  // an allocation is refused. `layout` (and its files) must outlive the streamer.
  WeightStreamer(Backend& backend, const ModelLayout& layout, const Plan& plan,
                 const StreamerOptions& options = {});
  // Stops the IO thread, waits for every copy and compute fence, then frees.
  ~WeightStreamer();
  WeightStreamer(const WeightStreamer&) = delete;
  WeightStreamer& operator=(const WeightStreamer&) = delete;

  std::size_t group_count() const override { return groups_.size(); }

  // Starts a pass over the groups; the previous pass must be complete. Error(kInternal) when
  // called out of turn or beyond StreamerOptions::passes.
  void begin_pass() override;
  // Waits until group `group` (the next in this pass) is on the device and makes later compute
  // wait for its upload. Rethrows an error the IO thread met (Error(kIo) for a file that shrank,
  // say); Error(kCancelled) after cancel(). The tensors stay valid until release(group).
  const LoadedGroup& acquire(std::size_t group) override;
  // The caller has queued all compute that reads the group; its device slot is reused once
  // that compute has finished.
  void release(std::size_t group) override;

  // Makes a waiting or later acquire() throw Error(kCancelled) and stops the IO thread. Any
  // thread may call it.
  void cancel();

  StreamStats stats() const;

  // Fixed allocations, for the plan's accounting.
  std::uint64_t device_bytes() const;   // resident groups and device slots
  std::uint64_t host_bytes() const;     // staging ring and pinned cache

 private:
  struct TensorSlot {  // one tensor of a group, as it sits in a device slot
    const io::TensorInfo* info = nullptr;
    std::size_t file = 0;        // index into files_
    std::uint64_t offset = 0;    // in the slot (256-byte aligned)
  };
  struct Group {
    Placement placement = Placement::kDisk;
    std::vector<TensorSlot> tensors;
    std::uint64_t slot_bytes = 0;
    std::byte* resident = nullptr;  // kDevice: its device memory; kPinnedCache: its cache
    LoadedGroup loaded;
  };
  struct File {
    const io::TensorFile* file = nullptr;
    io::DirectReader reader;  // kDirect only
  };
  struct DeviceSlot {
    std::byte* data = nullptr;
    std::shared_ptr<memory::Fence> upload;  // completes when the group in it has arrived
    std::shared_ptr<memory::Fence> compute; // completes when the compute reading it is done
  };

  void io_loop();
  // Reads and queues group `g`'s tensors into device memory at `dst`, the copies after the
  // compute fence `before` (if any); the staging slots it used are retired with the copy fence,
  // which it returns.
  std::shared_ptr<memory::Fence> upload_from_disk(const Group& group, std::byte* dst,
                                                  const std::shared_ptr<memory::Fence>& before);
  // Reads group `g`'s tensors from the files straight into host-addressable device memory.
  void read_straight(const Group& group, std::byte* dst);
  // [at, at + dst.size()) of `file` into dst, unbuffered: the part aligned in both the file and
  // memory straight in, the unaligned head and tail (under one alignment block each) through
  // bounce_.
  void read_direct(File& file, std::uint64_t at, std::span<std::byte> dst);
  // Throws Error(kCancelled) once cancel() or the destructor has begun: reads stop between
  // chunks.
  void throw_if_cancelled() const;
  void stall_until_slot_free(std::uint64_t occurrence);
  void point_tensors(Group& group, std::byte* base);
  void hook(StreamStage stage) const {
    if (options_.stage_hook != nullptr) options_.stage_hook(stage, options_.hook_context);
  }
  void wait_all_fences() noexcept;

  Backend& backend_;
  StreamerOptions options_;
  std::size_t look_ahead_ = 1;
  ReadMethod read_method_ = ReadMethod::kDirect;
  // Device memory is host memory and the plan's layout lets reads land in it: no staging.
  bool reads_straight_ = false;
  // The upload fence of a group read straight in: complete, as the read is.
  std::shared_ptr<memory::Fence> arrived_;
  std::vector<Group> groups_;
  std::vector<std::size_t> streamed_;  // indices of kDisk and kPinnedCache groups, in order
  std::vector<File> files_;

  // Fixed memory. Declared before the copy queue so the queue (and its in-flight copies) is
  // gone before any buffer it reads or writes is freed.
  std::unique_ptr<DeviceBuffer> resident_memory_;
  std::vector<std::unique_ptr<DeviceBuffer>> slot_memory_;
  memory::AlignedBuffer pinned_cache_;
  std::unique_ptr<memory::StagingRing> ring_;
  memory::AlignedBuffer bounce_;  // reading straight: unaligned heads and tails of tensors
  std::unique_ptr<CopyQueue> owned_copy_queue_;
  CopyQueue* copy_queue_ = nullptr;

  // Pipeline state, under mutex_. Occurrence k is the k-th streamed group since construction
  // (pass k / M, M = streamed_.size()); it goes to device slot k % slots.
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<DeviceSlot> slots_;
  std::uint64_t uploaded_ = 0;   // occurrences whose copies are queued, with their fence
  std::uint64_t released_ = 0;   // occurrences the caller has released
  std::uint64_t occurrence_limit_ = 0;  // the IO thread stops here (passes × M); 0: never
  bool cancelled_ = false;
  std::exception_ptr error_;

  // Caller-side position (caller thread only).
  std::uint64_t passes_begun_ = 0;
  std::size_t next_group_ = 0;
  bool in_pass_ = false;
  bool holding_ = false;
  std::uint64_t next_occurrence_ = 0;  // of the caller

  std::atomic<std::uint64_t> bytes_read_{0};
  std::atomic<std::uint64_t> bytes_uploaded_{0};
  std::atomic<std::uint64_t> passes_completed_{0};
  std::atomic<std::uint64_t> read_ns_{0};
  std::atomic<std::uint64_t> stall_ns_{0};
  std::atomic<std::uint64_t> wait_ns_{0};

  std::thread io_thread_;  // last: started when everything above exists
};

}  // namespace ferry::offload
