#include "cuda/cuda_devices.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/backend/device.h"
#include "core/error.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_info.h"

namespace ferry::cuda {
namespace {

std::vector<DeviceProperties> list(std::string& why) {
  const std::optional<DeviceInfo> info = query_device(&why);
  if (!info) return {};
  DeviceProperties d;
  d.kind = Device::kCuda;
  d.index = info->index;
  d.name = info->name;
  d.architecture = "sm_" + std::to_string(info->compute_major * 10 + info->compute_minor);
  d.driver = "CUDA driver " + std::to_string(info->driver_version / 1000) + "." +
             std::to_string(info->driver_version % 1000 / 10);
  try {
    d.memory = sample_device_memory();
  } catch (const Error& e) {
    why = std::string("the GPU's memory cannot be queried: ") + e.what();
    return {};
  }
  d.capabilities = capabilities_of(*info);
  return {d};
}

std::unique_ptr<Backend> create(const DeviceProperties&) {
  return std::make_unique<CudaBackend>();
}

DeviceMemory sample(const DeviceProperties&) {
  return sample_device_memory();
}

}  // namespace

void register_devices() {
  DeviceProvider provider;
  provider.kind = Device::kCuda;
  provider.list = &list;
  provider.create = &create;
  provider.sample_memory = &sample;
  register_device_provider(provider);
}

}  // namespace ferry::cuda
