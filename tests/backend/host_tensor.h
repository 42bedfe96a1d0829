// A tensor in host memory with its own bytes, for backend tests.
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/tensor/convert.h"
#include "core/tensor/tensor.h"

namespace ferry::test {

struct HostTensor {
  std::vector<std::byte> bytes;
  Tensor t;

  HostTensor(DType dtype, Shape shape, const std::vector<float>& values = {}) {
    t.dtype = dtype;
    t.shape = shape;
    bytes.resize(t.bytes() + 16);
    t.data = bytes.data();
    if (!values.empty()) {
      EXPECT_EQ(static_cast<std::int64_t>(values.size()), t.numel());
      convert_from_f32(values.data(), dtype, t.data, values.size());
    }
  }
  std::vector<float> values() const {
    std::vector<float> out(static_cast<std::size_t>(t.numel()));
    convert_to_f32(t.dtype, t.data, out.data(), out.size());
    return out;
  }
};

inline std::vector<float> random_values(std::size_t n, std::uint32_t seed, float lo = -1,
                                        float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace ferry::test
