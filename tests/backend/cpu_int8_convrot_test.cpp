// The CPU backend's linear with Comfy-Org's int8 ConvRot weights (minimax_h3.md §G.3), against
// comfy-kitchen 0.2.40: tests/data/int8_convrot/linear.safetensors holds weights its quantiser
// made from random f32 ones, and y = x · W_deqᵀ in float64 with W_deq its own dequantiser's
// weight (tools/reference/make_int8_convrot_reference.py).
//
// Bound: 2e-6 · max|y|. The floors the script measured (reference.json): an f32 torch GEMM of
// W_deq misses y by at most 3.4e-7 (max|y| 3.5, g256), rotating x first and multiplying by q · s
// in f32 (Ferry's association) by 1.4e-6 there and at most 3.9e-7 elsewhere: the bound is 5x the
// worst floor (g256: 7e-6), 10x and more on the other cases. A wrong sign of one h4 entry, a
// missed 1/√g or scale, or a group misplaced costs orders of magnitude more (the rotation mixes
// every value of a group).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/backend/convrot.h"
#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/gemm.h"
#include "core/error.h"
#include "core/io/tensor_file.h"
#include "tests/backend/host_tensor.h"
#include "tests/test_support.h"

namespace ferry::cpu {
namespace {

using test::HostTensor;

HostTensor read_tensor(const io::TensorFile& file, const std::string& name) {
  const io::TensorInfo& info = file.at(name);
  Shape shape;
  if (info.shape.size() == 1) shape = Shape{static_cast<std::int64_t>(info.shape[0])};
  if (info.shape.size() == 2) {
    shape =
        Shape{static_cast<std::int64_t>(info.shape[0]), static_cast<std::int64_t>(info.shape[1])};
  }
  HostTensor t(info.dtype, shape);
  file.map(info).copy_to(0, std::span<std::byte>(t.bytes.data(), info.bytes));
  return t;
}

struct Case {
  std::string name;
  std::int64_t group;
};

std::ostream& operator<<(std::ostream& os, const Case& c) {
  return os << c.name;
}

class CpuInt8ConvRot : public ::testing::TestWithParam<Case> {};

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

TEST_P(CpuInt8ConvRot, linear_gives_comfy_kitchens_product_on_each_gemm_path) {
  const Case& c = GetParam();
  const io::TensorFile file =
      io::TensorFile::open(test::data_path("int8_convrot/linear.safetensors"));
  const HostTensor w = read_tensor(file, c.name + ".weight");
  const HostTensor scale = read_tensor(file, c.name + ".weight_scale");
  const HostTensor x = read_tensor(file, c.name + ".x");
  const std::vector<float> expected = read_tensor(file, c.name + ".y").values();
  ASSERT_EQ(w.t.dtype, DType::kI8);
  const ConvRotState state{scale.t, c.group};
  WeightScaling scaling;
  scaling.convrot = &state;
  const double bound = 2e-6 * max_abs(expected);
  for (const GemmPath path : {GemmPath::kOwn, GemmPath::kOpenBlas}) {
    if (!gemm_path_available(path)) continue;
    CpuBackend backend(default_thread_pool(), path);
    HostTensor y(DType::kF32, Shape{x.t.shape[0], w.t.shape[0]});
    backend.linear(x.t, w.t, nullptr, y.t, scaling);
    const test::Difference d = test::difference(y.values(), expected);
    EXPECT_LE(d.max, bound) << "path " << static_cast<int>(path) << ", rms " << d.rms;
    std::printf("[ measured ] %s path %d: max|d| %.3g (bound %.3g), rms %.3g\n", c.name.c_str(),
                static_cast<int>(path), d.max, bound, d.rms);

    // linear_add: the same product added to what y holds.
    const std::vector<float> base = test::random_values(expected.size(), 7);
    HostTensor sum(DType::kF32, y.t.shape, base);
    backend.linear_add(x.t, w.t, sum.t, scaling);
    std::vector<float> expected_sum = expected;
    for (std::size_t i = 0; i < base.size(); ++i) expected_sum[i] += base[i];
    EXPECT_LE(test::difference(sum.values(), expected_sum).max, bound + 1e-6);
  }
}

INSTANTIATE_TEST_SUITE_P(ComfyKitchen, CpuInt8ConvRot,
                         ::testing::Values(Case{"g256", 256}, Case{"g64", 64}, Case{"g16", 16},
                                           Case{"g4", 4}),
                         [](const auto& param_info) { return param_info.param.name; });

// H_16 built from its definition, h4 ⊗ h4 / 4, against the fast transform; and H is its own
// inverse.
TEST(CpuInt8ConvRotTransform, fast_transform_is_the_kronecker_hadamard_and_self_inverse) {
  const int h4[4][4] = {{1, 1, 1, -1}, {1, 1, -1, 1}, {1, -1, 1, 1}, {-1, 1, 1, 1}};
  const std::vector<float> v = test::random_values(32, 3);
  std::vector<float> fast = v;
  rotate_convrot_groups(fast.data(), 32, 16);
  for (int g = 0; g < 2; ++g) {
    for (int i = 0; i < 16; ++i) {
      double expected = 0;
      for (int j = 0; j < 16; ++j) {
        expected += h4[i / 4][j / 4] * h4[i % 4][j % 4] * static_cast<double>(v[g * 16 + j]);
      }
      EXPECT_NEAR(fast[g * 16 + i], expected / 4.0, 1e-6) << "group " << g << " row " << i;
    }
  }
  rotate_convrot_groups(fast.data(), 32, 16);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(fast[i], v[i], 1e-6);
}

TEST(CpuInt8ConvRotErrors, refuses_bad_groups_and_scales_as_bad_model_files) {
  CpuBackend backend;
  HostTensor x(DType::kF32, Shape{1, 48});
  HostTensor w(DType::kI8, Shape{2, 48});
  HostTensor y(DType::kF32, Shape{1, 2});
  HostTensor scale(DType::kF32, Shape{2, 1}, {1.0f, 1.0f});
  auto code = [&](const Tensor& s, std::int64_t group) {
    const ConvRotState state{s, group};
    WeightScaling scaling;
    scaling.convrot = &state;
    return test::error_code_of([&] { backend.linear(x.t, w.t, nullptr, y.t, scaling); });
  };
  EXPECT_EQ(code(scale.t, 8), ErrorCode::kBadModelFile);  // a power of 2, not of 4
  EXPECT_EQ(code(scale.t, 0), ErrorCode::kBadModelFile);
  EXPECT_EQ(code(scale.t, 64), ErrorCode::kBadModelFile);  // does not divide 48
  HostTensor two_per_row(DType::kF32, Shape{2, 2});
  HostTensor half(DType::kF16, Shape{2, 1});
  HostTensor one(DType::kF32, Shape{1});
  EXPECT_EQ(code(two_per_row.t, 16), ErrorCode::kBadModelFile);
  EXPECT_EQ(code(half.t, 16), ErrorCode::kBadModelFile);
  EXPECT_EQ(code(one.t, 16), ErrorCode::kBadModelFile);
  // The message names the problem.
  try {
    const ConvRotState state{scale.t, 8};
    check_convrot(w.t.shape, state, "blocks.0.attn.qkv.weight");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a power of 4"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("blocks.0.attn.qkv.weight"), std::string::npos);
  }
  // A kI8 weight without its state is a caller's bug, as a 4-bit weight without its state is.
  EXPECT_EQ(test::error_code_of([&] { backend.linear(x.t, w.t, nullptr, y.t, 1.0f); }),
            ErrorCode::kInternal);
  // And with a good state, it runs.
  const ConvRotState good{scale.t, 16};
  WeightScaling scaling;
  scaling.convrot = &good;
  backend.linear(x.t, w.t, nullptr, y.t, scaling);
}

}  // namespace
}  // namespace ferry::cpu
