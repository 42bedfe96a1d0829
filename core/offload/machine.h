// This machine as the engine sees it, from the device registry (core/backend/device.h): its RAM,
// the GPU that GPU presets run on and what that GPU can do; and the backend a preset runs on,
// falling back to the CPU with the reason. Front ends (ferry-cli, the app, the session API) call
// these instead of probing the hardware themselves.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/backend/backend.h"
#include "core/backend/device.h"
#include "core/offload/preset.h"
#include "core/offload/telemetry.h"

namespace ferry::offload {

// The device that GPU presets (Preset::device == kCuda) run on, or nullopt with `why` set.
std::optional<DeviceProperties> find_gpu(std::string* why = nullptr);

// RAM from the OS (0 where it cannot say), the GPU from the registry.
MachineInfo probe_machine();

struct BackendChoice {
  std::unique_ptr<Backend> backend;
  DeviceProperties device;  // what the backend runs on
  // The driver's used memory of a device that has its own, for telemetry; empty otherwise.
  Telemetry::DeviceSampler device_memory;
  // A GPU preset that runs on the CPU: the caller switches to the `cpu` preset and says why.
  bool fell_back_to_cpu = false;
  std::string reason;  // why it fell back ("no NVIDIA driver is installed ...")
};

// The preset's device when it wants a GPU, the machine has one and a backend starts on it;
// otherwise the CPU. Throws Error when even the CPU backend cannot start.
BackendChoice choose_backend(const Preset& preset, const MachineInfo& machine);

}  // namespace ferry::offload
