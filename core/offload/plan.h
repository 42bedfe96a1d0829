// The residency plan: where every layer group of a model lives during a stage, and the fixed
// buffers the stage allocates once. Made by the planner (planner.h) from a preset and the
// machine; obeyed by the streamer (streamer.h). Deterministic for the same inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

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

struct Plan {
  std::vector<Placement> placement;  // one per layer group, in execution order

  // Device slots streamed groups are uploaded into: look_ahead + 1 of them, each able to hold
  // the largest streamed group (tensors 256-byte aligned).
  std::size_t look_ahead = 1;
  std::size_t device_slots = 0;
  std::uint64_t device_slot_bytes = 0;
  // Host staging ring between the file and the device slots (pinned with CUDA).
  std::size_t staging_slots = 0;
  std::uint64_t staging_slot_bytes = 0;
  ReadMethod read_method = ReadMethod::kDirect;

  // Fixed device and host allocations of the stage, and what the planner predicts for them.
  std::uint64_t resident_bytes = 0;      // device memory of kDevice groups
  std::uint64_t pinned_cache_bytes = 0;  // host memory of kPinnedCache groups
  std::uint64_t activation_bytes = 0;    // the activation arena
  std::uint64_t predicted_vram_peak = 0;
  std::uint64_t predicted_ram_peak = 0;

  std::size_t count(Placement p) const;
};

}  // namespace ferry::offload
