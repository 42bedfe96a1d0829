// What the model tests share around the backend: a tensor that owns its backend memory (filled
// from f32 values, converted to its dtype), and the error measure the reference comparisons use.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <memory>
#include <vector>

#include "core/backend/backend.h"
#include "core/tensor/convert.h"

namespace ferry::test {

struct OwnedTensor {
  std::unique_ptr<DeviceBuffer> memory;
  Tensor tensor;
  OwnedTensor(Backend& backend, DType dtype, const Shape& shape, const float* values = nullptr) {
    memory = backend.allocate(static_cast<std::size_t>(shape.numel()) * dtype_size(dtype));
    tensor = Tensor{memory->data(), dtype, shape, backend.device()};
    if (values != nullptr) {
      std::vector<std::byte> raw(tensor.bytes());
      convert_from_f32(values, dtype, raw.data(), static_cast<std::size_t>(shape.numel()));
      backend.upload(tensor, raw.data());
    }
  }
};

struct Deviation {
  double max_rel = 0;  // max |a - b| / max |b|
  double rms_rel = 0;  // rms(a - b) / rms(b)
};

inline Deviation compare(const std::vector<float>& got, const std::vector<float>& want) {
  double max_diff = 0, max_ref = 0, sq_diff = 0, sq_ref = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double diff = std::abs(static_cast<double>(got[i]) - want[i]);
    max_diff = std::max(max_diff, diff);
    max_ref = std::max(max_ref, std::abs(static_cast<double>(want[i])));
    sq_diff += diff * diff;
    sq_ref += static_cast<double>(want[i]) * want[i];
  }
  return {max_diff / max_ref, std::sqrt(sq_diff / sq_ref)};
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace ferry::test
