// The CUDA backend at the sizes a 720p video takes (1280x704x121: 27,280 tokens), where the
// parity suite's small shapes cannot reach: index arithmetic past 2^31, grids of hundreds of
// thousands of blocks, cuBLASLt's choices for the real layer shapes, chunking across the
// workspace. Each result is checked element by element for being written and finite (outputs
// start as all-ones bytes, a NaN), and on sampled rows against a reference on the CPU: float64 for
// attention, the CPU backend for linear, exact f32 rounding for the elementwise add.
//
// Needs a GPU with about 14 GiB free and takes seconds there; skipped without one. It is not
// registered with CTest (tests/gpu/run.sh runs it on the GPU machine, where a skip is a failure).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/tensor/convert.h"
#include "cuda/attention.cuh"
#include "cuda/cuda_backend.h"
#include "cuda/device_info.h"
#include "cuda/gemm.h"

namespace ferry::cuda {
namespace {

constexpr std::int64_t kTokens = 27280;  // 1280x704x121 after the VAE and the 2x2 patches
constexpr std::int64_t kHeads = 24;
constexpr std::int64_t kHeadDim = 128;
constexpr std::int64_t kDim = 3072;
constexpr std::int64_t kFfn = 14336;
// The parity suite's bounds (tests/backend/backend_parity_test.cpp, "Thresholds"): 16-bit outputs
// of products and attention ≈ 1e-2 relative; f32 sums of K products 1e-6·√K.
constexpr double kSixteenBit = 1e-2;
double f32_sum(std::int64_t k) {
  return 1e-6 * std::sqrt(static_cast<double>(k));
}

// Fixed pseudo-random numbers (splitmix64), uniform in [-1, 1).
struct Random {
  std::uint64_t state;
  std::uint64_t bits() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float next() { return static_cast<float>(bits() >> 40) * (2.0f / 16777216.0f) - 1.0f; }
};

std::vector<std::uint16_t> random_bf16(std::size_t n, std::uint64_t seed) {
  std::vector<std::uint16_t> v(n);
  Random rng{seed};
  for (auto& e : v) e = f32_to_bf16(rng.next());
  return v;
}

// A device tensor that owns its memory; starts as all-ones bytes (NaN in every float dtype).
struct DeviceTensor {
  std::unique_ptr<DeviceBuffer> memory;
  Tensor t;
};
DeviceTensor device_tensor(Backend& backend, DType dtype, Shape shape) {
  DeviceTensor d;
  const std::size_t bytes = static_cast<std::size_t>(shape.numel()) * dtype_size(dtype);
  d.memory = backend.allocate(bytes);
  d.t = Tensor{d.memory->data(), dtype, shape, Device::kCuda};
  if (cudaMemset(d.t.data, 0xFF, bytes) != cudaSuccess) throw std::runtime_error("cudaMemset");
  return d;
}

template <typename T>
std::vector<T> download(Backend& backend, const Tensor& t) {
  std::vector<T> host(t.bytes() / sizeof(T));
  backend.download(t, host.data());
  return host;
}

// Whether every bf16 element is finite (an unwritten one is a NaN); the index of the first not.
std::int64_t first_non_finite(const std::vector<std::uint16_t>& v) {
  for (std::size_t i = 0; i < v.size(); ++i) {
    if ((v[i] & 0x7F80) == 0x7F80) return static_cast<std::int64_t>(i);
  }
  return -1;
}

class VideoSize : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    const auto info = query_device(&why);
    if (!info) GTEST_SKIP() << "no CUDA device: " << why;
    const DeviceMemory m = sample_device_memory();
    constexpr std::uint64_t kNeed = std::uint64_t{14} << 30;
    if (m.free_bytes < kNeed) {
      GTEST_SKIP() << "needs 14 GiB of free device memory, the GPU has " << (m.free_bytes >> 20)
                   << " MiB free";
    }
    compute_capability_ = info->compute_major * 10 + info->compute_minor;
  }
  int compute_capability_ = 0;
};

// o = softmax(q·kᵀ·scale)·v for one query row and head, in float64 from the bf16 inputs.
std::vector<double> attention_row(const std::vector<std::uint16_t>& q,
                                  const std::vector<std::uint16_t>& k,
                                  const std::vector<std::uint16_t>& v, std::int64_t keys,
                                  std::int64_t row, std::int64_t head, double scale) {
  const auto at = [](const std::vector<std::uint16_t>& t, std::int64_t token, std::int64_t h,
                     std::int64_t d) {
    return static_cast<double>(
        bf16_to_f32(t[static_cast<std::size_t>((token * kHeads + h) * kHeadDim + d)]));
  };
  std::vector<double> p(static_cast<std::size_t>(keys));
  double top = -INFINITY;
  for (std::int64_t j = 0; j < keys; ++j) {
    double dot = 0;
    for (std::int64_t d = 0; d < kHeadDim; ++d) dot += at(q, row, head, d) * at(k, j, head, d);
    p[static_cast<std::size_t>(j)] = dot * scale;
    top = std::max(top, dot * scale);
  }
  double sum = 0;
  for (double& e : p) sum += (e = std::exp(e - top));
  std::vector<double> o(static_cast<std::size_t>(kHeadDim), 0.0);
  for (std::int64_t j = 0; j < keys; ++j) {
    for (std::int64_t d = 0; d < kHeadDim; ++d)
      o[static_cast<std::size_t>(d)] += p[static_cast<std::size_t>(j)] * at(v, j, head, d);
  }
  for (double& e : o) e /= sum;
  return o;
}

// The flash kernel (CudaBackend's default for bf16, D = 128) and the tiled one
// (flash_attention = false) on the same inputs: every output element written and finite, sampled
// rows of each against float64, and the two against each other over the whole output.
void check_attention(int compute_capability, std::int64_t len, std::int64_t keys) {
  CudaBackendOptions tiled_options;
  tiled_options.flash_attention = false;
  CudaBackend flash_backend;
  CudaBackend tiled_backend(tiled_options);
  const auto hq = random_bf16(static_cast<std::size_t>(len * kHeads * kHeadDim), 1);
  const auto hk = random_bf16(static_cast<std::size_t>(keys * kHeads * kHeadDim), 2);
  const auto hv = random_bf16(static_cast<std::size_t>(keys * kHeads * kHeadDim), 3);
  const DeviceTensor q = device_tensor(flash_backend, DType::kBF16, {len, kHeads, kHeadDim});
  const DeviceTensor k = device_tensor(flash_backend, DType::kBF16, {keys, kHeads, kHeadDim});
  const DeviceTensor v = device_tensor(flash_backend, DType::kBF16, {keys, kHeads, kHeadDim});
  const DeviceTensor o_flash = device_tensor(flash_backend, DType::kBF16, {len, kHeads, kHeadDim});
  const DeviceTensor o_tiled = device_tensor(flash_backend, DType::kBF16, {len, kHeads, kHeadDim});
  flash_backend.upload(q.t, hq.data());
  flash_backend.upload(k.t, hk.data());
  flash_backend.upload(v.t, hv.data());
  flash_backend.synchronize();

  AttentionArgs args;
  args.q = q.t.data;
  args.k = k.t.data;
  args.v = v.t.data;
  args.q_dtype = args.k_dtype = args.v_dtype = DType::kBF16;
  args.dim = kHeadDim;
  ASSERT_TRUE(flash_attention_applies(args, compute_capability))
      << "the flash kernel does not take bf16, D = 128 on sm_" << compute_capability;

  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  flash_backend.attention(q.t, k.t, v.t, scale, nullptr, false, o_flash.t);
  flash_backend.synchronize();
  tiled_backend.attention(q.t, k.t, v.t, scale, nullptr, false, o_tiled.t);
  tiled_backend.synchronize();
  const auto flash = download<std::uint16_t>(flash_backend, o_flash.t);
  const auto tiled = download<std::uint16_t>(flash_backend, o_tiled.t);
  ASSERT_EQ(first_non_finite(flash), -1) << "flash: element not written or not finite";
  ASSERT_EQ(first_non_finite(tiled), -1) << "tiled: element not written or not finite";

  // Rows at the ends, at a 64-row tile boundary, in the middle, and two at random.
  Random rng{7};
  const std::int64_t rows[] = {
      0,
      1,
      63,
      64,
      len / 2,
      len - 1,
      static_cast<std::int64_t>(rng.bits() % static_cast<std::uint64_t>(len)),
      static_cast<std::int64_t>(rng.bits() % static_cast<std::uint64_t>(len))};
  double flash_diff = 0, tiled_diff = 0, magnitude = 0;
  for (const std::int64_t row : rows) {
    for (const std::int64_t head : {std::int64_t{0}, kHeads / 2, kHeads - 1}) {
      const auto ref = attention_row(hq, hk, hv, keys, row, head, static_cast<double>(scale));
      for (std::int64_t d = 0; d < kHeadDim; ++d) {
        const auto i = static_cast<std::size_t>((row * kHeads + head) * kHeadDim + d);
        const double r = ref[static_cast<std::size_t>(d)];
        flash_diff = std::max(flash_diff, std::fabs(bf16_to_f32(flash[i]) - r));
        tiled_diff = std::max(tiled_diff, std::fabs(bf16_to_f32(tiled[i]) - r));
        magnitude = std::max(magnitude, std::fabs(r));
      }
    }
  }
  EXPECT_LE(flash_diff / magnitude, kSixteenBit) << "flash vs float64 on 24 sampled rows";
  EXPECT_LE(tiled_diff / magnitude, kSixteenBit) << "tiled vs float64 on 24 sampled rows";

  double between = 0, largest = 0;
  for (std::size_t i = 0; i < flash.size(); ++i) {
    const double t = bf16_to_f32(tiled[i]);
    between = std::max(between, std::fabs(bf16_to_f32(flash[i]) - t));
    largest = std::max(largest, std::fabs(t));
  }
  EXPECT_LE(between / largest, 2 * kSixteenBit) << "flash vs tiled over the whole output";
  std::printf(
      "attention L %lld S %lld: vs float64 (24 rows) flash %.2e tiled %.2e; flash vs tiled %.2e\n",
      static_cast<long long>(len), static_cast<long long>(keys), flash_diff / magnitude,
      tiled_diff / magnitude, between / largest);
}

TEST_F(VideoSize, flash_and_tiled_attention_agree_with_float64_at_27280_queries_and_keys) {
  check_attention(compute_capability_, kTokens, kTokens);
}

TEST_F(VideoSize, flash_and_tiled_attention_agree_with_float64_at_27280_queries_and_512_keys) {
  check_attention(compute_capability_, kTokens, 512);
}

// y[27280, 14336] = x[27280, 3072] · (scale · w)ᵀ + bias (f32), the FFN's first layer at 720p:
// bf16 and fp8 e4m3 weights, bf16 and f32 outputs. The f32 bias makes a bf16 y go through the f32
// staging block in row blocks (1,536 rows at the default 64 MiB workspace), and an f32 y take
// the preloaded bias with bf16 operands (beta = 1). Every output element is checked written and
// finite; 8 rows (at block boundaries among them) against the CPU backend.
TEST_F(VideoSize, linear_27280x3072x14336_bf16_and_fp8_with_f32_bias_matches_the_cpu_on_rows) {
  CudaBackend gpu;
  cpu::CpuBackend cpu;
  const auto hx = random_bf16(static_cast<std::size_t>(kTokens * kDim), 11);
  std::vector<std::uint8_t> hw8(static_cast<std::size_t>(kFfn * kDim));
  std::vector<std::uint16_t> hw16(hw8.size());
  Random rng{12};
  for (std::size_t i = 0; i < hw8.size(); ++i) {
    hw8[i] = f32_to_f8e4m3(rng.next() * 0.1f);
    hw16[i] = f32_to_bf16(rng.next() * 0.1f);
  }
  std::vector<float> hbias(static_cast<std::size_t>(kFfn));
  for (float& b : hbias) b = rng.next();
  const DeviceTensor x = device_tensor(gpu, DType::kBF16, {kTokens, kDim});
  const DeviceTensor w16 = device_tensor(gpu, DType::kBF16, {kFfn, kDim});
  const DeviceTensor w8 = device_tensor(gpu, DType::kF8E4M3, {kFfn, kDim});
  const DeviceTensor bias = device_tensor(gpu, DType::kF32, {kFfn});
  gpu.upload(x.t, hx.data());
  gpu.upload(w16.t, hw16.data());
  gpu.upload(w8.t, hw8.data());
  gpu.upload(bias.t, hbias.data());

  const std::int64_t rows[] = {0, 1, 1535, 1536, 3072, kTokens / 2, kTokens - 2, kTokens - 1};
  constexpr std::int64_t kRows = 8;
  std::vector<std::uint16_t> x_rows(static_cast<std::size_t>(kRows * kDim));
  for (std::int64_t r = 0; r < kRows; ++r) {
    std::memcpy(x_rows.data() + r * kDim, hx.data() + rows[r] * kDim, kDim * sizeof(std::uint16_t));
  }
  const Tensor cpu_x{x_rows.data(), DType::kBF16, {kRows, kDim}, Device::kCpu};
  const Tensor cpu_bias{hbias.data(), DType::kF32, {kFfn}, Device::kCpu};

  struct Case {
    const char* name;
    const DeviceTensor* w;
    void* host_w;
    float scale;
    DType y;
  };
  const Case cases[] = {{"bf16 w, bf16 y", &w16, hw16.data(), 1.0f, DType::kBF16},
                        {"fp8 w, bf16 y", &w8, hw8.data(), 0.75f, DType::kBF16},
                        {"bf16 w, f32 y", &w16, hw16.data(), 1.0f, DType::kF32},
                        {"fp8 w, f32 y", &w8, hw8.data(), 0.75f, DType::kF32}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const DeviceTensor y = device_tensor(gpu, c.y, {kTokens, kFfn});
    gpu.linear(x.t, c.w->t, &bias.t, y.t, c.scale);
    gpu.synchronize();

    const Tensor cpu_w{c.host_w, c.w->t.dtype, {kFfn, kDim}, Device::kCpu};
    std::vector<std::byte> ref_bytes(static_cast<std::size_t>(kRows * kFfn) * dtype_size(c.y));
    const Tensor cpu_y{ref_bytes.data(), c.y, {kRows, kFfn}, Device::kCpu};
    cpu.linear(cpu_x, cpu_w, &cpu_bias, cpu_y, c.scale);

    std::vector<float> got_all(static_cast<std::size_t>(kTokens * kFfn));
    std::vector<float> ref(static_cast<std::size_t>(kRows * kFfn));
    if (c.y == DType::kBF16) {
      const auto raw = download<std::uint16_t>(gpu, y.t);
      ASSERT_EQ(first_non_finite(raw), -1) << "element not written or not finite";
      for (std::size_t i = 0; i < raw.size(); ++i) got_all[i] = bf16_to_f32(raw[i]);
      const auto* r16 = reinterpret_cast<const std::uint16_t*>(ref_bytes.data());
      for (std::size_t i = 0; i < ref.size(); ++i) ref[i] = bf16_to_f32(r16[i]);
    } else {
      got_all = download<float>(gpu, y.t);
      for (std::size_t i = 0; i < got_all.size(); ++i)
        ASSERT_TRUE(std::isfinite(got_all[i])) << "element " << i << " not written or not finite";
      std::memcpy(ref.data(), ref_bytes.data(), ref.size() * sizeof(float));
    }
    double diff = 0, magnitude = 0;
    for (std::int64_t r = 0; r < kRows; ++r) {
      for (std::int64_t j = 0; j < kFfn; ++j) {
        const double g = got_all[static_cast<std::size_t>(rows[r] * kFfn + j)];
        const double e = ref[static_cast<std::size_t>(r * kFfn + j)];
        diff = std::max(diff, std::fabs(g - e));
        magnitude = std::max(magnitude, std::fabs(e));
      }
    }
    const double bound = c.y == DType::kBF16 ? kSixteenBit : f32_sum(kDim);
    EXPECT_LE(diff / magnitude, bound);
    std::printf("linear %s: 8 rows vs the CPU backend %.2e (bound %.1e)\n", c.name,
                diff / magnitude, bound);
  }
  const LtGemmCounters n = lt_gemm_counters();
  std::printf("cuBLASLt: %llu heuristic queries, %llu plans, %llu without an algorithm\n",
              static_cast<unsigned long long>(n.heuristic_queries),
              static_cast<unsigned long long>(n.plans),
              static_cast<unsigned long long>(n.no_algorithm));
}

// out = a + b over 2^31 + 2^24 bf16 elements (4.03 GiB each): past the 32-bit index range, on a
// grid at its block cap. a repeats every 2^16 elements, b is constant per 2^24-element chunk and
// different in each ((c + 1) / 128), so an element computed from another index (a 32-bit wrap) gets
// the wrong b. Every element is compared with the CPU's rounding of the f32 sum.
TEST_F(VideoSize, add_over_more_than_2_pow_31_elements_writes_every_element_right) {
  CudaBackend gpu;
  constexpr std::int64_t kChunk = std::int64_t{1} << 24;
  constexpr std::int64_t kChunks = 129;  // 2^31 + 2^24 elements
  constexpr std::int64_t kN = kChunk * kChunks;
  const DeviceTensor a = device_tensor(gpu, DType::kBF16, {kN});
  const DeviceTensor b = device_tensor(gpu, DType::kBF16, {kN});
  const DeviceTensor out = device_tensor(gpu, DType::kBF16, {kN});
  const auto period = random_bf16(std::size_t{1} << 16, 21);
  std::vector<std::uint16_t> a_chunk(static_cast<std::size_t>(kChunk));
  for (std::size_t i = 0; i < a_chunk.size(); ++i) a_chunk[i] = period[i & 0xFFFF];
  std::vector<std::uint16_t> b_values(static_cast<std::size_t>(kChunks));  // all different
  for (std::int64_t c = 0; c < kChunks; ++c)
    b_values[static_cast<std::size_t>(c)] = f32_to_bf16(static_cast<float>(c + 1) / 128.0f);
  std::vector<std::uint16_t> b_chunk(static_cast<std::size_t>(kChunk));
  for (std::int64_t c = 0; c < kChunks; ++c) {
    std::fill(b_chunk.begin(), b_chunk.end(), b_values[static_cast<std::size_t>(c)]);
    gpu.upload(a.t.rows(c * kChunk, (c + 1) * kChunk), a_chunk.data());
    gpu.upload(b.t.rows(c * kChunk, (c + 1) * kChunk), b_chunk.data());
  }
  gpu.add(a.t, b.t, out.t);
  gpu.synchronize();

  std::vector<std::uint16_t> got(static_cast<std::size_t>(kChunk));
  std::vector<std::uint16_t> want(period.size());
  std::int64_t wrong = 0, first_wrong = -1;
  for (std::int64_t c = 0; c < kChunks; ++c) {
    gpu.download(out.t.rows(c * kChunk, (c + 1) * kChunk), got.data());
    const float bv = bf16_to_f32(b_values[static_cast<std::size_t>(c)]);
    for (std::size_t i = 0; i < want.size(); ++i)
      want[i] = f32_to_bf16(bf16_to_f32(period[i]) + bv);
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (got[i] != want[i & 0xFFFF]) {
        if (first_wrong < 0) first_wrong = c * kChunk + static_cast<std::int64_t>(i);
        ++wrong;
      }
    }
  }
  EXPECT_EQ(wrong, 0) << "elements wrong or not written, the first at index " << first_wrong;
}

}  // namespace
}  // namespace ferry::cuda
