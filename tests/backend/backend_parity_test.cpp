// Backend parity: every op of the CUDA backend on random inputs (odd sizes included) against the
// CPU backend, the reference. Each case compares the normalised error
//   max |cpu - cuda| / max(1e-6, max |cpu|)
// with a threshold chosen for the op (see "Thresholds"), fails on any NaN the CUDA result has
// where the CPU's has none (the CUDA outputs start as all-ones bytes, a NaN in every float dtype,
// so an element an op never wrote fails too), checks the guard bytes around every device tensor
// (outputs and inputs) and that no input was written.
//
// Built into ferry_cuda_tests only (FERRY_CUDA_PARITY_TEST); tests/CMakeLists.txt also globs
// this folder into the CPU-only ferry_tests, where the file compiles to nothing. Skipped without
// a GPU. After the run it prints one line per comparison (tests/gpu/run.sh keeps that summary).
#if defined(FERRY_CUDA_PARITY_TEST)

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/tensor/convert.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_info.h"

namespace ferry {
namespace {

// ---- Thresholds (normalised error) ----
//
// Data movement (permute, concat, slice, embedding, upsample, dup_up) and convert: the bytes
// must be identical (threshold 0): no arithmetic, and both backends share the codecs' rules.
constexpr double kExact = 0.0;

// One rounding step of the output dtype, relative to the largest output: a result whose f32 value
// differs by an ulp can land on the other side of a 16-bit rounding boundary. For f32 outputs a
// few f32 ulps (2^-21): the elementwise ops compute the same f32 expression on both sides (the
// kernels are built with --fmad=false), so in practice they agree bit for bit.
double one_rounding(DType t) {
  switch (t) {
    case DType::kBF16:
      return 0x1p-7;
    case DType::kF16:
      return 0x1p-10;
    case DType::kF8E4M3:
      return 0x1p-3;
    case DType::kF8E5M2:
      return 0x1p-2;
    default:
      return 0x1p-21;
  }
}

// Transcendentals (expf, tanhf) differ by an ulp or two between CUDA's libm and glibc; norms
// and softmax reduce in f64 on both sides but in another order, so the f32 factor they apply
// may differ by an ulp. 1e-6 is ~8 f32 ulps; 16-bit outputs allow one rounding flip on top.
double transcendental(DType t) {
  return t == DType::kF32 ? 1e-6 : one_rounding(t) + 1e-6;
}

// f32 sums of K products in another order (cuBLAS SGEMM vs the CPU's blocked GEMM): the error
// of a random-sign sum grows like √K ulps of its terms, and 1e-6·√K stays far above that
// (≈ 8·√K ulps) while a wrong element, bias or block boundary is O(1).
double f32_sum(std::int64_t k) {
  return 1e-6 * std::sqrt(static_cast<double>(std::max<std::int64_t>(k, 1)));
}

// 16-bit outputs of products and attention: ≈1e-2 relative — the output's own rounding (2^-8 for
// bf16) plus accumulation-order differences, and in the flash kernel the bf16 rounding of P
// (2^-9 relative per weight), the same rounding FlashAttention applies.
constexpr double kSixteenBit = 1e-2;

// f32 attention: a score's f32 error (≈ 2^-24·Σ|q·k|, ≤ 1e-6·D/4 for inputs in [-1, 1] and
// scale 1/√D or the unscaled T5 D = 64) becomes the same relative error of its softmax weight;
// 3e-5 covers D up to 1024 with room, while one wrong bias bucket moves an output by ≈ 0.1.
constexpr double kF32Attention = 3e-5;

// ---- the summary printed after the run ----

struct Record {
  std::string test;
  std::string what;
  double error;
  double threshold;
  bool passed;
};

std::vector<Record>& records() {
  static std::vector<Record> all;
  return all;
}

class SummaryPrinter : public ::testing::Environment {
 public:
  void TearDown() override {
    if (records().empty()) return;
    int failed = 0;
    for (const Record& r : records()) failed += r.passed ? 0 : 1;
    std::printf("\n== backend parity summary: %zu comparisons, %d failed\n", records().size(),
                failed);
    std::printf("%-4s  %-44s  %-58s  %10s  %10s\n", "", "test", "case", "error", "threshold");
    for (const Record& r : records()) {
      std::printf("%-4s  %-44s  %-58s  %10.3g  %10.3g\n", r.passed ? "ok" : "FAIL", r.test.c_str(),
                  r.what.c_str(), r.error, r.threshold);
    }
    std::fflush(stdout);
  }
};

[[maybe_unused]] ::testing::Environment* const kSummary =
    ::testing::AddGlobalTestEnvironment(new SummaryPrinter);

// ---- tensors on both backends ----

constexpr std::size_t kGuardBytes =
    1024;  // a multiple of 256: the tensor keeps cudaMalloc's alignment

std::byte guard_byte(std::size_t i) {
  return static_cast<std::byte>((i * 131 + 0x5A) & 0xFF);
}

void cuda_ok(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

std::uint32_t next_seed() {
  static std::uint32_t seed = 1;
  return seed++;
}

enum class Fill { kRandom, kOutput };

// One tensor on both backends. The device copy sits between two guard regions of one cudaMalloc;
// an output's device bytes start as 0xFF (NaN in every float dtype).
class Operand {
 public:
  Operand(DType dtype, Shape shape, Fill fill = Fill::kRandom, float lo = -1.0f, float hi = 1.0f) {
    init(dtype, shape);
    if (fill == Fill::kRandom) {
      std::mt19937 rng(next_seed());
      std::uniform_real_distribution<float> dist(lo, hi);
      std::vector<float> values(static_cast<std::size_t>(cpu.numel()));
      for (float& v : values) v = dist(rng);
      convert_from_f32(values.data(), dtype, initial_.data(), values.size());
      is_output_ = false;
    } else {
      is_output_ = true;
    }
    finish(fill == Fill::kOutput);
  }

  // Given bytes (ids, or values chosen by the test).
  Operand(DType dtype, Shape shape, const void* bytes) {
    init(dtype, shape);
    std::memcpy(initial_.data(), bytes, initial_.size());
    is_output_ = false;
    finish(false);
  }

  ~Operand() {
    if (base_ != nullptr) cudaFree(base_);
  }
  Operand(const Operand&) = delete;
  Operand& operator=(const Operand&) = delete;

  Tensor cpu;
  Tensor gpu;

  const std::vector<std::byte>& initial() const { return initial_; }
  const std::vector<std::byte>& host() const { return host_; }
  bool is_output() const { return is_output_; }
  // Marks an input as written in place by the op (gated_add's x, rope_3d's x, an aliased out).
  void written() { is_output_ = true; }

  // The device bytes (body) and whether both guard regions are intact; the caller synchronised.
  std::vector<std::byte> device_body(std::string* guard_damage) const {
    std::vector<std::byte> all(body_ + 2 * kGuardBytes);
    cuda_ok(cudaMemcpy(all.data(), base_, all.size(), cudaMemcpyDeviceToHost), "download");
    for (std::size_t i = 0; i < kGuardBytes; ++i) {
      if (all[i] != guard_byte(i) && guard_damage->empty()) {
        *guard_damage =
            "guard byte " + std::to_string(kGuardBytes - i) + " before the tensor was overwritten";
      }
      const std::size_t j = kGuardBytes + body_ + i;
      if (all[j] != guard_byte(j) && guard_damage->empty()) {
        *guard_damage = "guard byte " + std::to_string(i) + " after the tensor was overwritten";
      }
    }
    return {all.begin() + static_cast<std::ptrdiff_t>(kGuardBytes),
            all.begin() + static_cast<std::ptrdiff_t>(kGuardBytes + body_)};
  }

 private:
  void init(DType dtype, const Shape& shape) {
    cpu.dtype = gpu.dtype = dtype;
    cpu.shape = gpu.shape = shape;
    cpu.device = Device::kCpu;
    gpu.device = Device::kCuda;
    body_ = cpu.bytes();
    initial_.assign(body_, std::byte{0});
  }

  void finish(bool output) {
    host_.assign(body_ + 16, std::byte{0});
    std::memcpy(host_.data(), initial_.data(), body_);
    cpu.data = host_.data();
    std::vector<std::byte> all(body_ + 2 * kGuardBytes);
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = guard_byte(i);
    if (output) {
      std::fill(all.begin() + static_cast<std::ptrdiff_t>(kGuardBytes),
                all.begin() + static_cast<std::ptrdiff_t>(kGuardBytes + body_), std::byte{0xFF});
    } else {
      std::memcpy(all.data() + kGuardBytes, initial_.data(), body_);
    }
    cuda_ok(cudaMalloc(&base_, all.size()), "cudaMalloc (test tensor)");
    cuda_ok(cudaMemcpy(base_, all.data(), all.size(), cudaMemcpyHostToDevice), "upload");
    // The backend's stream does not wait for the legacy stream: finish the copy here.
    cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    gpu.data = static_cast<std::byte*>(base_) + kGuardBytes;
  }

  std::size_t body_ = 0;
  std::vector<std::byte> initial_;
  std::vector<std::byte> host_;
  void* base_ = nullptr;
  bool is_output_ = false;
};

std::vector<float> as_f32(DType dtype, const std::byte* bytes, std::size_t n) {
  std::vector<float> v(n);
  convert_to_f32(dtype, bytes, v.data(), n);
  return v;
}

bool is_float(DType t) {
  return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16 || t == DType::kF8E4M3 ||
         t == DType::kF8E5M2 || t == DType::kF64;
}

// ---- the comparison ----

struct Outcome {
  double error = 0;
  std::string problem;  // empty when the comparison passed
};

Outcome compare(const Operand& out, const std::vector<std::byte>& got, double threshold) {
  Outcome r;
  const std::vector<std::byte>& want = out.host();
  const std::size_t bytes = got.size();
  if (threshold == kExact || !is_float(out.cpu.dtype)) {
    for (std::size_t i = 0; i < bytes; ++i) {
      if (got[i] != want[i]) {
        r.error = INFINITY;
        r.problem = "byte " + std::to_string(i) + " differs (exact op)";
        return r;
      }
    }
    return r;
  }
  const auto n = static_cast<std::size_t>(out.cpu.numel());
  const std::vector<float> a = as_f32(out.cpu.dtype, want.data(), n);
  const std::vector<float> b = as_f32(out.cpu.dtype, got.data(), n);
  double max_a = 0, max_diff = 0;
  std::size_t worst = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isfinite(a[i])) max_a = std::max(max_a, static_cast<double>(std::fabs(a[i])));
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isnan(a[i]) != std::isnan(b[i])) {
      r.error = INFINITY;
      r.problem = "element " + std::to_string(i) + ": cpu " + std::to_string(a[i]) + ", cuda " +
                  std::to_string(b[i]) + (std::isnan(b[i]) ? " (NaN, or never written)" : "");
      return r;
    }
    if (std::isnan(a[i]) || a[i] == b[i]) continue;
    const double diff = std::isinf(a[i]) || std::isinf(b[i])
                            ? INFINITY
                            : std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    if (diff > max_diff) {
      max_diff = diff;
      worst = i;
    }
  }
  r.error = max_diff / std::max(1e-6, max_a);
  if (!(r.error <= threshold)) {
    r.problem = "element " + std::to_string(worst) + ": cpu " + std::to_string(a[worst]) +
                ", cuda " + std::to_string(b[worst]);
  }
  return r;
}

// Synchronises `gpu`, compares every output with the CPU's, checks all guards and that inputs
// kept their bytes. Records one summary line per output.
void expect_parity(Backend& gpu, const std::string& what, double threshold,
                   std::initializer_list<const Operand*> operands) {
  try {
    gpu.synchronize();
  } catch (const Error& e) {
    ADD_FAILURE() << what << ": the CUDA stream failed: " << e.what();
    records().push_back({::testing::UnitTest::GetInstance()->current_test_info()->name(), what,
                         INFINITY, threshold, false});
    return;
  }
  for (const Operand* o : operands) {
    std::string damage;
    const std::vector<std::byte> body = o->device_body(&damage);
    EXPECT_TRUE(damage.empty()) << what << ": " << describe(o->gpu) << ": " << damage;
    if (!o->is_output()) {
      EXPECT_TRUE(body == o->initial()) << what << ": input " << describe(o->gpu) << " was written";
      continue;
    }
    const Outcome r = compare(*o, body, threshold);
    const bool passed = r.problem.empty() && damage.empty();
    EXPECT_TRUE(r.problem.empty()) << what << ": " << describe(o->gpu) << ": error " << r.error
                                   << " > " << threshold << " at " << r.problem;
    records().push_back({::testing::UnitTest::GetInstance()->current_test_info()->name(),
                         what + " -> " + std::string(dtype_name(o->cpu.dtype)), r.error, threshold,
                         passed});
  }
}

std::string shape_text(std::initializer_list<std::int64_t> dims) {
  std::string s;
  for (std::int64_t d : dims) {
    if (!s.empty()) s += 'x';
    s += std::to_string(d);
  }
  return s;
}

std::string dt(DType t) {
  return std::string(dtype_name(t));
}

// ---- the fixture ----

class BackendParity : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda::query_device(&why))
      GTEST_SKIP() << "no CUDA device, the parity tests need one: " << why;
  }

  static cpu::CpuBackend& cpu() {
    static cpu::CpuBackend backend;
    return backend;
  }
  // The default CUDA backend (flash attention where it applies).
  static cuda::CudaBackend& gpu() {
    static cuda::CudaBackend backend;
    return backend;
  }
  // Every attention on the tiled kernel.
  static cuda::CudaBackend& gpu_tiled() {
    static cuda::CudaBackend backend([] {
      cuda::CudaBackendOptions o;
      o.flash_attention = false;
      return o;
    }());
    return backend;
  }
  // A 4 KiB workspace: at the test's sizes linear and conv3d go through several row blocks and
  // weight panels, and write output blocks at unaligned addresses.
  static cuda::CudaBackend& gpu_small() {
    static cuda::CudaBackend backend([] {
      cuda::CudaBackendOptions o;
      o.workspace_bytes = 4 << 10;
      o.gemm_workspace_bytes = 1 << 20;
      return o;
    }());
    return backend;
  }
};

// ---- matrix products ----

struct LinearCase {
  DType x, w, y;
  bool bias;
  DType b;
  float scale;
};

TEST_F(BackendParity, linear_matches_the_cpu_backend_for_every_weight_and_output_dtype) {
  const LinearCase cases[] = {
      {DType::kF32, DType::kF32, DType::kF32, true, DType::kF32, 1.0f},  // f32 head
      {DType::kF32, DType::kBF16, DType::kBF16, true, DType::kBF16,
       1.0f},  // x rounded, bias preloaded
      {DType::kF32, DType::kBF16, DType::kBF16, true, DType::kF32,
       1.0f},  // f32 bias: staged epilogue
      {DType::kBF16, DType::kBF16, DType::kBF16, false, DType::kF32, 1.0f},  // in place, no bias
      {DType::kBF16, DType::kBF16, DType::kF32, true, DType::kBF16, 1.0f},   // bf16 GEMM, f32 out
      {DType::kF32, DType::kBF16, DType::kF32, true, DType::kF32, 1.0f},     // bf16 weights widened
      {DType::kF32, DType::kF16, DType::kF16, true, DType::kF16, 1.0f},
      {DType::kBF16, DType::kF32, DType::kBF16, true, DType::kBF16, 1.0f},  // f32 GEMM, staged
      {DType::kF32, DType::kF16, DType::kBF16, false, DType::kF32, 1.0f},   // mixed: f32 GEMM
      {DType::kF32, DType::kF8E4M3, DType::kBF16, true, DType::kBF16, 0.37f},
      {DType::kF32, DType::kF8E5M2, DType::kF32, true, DType::kF32, 1.7f},
      {DType::kF16, DType::kF8E4M3, DType::kF16, false, DType::kF32, 0.05f},
  };
  const std::int64_t shapes[][3] = {{1, 1, 1}, {37, 53, 129}, {64, 256, 31}, {300, 96, 70}};
  for (cuda::CudaBackend* gpu : {&gpu(), &gpu_small()}) {
    for (const LinearCase& c : cases) {
      for (const auto& s : shapes) {
        const std::int64_t m = s[0], k = s[1], n = s[2];
        Operand x(c.x, {m, k});
        Operand w(c.w, {n, k});
        Operand b(c.b, {n});
        Operand y(c.y, {m, n}, Fill::kOutput);
        cpu().linear(x.cpu, w.cpu, c.bias ? &b.cpu : nullptr, y.cpu, c.scale);
        gpu->linear(x.gpu, w.gpu, c.bias ? &b.gpu : nullptr, y.gpu, c.scale);
        const double threshold = c.y == DType::kF32 && c.x != DType::kBF16 && c.w == DType::kF32
                                     ? f32_sum(k)
                                 : c.y == DType::kF32 ? std::max(f32_sum(k), 1e-5)
                                                      : kSixteenBit;
        expect_parity(*gpu,
                      "x " + dt(c.x) + " w " + dt(c.w) + (c.bias ? " b " + dt(c.b) : "") + " " +
                          shape_text({m, k, n}) + (gpu == &gpu_small() ? " small ws" : ""),
                      threshold, {&y, &x, &w, &b});
      }
    }
  }
}

TEST_F(BackendParity, linear_add_adds_the_product_to_y_with_one_rounding) {
  // The runtime LoRA's calls: bf16 activations and low-rank factors into a bf16 or f32 output,
  // f32 factors (the Lightning release), a full fp8 delta with its scale, on the direct path
  // (beta = 1) and the staged one (the small workspace).
  const LinearCase cases[] = {
      {DType::kBF16, DType::kBF16, DType::kBF16, false, DType::kF32, 0.75f},
      {DType::kF32, DType::kBF16, DType::kF32, false, DType::kF32, -1.25f},
      {DType::kBF16, DType::kF32, DType::kBF16, false, DType::kF32, 1.0f},
      {DType::kF32, DType::kF8E4M3, DType::kBF16, false, DType::kF32, 0.37f},
  };
  const std::int64_t shapes[][3] = {{1, 1, 1}, {37, 16, 129}, {300, 64, 70}, {5, 96, 1}};
  for (cuda::CudaBackend* gpu : {&gpu(), &gpu_small()}) {
    for (const LinearCase& c : cases) {
      for (const auto& s : shapes) {
        const std::int64_t m = s[0], k = s[1], n = s[2];
        Operand x(c.x, {m, k});
        Operand w(c.w, {n, k});
        Operand y(c.y, {m, n});
        y.written();
        cpu().linear_add(x.cpu, w.cpu, y.cpu, c.scale);
        gpu->linear_add(x.gpu, w.gpu, y.gpu, c.scale);
        const double threshold = c.y == DType::kF32 ? std::max(f32_sum(k + 1), 1e-5) : kSixteenBit;
        expect_parity(*gpu,
                      "linear_add x " + dt(c.x) + " w " + dt(c.w) + " y " + dt(c.y) + " " +
                          shape_text({m, k, n}) + (gpu == &gpu_small() ? " small ws" : ""),
                      threshold, {&y, &x, &w});
      }
    }
  }
}

// ---- normalisation ----

TEST_F(BackendParity, rms_norm_matches_with_the_normalised_value_rounded_to_x_dtype) {
  for (const auto& [xt, wt] : {std::pair{DType::kF32, DType::kF32},
                               {DType::kBF16, DType::kF32},
                               {DType::kBF16, DType::kBF16},
                               {DType::kF16, DType::kF32}}) {
    for (const auto& [r, c] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {17, 33}, {5, 4096}}) {
      Operand x(xt, {r, c}, Fill::kRandom, -3.0f, 3.0f);
      Operand w(wt, {c});
      Operand y(xt, {r, c}, Fill::kOutput);
      cpu().rms_norm(x.cpu, w.cpu, 1e-6f, y.cpu);
      gpu().rms_norm(x.gpu, w.gpu, 1e-6f, y.gpu);
      expect_parity(gpu(), "x " + dt(xt) + " w " + dt(wt) + " " + shape_text({r, c}),
                    2 * transcendental(xt), {&y, &x, &w});
    }
  }
}

TEST_F(BackendParity, layer_norm_matches_with_and_without_affine) {
  for (const DType xt : {DType::kF32, DType::kBF16}) {
    for (const int affine : {0, 1, 2}) {  // none, weight only, weight and bias
      for (const auto& [r, c] : {std::pair<std::int64_t, std::int64_t>{3, 7}, {19, 3072}}) {
        Operand x(xt, {r, c}, Fill::kRandom, -2.0f, 5.0f);
        Operand w(DType::kF32, {c});
        Operand b(DType::kBF16, {c});
        Operand y(DType::kF32, {r, c}, Fill::kOutput);
        cpu().layer_norm(x.cpu, affine > 0 ? &w.cpu : nullptr, affine > 1 ? &b.cpu : nullptr, 1e-6f,
                         y.cpu);
        gpu().layer_norm(x.gpu, affine > 0 ? &w.gpu : nullptr, affine > 1 ? &b.gpu : nullptr, 1e-6f,
                         y.gpu);
        expect_parity(
            gpu(), "x " + dt(xt) + " affine " + std::to_string(affine) + " " + shape_text({r, c}),
            transcendental(DType::kF32), {&y, &x, &w, &b});
      }
    }
  }
}

TEST_F(BackendParity, channel_rms_norm_matches_over_channels_first_video) {
  for (const DType xt : {DType::kF32, DType::kBF16}) {
    for (const auto& s : {Shape{16, 3, 5, 7}, Shape{96, 2, 9, 11}, Shape{1, 1, 1, 1}}) {
      Operand x(xt, s, Fill::kRandom, -2.0f, 2.0f);
      Operand g(DType::kF32, {s[0]});
      Operand y(xt, s, Fill::kOutput);
      cpu().channel_rms_norm(x.cpu, g.cpu, y.cpu);
      gpu().channel_rms_norm(x.gpu, g.gpu, y.gpu);
      expect_parity(gpu(), "x " + dt(xt) + " " + s.str(), transcendental(xt), {&y, &x, &g});
    }
  }
}

// ---- elementwise ----

TEST_F(BackendParity, modulate_matches_with_per_column_and_per_row_parameters) {
  const std::int64_t r = 13, c = 77;
  for (const bool per_row : {false, true}) {
    for (const DType yt : {DType::kF32, DType::kBF16}) {
      Operand x(DType::kF32, {r, c});
      Operand scale(DType::kF32, per_row ? Shape{r, c} : Shape{c});
      Operand shift(DType::kBF16, per_row ? Shape{r, c} : Shape{c});
      Operand y(yt, {r, c}, Fill::kOutput);
      cpu().modulate(x.cpu, scale.cpu, shift.cpu, y.cpu);
      gpu().modulate(x.gpu, scale.gpu, shift.gpu, y.gpu);
      expect_parity(gpu(), std::string(per_row ? "[R,C]" : "[C]") + " params", one_rounding(yt),
                    {&y, &x, &scale, &shift});
    }
  }
}

TEST_F(BackendParity, gated_add_updates_x_in_place_with_every_gate_shape) {
  const std::int64_t r = 9, c = 131;
  for (const int gate_kind : {0, 1, 2}) {  // none, [C], [R,C]
    for (const DType xt : {DType::kF32, DType::kBF16}) {
      Operand x(xt, {r, c});
      x.written();
      Operand y(DType::kBF16, {r, c});
      Operand gate(DType::kF32, gate_kind == 2 ? Shape{r, c} : Shape{c});
      cpu().gated_add(x.cpu, y.cpu, gate_kind > 0 ? &gate.cpu : nullptr);
      gpu().gated_add(x.gpu, y.gpu, gate_kind > 0 ? &gate.gpu : nullptr);
      expect_parity(gpu(), "x " + dt(xt) + " gate kind " + std::to_string(gate_kind),
                    one_rounding(xt), {&x, &y, &gate});
    }
  }
}

TEST_F(BackendParity, add_scaled_updates_x_in_place) {
  const std::int64_t r = 7, c = 301;
  for (const DType xt : {DType::kF32, DType::kBF16}) {
    for (const float alpha : {1.0f, -0.35f}) {
      Operand x(xt, {r, c});
      x.written();
      Operand y(DType::kBF16, {r, c});
      cpu().add_scaled(x.cpu, y.cpu, alpha);
      gpu().add_scaled(x.gpu, y.gpu, alpha);
      expect_parity(gpu(), "add_scaled x " + dt(xt) + " alpha " + std::to_string(alpha),
                    one_rounding(xt), {&x, &y});
    }
  }
}

TEST_F(BackendParity, add_and_mul_match_including_an_output_aliasing_a) {
  for (const bool multiply : {false, true}) {
    for (const auto& [at, bt, ot] : {std::tuple{DType::kF32, DType::kF32, DType::kF32},
                                     {DType::kBF16, DType::kF32, DType::kBF16},
                                     {DType::kF16, DType::kBF16, DType::kF32}}) {
      Operand a(at, {7, 333});
      Operand b(bt, {7, 333});
      Operand out(ot, {7, 333}, Fill::kOutput);
      auto run = [&](Backend& be, const Tensor& x, const Tensor& y, const Tensor& o) {
        multiply ? be.mul(x, y, o) : be.add(x, y, o);
      };
      run(cpu(), a.cpu, b.cpu, out.cpu);
      run(gpu(), a.gpu, b.gpu, out.gpu);
      const std::string name = std::string(multiply ? "mul " : "add ") + dt(at) + " " + dt(bt);
      expect_parity(gpu(), name, one_rounding(ot), {&out, &a, &b});
    }
    Operand a(DType::kBF16, {1001});
    a.written();
    Operand b(DType::kBF16, {1001});
    multiply ? cpu().mul(a.cpu, b.cpu, a.cpu) : cpu().add(a.cpu, b.cpu, a.cpu);
    multiply ? gpu().mul(a.gpu, b.gpu, a.gpu) : gpu().add(a.gpu, b.gpu, a.gpu);
    expect_parity(gpu(), std::string(multiply ? "mul" : "add") + " in place",
                  one_rounding(DType::kBF16), {&a, &b});
  }
}

TEST_F(BackendParity, clamp_and_tanh_clamp_match_in_place_and_out_of_place) {
  for (const DType t : {DType::kF32, DType::kBF16}) {
    Operand x(t, {3, 1000}, Fill::kRandom, -8.0f, 8.0f);
    Operand y(t, {3, 1000}, Fill::kOutput);
    cpu().clamp(x.cpu, 0.0f, std::numeric_limits<float>::infinity(), y.cpu);
    gpu().clamp(x.gpu, 0.0f, std::numeric_limits<float>::infinity(), y.gpu);
    expect_parity(gpu(), "clamp as ReLU " + dt(t), 0, {&y, &x});
    cpu().clamp(x.cpu, -1.0f, 0.5f, y.cpu);
    gpu().clamp(x.gpu, -1.0f, 0.5f, y.gpu);
    expect_parity(gpu(), "clamp " + dt(t), 0, {&y, &x});
    cpu().tanh_clamp(x.cpu, 3.0f, y.cpu);
    gpu().tanh_clamp(x.gpu, 3.0f, y.gpu);
    expect_parity(gpu(), "tanh_clamp " + dt(t), transcendental(t), {&y, &x});
    Operand z(t, {777}, Fill::kRandom, -8.0f, 8.0f);
    z.written();
    cpu().tanh_clamp(z.cpu, 3.0f, z.cpu);
    gpu().tanh_clamp(z.gpu, 3.0f, z.gpu);
    expect_parity(gpu(), "tanh_clamp " + dt(t) + " in place", transcendental(t), {&z});
  }
}

TEST_F(BackendParity, gelu_tanh_gelu_erf_and_silu_match_in_place_and_out_of_place) {
  using Op = void (Backend::*)(const Tensor&, const Tensor&);
  const std::pair<const char*, Op> ops[] = {{"gelu_tanh ", &Backend::gelu_tanh},
                                            {"gelu_erf ", &Backend::gelu_erf},
                                            {"silu ", &Backend::silu}};
  for (const auto& [name, op] : ops) {
    for (const DType t : {DType::kF32, DType::kBF16}) {
      Operand x(t, {3, 1000}, Fill::kRandom, -8.0f, 8.0f);
      Operand y(t, {3, 1000}, Fill::kOutput);
      (cpu().*op)(x.cpu, y.cpu);
      (gpu().*op)(x.gpu, y.gpu);
      expect_parity(gpu(), std::string(name) + dt(t), transcendental(t), {&y, &x});
      Operand z(t, {777}, Fill::kRandom, -8.0f, 8.0f);
      z.written();
      (cpu().*op)(z.cpu, z.cpu);
      (gpu().*op)(z.gpu, z.gpu);
      expect_parity(gpu(), std::string(name) + dt(t) + " in place", transcendental(t), {&z});
    }
  }
}

TEST_F(BackendParity, softmax_matches_per_row_in_place_and_out_of_place) {
  for (const DType t : {DType::kF32, DType::kBF16}) {
    for (const auto& [r, c] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {9, 77}, {3, 5000}}) {
      Operand x(t, {r, c}, Fill::kRandom, -20.0f, 20.0f);
      Operand y(DType::kF32, {r, c}, Fill::kOutput);
      cpu().softmax(x.cpu, y.cpu);
      gpu().softmax(x.gpu, y.gpu);
      expect_parity(gpu(), dt(t) + " " + shape_text({r, c}), transcendental(DType::kF32), {&y, &x});
    }
  }
  Operand z(DType::kF32, {4, 513}, Fill::kRandom, -5.0f, 5.0f);
  z.written();
  cpu().softmax(z.cpu, z.cpu);
  gpu().softmax(z.gpu, z.gpu);
  expect_parity(gpu(), "in place", transcendental(DType::kF32), {&z});
}

TEST_F(BackendParity, convert_rounds_exactly_like_the_cpu_codecs) {
  const std::pair<DType, DType> pairs[] = {
      {DType::kF32, DType::kBF16},   {DType::kF32, DType::kF16},    {DType::kBF16, DType::kF32},
      {DType::kF16, DType::kBF16},   {DType::kBF16, DType::kF16},   {DType::kF32, DType::kF8E4M3},
      {DType::kF32, DType::kF8E5M2}, {DType::kF8E4M3, DType::kF32}, {DType::kBF16, DType::kBF16}};
  for (const auto& [from, to] : pairs) {
    // Values past every format's range (inf, NaN, saturation rules) and tiny ones (subnormals).
    for (const float range : {1e-6f, 1.0f, 600.0f, 1e5f}) {
      Operand x(from, {1237}, Fill::kRandom, -range, range);
      Operand y(to, {1237}, Fill::kOutput);
      cpu().convert(x.cpu, y.cpu);
      gpu().convert(x.gpu, y.gpu);
      expect_parity(gpu(), dt(from) + " -> " + dt(to) + " range " + std::to_string(range), kExact,
                    {&y, &x});
    }
  }
}

// ---- attention ----

struct AttentionCase {
  std::int64_t len, keys, heads, dim;
  DType in, out;
  bool rel;
  std::int64_t kv_heads = 0;  // 0: as many as query heads
  bool causal = false;
};

void run_attention(cpu::CpuBackend& cpu, cuda::CudaBackend& gpu, const AttentionCase& c,
                   const std::string& kernel) {
  const float scale =
      c.rel ? 1.0f : static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.dim)));
  const std::int64_t kv_heads = c.kv_heads == 0 ? c.heads : c.kv_heads;
  Operand q(c.in, {c.len, c.heads, c.dim});
  Operand k(c.in, {c.keys, kv_heads, c.dim});
  Operand v(c.in, {c.keys, kv_heads, c.dim});
  Operand rel(c.in, {32, c.heads}, Fill::kRandom, -3.0f, 3.0f);
  Operand o(c.out, {c.len, c.heads, c.dim}, Fill::kOutput);
  cpu.attention(q.cpu, k.cpu, v.cpu, scale, c.rel ? &rel.cpu : nullptr, c.causal, o.cpu);
  gpu.attention(q.gpu, k.gpu, v.gpu, scale, c.rel ? &rel.gpu : nullptr, c.causal, o.gpu);
  const double threshold =
      c.in == DType::kF32 && c.out == DType::kF32 ? kF32Attention : kSixteenBit;
  expect_parity(gpu,
                kernel + " L" + std::to_string(c.len) + " S" + std::to_string(c.keys) + " H" +
                    std::to_string(c.heads) + " Hk" + std::to_string(kv_heads) + " D" +
                    std::to_string(c.dim) + " " + dt(c.in) + (c.rel ? " t5-bias" : "") +
                    (c.causal ? " causal" : ""),
                threshold, {&o, &q, &k, &v, &rel});
}

TEST_F(BackendParity, flash_attention_matches_for_bf16_head_dim_128) {
  const AttentionCase cases[] = {
      {1, 1, 1, 128, DType::kBF16, DType::kBF16, false},
      {77, 130, 3, 128, DType::kBF16, DType::kBF16, false},  // partial query and key tiles
      {200, 64, 2, 128, DType::kBF16, DType::kF32, false},
      {64, 513, 5, 128, DType::kBF16, DType::kBF16, false},  // cross-attention-like
      {129, 129, 1, 128, DType::kBF16, DType::kBF16, false},
  };
  for (const AttentionCase& c : cases) {
    run_attention(cpu(), gpu(), c, "flash");
    run_attention(cpu(), gpu_tiled(), c, "tiled");
  }
}

TEST_F(BackendParity, tiled_attention_matches_for_other_head_dims_and_f32) {
  const AttentionCase cases[] = {
      {37, 53, 3, 64, DType::kF32, DType::kF32, false},
      {20, 7, 2, 40, DType::kF32, DType::kF32, false},
      {50, 50, 1, 384, DType::kF32, DType::kF32, false},   // Wan 2.1 VAE middle attention
      {33, 21, 1, 1024, DType::kF32, DType::kF32, false},  // Wan 2.2 VAE decoder
      {19, 40, 2, 200, DType::kF32, DType::kBF16, false},
      {45, 30, 4, 128, DType::kF32, DType::kF32, false},  // f32 D = 128: not the flash kernel
      {1, 1, 1, 1, DType::kF32, DType::kF32, false},
  };
  for (const AttentionCase& c : cases) run_attention(cpu(), gpu(), c, "tiled");
}

// Qwen3-VL's decoder prefill: key/value heads shared by groups of query heads (64/8 in the 32B
// model), causal; both kernels, sizes that leave partial query and key tiles.
TEST_F(BackendParity, causal_grouped_query_attention_matches) {
  const AttentionCase cases[] = {
      {77, 77, 8, 128, DType::kBF16, DType::kBF16, false, 1, true},
      {150, 150, 16, 128, DType::kBF16, DType::kBF16, false, 2, true},
      {150, 150, 4, 128, DType::kBF16, DType::kBF16, false, 2, false},
      {1, 1, 2, 128, DType::kBF16, DType::kBF16, false, 1, true},
  };
  for (const AttentionCase& c : cases) {
    run_attention(cpu(), gpu(), c, "flash");
    run_attention(cpu(), gpu_tiled(), c, "tiled");
  }
  const AttentionCase tiled_cases[] = {
      {37, 37, 6, 8, DType::kF32, DType::kF32, false, 3, true},
      {70, 70, 2, 64, DType::kBF16, DType::kBF16, false, 1, true},
  };
  for (const AttentionCase& c : tiled_cases) run_attention(cpu(), gpu(), c, "tiled");
}

TEST_F(BackendParity, t5_relative_bias_attention_matches_over_every_bucket) {
  // 150 positions: distances up to ±149 reach every bucket in both directions.
  const AttentionCase cases[] = {
      {150, 150, 4, 64, DType::kBF16, DType::kBF16, true},
      {150, 150, 2, 64, DType::kF32, DType::kF32, true},
      {9, 140, 3, 64, DType::kF32, DType::kF32, true},
  };
  for (const AttentionCase& c : cases) run_attention(cpu(), gpu(), c, "tiled");
}

TEST_F(BackendParity, attention_without_keys_writes_zeros) {
  Operand q(DType::kF32, {5, 2, 64});
  Operand k(DType::kF32, {0, 2, 64});
  Operand v(DType::kF32, {0, 2, 64});
  Operand o(DType::kF32, {5, 2, 64}, Fill::kOutput);
  cpu().attention(q.cpu, k.cpu, v.cpu, 0.125f, nullptr, false, o.cpu);
  gpu().attention(q.gpu, k.gpu, v.gpu, 0.125f, nullptr, false, o.gpu);
  expect_parity(gpu(), "S = 0", kExact, {&o, &q});
}

// Qwen's rotation by halves with bf16 tables (as the Qwen3-VL text model rounds them) and f32
// ones (the vision tower's); and H3's DiT's partial one (96 of 128 dims; the rest untouched).
TEST_F(BackendParity, rope_halves_matches_in_place) {
  for (const DType t : {DType::kF32, DType::kBF16}) {
    for (const auto& [len, heads, dim, half] :
         {std::tuple{std::int64_t{7}, std::int64_t{3}, std::int64_t{128}, std::int64_t{64}},
          {1, 1, 2, 1},
          {33, 2, 72, 36},
          {29, 3, 128, 48},
          {5, 2, 16, 6}}) {
      Operand x(t, {len, heads, dim}, Fill::kRandom, -4.0f, 4.0f);
      Operand c(t, {len, half}, Fill::kRandom, -1.0f, 1.0f);
      Operand s(t, {len, half}, Fill::kRandom, -1.0f, 1.0f);
      x.written();
      cpu().rope_halves(x.cpu, c.cpu, s.cpu);
      gpu().rope_halves(x.gpu, c.gpu, s.gpu);
      expect_parity(gpu(),
                    dt(t) + " rope_halves L" + std::to_string(len) + " D" + std::to_string(dim) +
                        " R" + std::to_string(2 * half),
                    t == DType::kF32 ? 1e-6 : one_rounding(t), {&x, &c, &s});
    }
  }
}

TEST_F(BackendParity, rope_3d_matches_in_place) {
  for (const DType t : {DType::kF32, DType::kBF16}) {
    for (const auto& [grid, heads, dim] :
         {std::tuple{RopeGrid{2, 3, 5}, std::int64_t{2}, std::int64_t{128}},
          {RopeGrid{1, 1, 1}, 1, 12},
          {RopeGrid{3, 4, 2}, 3, 64}}) {
      Operand x(t, {grid.frames * grid.height * grid.width, heads, dim}, Fill::kRandom, -4.0f,
                4.0f);
      x.written();
      cpu().rope_3d(x.cpu, grid);
      gpu().rope_3d(x.gpu, grid);
      expect_parity(gpu(),
                    dt(t) + " grid " + shape_text({grid.frames, grid.height, grid.width}) + " D" +
                        std::to_string(dim),
                    t == DType::kF32 ? 1e-6 : one_rounding(t), {&x});
    }
  }
}

TEST_F(BackendParity, rope_3d_on_a_run_of_tokens_matches) {
  const RopeGrid grid{3, 4, 5, 13};  // tokens 13 … 33 of 60
  Operand x(DType::kBF16, {21, 2, 128}, Fill::kRandom, -4.0f, 4.0f);
  x.written();
  cpu().rope_3d(x.cpu, grid);
  gpu().rope_3d(x.gpu, grid);
  expect_parity(gpu(), "bf16 tokens 13-33 of 3x4x5", one_rounding(DType::kBF16), {&x});
}

// ---- convolutions and resampling ----

struct ConvCase {
  std::int64_t ci, t, h, w, co, kt, kh, kw;
  Conv3dParams p;
  DType x, wt, y;
  bool bias;
  const char* what;
};

TEST_F(BackendParity, conv3d_matches_for_every_padding_and_stride) {
  Conv3dParams causal;  // CausalConv3d(3): 2 frames in front, 1 pixel around
  causal.pad_front = 2;
  causal.pad_top = causal.pad_bottom = causal.pad_left = causal.pad_right = 1;
  Conv3dParams down;  // downsample2d: pad right and bottom, stride 2
  down.stride_h = down.stride_w = 2;
  down.pad_bottom = down.pad_right = 1;
  Conv3dParams time_down;  // downsample3d's temporal conv: (3,1,1), stride (2,1,1)
  time_down.stride_t = 2;
  Conv3dParams odd;  // every field different
  odd.stride_t = 2;
  odd.stride_h = 3;
  odd.stride_w = 1;
  odd.pad_front = 1;
  odd.pad_back = 2;
  odd.pad_top = 0;
  odd.pad_bottom = 2;
  odd.pad_left = 3;
  odd.pad_right = 1;
  const ConvCase cases[] = {
      {3, 5, 9, 11, 8, 3, 3, 3, causal, DType::kF32, DType::kF32, DType::kF32, true,
       "causal 3x3x3"},
      {16, 3, 8, 10, 12, 1, 3, 3, down, DType::kF32, DType::kF32, DType::kF32, true,
       "downsample2d"},
      {6, 7, 5, 4, 6, 3, 1, 1, time_down, DType::kF32, DType::kF32, DType::kF32, false,
       "temporal stride 2"},
      {5, 4, 7, 9, 7, 2, 3, 2, odd, DType::kF32, DType::kF32, DType::kF32, true, "odd paddings"},
      {8, 2, 6, 6, 5, 1, 1, 1, Conv3dParams{}, DType::kF32, DType::kF32, DType::kF32, true,
       "1x1x1"},
      {4, 3, 6, 7, 9, 3, 3, 3, causal, DType::kF32, DType::kBF16, DType::kF32, true,
       "bf16 weights"},
      {4, 3, 6, 7, 9, 3, 3, 3, causal, DType::kBF16, DType::kF32, DType::kBF16, true,
       "bf16 in/out"},
      {3, 2, 5, 5, 4, 1, 3, 3, causal, DType::kF32, DType::kF16, DType::kF16, false,
       "f16 out, no bias"},
  };
  for (cuda::CudaBackend* gpu : {&gpu(), &gpu_small()}) {
    for (const ConvCase& c : cases) {
      const std::int64_t to = (c.t + c.p.pad_front + c.p.pad_back - c.kt) / c.p.stride_t + 1;
      const std::int64_t ho = (c.h + c.p.pad_top + c.p.pad_bottom - c.kh) / c.p.stride_h + 1;
      const std::int64_t wo = (c.w + c.p.pad_left + c.p.pad_right - c.kw) / c.p.stride_w + 1;
      Operand x(c.x, {c.ci, c.t, c.h, c.w});
      Operand w(c.wt, {c.co, c.ci, c.kt, c.kh, c.kw});
      Operand b(DType::kF32, {c.co});
      Operand y(c.y, {c.co, to, ho, wo}, Fill::kOutput);
      cpu().conv3d(x.cpu, w.cpu, c.bias ? &b.cpu : nullptr, c.p, y.cpu);
      gpu->conv3d(x.gpu, w.gpu, c.bias ? &b.gpu : nullptr, c.p, y.gpu);
      const std::int64_t k = c.ci * c.kt * c.kh * c.kw;
      expect_parity(*gpu, std::string(c.what) + (gpu == &gpu_small() ? " small ws" : ""),
                    c.y == DType::kF32 ? f32_sum(k) : kSixteenBit, {&y, &x, &w, &b});
    }
  }
}

TEST_F(BackendParity, upsample_nearest_2x_repeats_every_pixel) {
  for (const auto& [xt, yt] : {std::pair{DType::kF32, DType::kF32},
                               {DType::kBF16, DType::kBF16},
                               {DType::kBF16, DType::kF32}}) {
    Operand x(xt, {3, 2, 5, 7});
    Operand y(yt, {3, 2, 10, 14}, Fill::kOutput);
    cpu().upsample_nearest_2x(x.cpu, y.cpu);
    gpu().upsample_nearest_2x(x.gpu, y.gpu);
    expect_parity(gpu(), dt(xt) + " -> " + dt(yt), kExact, {&y, &x});
  }
}

TEST_F(BackendParity, avg_down_3d_and_dup_up_3d_match_wan22_shortcuts) {
  struct Case {
    std::int64_t ci, t, h, w, co;
    int ft, fs;
  };
  for (const Case& c : {Case{4, 4, 6, 8, 8, 2, 2}, Case{6, 3, 4, 6, 12, 1, 2},
                        Case{5, 2, 3, 5, 5, 1, 1}, Case{3, 6, 4, 2, 12, 2, 2}}) {
    Operand x(DType::kF32, {c.ci, c.t, c.h, c.w});
    Operand y(DType::kF32, {c.co, c.t / c.ft, c.h / c.fs, c.w / c.fs}, Fill::kOutput);
    cpu().avg_down_3d(x.cpu, c.ft, c.fs, y.cpu);
    gpu().avg_down_3d(x.gpu, c.ft, c.fs, y.gpu);
    expect_parity(gpu(),
                  "avg_down " + shape_text({c.ci, c.t, c.h, c.w}) + " -> " + std::to_string(c.co),
                  one_rounding(DType::kF32), {&y, &x});
  }
  for (const Case& c :
       {Case{8, 2, 3, 4, 8, 2, 2}, Case{8, 3, 2, 5, 4, 1, 2}, Case{6, 2, 3, 3, 3, 2, 1}}) {
    Operand x(DType::kBF16, {c.ci, c.t, c.h, c.w});
    Operand y(DType::kBF16, {c.co, c.t * c.ft, c.h * c.fs, c.w * c.fs}, Fill::kOutput);
    cpu().dup_up_3d(x.cpu, c.ft, c.fs, y.cpu);
    gpu().dup_up_3d(x.gpu, c.ft, c.fs, y.gpu);
    expect_parity(gpu(),
                  "dup_up " + shape_text({c.ci, c.t, c.h, c.w}) + " -> " + std::to_string(c.co),
                  kExact, {&y, &x});
  }
}

// ---- data movement ----

TEST_F(BackendParity, permute_reorders_up_to_rank_6_for_every_element_size) {
  struct Case {
    Shape shape;
    std::vector<int> order;
  };
  const Case cases[] = {{Shape{5, 7, 9}, {2, 0, 1}},
                        {Shape{2, 3, 1, 4, 5, 2}, {5, 3, 1, 0, 2, 4}},
                        {Shape{11, 13}, {1, 0}},
                        {Shape{3, 1, 4, 2}, {0, 1, 2, 3}}};
  for (const DType t : {DType::kF32, DType::kBF16, DType::kF8E4M3, DType::kF64}) {
    for (const Case& c : cases) {
      Shape out = c.shape;
      for (int i = 0; i < c.shape.rank(); ++i)
        out[i] = c.shape[c.order[static_cast<std::size_t>(i)]];
      Operand x(t, c.shape);
      Operand y(t, out, Fill::kOutput);
      cpu().permute(x.cpu, c.order, y.cpu);
      gpu().permute(x.gpu, c.order, y.gpu);
      expect_parity(gpu(), dt(t) + " " + c.shape.str() + " -> " + out.str(), kExact, {&y, &x});
    }
  }
}

TEST_F(BackendParity, concat_and_slice_copy_along_every_dimension) {
  for (const DType t : {DType::kF32, DType::kBF16, DType::kF8E5M2}) {
    const Shape a_shape{3, 5, 7};
    for (int dim = 0; dim < 3; ++dim) {
      Shape b_shape = a_shape;
      b_shape[dim] = 2;
      Shape y_shape = a_shape;
      y_shape[dim] += 2;
      Operand a(t, a_shape);
      Operand b(t, b_shape);
      Operand y(t, y_shape, Fill::kOutput);
      cpu().concat(a.cpu, b.cpu, dim, y.cpu);
      gpu().concat(a.gpu, b.gpu, dim, y.gpu);
      expect_parity(gpu(), "concat " + dt(t) + " dim " + std::to_string(dim), kExact, {&y, &a, &b});

      Shape s_shape = y_shape;
      s_shape[dim] = 3;
      Operand s(t, s_shape, Fill::kOutput);
      cpu().slice(y.cpu, dim, 1, s.cpu);
      Operand yg(t, y_shape, y.host().data());  // the concatenation as an input
      gpu().slice(yg.gpu, dim, 1, s.gpu);
      expect_parity(gpu(), "slice " + dt(t) + " dim " + std::to_string(dim), kExact, {&s, &yg});
    }
  }
}

TEST_F(BackendParity, embedding_gathers_rows_for_i32_and_i64_ids) {
  const std::int64_t rows = 1000, dim = 37, n = 301;
  std::mt19937 rng(next_seed());
  std::uniform_int_distribution<std::int64_t> pick(0, rows - 1);
  std::vector<std::int32_t> ids32(n);
  std::vector<std::int64_t> ids64(n);
  for (std::int64_t i = 0; i < n; ++i)
    ids32[static_cast<std::size_t>(i)] =
        static_cast<std::int32_t>(ids64[static_cast<std::size_t>(i)] = pick(rng));
  ids32[0] = 0;
  ids32[1] = static_cast<std::int32_t>(rows - 1);
  for (const bool wide : {false, true}) {
    Operand table(DType::kBF16, {rows, dim});
    Operand ids(wide ? DType::kI64 : DType::kI32, {n},
                wide ? static_cast<const void*>(ids64.data()) : ids32.data());
    Operand y(DType::kF32, {n, dim}, Fill::kOutput);
    cpu().embedding(table.cpu, ids.cpu, y.cpu);
    gpu().embedding(table.gpu, ids.gpu, y.gpu);
    expect_parity(gpu(), wide ? "i64 ids" : "i32 ids", kExact, {&y, &table, &ids});
  }
}

TEST_F(BackendParity, embedding_rejects_an_out_of_range_id_with_the_cpu_backends_error) {
  for (const std::int64_t bad : {std::int64_t{-1}, std::int64_t{50}}) {
    std::vector<std::int64_t> values{3, 7, bad, 9, 60};
    Operand table(DType::kF32, {50, 4});
    Operand ids(DType::kI64, {5}, values.data());
    Operand y(DType::kF32, {5, 4}, Fill::kOutput);
    std::string cpu_message, gpu_message;
    ErrorCode cpu_code = ErrorCode::kInternal, gpu_code = ErrorCode::kInternal;
    try {
      cpu().embedding(table.cpu, ids.cpu, y.cpu);
    } catch (const Error& e) {
      cpu_code = e.code();
      cpu_message = e.what();
    }
    try {
      gpu().embedding(table.gpu, ids.gpu, y.gpu);
    } catch (const Error& e) {
      gpu_code = e.code();
      gpu_message = e.what();
    }
    EXPECT_EQ(cpu_code, ErrorCode::kBadModelFile);
    EXPECT_EQ(gpu_code, cpu_code);
    EXPECT_EQ(gpu_message, cpu_message);
    EXPECT_NE(gpu_message.find(std::to_string(bad)), std::string::npos) << gpu_message;
  }
  // The backend still works after the error (nothing sticky was left behind).
  Operand a(DType::kF32, {10});
  Operand b(DType::kF32, {10});
  Operand out(DType::kF32, {10}, Fill::kOutput);
  cpu().add(a.cpu, b.cpu, out.cpu);
  gpu().add(a.gpu, b.gpu, out.gpu);
  expect_parity(gpu(), "add after an embedding error", one_rounding(DType::kF32), {&out, &a, &b});
}

TEST_F(BackendParity, upload_and_download_round_trip_on_the_compute_stream) {
  std::vector<float> values(4099);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.25f - 3.0f;
  auto buffer = gpu().allocate(values.size() * sizeof(float));
  Tensor t;
  t.data = buffer->data();
  t.dtype = DType::kF32;
  t.shape = Shape{static_cast<std::int64_t>(values.size())};
  t.device = Device::kCuda;
  gpu().upload(t, values.data());
  gpu().silu(t, t);
  std::vector<float> back(values.size());
  gpu().download(t, back.data());
  std::vector<float> want = values;
  Tensor host{want.data(), DType::kF32, t.shape, Device::kCpu};
  cpu().silu(host, host);
  for (std::size_t i = 0; i < values.size(); ++i)
    ASSERT_NEAR(back[i], want[i], 1e-6 * (1 + std::fabs(want[i]))) << i;
}

TEST_F(BackendParity, allocate_reports_out_of_memory_with_the_size) {
  const ErrorCode code = [&] {
    try {
      gpu().allocate(std::size_t{1} << 50);  // 1 PiB
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("MiB"), std::string::npos) << e.what();
      return e.code();
    }
    return ErrorCode::kInternal;
  }();
  EXPECT_EQ(code, ErrorCode::kOutOfMemory);
  // The failed cudaMalloc must not surface as the next op's launch error.
  Operand x(DType::kF32, {64});
  Operand y(DType::kF32, {64}, Fill::kOutput);
  cpu().silu(x.cpu, y.cpu);
  gpu().silu(x.gpu, y.gpu);
  expect_parity(gpu(), "silu after a refused allocation", transcendental(DType::kF32), {&y, &x});
}

}  // namespace
}  // namespace ferry

#endif  // FERRY_CUDA_PARITY_TEST
