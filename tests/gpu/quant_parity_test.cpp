// Quantised weights on the CUDA backend against the CPU (issue 15), on a GPU (skipped without
// one; tests/gpu/run.sh runs them as its "quant" stage):
// - the dequantisation kernels, bit for bit against core/backend/cpu/quant_blocks.h on 1024
//   random blocks plus 50 edge blocks per ggml type, and on bitsandbytes NF4 / FP4 weights with
//   plain and nested scales, a partial last block and an odd first value;
// - linear with each quantised weight type against the CPU backend's linear on the same weights,
//   dequantised (see "Bounds");
// - embedding with a quantised table, byte for byte against the CPU dequantiser's rows;
// - the refusals: codes without their quant state, a state that does not fit, rows that are not
//   whole blocks.
// Every device buffer sits between guard bytes, checked after each kernel; outputs start as
// 0xFF bytes (NaN), so a value never written fails.
//
// Built into ferry_cuda_tests (tests/cuda/CMakeLists.txt).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/backend/convrot.h"
#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/quant_blocks.h"
#include "core/error.h"
#include "core/tensor/convert.h"
#include "core/tensor/quant.h"
#include "cuda/convrot.cuh"
#include "cuda/cuda_backend.h"
#include "cuda/device_info.h"
#include "cuda/quant.cuh"
#include "tests/backend/quant_test_blocks.h"
#include "tests/gpu/quant_linear_reference.h"

namespace ferry {
namespace {

// linear's bounds, and what it is compared with: quant_linear_reference.h.

constexpr std::size_t kGuardBytes = 1024;  // a multiple of 256: the body keeps cudaMalloc's
                                           // alignment

std::uint8_t guard_byte(std::size_t i) {
  return static_cast<std::uint8_t>((i * 131 + 0x5A) & 0xFF);
}

void cuda_ok(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

// Bytes in device memory between two guard regions: given bytes (an input), or 0xFF (an output).
class DeviceBytes {
 public:
  DeviceBytes(std::size_t bytes, const void* init) : body_(bytes) {
    std::vector<std::uint8_t> all(bytes + 2 * kGuardBytes);
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = guard_byte(i);
    if (init != nullptr) {
      std::memcpy(all.data() + kGuardBytes, init, bytes);
      initial_.assign(all.begin() + kGuardBytes, all.begin() + kGuardBytes + bytes);
    } else {
      std::fill(all.begin() + kGuardBytes, all.begin() + kGuardBytes + bytes, 0xFF);
    }
    cuda_ok(cudaMalloc(&base_, all.size()), "cudaMalloc (test buffer)");
    cuda_ok(cudaMemcpy(base_, all.data(), all.size(), cudaMemcpyHostToDevice), "upload");
    cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  explicit DeviceBytes(std::size_t bytes) : DeviceBytes(bytes, nullptr) {}
  template <typename T>
  explicit DeviceBytes(const std::vector<T>& values)
      : DeviceBytes(values.size() * sizeof(T), values.data()) {}
  ~DeviceBytes() { cudaFree(base_); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;

  void* data() const { return static_cast<std::uint8_t*>(base_) + kGuardBytes; }
  Tensor tensor(DType dtype, Shape shape) const {
    Tensor t;
    t.dtype = dtype;
    t.shape = shape;
    t.data = data();
    t.device = Device::kCuda;
    return t;
  }

  // The body after the device finished; a damaged guard or a changed input is a test failure.
  std::vector<std::uint8_t> body(const std::string& what) const {
    cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    std::vector<std::uint8_t> all(body_ + 2 * kGuardBytes);
    cuda_ok(cudaMemcpy(all.data(), base_, all.size(), cudaMemcpyDeviceToHost), "download");
    for (std::size_t i = 0; i < kGuardBytes; ++i) {
      EXPECT_EQ(all[i], guard_byte(i))
          << what << ": guard byte " << kGuardBytes - i << " before the buffer was written";
      const std::size_t j = kGuardBytes + body_ + i;
      EXPECT_EQ(all[j], guard_byte(j))
          << what << ": guard byte " << i << " after the buffer was written";
      if (all[i] != guard_byte(i) || all[j] != guard_byte(j)) break;
    }
    std::vector<std::uint8_t> body(all.begin() + kGuardBytes, all.begin() + kGuardBytes + body_);
    if (!initial_.empty()) {
      EXPECT_TRUE(body == initial_) << what << ": an input was written";
    }
    return body;
  }

 private:
  std::size_t body_;
  std::vector<std::uint8_t> initial_;
  void* base_ = nullptr;
};

std::vector<float> floats_of(const std::vector<std::uint8_t>& bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

// A value with all its digits and its bits: "-0.00275993184 (0xbb34e000)".
std::string bits_text(float v) {
  char text[48];
  std::snprintf(text, sizeof text, "%.9g (0x%08x)", static_cast<double>(v),
                static_cast<unsigned>(std::bit_cast<std::uint32_t>(v)));
  return text;
}

// "" when the bits are equal, else how many values differ and the first.
std::string first_difference(const std::vector<float>& want, const std::vector<float>& got) {
  std::int64_t differing = 0;
  std::string first;
  for (std::size_t j = 0; j < want.size() && j < got.size(); ++j) {
    if (std::bit_cast<std::uint32_t>(want[j]) == std::bit_cast<std::uint32_t>(got[j])) continue;
    if (differing++ == 0) {
      first = "value " + std::to_string(j) + ": cpu " + bits_text(want[j]) + ", cuda " +
              bits_text(got[j]);
    }
  }
  if (want.size() != got.size()) return "sizes differ";
  return differing == 0 ? "" : std::to_string(differing) + " values differ, first " + first;
}

std::string dt(DType t) {
  return std::string(dtype_name(t));
}

// One line per comparison, printed after the run (tests/gpu/run.sh keeps the summary).
struct Record {
  std::string what;
  double error, threshold;
};
std::vector<Record>& records() {
  static std::vector<Record> all;
  return all;
}
class QuantSummary : public ::testing::Environment {
 public:
  void TearDown() override {
    if (records().empty()) return;
    int failed = 0;
    for (const Record& r : records()) failed += r.error <= r.threshold ? 0 : 1;
    std::printf("\n== quant parity summary: %zu comparisons, %d failed\n", records().size(),
                failed);
    for (const Record& r : records()) {
      std::printf("%-4s  %-70s  %10.3g  %10.3g\n", r.error <= r.threshold ? "ok" : "FAIL",
                  r.what.c_str(), r.error, r.threshold);
    }
    std::fflush(stdout);
  }
};
[[maybe_unused]] ::testing::Environment* const kQuantSummary =
    ::testing::AddGlobalTestEnvironment(new QuantSummary);

// A quantised weight in host memory (what the CPU oracle reads) and on the device (what the
// kernels read), with its bitsandbytes state where it has one.
struct QuantCase {
  DType dtype;
  std::vector<std::uint8_t> bytes;  // blocks, or bnb4 codes
  test::Bnb4Host bnb4;              // kBnb4 only
  std::unique_ptr<DeviceBytes> dev, absmax, code, nested_absmax, nested_code;
  Bnb4State host_state, dev_state;

  QuantCase(DType t, std::int64_t rows, std::int64_t cols, std::uint32_t seed, bool moderate)
      : dtype(t) {
    if (t == DType::kBnb4) {
      bnb4 = test::random_bnb4(rows * cols, /*nested=*/true, /*nf4=*/true, seed);
      bytes = bnb4.codes;
    } else {
      bytes = test::random_blocks(t, rows * cols / dtype_block_elems(t), seed, moderate);
    }
    dev = std::make_unique<DeviceBytes>(bytes);
    if (t != DType::kBnb4) return;
    absmax = std::make_unique<DeviceBytes>(bnb4.absmax_u8);
    code = std::make_unique<DeviceBytes>(bnb4.code);
    nested_absmax = std::make_unique<DeviceBytes>(bnb4.nested_absmax);
    nested_code = std::make_unique<DeviceBytes>(bnb4.nested_code);
    const Shape nested_shape{static_cast<std::int64_t>(bnb4.nested_absmax.size())};
    for (Bnb4State* s : {&host_state, &dev_state}) {
      s->blocksize = bnb4.blocksize;
      s->nested_blocksize = bnb4.nested_blocksize;
      s->nested_offset = bnb4.nested_offset;
    }
    host_state.absmax = test::host_tensor(DType::kU8, {bnb4.blocks()}, bnb4.absmax_u8.data());
    host_state.code = test::host_tensor(DType::kF32, {16}, bnb4.code.data());
    host_state.nested_absmax =
        test::host_tensor(DType::kF32, nested_shape, bnb4.nested_absmax.data());
    host_state.nested_code = test::host_tensor(DType::kF32, {256}, bnb4.nested_code.data());
    dev_state.absmax = absmax->tensor(DType::kU8, {bnb4.blocks()});
    dev_state.code = code->tensor(DType::kF32, {16});
    dev_state.nested_absmax = nested_absmax->tensor(DType::kF32, nested_shape);
    dev_state.nested_code = nested_code->tensor(DType::kF32, {256});
  }

  // The CPU oracle's f32 values.
  std::vector<float> values(std::int64_t count) const {
    std::vector<float> v(static_cast<std::size_t>(count));
    if (dtype == DType::kBnb4) {
      cpu::dequantize_bnb4(host_state, bytes.data(), 0, v.data(), count);
    } else {
      cpu::dequantize(dtype, bytes.data(), v.data(), count);
    }
    return v;
  }

  // The weight in host memory, as the CPU backend takes it.
  Tensor host_tensor(std::int64_t rows, std::int64_t cols) const {
    return test::host_tensor(dtype, {rows, cols}, bytes.data());
  }
  WeightScaling host_scaling() const {
    WeightScaling s;
    if (dtype == DType::kBnb4) s.bnb4 = &host_state;
    return s;
  }

  WeightScaling scaling() const {
    WeightScaling s;
    if (dtype == DType::kBnb4) s.bnb4 = &dev_state;
    return s;
  }
};

class QuantParity : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda::query_device(&why))
      GTEST_SKIP() << "no CUDA device, the quantised-weight tests need one: " << why;
  }

  static cpu::CpuBackend& cpu() {
    static cpu::CpuBackend backend;
    return backend;
  }
  static cuda::CudaBackend& gpu() {
    static cuda::CudaBackend backend;
    return backend;
  }
  // A 16 KiB workspace: at K = 768 linear dequantises panels of a few weight rows, for row
  // blocks of a few tokens, and writes output blocks at unaligned addresses; its f32 fallback
  // (x and w both f32, 3 KiB a row each) still fits.
  static cuda::CudaBackend& gpu_small() {
    static cuda::CudaBackend backend([] {
      cuda::CudaBackendOptions o;
      o.workspace_bytes = 16 << 10;
      o.gemm_workspace_bytes = 1 << 20;
      return o;
    }());
    return backend;
  }
};

// ---- dequantisation ----

TEST_F(QuantParity, dequantize_is_bit_exact_with_the_cpu_for_every_block_type) {
  std::uint32_t seed = 1;
  for (const DType t : test::kBlockTypes) {
    std::vector<std::uint8_t> bytes = test::random_blocks(t, 1024, seed++);
    const std::vector<std::uint8_t> edges = test::edge_blocks(t, seed++);
    bytes.insert(bytes.end(), edges.begin(), edges.end());
    const std::int64_t per_block = dtype_block_elems(t);
    const auto blocks = static_cast<std::int64_t>(bytes.size() / dtype_block_bytes(t));
    const std::int64_t count = blocks * per_block;
    std::vector<float> want(static_cast<std::size_t>(count));
    cpu::dequantize(t, bytes.data(), want.data(), count);

    DeviceBytes w(bytes);
    cuda::QuantWeight q;
    q.dtype = t;
    q.data = w.data();
    // Everything to f32; a panel of whole blocks from the middle to bf16 (as linear feeds it).
    DeviceBytes all(static_cast<std::size_t>(count) * sizeof(float));
    cuda::launch_dequantize(q, 0, count, all.data(), DType::kF32, nullptr);
    const std::int64_t first = 7 * per_block, part = 300 * per_block;
    DeviceBytes panel(static_cast<std::size_t>(part) * 2);
    cuda::launch_dequantize(q, first, part, panel.data(), DType::kBF16, nullptr);

    const std::string what = dt(t) + ", " + std::to_string(blocks) + " blocks";
    w.body(what);
    const std::string f32_diff = first_difference(want, floats_of(all.body(what)));
    EXPECT_EQ(f32_diff, "") << what << " to F32";
    std::vector<std::uint8_t> want_panel(static_cast<std::size_t>(part) * 2);
    convert_from_f32(want.data() + first, DType::kBF16, want_panel.data(),
                     static_cast<std::size_t>(part));
    const bool panel_equal = panel.body(what) == want_panel;
    EXPECT_TRUE(panel_equal) << what << ": the BF16 panel differs from the CPU's values rounded";
    records().push_back(
        {"dequantize " + what + " bit for bit", f32_diff.empty() && panel_equal ? 0.0 : 1.0, 0.0});
  }
}

TEST_F(QuantParity, dequantize_bnb4_is_bit_exact_with_the_cpu_nested_and_plain) {
  std::uint32_t seed = 100;
  for (const bool nested : {false, true}) {
    for (const bool nf4 : {true, false}) {
      // 1101 blocks of 64, the last one partial: 5 nested blocks, the last one partial too.
      const test::Bnb4Host h = test::random_bnb4(64 * 1100 + 37, nested, nf4, seed++);
      Bnb4State state;
      state.blocksize = h.blocksize;
      state.nested_blocksize = h.nested_blocksize;
      state.code = test::host_tensor(DType::kF32, {16}, h.code.data());
      if (nested) {
        state.absmax = test::host_tensor(DType::kU8, {h.blocks()}, h.absmax_u8.data());
        state.nested_absmax =
            test::host_tensor(DType::kF32, {static_cast<std::int64_t>(h.nested_absmax.size())},
                              h.nested_absmax.data());
        state.nested_code = test::host_tensor(DType::kF32, {256}, h.nested_code.data());
        state.nested_offset = h.nested_offset;
      } else {
        state.absmax = test::host_tensor(DType::kF32, {h.blocks()}, h.absmax_f32.data());
      }
      std::vector<float> want(static_cast<std::size_t>(h.count));
      cpu::dequantize_bnb4(state, h.codes.data(), 0, want.data(), h.count);

      DeviceBytes codes(h.codes);
      std::unique_ptr<DeviceBytes> absmax = nested ? std::make_unique<DeviceBytes>(h.absmax_u8)
                                                   : std::make_unique<DeviceBytes>(h.absmax_f32);
      DeviceBytes code(h.code);
      std::unique_ptr<DeviceBytes> nested_absmax, nested_code;
      cuda::QuantWeight q;
      q.dtype = DType::kBnb4;
      q.data = codes.data();
      q.absmax = absmax->data();
      q.code = static_cast<const float*>(code.data());
      q.blocksize = h.blocksize;
      q.nested = nested;
      if (nested) {
        nested_absmax = std::make_unique<DeviceBytes>(h.nested_absmax);
        nested_code = std::make_unique<DeviceBytes>(h.nested_code);
        q.nested_absmax = static_cast<const float*>(nested_absmax->data());
        q.nested_code = static_cast<const float*>(nested_code->data());
        q.nested_offset = h.nested_offset;
        q.nested_blocksize = h.nested_blocksize;
      }
      DeviceBytes all(static_cast<std::size_t>(h.count) * sizeof(float));
      cuda::launch_dequantize(q, 0, h.count, all.data(), DType::kF32, nullptr);
      // An odd first value (a low nibble) inside a block, across block boundaries.
      const std::int64_t first = 64 * 5 + 3, part = 1001;
      DeviceBytes range(static_cast<std::size_t>(part) * sizeof(float));
      cuda::launch_dequantize(q, first, part, range.data(), DType::kF32, nullptr);

      const std::string what = std::string(nested ? "nested " : "plain ") + (nf4 ? "NF4" : "FP4");
      codes.body(what);
      absmax->body(what);
      const std::string all_diff = first_difference(want, floats_of(all.body(what)));
      EXPECT_EQ(all_diff, "") << what;
      const std::vector<float> want_range(want.begin() + first, want.begin() + first + part);
      const std::string range_diff = first_difference(want_range, floats_of(range.body(what)));
      EXPECT_EQ(range_diff, "") << what << " from value " << first;
      records().push_back({"dequantize bnb4 " + what + " bit for bit",
                           all_diff.empty() && range_diff.empty() ? 0.0 : 1.0, 0.0});
    }
  }
}

// ---- linear ----

TEST_F(QuantParity, linear_matches_the_cpu_on_the_same_dequantised_weights_for_every_type) {
  const std::int64_t sizes[][2] = {{1, 31}, {37, 129}, {300, 70}};  // m, n
  std::vector<DType> types(std::begin(test::kBlockTypes), std::end(test::kBlockTypes));
  types.push_back(DType::kBnb4);
  std::uint32_t seed = 1000;
  for (const DType t : types) {
    // K = 3 blocks of 256 (K-quants), 5 of 32 (legacy), 3 of 64 (bitsandbytes).
    const std::int64_t k = t == DType::kBnb4 ? 192 : dtype_block_elems(t) == 256 ? 768 : 160;
    for (const auto& size : sizes) {
      const std::int64_t m = size[0], n = size[1];
      const QuantCase w(t, n, k, seed++, /*moderate=*/true);
      const std::vector<float> w_exact = w.values(n * k);
      for (const test::LinearCase& c : test::kLinearCases) {
        const std::vector<std::uint8_t> x_bytes = test::random_values(c.x, m * k, seed++);
        const std::vector<std::uint8_t> b_bytes = test::random_values(c.b, n, seed++);
        const test::LinearReference ref = test::linear_reference(
            cpu(), c, m, k, n, x_bytes, b_bytes, w.host_tensor(n, k), w.host_scaling(), w_exact);
        const double threshold = ref.threshold;
        for (cuda::CudaBackend* gpu : {&gpu(), &gpu_small()}) {
          DeviceBytes x(x_bytes), b(b_bytes);
          DeviceBytes y(static_cast<std::size_t>(m * n) * dtype_size(c.y));
          const Tensor b_dev = b.tensor(c.b, {n});
          gpu->linear(x.tensor(c.x, {m, k}), w.dev->tensor(t, {n, k}), c.bias ? &b_dev : nullptr,
                      y.tensor(c.y, {m, n}), w.scaling());
          const std::string what = "linear w " + dt(t) + " x " + dt(c.x) +
                                   (c.bias ? " b " + dt(c.b) : "") + " -> " + dt(c.y) + " " +
                                   std::to_string(m) + "x" + std::to_string(k) + "x" +
                                   std::to_string(n) + (gpu == &gpu_small() ? " small ws" : "");
          x.body(what);
          b.body(what);
          w.dev->body(what);
          const std::vector<float> got = test::as_f32(c.y, y.body(what).data(), m * n);
          std::string where;
          const double error = test::normalised_error(ref.want, got, &where);
          if (!ref.bf16_gemm) {
            EXPECT_LE(error, threshold) << what << " vs the CPU on the same weights, at " << where;
            records().push_back({what, error, threshold});
            continue;
          }
          std::string where_exact;
          const double error_exact = test::normalised_error(ref.want_exact, got, &where_exact);
          // Where cuBLASLt has no bf16 algorithm for a block (an unaligned output block of the
          // small workspace, say), linear falls back to f32 operands, the exact weights (and logs
          // it): then the result is the exact-weight one, within the same summation bound.
          const bool f32_fallback = !(error <= threshold) && error_exact <= threshold;
          EXPECT_TRUE(error <= threshold || f32_fallback)
              << what << ": error " << error << " > " << threshold
              << " vs the CPU on the same bf16-rounded weights, at " << where << " (and "
              << error_exact << " vs the exact weights, at " << where_exact << ")";
          records().push_back(f32_fallback
                                  ? Record{what + " (f32 fallback)", error_exact, threshold}
                                  : Record{what, error, threshold});
          const double bound = threshold + ref.rounding_bound;
          EXPECT_LE(error_exact, bound)
              << what << " vs the CPU backend's linear on the quantised weight, at " << where_exact;
          records().push_back({what + " vs the cpu's quantised linear", error_exact, bound});
        }
      }
    }
  }
}

// ---- int8 ConvRot (Comfy-Org) ----

// Random int8 codes [n, k] with f32 row scales, on the host and the device; `values` is W =
// (q · s) · H_g per group as the CPU computes it (rotate_convrot_groups on each row of q · s, the
// association the kernel uses: same butterflies in the same passes).
struct ConvRotCase {
  std::int64_t n, k, group;
  std::vector<std::int8_t> codes;
  std::vector<float> scales;
  std::unique_ptr<DeviceBytes> dev, dev_scales;
  ConvRotState host_state, dev_state;

  ConvRotCase(std::int64_t rows, std::int64_t cols, std::int64_t g, std::uint32_t seed)
      : n(rows), k(cols), group(g) {
    std::mt19937 rng(seed);
    codes.resize(static_cast<std::size_t>(n * k));
    for (auto& c : codes) c = static_cast<std::int8_t>(static_cast<int>(rng() % 255) - 127);
    std::uniform_real_distribution<float> scale(0.5e-4f, 2e-4f);
    scales.resize(static_cast<std::size_t>(n));
    for (auto& s : scales) s = scale(rng);
    dev = std::make_unique<DeviceBytes>(codes);
    dev_scales = std::make_unique<DeviceBytes>(scales);
    host_state = {test::host_tensor(DType::kF32, {n, 1}, scales.data()), group};
    dev_state = {dev_scales->tensor(DType::kF32, {n, 1}), group};
  }
  std::vector<float> values() const {
    std::vector<float> w(codes.size());
    for (std::size_t i = 0; i < w.size(); ++i) {
      w[i] = static_cast<float>(codes[i]) * scales[i / static_cast<std::size_t>(k)];
    }
    rotate_convrot_groups(w.data(), n * k, group);
    return w;
  }
  WeightScaling scaling(bool device) const {
    WeightScaling s;
    s.convrot = device ? &dev_state : &host_state;
    return s;
  }
};

TEST_F(QuantParity, convrot_dequantize_is_bit_exact_with_the_cpu_rotation) {
  for (const auto& [n, k, g] :
       {std::array<std::int64_t, 3>{7, 768, 256}, std::array<std::int64_t, 3>{5, 192, 64},
        std::array<std::int64_t, 3>{3, 4096, 4096}, std::array<std::int64_t, 3>{9, 48, 4}}) {
    const ConvRotCase w(n, k, g, static_cast<std::uint32_t>(n * k + g));
    const std::vector<float> want = w.values();
    DeviceBytes out(static_cast<std::size_t>((n - 1) * k) * sizeof(float));
    // Rows [1, n): a panel that does not start at row 0.
    cuda::launch_dequantize_convrot(
        static_cast<const std::int8_t*>(w.dev->tensor(DType::kI8, {n, k}).data),
        static_cast<const float*>(w.dev_state.row_scale.data), k, g, 1, n - 1,
        out.tensor(DType::kF32, {n - 1, k}).data, DType::kF32, nullptr);
    cuda_ok(cudaDeviceSynchronize(), "convrot dequantize");
    const std::string what = "convrot dequantize g" + std::to_string(g) + " k" + std::to_string(k);
    const std::vector<std::uint8_t> got = out.body(what);
    const bool equal = std::memcmp(got.data(), want.data() + k, got.size()) == 0;
    EXPECT_TRUE(equal) << what << ": differs from the CPU's rotation";
    records().push_back({what + " bit for bit", equal ? 0.0 : 1.0, 0.0});
  }
}

// linear on the GPU (the rotated weight, dequantised into the GEMM's panel) against the CPU's
// linear (x rotated, times q · s), through quant_linear_reference.h's bounds: against the CPU on
// the same bf16-rounded rotated weight, and within the rounding bound of the CPU's exact path.
TEST_F(QuantParity, convrot_linear_matches_the_cpu) {
  const std::int64_t sizes[][2] = {{1, 31}, {37, 129}, {300, 70}};  // m, n
  std::uint32_t seed = 5000;
  for (const auto& [k, g] :
       {std::array<std::int64_t, 2>{768, 256}, std::array<std::int64_t, 2>{192, 64}}) {
    for (const auto& size : sizes) {
      const std::int64_t m = size[0], n = size[1];
      const ConvRotCase w(n, k, g, seed++);
      const std::vector<float> w_exact = w.values();
      for (const test::LinearCase& c : test::kLinearCases) {
        const std::vector<std::uint8_t> x_bytes = test::random_values(c.x, m * k, seed++);
        const std::vector<std::uint8_t> b_bytes = test::random_values(c.b, n, seed++);
        const test::LinearReference ref = test::linear_reference(
            cpu(), c, m, k, n, x_bytes, b_bytes,
            test::host_tensor(DType::kI8, {n, k}, w.codes.data()), w.scaling(false), w_exact);
        for (cuda::CudaBackend* gpu : {&gpu(), &gpu_small()}) {
          DeviceBytes x(x_bytes), b(b_bytes);
          DeviceBytes y(static_cast<std::size_t>(m * n) * dtype_size(c.y));
          const Tensor b_dev = b.tensor(c.b, {n});
          gpu->linear(x.tensor(c.x, {m, k}), w.dev->tensor(DType::kI8, {n, k}),
                      c.bias ? &b_dev : nullptr, y.tensor(c.y, {m, n}), w.scaling(true));
          const std::string what = "linear w I8 convrot g" + std::to_string(g) + " x " + dt(c.x) +
                                   (c.bias ? " b " + dt(c.b) : "") + " -> " + dt(c.y) + " " +
                                   std::to_string(m) + "x" + std::to_string(k) + "x" +
                                   std::to_string(n) + (gpu == &gpu_small() ? " small ws" : "");
          const std::vector<float> got = test::as_f32(c.y, y.body(what).data(), m * n);
          std::string where, where_exact;
          const double error = test::normalised_error(ref.want, got, &where);
          const double error_exact = test::normalised_error(ref.want_exact, got, &where_exact);
          const bool f32_fallback =
              ref.bf16_gemm && !(error <= ref.threshold) && error_exact <= ref.threshold;
          EXPECT_TRUE(error <= ref.threshold || f32_fallback)
              << what << ": error " << error << " > " << ref.threshold << " at " << where;
          records().push_back({what, f32_fallback ? error_exact : error, ref.threshold});
          const double bound = ref.threshold + ref.rounding_bound;
          EXPECT_LE(error_exact, bound) << what << " vs the CPU's int8 linear, at " << where_exact;
          records().push_back({what + " vs the cpu's int8 linear", error_exact, bound});
        }
      }
    }
  }
}

TEST_F(QuantParity, convrot_linear_refuses_a_bad_group_or_missing_state) {
  const ConvRotCase w(4, 48, 16, 77);
  DeviceBytes x(std::vector<float>(48, 1.0f));
  DeviceBytes y(4 * sizeof(float));
  const auto code = [&](const WeightScaling& s) {
    try {
      gpu().linear(x.tensor(DType::kF32, {1, 48}), w.dev->tensor(DType::kI8, {4, 48}), nullptr,
                   y.tensor(DType::kF32, {1, 4}), s);
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::kCancelled;  // stands for "nothing thrown"
  };
  ConvRotState bad = w.dev_state;
  bad.group_size = 32;  // not a power of 4
  WeightScaling s;
  s.convrot = &bad;
  EXPECT_EQ(code(s), ErrorCode::kBadModelFile);
  bad.group_size = 64;  // does not divide 48
  EXPECT_EQ(code(s), ErrorCode::kBadModelFile);
  EXPECT_EQ(code(WeightScaling{}), ErrorCode::kInternal);
  EXPECT_EQ(code(w.scaling(true)), ErrorCode::kCancelled);
}

// ---- embedding ----

TEST_F(QuantParity, embedding_gathers_and_dequantises_rows_of_a_quantised_table) {
  const std::int64_t rows = 50, n = 37;
  std::uint32_t seed = 5000;
  for (const DType t : test::kBlockTypes) {
    const std::int64_t dim = 2 * dtype_block_elems(t);
    const std::vector<std::uint8_t> table = test::random_blocks(t, rows * 2, seed++);
    const std::size_t row_bytes = 2 * dtype_block_bytes(t);
    for (const DType it : {DType::kI32, DType::kI64}) {
      std::mt19937 rng(seed++);
      std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
      for (auto& id : ids) id = static_cast<std::int64_t>(rng() % rows);
      ids[0] = 0;
      ids[1] = rows - 1;
      ids[2] = ids[3];  // a repeated id
      std::vector<std::uint8_t> id_bytes(static_cast<std::size_t>(n) * dtype_size(it));
      for (std::size_t l = 0; l < ids.size(); ++l) {
        if (it == DType::kI64) {
          std::memcpy(id_bytes.data() + 8 * l, &ids[l], 8);
        } else {
          const auto id32 = static_cast<std::int32_t>(ids[l]);
          std::memcpy(id_bytes.data() + 4 * l, &id32, 4);
        }
      }
      for (const DType yt : {DType::kF32, DType::kBF16}) {
        std::vector<float> row(static_cast<std::size_t>(dim));
        std::vector<std::uint8_t> want(static_cast<std::size_t>(n * dim) * dtype_size(yt));
        for (std::int64_t l = 0; l < n; ++l) {
          cpu::dequantize(
              t,
              table.data() + static_cast<std::size_t>(ids[static_cast<std::size_t>(l)]) * row_bytes,
              row.data(), dim);
          convert_from_f32(row.data(), yt,
                           want.data() + static_cast<std::size_t>(l * dim) * dtype_size(yt),
                           row.size());
        }
        // The CPU backend's embedding of the same table gives the same bytes.
        std::vector<std::uint8_t> cpu_y(want.size());
        cpu().embedding(test::host_tensor(t, {rows, dim}, table.data()),
                        test::host_tensor(it, {n}, id_bytes.data()),
                        test::host_tensor(yt, {n, dim}, cpu_y.data()));
        DeviceBytes table_dev(table), ids_dev(id_bytes);
        DeviceBytes y(want.size());
        gpu().embedding(table_dev.tensor(t, {rows, dim}), ids_dev.tensor(it, {n}),
                        y.tensor(yt, {n, dim}));
        const std::string what = "embedding " + dt(t) + " ids " + dt(it) + " -> " + dt(yt);
        table_dev.body(what);
        ids_dev.body(what);
        const std::vector<std::uint8_t> got = y.body(what);
        const bool equal = got == want && got == cpu_y;
        EXPECT_TRUE(got == want) << what << ": the rows differ from the CPU dequantiser's";
        EXPECT_TRUE(got == cpu_y) << what << ": the rows differ from the CPU backend's embedding";
        records().push_back({what + " byte for byte", equal ? 0.0 : 1.0, 0.0});
      }
    }
  }
}

TEST_F(QuantParity, embedding_refuses_an_id_outside_a_quantised_table) {
  const std::vector<std::uint8_t> table = test::random_blocks(DType::kQ8_0, 10, 7);
  const std::vector<std::int32_t> ids = {1, 10, 3};
  DeviceBytes table_dev(table), ids_dev(ids), y(3 * 32 * sizeof(float));
  try {
    gpu().embedding(table_dev.tensor(DType::kQ8_0, {10, 32}), ids_dev.tensor(DType::kI32, {3}),
                    y.tensor(DType::kF32, {3, 32}));
    FAIL() << "an id past the table's 10 rows was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadModelFile);
    EXPECT_NE(std::string(e.what()).find("token id 10"), std::string::npos) << e.what();
  }
}

// ---- refusals ----

TEST_F(QuantParity, linear_refuses_codes_without_a_fitting_quant_state_and_partial_blocks) {
  const std::int64_t n = 4, k = 128;
  const QuantCase w(DType::kBnb4, n, k, 9, true);
  DeviceBytes x(static_cast<std::size_t>(k) * 4), y(static_cast<std::size_t>(n) * 4);
  const Tensor xt = x.tensor(DType::kF32, {1, k});
  const Tensor yt = y.tensor(DType::kF32, {1, n});
  const Tensor codes = w.dev->tensor(DType::kBnb4, {n, k});
  const auto refused = [&](const char* what, const auto& call, const char* says) {
    try {
      call();
      ADD_FAILURE() << what << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << what << ": " << e.what();
    }
  };
  refused(
      "codes without a state", [&] { gpu().linear(xt, codes, nullptr, yt, {}); }, "no quant state");
  Bnb4State short_state = w.dev_state;
  short_state.absmax = short_state.absmax.rows(0, short_state.absmax.shape[0] - 1);
  WeightScaling s;
  s.bnb4 = &short_state;
  refused(
      "an absmax one block short", [&] { gpu().linear(xt, codes, nullptr, yt, s); }, "absmax");
  // A Q4_K weight whose rows are 128 values: half a block.
  const std::vector<std::uint8_t> blocks = test::random_blocks(DType::kQ4_K, 2, 3);
  DeviceBytes q4(blocks);
  Tensor partial = q4.tensor(DType::kQ4_K, {n, k});
  refused(
      "rows of half a Q4_K block", [&] { gpu().linear(xt, partial, nullptr, yt, {}); },
      "whole blocks");
  s.bnb4 = &w.dev_state;
  const QuantCase q8(DType::kQ8_0, n, k, 4, true);
  refused(
      "a quant state with a Q8_0 weight",
      [&] {
        gpu().linear(xt, q8.dev->tensor(DType::kQ8_0, {n, k}), nullptr, yt, s);
      },
      "quant state");
}

}  // namespace
}  // namespace ferry
