// The devices Ferry can run on, with what each can do, and the backends they create. Core
// provides the CPU; a backend library that is linked in (cuda/: NVIDIA GPUs) registers its own
// kind of device before main() runs. Callers ask for devices and capabilities here and never
// need to know which libraries the build has.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor/tensor.h"

namespace ferry {

class Backend;

// What the engine's data path needs to know about a device.
struct DeviceCapabilities {
  // Device memory is host RAM (the CPU): budgets are RAM budgets, and the weight streamer reads
  // model files straight into the device slots, with no staging ring and no copy.
  bool memory_is_host = false;
  // Host-to-device copies run beside compute (a copy stream; the CPU's copy worker).
  bool async_copies = false;
  // Page-locked host memory speeds its copies up: a pinned-RAM cache of weights pays.
  bool pinned_host_memory = false;
};

// The CPU's: its memory is the host's, its copy queue a worker thread, nothing to pin.
inline constexpr DeviceCapabilities kHostCapabilities{true, true, false};
// What a plan assumes of a GPU it has not listed (a machine described by hand: ferry-cli plan
// --vram-mib, the tests): memory of its own, async copies, pinned staging.
inline constexpr DeviceCapabilities kDiscreteGpuCapabilities{false, true, true};

struct DeviceMemory {
  std::uint64_t total_bytes = 0;
  std::uint64_t free_bytes = 0;
  std::uint64_t used_bytes() const { return total_bytes - free_bytes; }
};

// One device as the registry lists it.
struct DeviceProperties {
  Device kind = Device::kCpu;
  int index = 0;             // among the devices of its kind
  std::string name;          // "NVIDIA GeForce RTX 4070 Laptop GPU", "CPU"
  std::string architecture;  // "sm_89", "x86-64"
  std::string driver;        // "CUDA driver 13.0"; empty for the CPU
  DeviceMemory memory;       // when listed (RAM for the CPU)
  DeviceCapabilities capabilities;
};

// What a library that provides one kind of device registers.
struct DeviceProvider {
  Device kind = Device::kCpu;
  // Its usable devices, in order; with none, `why` says why (no driver, driver too old, ...).
  std::vector<DeviceProperties> (*list)(std::string& why) = nullptr;
  // A backend on a listed device. Throws Error when it cannot start.
  std::unique_ptr<Backend> (*create)(const DeviceProperties& device) = nullptr;
  // The device's memory now (for telemetry and the machine check). Throws Error.
  DeviceMemory (*sample_memory)(const DeviceProperties& device) = nullptr;
};

// Adds a kind of device; called from a library's registrar before main(). A kind registered
// again replaces the earlier entry (one library, linked twice).
void register_device_provider(const DeviceProvider& provider);

// Whether this build has a provider for `kind` (the CPU always).
bool has_device_provider(Device kind);

// Every usable device: the CPU first, then each registered kind's. Probes the hardware.
std::vector<DeviceProperties> list_devices();

// The first usable device of `kind`, or nullopt with `why` set: "this build of Ferry has no
// CUDA backend", or the provider's reason (no driver, no GPU, ...).
std::optional<DeviceProperties> find_device(Device kind, std::string* why = nullptr);

// The CPU as listed (always there).
DeviceProperties cpu_device();

// A backend on `device`. Throws Error(kUnsupported) when no provider for its kind is built in.
std::unique_ptr<Backend> create_backend(const DeviceProperties& device);

// `device`'s memory now. Throws Error.
DeviceMemory sample_device_memory(const DeviceProperties& device);

}  // namespace ferry
