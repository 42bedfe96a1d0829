// The CUDA library's entry in the device registry (core/backend/device.h): NVIDIA GPUs, listed
// with their capabilities, each creating a CudaBackend. Every program that links ferry_cuda
// calls register_devices() before main() (cuda/register_devices.cpp, an interface source of
// ferry_cuda), so callers find CUDA devices through the registry alone.
#pragma once

namespace ferry::cuda {

// Adds the CUDA device provider to the registry; idempotent.
void register_devices();

}  // namespace ferry::cuda
