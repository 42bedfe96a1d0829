// A backend allocation with a tensor over it: what a family's run keeps across a stage (text
// states, latents) on the device it computes on.
#pragma once

#include <cstddef>
#include <memory>

#include "core/backend/backend.h"

namespace ferry::models {

struct DeviceTensor {
  std::unique_ptr<DeviceBuffer> memory;
  Tensor tensor;
};

inline DeviceTensor device_tensor(Backend& backend, DType dtype, const Shape& shape) {
  DeviceTensor t;
  t.memory = backend.allocate(static_cast<std::size_t>(shape.numel()) * dtype_size(dtype));
  t.tensor = Tensor{t.memory->data(), dtype, shape, backend.device()};
  return t;
}

}  // namespace ferry::models
