// The residency plan: where every layer group of a model lives during a stage, and the fixed
// buffers the stage allocates once. Made by the planner (planner.h) from a preset and the
// machine; obeyed by the streamer (streamer.h). Deterministic for the same inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/offload/layer_group.h"

namespace ferry::offload {

enum class Placement {
  kDevice,       // uploaded once, stays in device memory for the stage
  kPinnedCache,  // read from disk once into pinned host RAM, copied to a device slot each pass
  kDisk,         // read from the model file into the staging ring each pass
};

enum class ReadMethod {
  kMapped,  // MappedView leases copied into staging slots
  kDirect,  // unbuffered DirectReader reads straight into staging slots
};

// How a group's tensors sit in a device slot (and in resident memory and the pinned cache).
enum class SlotLayout {
  // Each tensor on the next 256-byte boundary: filled by copies, from the staging ring or the
  // pinned cache.
  kPacked,
  // Each tensor at an offset congruent to its file offset modulo kFileAlignment, and each group
  // a whole number of kFileAlignment blocks: an unbuffered read lands in it straight from the
  // file. For devices whose memory is host memory (the CPU), which then need no staging ring.
  kFileAligned,
};

// The unbuffered read alignment kFileAligned slots keep (a page on x86-64 Windows and Linux;
// where a file needs more, its reads still land, through a small bounce buffer).
inline constexpr std::uint64_t kFileAlignment = 4096;

// Where `tensor` starts in a slot whose first `used` bytes are taken.
std::uint64_t tensor_slot_offset(std::uint64_t used, const io::TensorInfo& tensor,
                                 SlotLayout layout);
// The bytes `group` takes in a device slot, in resident memory or in the pinned cache: the one
// figure the planner sizes with and the streamer allocates.
std::uint64_t group_slot_bytes(const LayerGroup& group, SlotLayout layout);

struct Plan {
  std::vector<Placement> placement;  // one per layer group, in execution order

  // Device slots streamed groups are uploaded into: look_ahead + 1 of them, each able to hold
  // the largest streamed group (group_slot_bytes under slot_layout).
  std::size_t look_ahead = 1;
  std::size_t device_slots = 0;
  std::uint64_t device_slot_bytes = 0;
  // Host staging ring between the file and the device slots (pinned with CUDA).
  std::size_t staging_slots = 0;
  std::uint64_t staging_slot_bytes = 0;
  ReadMethod read_method = ReadMethod::kDirect;
  SlotLayout slot_layout = SlotLayout::kPacked;

  // Fixed device and host allocations of the stage, and what the planner predicts for them.
  std::uint64_t resident_bytes = 0;      // device memory of kDevice groups
  std::uint64_t pinned_cache_bytes = 0;  // host memory of kPinnedCache groups
  std::uint64_t activation_bytes = 0;    // the activation arena
  std::uint64_t predicted_vram_peak = 0;
  std::uint64_t predicted_ram_peak = 0;

  std::size_t count(Placement p) const;
};

}  // namespace ferry::offload
