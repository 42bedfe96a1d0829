// TEMPORARY (replaced by the device registry's version when it lands): this machine and the
// backend a preset runs on.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/backend/backend.h"
#include "core/offload/preset.h"
#include "core/offload/telemetry.h"

namespace ferry::offload {

struct GpuInfo {};
std::optional<GpuInfo> find_gpu(std::string* why = nullptr);
MachineInfo probe_machine();

struct BackendChoice {
  std::unique_ptr<Backend> backend;
  Telemetry::DeviceSampler device_memory;
  bool fell_back_to_cpu = false;
  std::string reason;
};
BackendChoice choose_backend(const Preset& preset, const MachineInfo& machine);

}  // namespace ferry::offload
