// Compiled into every target that links ferry_cuda (an INTERFACE source of it: a registrar
// inside the static library would be dropped by the linker, since nothing refers to it). Runs
// before main() and makes the CUDA devices visible through core/backend/device.h.
#include "cuda/cuda_devices.h"

namespace {

[[maybe_unused]] const bool registered = (ferry::cuda::register_devices(), true);

}  // namespace
