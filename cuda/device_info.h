// What the GPU is and how much of its memory is in use: the first-run check, the planner's
// free-VRAM input and the per-step VRAM figures.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/backend/device.h"

namespace ferry::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  int multiprocessors = 0;
  int async_engines = 0;  // copy engines: uploads run beside kernels when > 0
  std::uint64_t total_bytes = 0;
  int driver_version = 0;   // e.g. 13000 for CUDA 13.0
  int runtime_version = 0;
};

using DeviceMemory = ferry::DeviceMemory;

// What the engine may count on: device memory of its own (cudaMalloc), pinned staging, and
// uploads beside compute when the GPU has a copy engine.
DeviceCapabilities capabilities_of(const DeviceInfo& info);

// The first CUDA device (the one CudaBackend runs on), or nullopt with `why` set (no driver, no
// device, driver too old).
std::optional<DeviceInfo> query_device(std::string* why = nullptr);

// cudaMemGetInfo on the current device. Throws Error.
DeviceMemory sample_device_memory();

}  // namespace ferry::cuda
