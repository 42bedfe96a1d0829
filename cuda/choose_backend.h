// The backend a front end (ferry-cli, the app) runs a preset on: the CUDA backend when this build
// has it, the preset wants a GPU and a usable one is there; otherwise the CPU backend, and a GPU
// preset falls back to `cpu`. Header-only, so builds without CUDA (which compile nothing in cuda/)
// include it too; FERRY_HAVE_CUDA is defined for targets that link ferry_cuda.
#pragma once

#include <memory>

#include "core/backend/backend.h"
#include "core/backend/cpu/cpu_backend.h"
#include "core/offload/preset.h"
#include "core/offload/telemetry.h"
#ifdef FERRY_HAVE_CUDA
#include "cuda/cuda_backend.h"
#include "cuda/device_info.h"
#endif

namespace ferry {

struct ChosenBackend {
  std::unique_ptr<Backend> backend;
  // The driver's used VRAM, for telemetry; empty on the CPU.
  offload::Telemetry::DeviceSampler device_memory;
  // A GPU preset that runs on the CPU: the caller switches to the `cpu` preset and says so.
  bool fell_back_to_cpu = false;
};

inline ChosenBackend choose_backend(const offload::Preset& preset,
                                    const offload::MachineInfo& machine) {
  ChosenBackend chosen;
#ifdef FERRY_HAVE_CUDA
  if (preset.device == Device::kCuda && machine.has_gpu && cuda::query_device()) {
    chosen.backend = std::make_unique<cuda::CudaBackend>();
    chosen.device_memory = [] {
      const cuda::DeviceMemory m = cuda::sample_device_memory();
      return offload::DeviceMemorySample{m.total_bytes - m.free_bytes, 0};
    };
    return chosen;
  }
#else
  (void)machine;
#endif
  chosen.backend = std::make_unique<cpu::CpuBackend>();
  chosen.fell_back_to_cpu = preset.device == Device::kCuda;
  return chosen;
}

}  // namespace ferry
