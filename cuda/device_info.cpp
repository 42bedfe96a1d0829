#include "cuda/device_info.h"

#include <cuda_runtime_api.h>

#include "cuda/cuda_error.h"

namespace ferry::cuda {

std::optional<DeviceInfo> query_device(std::string* why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    if (why != nullptr) {
      // With no driver at all the static runtime also answers "insufficient driver"; the driver
      // version (0 when none is installed) tells the two apart.
      int driver = 0;
      cudaDriverGetVersion(&driver);
      *why = status == cudaErrorInsufficientDriver && driver == 0
                 ? "no NVIDIA driver is installed (no NVIDIA GPU, or its driver is missing)"
             : status == cudaErrorInsufficientDriver
                 ? "the NVIDIA driver is too old for CUDA 13 (driver 580 or newer is needed)"
             : status == cudaErrorNoDevice || count == 0 || status == cudaErrorInitializationError
                 ? "no NVIDIA GPU was found"
                 : std::string("the CUDA runtime failed: ") + cudaGetErrorString(status);
    }
    return std::nullopt;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  DeviceInfo info;
  info.name = prop.name;
  info.compute_major = prop.major;
  info.compute_minor = prop.minor;
  info.multiprocessors = prop.multiProcessorCount;
  info.async_engines = prop.asyncEngineCount;
  info.total_bytes = prop.totalGlobalMem;
  check(cudaDriverGetVersion(&info.driver_version), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&info.runtime_version), "cudaRuntimeGetVersion");
  return info;
}

DeviceCapabilities capabilities_of(const DeviceInfo& info) {
  DeviceCapabilities c;
  c.memory_is_host = false;
  c.async_copies = info.async_engines > 0;
  c.pinned_host_memory = true;
  return c;
}

DeviceMemory sample_device_memory() {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  return {total_bytes, free_bytes};
}

}  // namespace ferry::cuda
