#include "core/offload/streamer.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <string>

#include "core/error.h"
#include "core/io/mapped_file.h"

namespace ferry::offload {

namespace {

using Clock = std::chrono::steady_clock;

std::uint64_t ns_since(Clock::time_point start) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
}

std::uint64_t align_up(std::uint64_t value, std::uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

std::string mib_text(std::uint64_t bytes) {
  return std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB";
}

}  // namespace

// ---- construction ----

WeightStreamer::WeightStreamer(Backend& backend, const ModelLayout& layout, const Plan& plan,
                               const StreamerOptions& options)
    : backend_(backend),
      options_(options),
      look_ahead_(std::max<std::size_t>(plan.look_ahead, 1)),
      read_method_(plan.read_method) {
  if (plan.placement.size() != layout.groups.size()) {
    throw Error(ErrorCode::kBadArgument,
                "the plan places " + std::to_string(plan.placement.size()) +
                    " layer groups but the model has " + std::to_string(layout.groups.size()));
  }
  const DeviceCapabilities device = backend.capabilities();
  if (plan.slot_layout == SlotLayout::kFileAligned && !device.memory_is_host) {
    throw Error(ErrorCode::kBadArgument,
                "the plan lays out file-aligned slots, which only a device whose memory is host "
                "memory reads into; " +
                    backend.name() + " has memory of its own");
  }
  // Mapped views copy into any address; unbuffered reads land only where the layout keeps each
  // tensor at its file offset's alignment.
  reads_straight_ = device.memory_is_host && (read_method_ == ReadMethod::kMapped ||
                                              plan.slot_layout == SlotLayout::kFileAligned);

  // Per-group tensor tables, so acquire() and tensor lookups never allocate.
  std::map<const io::TensorFile*, std::size_t> file_index;
  std::uint64_t resident_bytes = 0;
  std::uint64_t cache_bytes = 0;
  std::uint64_t largest_streamed = 0;
  bool any_disk = false;
  groups_.resize(layout.groups.size());
  for (std::size_t g = 0; g < layout.groups.size(); ++g) {
    const LayerGroup& source = layout.groups[g];
    Group& group = groups_[g];
    group.placement = plan.placement[g];
    group.loaded = LoadedGroup(source, backend.device());
    std::uint64_t offset = 0;
    for (const WeightRef& w : source.weights) {
      if (w.file == nullptr || w.tensor == nullptr) {
        throw Error(ErrorCode::kBadArgument, "layer group " + source.name + " has an empty weight");
      }
      const auto [it, added] = file_index.emplace(w.file, files_.size());
      if (added) files_.push_back(File{w.file, {}});
      offset = tensor_slot_offset(offset, *w.tensor, plan.slot_layout);
      group.tensors.push_back(TensorSlot{w.tensor, it->second, offset});
      offset += w.tensor->bytes;
    }
    group.slot_bytes = group_slot_bytes(source, plan.slot_layout);
    switch (group.placement) {
      case Placement::kDevice:
        resident_bytes += group.slot_bytes;
        break;
      case Placement::kPinnedCache:
        cache_bytes += group.slot_bytes;
        streamed_.push_back(g);
        largest_streamed = std::max(largest_streamed, group.slot_bytes);
        break;
      case Placement::kDisk:
        any_disk = true;
        streamed_.push_back(g);
        largest_streamed = std::max(largest_streamed, group.slot_bytes);
        break;
    }
  }

  if (!streamed_.empty()) {
    if (plan.device_slots == 0 || plan.device_slot_bytes < largest_streamed) {
      throw Error(ErrorCode::kBadArgument,
                  "the plan streams layer groups of up to " + mib_text(largest_streamed) +
                      " but gives them " + std::to_string(plan.device_slots) +
                      " device slots of " + mib_text(plan.device_slot_bytes));
    }
  }
  if (any_disk && !reads_straight_ && (plan.staging_slots == 0 || plan.staging_slot_bytes == 0)) {
    throw Error(ErrorCode::kBadArgument, "the plan streams from disk without a staging ring");
  }

  if (read_method_ == ReadMethod::kDirect) {
    for (File& f : files_) f.reader = io::DirectReader::open(f.file->path());
  }

  // The staging ring: the plan's, or for a plan that streams nothing from disk a small one that
  // only the loading below uses.
  const bool ring_is_temporary = !any_disk;
  {
    std::size_t slots = plan.staging_slots;
    std::size_t slot_bytes = static_cast<std::size_t>(plan.staging_slot_bytes);
    if (ring_is_temporary && (slots == 0 || slot_bytes == 0)) {
      slots = 2;
      slot_bytes = std::size_t{8} << 20;
    }
    if (!reads_straight_ && (resident_bytes > 0 || any_disk)) {
      ring_ = std::make_unique<memory::StagingRing>(slots, slot_bytes, backend.host_allocator());
      for (const File& f : files_) {
        if (read_method_ == ReadMethod::kDirect && ring_->slot_bytes() % f.reader.alignment() != 0) {
          throw Error(ErrorCode::kBadArgument,
                      "staging slots of " + std::to_string(ring_->slot_bytes()) +
                          " bytes are not a multiple of the unbuffered read alignment (" +
                          std::to_string(f.reader.alignment()) + " bytes) of " +
                          f.file->path().string());
        }
      }
    }
  }

  if (reads_straight_ && read_method_ == ReadMethod::kDirect) {
    std::size_t alignment = 1;
    for (const File& f : files_) alignment = std::max(alignment, f.reader.alignment());
    bounce_ = memory::AlignedBuffer(alignment, alignment);
  }
  {
    auto arrived = std::make_shared<memory::CpuFence>();
    arrived->signal();
    arrived_ = std::move(arrived);
  }

  if (options_.copy_queue != nullptr) {
    copy_queue_ = options_.copy_queue;
  } else {
    owned_copy_queue_ = backend.create_copy_queue();
    copy_queue_ = owned_copy_queue_.get();
  }

  // Fixed memory, allocated now and once.
  if (resident_bytes > 0) resident_memory_ = backend.allocate(resident_bytes);
  if (cache_bytes > 0) {
    pinned_cache_ = memory::AlignedBuffer(static_cast<std::size_t>(cache_bytes),
                                          memory::host_page_size(), backend.host_allocator());
  }
  if (!streamed_.empty()) {
    slots_.resize(plan.device_slots);
    for (DeviceSlot& slot : slots_) {
      slot_memory_.push_back(backend.allocate(static_cast<std::size_t>(plan.device_slot_bytes)));
      slot.data = static_cast<std::byte*>(slot_memory_.back()->data());
    }
  }

  // Load what stays: resident groups onto the device, cached groups into pinned memory.
  std::uint64_t resident_offset = 0;
  std::uint64_t cache_offset = 0;
  std::shared_ptr<memory::Fence> last_upload;
  for (Group& group : groups_) {
    if (group.placement == Placement::kDevice) {
      group.resident = static_cast<std::byte*>(resident_memory_->data()) + resident_offset;
      resident_offset += group.slot_bytes;
      if (reads_straight_) {
        read_straight(group, group.resident);
      } else {
        last_upload = upload_from_disk(group, group.resident, nullptr);
      }
      point_tensors(group, group.resident);
    } else if (group.placement == Placement::kPinnedCache) {
      group.resident = pinned_cache_.data() + cache_offset;
      cache_offset += group.slot_bytes;
      for (const TensorSlot& t : group.tensors) {
        const std::span<std::byte> dst(group.resident + t.offset,
                                       static_cast<std::size_t>(t.info->bytes));
        File& f = files_[t.file];
        if (read_method_ == ReadMethod::kDirect) {
          f.reader.read(t.info->offset, dst);
        } else {
          io::MappedView view = f.file->mapped_file().map(t.info->offset, t.info->bytes);
          const std::size_t window = std::max<std::size_t>(options_.evict_window_bytes, 1);
          for (std::size_t done = 0; done < dst.size(); done += window) {
            const std::size_t n = std::min(window, dst.size() - done);
            view.copy_to(done, dst.subspan(done, n));
            view.evict(done, n);
          }
        }
      }
    }
  }
  if (last_upload) last_upload->wait();
  if (ring_is_temporary) ring_.reset();

  occurrence_limit_ = options_.passes * streamed_.size();
  bytes_read_ = 0;
  bytes_uploaded_ = 0;
  read_ns_ = 0;
  stall_ns_ = 0;
  if (!streamed_.empty()) io_thread_ = std::thread([this] { io_loop(); });
}

WeightStreamer::~WeightStreamer() {
  {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
  }
  changed_.notify_all();
  if (ring_) ring_->shutdown();
  if (io_thread_.joinable()) io_thread_.join();
  wait_all_fences();
}

void WeightStreamer::wait_all_fences() noexcept {
  // Every copy queued (even one whose group never got its fence) and all compute that may read
  // a slot finish before any buffer is freed.
  try {
    if (copy_queue_ != nullptr) copy_queue_->record()->wait();
  } catch (...) {
  }
  try {
    backend_.record_compute()->wait();
  } catch (...) {
  }
  for (DeviceSlot& slot : slots_) {
    try {
      if (slot.upload) slot.upload->wait();
      if (slot.compute) slot.compute->wait();
    } catch (...) {
    }
  }
}

void WeightStreamer::point_tensors(Group& group, std::byte* base) {
  for (std::size_t i = 0; i < group.tensors.size(); ++i) {
    group.loaded.set_data(i, base + group.tensors[i].offset);
  }
}

std::uint64_t WeightStreamer::device_bytes() const {
  std::uint64_t n = resident_memory_ ? resident_memory_->size() : 0;
  for (const auto& slot : slot_memory_) n += slot->size();
  return n;
}

std::uint64_t WeightStreamer::host_bytes() const {
  return pinned_cache_.size() + (ring_ ? ring_->total_bytes() : 0);
}

// ---- the IO thread ----

std::shared_ptr<memory::Fence> WeightStreamer::upload_from_disk(
    const Group& group, std::byte* dst, const std::shared_ptr<memory::Fence>& before) {
  const bool direct = read_method_ == ReadMethod::kDirect;
  const std::size_t slot_size = ring_->slot_bytes();
  const std::size_t window = std::max<std::size_t>(options_.evict_window_bytes, 1);
  memory::StagingRing::Lease lease;
  bool have_slot = false;
  std::span<std::byte> slot;
  std::size_t pos = 0;
  bool waited = false;
  try {
    for (const TensorSlot& t : group.tensors) {
      File& f = files_[t.file];
      const std::uint64_t offset = t.info->offset;
      const std::uint64_t length = t.info->bytes;
      io::MappedView view;
      if (!direct && length > 0) {
        view = f.file->mapped_file().map(offset, length);
        view.prefetch();
      }
      for (std::uint64_t done = 0; done < length;) {
        // Where the chunk goes in the staging slot, and how much of the tensor fits.
        const std::uint64_t at = offset + done;
        std::uint64_t chunk = 0;
        std::size_t start = 0;
        for (int attempt = 0; attempt < 2; ++attempt) {
          if (have_slot) {
            if (direct) {
              start = static_cast<std::size_t>(align_up(pos, f.reader.alignment()));
              const std::size_t head = static_cast<std::size_t>(at % f.reader.alignment());
              if (start < slot_size && slot_size - start > head) {
                chunk = std::min<std::uint64_t>(length - done,
                                                f.reader.max_cover_length(at, slot_size - start));
              }
            } else {
              start = static_cast<std::size_t>(align_up(pos, 64));
              if (start < slot_size) chunk = std::min<std::uint64_t>(length - done, slot_size - start);
            }
          }
          // A full slot goes to the copy queue's care; the next one is taken.
          if (chunk > 0) break;
          if (have_slot) lease.retire(copy_queue_->record());
          const Clock::time_point stall = Clock::now();
          lease = ring_->lease();
          stall_ns_ += ns_since(stall);
          slot = lease.bytes();
          have_slot = true;
          pos = 0;
        }

        hook(StreamStage::kIo);
        const Clock::time_point read_start = Clock::now();
        const std::byte* src = nullptr;
        std::size_t used = 0;
        if (direct) {
          const std::span<const std::byte> bytes =
              f.reader.read_cover(at, chunk, slot.subspan(start));
          src = bytes.data();
          used = f.reader.cover_size(at, chunk);
        } else {
          // Window by window, each window's pages dropped from our resident set once copied.
          const std::size_t n = static_cast<std::size_t>(chunk);
          for (std::size_t copied = 0; copied < n; copied += window) {
            const std::size_t len = std::min(window, n - copied);
            view.copy_to(done + copied, slot.subspan(start + copied, len));
            view.evict(done + copied, len);
          }
          src = slot.data() + start;
          used = n;
        }
        read_ns_ += ns_since(read_start);
        bytes_read_ += chunk;

        hook(StreamStage::kCopy);
        if (!waited) {
          // The device slot's previous group: the copies wait for its compute, not this thread.
          copy_queue_->wait_for(before);
          waited = true;
        }
        copy_queue_->copy_to_device(dst + t.offset + done, src, static_cast<std::size_t>(chunk));
        bytes_uploaded_ += chunk;
        pos = start + used;
        done += chunk;
      }
      view.release();  // the lease ends as soon as its bytes are copied
    }
    std::shared_ptr<memory::Fence> fence = copy_queue_->record();
    lease.retire(fence);
    return fence;
  } catch (...) {
    // Copies from the slot may still be queued: it is reused only after they finish.
    std::shared_ptr<memory::Fence> fence;
    try {
      fence = copy_queue_->record();
    } catch (...) {
    }
    lease.retire(std::move(fence));
    throw;
  }
}

void WeightStreamer::throw_if_cancelled() const {
  std::lock_guard lock(mutex_);
  if (cancelled_) throw Error(ErrorCode::kCancelled, "cancelled");
}

void WeightStreamer::read_direct(File& file, std::uint64_t at, std::span<std::byte> dst) {
  const std::size_t a = file.reader.alignment();
  const auto address = reinterpret_cast<std::uintptr_t>(dst.data());
  if ((address - at) % a != 0) {
    // Not at its file offset's alignment (a file whose reads need more than kFileAlignment):
    // through the reader's own bounce buffer.
    file.reader.read(at, dst);
    return;
  }
  auto bounced = [&](std::uint64_t offset, std::span<std::byte> out) {
    const std::span<const std::byte> bytes =
        file.reader.read_cover(offset, out.size(), bounce_.span());
    std::memcpy(out.data(), bytes.data(), out.size());
  };
  const std::size_t head =
      std::min<std::size_t>(dst.size(), static_cast<std::size_t>((a - at % a) % a));
  if (head > 0) bounced(at, dst.first(head));
  const std::size_t middle = (dst.size() - head) / a * a;
  if (middle > 0) {
    const std::size_t got = file.reader.read_aligned(at + head, dst.subspan(head, middle));
    if (got < middle) {
      throw Error(ErrorCode::kIo, "reading " + file.file->path().string() +
                                      ": the file ended early (it shrank while in use)");
    }
  }
  const std::size_t tail = dst.size() - head - middle;
  if (tail > 0) bounced(at + head + middle, dst.last(tail));
}

void WeightStreamer::read_straight(const Group& group, std::byte* dst) {
  // Chunks small enough to notice a cancel soon, large enough to keep the disk busy.
  constexpr std::size_t kChunk = std::size_t{16} << 20;
  const std::size_t window = std::max<std::size_t>(options_.evict_window_bytes, 1);
  for (const TensorSlot& t : group.tensors) {
    File& f = files_[t.file];
    const std::span<std::byte> out(dst + t.offset, static_cast<std::size_t>(t.info->bytes));
    io::MappedView view;
    if (read_method_ == ReadMethod::kMapped && !out.empty()) {
      view = f.file->mapped_file().map(t.info->offset, t.info->bytes);
      view.prefetch();
    }
    for (std::size_t done = 0; done < out.size();) {
      throw_if_cancelled();
      hook(StreamStage::kIo);
      std::size_t n = std::min(kChunk, out.size() - done);
      if (read_method_ == ReadMethod::kDirect && done + n < out.size()) {
        // The chunk ends on an aligned file offset: no block is read twice.
        n -= static_cast<std::size_t>((t.info->offset + done + n) % f.reader.alignment());
      }
      const Clock::time_point read_start = Clock::now();
      if (read_method_ == ReadMethod::kDirect) {
        read_direct(f, t.info->offset + done, out.subspan(done, n));
      } else {
        // Window by window, each window's pages dropped from our resident set once copied.
        for (std::size_t copied = 0; copied < n; copied += window) {
          const std::size_t len = std::min(window, n - copied);
          view.copy_to(done + copied, out.subspan(done + copied, len));
          view.evict(done + copied, len);
        }
      }
      read_ns_ += ns_since(read_start);
      bytes_read_ += n;
      bytes_uploaded_ += n;  // on the device already
      hook(StreamStage::kCopy);
      done += n;
    }
    view.release();  // the lease ends as soon as its bytes are in the slot
  }
}

void WeightStreamer::io_loop() {
  const std::size_t m = streamed_.size();
  const std::size_t slot_count = slots_.size();
  try {
    for (std::uint64_t k = 0;; ++k) {
      if (occurrence_limit_ != 0 && k >= occurrence_limit_) return;
      Group& group = groups_[streamed_[k % m]];
      DeviceSlot& slot = slots_[k % slot_count];
      std::shared_ptr<memory::Fence> compute;
      {
        // Look-ahead: occurrence k loads while the caller computes k - look_ahead, and only
        // into a slot whose previous group (k - slots) has been released.
        const Clock::time_point stall = Clock::now();
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] {
          return cancelled_ || (k <= released_ + look_ahead_ && k < released_ + slot_count);
        });
        if (cancelled_) return;
        compute = slot.compute;
        stall_ns_ += ns_since(stall);
      }

      std::shared_ptr<memory::Fence> upload;
      if (group.placement == Placement::kPinnedCache) {
        // Already in pinned memory, laid out as a slot: one copy, nothing to read.
        hook(StreamStage::kCopy);
        copy_queue_->wait_for(compute);
        copy_queue_->copy_to_device(slot.data, group.resident,
                                    static_cast<std::size_t>(group.slot_bytes));
        bytes_uploaded_ += group.slot_bytes;
        upload = copy_queue_->record();
      } else if (reads_straight_) {
        // This thread writes the slot itself: the compute reading it must be done (on the
        // CPU it is, when recorded).
        if (compute) {
          const Clock::time_point stall = Clock::now();
          compute->wait();
          stall_ns_ += ns_since(stall);
        }
        read_straight(group, slot.data);
        upload = arrived_;
      } else {
        upload = upload_from_disk(group, slot.data, compute);
      }
      {
        std::lock_guard lock(mutex_);
        slot.upload = std::move(upload);
        uploaded_ = k + 1;
      }
      changed_.notify_all();
    }
  } catch (const Error& e) {
    std::lock_guard lock(mutex_);
    // The ring's shutdown is how cancellation reaches a thread waiting for a staging slot.
    if (!(e.code() == ErrorCode::kCancelled && cancelled_)) error_ = std::current_exception();
  } catch (...) {
    std::lock_guard lock(mutex_);
    error_ = std::current_exception();
  }
  changed_.notify_all();
}

// ---- the caller's side ----

void WeightStreamer::begin_pass() {
  if (in_pass_) throw Error(ErrorCode::kInternal, "begin_pass() before the last pass finished");
  if (options_.passes != 0 && passes_begun_ >= options_.passes) {
    throw Error(ErrorCode::kInternal, "begin_pass() beyond the " + std::to_string(options_.passes) +
                                          " passes the streamer was made for");
  }
  in_pass_ = true;
  next_group_ = 0;
  ++passes_begun_;
}

const LoadedGroup& WeightStreamer::acquire(std::size_t index) {
  {
    std::lock_guard lock(mutex_);
    if (cancelled_) throw Error(ErrorCode::kCancelled, "cancelled");
    if (error_) std::rethrow_exception(error_);
  }
  if (!in_pass_ || holding_ || index != next_group_) {
    throw Error(ErrorCode::kInternal,
                "acquire(" + std::to_string(index) + ") out of turn: groups are acquired in "
                "order within a pass, each released before the next");
  }
  Group& group = groups_[index];
  if (group.placement != Placement::kDevice) {
    const std::uint64_t k = next_occurrence_;
    DeviceSlot& slot = slots_[k % slots_.size()];
    std::shared_ptr<memory::Fence> upload;
    {
      const Clock::time_point start = Clock::now();
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return cancelled_ || error_ || uploaded_ > k; });
      wait_ns_ += ns_since(start);
      if (cancelled_) throw Error(ErrorCode::kCancelled, "cancelled");
      if (error_) std::rethrow_exception(error_);
      upload = slot.upload;
    }
    backend_.wait_for(*upload);
    point_tensors(group, slot.data);
  }
  hook(StreamStage::kCompute);
  holding_ = true;
  return group.loaded;
}

void WeightStreamer::release(std::size_t index) {
  if (!holding_ || index != next_group_) {
    throw Error(ErrorCode::kInternal,
                "release(" + std::to_string(index) + ") of a group that is not acquired");
  }
  if (groups_[index].placement != Placement::kDevice) {
    std::shared_ptr<memory::Fence> compute = backend_.record_compute();
    const std::uint64_t k = next_occurrence_++;
    {
      std::lock_guard lock(mutex_);
      slots_[k % slots_.size()].compute = std::move(compute);
      released_ = k + 1;
    }
    changed_.notify_all();
  }
  holding_ = false;
  if (++next_group_ == groups_.size()) {
    in_pass_ = false;
    ++passes_completed_;
  }
}

void WeightStreamer::cancel() {
  {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
  }
  changed_.notify_all();
  if (ring_) ring_->shutdown();
}

StreamStats WeightStreamer::stats() const {
  StreamStats s;
  s.bytes_read = bytes_read_.load();
  s.bytes_uploaded = bytes_uploaded_.load();
  {
    std::lock_guard lock(mutex_);
    s.groups_uploaded = uploaded_;
  }
  s.passes_completed = passes_completed_.load();
  s.read_seconds = static_cast<double>(read_ns_.load()) / 1e9;
  s.io_stall_seconds = static_cast<double>(stall_ns_.load()) / 1e9;
  s.acquire_wait_seconds = static_cast<double>(wait_ns_.load()) / 1e9;
  return s;
}

}  // namespace ferry::offload
