// bench/gpu_ops: the CUDA backend's GEMM and attention on the GPU, each against a floor measured
// in the same run.
//   1. bf16 linear (y = x·wᵀ, bf16 x [M,K], w [N,K], y [M,N], no bias) at the Wan 2.2 5B shapes,
//      through CudaBackend::linear and through one plain cublasLtMatmul call (descriptors and the
//      heuristic's first algorithm chosen once, outside the timing): "kernel vs cuBLAS".
//   2. The same product with fp8 e4m3 weights through CudaBackend::linear (panels dequantised to
//      bf16 in the workspace, then cuBLASLt): ratio to the bf16 weights.
//   3. CudaBackend::attention (bf16, 24 heads x 128, no bias) at L = S = 8190, 27280, 75600:
//      TFLOP/s counting 4·L·S·H·D and the fraction of the best bf16 linear rate of 1. A size whose
//      projected time (from the previous size's rate) exceeds the budget is skipped, with why.
// Timing: CUDA events around every call on the backend's compute stream, calls queued back to
// back (the host's per-call work overlaps the previous call, as in a model), a warm-up call
// first, the median of the rest. Everything is allocated once (backend.allocate + Arena) and
// filled from the host with fixed pseudo-random values.
//
// The weights are fp8 e4m3 values, stored as e4m3 and as bf16 (exact), so all three GEMM paths
// compute the same product: the first 256 rows of each result are compared (and NaN-checked).
// Attention at the first size is checked against a float64 reference at a few queries.
//
// Usage: gpu_ops [--reps N] [--budget S]
//   --reps N    timed GEMM calls per variant (default 20; attention takes 5..20 by its own time)
//   --budget S  seconds one attention size may take, warm-up included (default 60)
// Exit 0 with "no CUDA device: skipped" when there is no usable GPU; 1 on a mismatch or error.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "bench/bench_support.h"
#include "core/error.h"
#include "core/memory/arena.h"
#include "core/tensor/convert.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_error.h"
#include "cuda/device_info.h"
#include "cuda/gemm.h"

namespace {

using ferry::DType;
using ferry::Shape;
using ferry::Tensor;
using ferry::bench::median;
using ferry::cuda::check;

constexpr std::int64_t kHeads = 24;
constexpr std::int64_t kHeadDim = 128;
constexpr std::int64_t kCheckRows = 256;  // result rows compared between the GEMM paths

// Seconds of each of `calls` calls of `run`, queued back to back on `stream`, each between two
// events; waits for the last.
std::vector<double> time_calls(cudaStream_t stream, int calls, const std::function<void()>& run) {
  std::vector<cudaEvent_t> events(static_cast<std::size_t>(2 * calls), nullptr);
  for (auto& e : events) check(cudaEventCreate(&e), "cudaEventCreate");
  for (int i = 0; i < calls; ++i) {
    check(cudaEventRecord(events[static_cast<std::size_t>(2 * i)], stream), "cudaEventRecord");
    run();
    check(cudaEventRecord(events[static_cast<std::size_t>(2 * i + 1)], stream), "cudaEventRecord");
  }
  check(cudaEventSynchronize(events.back()), "cudaEventSynchronize");
  std::vector<double> seconds;
  for (int i = 0; i < calls; ++i) {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, events[static_cast<std::size_t>(2 * i)],
                               events[static_cast<std::size_t>(2 * i + 1)]),
          "cudaEventElapsedTime");
    seconds.push_back(static_cast<double>(ms) * 1e-3);
  }
  for (auto& e : events) cudaEventDestroy(e);
  return seconds;
}

// Fixed pseudo-random numbers (splitmix64), uniform in [-1, 1).
struct Random {
  std::uint64_t state;
  float next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
  }
};

// The first shape.numel() elements of a flat tensor, seen as `shape`.
Tensor view(const Tensor& flat, const Shape& shape) {
  return flat.rows(0, shape.numel()).reshaped(shape);
}

// Fills a flat bf16 tensor by uploading windows of `pool` (random bf16 values), each window
// starting at a different offset so that no two buffers (and no two windows) repeat each other.
void fill_tiled(ferry::Backend& backend, const Tensor& flat, const std::vector<std::uint16_t>& pool,
                std::size_t window, std::uint64_t salt) {
  const std::int64_t total = flat.numel();
  const std::size_t spread = pool.size() - window;
  for (std::int64_t begin = 0, j = 0; begin < total;
       begin += static_cast<std::int64_t>(window), ++j) {
    const std::int64_t end = std::min(total, begin + static_cast<std::int64_t>(window));
    const std::size_t offset =
        static_cast<std::size_t>((salt * 104729u + static_cast<std::uint64_t>(j) * 7919u) % spread);
    backend.upload(flat.rows(begin, end), pool.data() + offset);
  }
}

void check_lt(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw ferry::Error(ferry::ErrorCode::kInternal,
                       std::string("cuBLASLt ") + what + ": " + cublasLtGetStatusString(status));
  }
}

// One plain cuBLASLt bf16 product in the backend's layout (column-major yᵀ[N×M] = w[K×N]ᵀ ·
// xᵀ[K×M], f32 compute and scale), its algorithm the heuristic's first choice, picked once.
class DirectGemm {
 public:
  DirectGemm(cublasLtHandle_t handle, void* workspace, std::size_t workspace_bytes, std::int64_t m,
             std::int64_t n, std::int64_t k)
      : handle_(handle), workspace_(workspace), workspace_bytes_(workspace_bytes) {
    check_lt(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "descriptor");
    const cublasOperation_t trans_a = CUBLAS_OP_T;
    const cublasOperation_t trans_b = CUBLAS_OP_N;
    check_lt(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a,
                                            sizeof trans_a),
             "transa");
    check_lt(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b,
                                            sizeof trans_b),
             "transb");
    const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
    check_lt(cublasLtMatrixLayoutCreate(&a_, CUDA_R_16BF, u(k), u(n), k), "layout w");
    check_lt(cublasLtMatrixLayoutCreate(&b_, CUDA_R_16BF, u(k), u(m), k), "layout x");
    check_lt(cublasLtMatrixLayoutCreate(&d_, CUDA_R_16BF, u(n), u(m), n), "layout y");
    cublasLtMatmulPreference_t pref = nullptr;
    check_lt(cublasLtMatmulPreferenceCreate(&pref), "preference");
    const auto ws = static_cast<std::uint64_t>(workspace_bytes_);
    check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &ws, sizeof ws),
             "preference workspace");
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status =
        cublasLtMatmulAlgoGetHeuristic(handle_, desc_, a_, b_, d_, d_, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    check_lt(status, "heuristic");
    if (found < 1) check_lt(CUBLAS_STATUS_NOT_SUPPORTED, "heuristic (no algorithm)");
    algo_ = result.algo;
  }
  ~DirectGemm() {
    cublasLtMatrixLayoutDestroy(d_);
    cublasLtMatrixLayoutDestroy(b_);
    cublasLtMatrixLayoutDestroy(a_);
    cublasLtMatmulDescDestroy(desc_);
  }
  DirectGemm(const DirectGemm&) = delete;
  DirectGemm& operator=(const DirectGemm&) = delete;

  void run(const void* x, const void* w, void* y, cudaStream_t stream) const {
    const float alpha = 1.0f;
    const float beta = 0.0f;
    check_lt(cublasLtMatmul(handle_, desc_, &alpha, w, a_, x, b_, &beta, y, d_, y, d_, &algo_,
                            workspace_, workspace_bytes_, stream),
             "matmul");
  }

 private:
  cublasLtHandle_t handle_;
  void* workspace_;
  std::size_t workspace_bytes_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
};

// Largest |x - y| over the largest |y| of two bf16 results; infinite if either has a NaN.
double relative_difference(const std::vector<std::uint16_t>& x,
                           const std::vector<std::uint16_t>& y) {
  double diff = 0;
  double scale = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double a = ferry::bf16_to_f32(x[i]);
    const double b = ferry::bf16_to_f32(y[i]);
    if (std::isnan(a) || std::isnan(b)) return INFINITY;
    diff = std::max(diff, std::fabs(a - b));
    scale = std::max(scale, std::fabs(b));
  }
  return scale > 0 ? diff / scale : diff;
}

struct GemmShape {
  std::int64_t m, n, k;
};

int run(int gemm_reps, double budget_s) {
  const auto wall_start = ferry::bench::Clock::now();
  std::string why;
  const auto info = ferry::cuda::query_device(&why);
  if (!info) {
    std::printf("gpu_ops: no CUDA device: skipped (%s)\n", why.c_str());
    return 0;
  }
  ferry::cuda::CudaBackend backend;
  const cudaStream_t stream = backend.stream();
  {
    int sm_khz = 0, mem_khz = 0;
    const bool clocks =
        cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, 0) == cudaSuccess &&
        cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, 0) == cudaSuccess;
    cudaGetLastError();
    std::printf("device: %s, sm_%d%d, %d SMs, %.1f GiB", info->name.c_str(), info->compute_major,
                info->compute_minor, info->multiprocessors,
                static_cast<double>(info->total_bytes) / (1ull << 30));
    if (clocks)
      std::printf(", peak clocks SM %d MHz, memory %d MHz", sm_khz / 1000, mem_khz / 1000);
    std::printf(", driver %d, runtime %d\n", info->driver_version, info->runtime_version);
  }

  const GemmShape shapes[] = {{8192, 3072, 3072},  {8192, 14336, 3072},  {8192, 3072, 14336},
                              {27280, 3072, 3072}, {27280, 14336, 3072}, {27280, 3072, 14336}};
  const std::int64_t att_lens[] = {8190, 27280, 75600};
  std::int64_t max_x = 0, max_y = 0, max_w = 0;
  for (const auto& s : shapes) {
    max_x = std::max(max_x, s.m * s.k);
    max_y = std::max(max_y, s.m * s.n);
    max_w = std::max(max_w, s.n * s.k);
  }
  const std::int64_t max_qkv = att_lens[2] * kHeads * kHeadDim;
  constexpr std::size_t kLtWorkspace = std::size_t{32} << 20;

  // ---- memory, once ----
  using ferry::memory::Arena;
  const std::size_t bytes = Arena::footprint(static_cast<std::size_t>(max_x) * 2) +
                            Arena::footprint(static_cast<std::size_t>(max_y) * 2) +
                            Arena::footprint(static_cast<std::size_t>(max_w) * 2) +
                            Arena::footprint(static_cast<std::size_t>(max_w)) +
                            4 * Arena::footprint(static_cast<std::size_t>(max_qkv) * 2) +
                            Arena::footprint(kLtWorkspace);
  const auto block = backend.allocate(bytes);
  Arena arena(block->data(), block->size(), ferry::Device::kCuda);
  const Tensor x_all = arena.allocate(DType::kBF16, {max_x});
  const Tensor y_all = arena.allocate(DType::kBF16, {max_y});
  const Tensor w_bf16_all = arena.allocate(DType::kBF16, {max_w});
  const Tensor w_f8_all = arena.allocate(DType::kF8E4M3, {max_w});
  const Tensor q_all = arena.allocate(DType::kBF16, {max_qkv});
  const Tensor k_all = arena.allocate(DType::kBF16, {max_qkv});
  const Tensor v_all = arena.allocate(DType::kBF16, {max_qkv});
  const Tensor o_all = arena.allocate(DType::kBF16, {max_qkv});
  const Tensor lt_ws = arena.allocate(DType::kU8, {static_cast<std::int64_t>(kLtWorkspace)});
  std::printf("memory: %.2f GiB in one block\n", static_cast<double>(bytes) / (1ull << 30));

  // ---- inputs: random bf16 activations, e4m3 weights (also stored as the same bf16 values) ----
  {
    constexpr std::size_t kWindow = std::size_t{1} << 24;
    std::vector<std::uint16_t> pool(kWindow + (std::size_t{1} << 20));
    Random rng{1};
    for (auto& v : pool) v = ferry::f32_to_bf16(rng.next());
    fill_tiled(backend, x_all, pool, kWindow, 1);
    fill_tiled(backend, q_all, pool, kWindow, 2);
    fill_tiled(backend, k_all, pool, kWindow, 3);
    fill_tiled(backend, v_all, pool, kWindow, 4);
    std::vector<std::uint8_t> w8(static_cast<std::size_t>(max_w));
    std::vector<std::uint16_t> w16(w8.size());
    for (std::size_t i = 0; i < w8.size(); ++i) {
      w8[i] = ferry::f32_to_f8e4m3(rng.next());
      w16[i] = ferry::f32_to_bf16(ferry::f8e4m3_to_f32(w8[i]));
    }
    backend.upload(w_f8_all, w8.data());
    backend.upload(w_bf16_all, w16.data());
    backend.synchronize();
  }

  cublasLtHandle_t lt = nullptr;
  check_lt(cublasLtCreate(&lt), "create");
  const std::unique_ptr<std::remove_pointer_t<cublasLtHandle_t>, decltype(&cublasLtDestroy)>
      lt_owner(lt, &cublasLtDestroy);

  int status = 0;

  // ---- clocks up: about a second of the largest bf16 product ----
  {
    const GemmShape& s = shapes[5];
    const Tensor x = view(x_all, {s.m, s.k});
    const Tensor w = view(w_bf16_all, {s.n, s.k});
    const Tensor y = view(y_all, {s.m, s.n});
    // The second of two calls: the first also loads the kernels.
    const double one = time_calls(stream, 2, [&] { backend.linear(x, w, nullptr, y, 1.0f); })[1];
    const int calls = std::clamp(static_cast<int>(1.0 / std::max(one, 1e-6)), 1, 2000);
    time_calls(stream, calls, [&] { backend.linear(x, w, nullptr, y, 1.0f); });
  }

  // ---- 1 and 2: GEMM ----
  std::printf(
      "\nGEMM y[M,N] = x[M,K] * w[N,K]^T, bf16 x and y, no bias; TFLOP/s = 2MNK/s, median of %d\n"
      "  linear: CudaBackend::linear; cuBLASLt: one plain cublasLtMatmul (heuristic's first "
      "algorithm, chosen once)\n"
      "  fp8: e4m3 weights through linear (dequantised to bf16 panels in the %d MiB workspace)\n",
      gemm_reps, static_cast<int>(ferry::cuda::CudaBackendOptions{}.workspace_bytes >> 20));
  std::printf(
      "      M      N      K | linear bf16  cuBLASLt  lin/cuBLAS | linear fp8  fp8/bf16 | "
      "check (max diff / max |y|)\n");
  double best_bf16 = 0;
  GemmShape best_shape{};
  for (const GemmShape& s : shapes) {
    const Tensor x = view(x_all, {s.m, s.k});
    const Tensor w16 = view(w_bf16_all, {s.n, s.k});
    const Tensor w8 = view(w_f8_all, {s.n, s.k});
    const Tensor y = view(y_all, {s.m, s.n});
    const double flops =
        2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
    const DirectGemm direct(lt, lt_ws.data, kLtWorkspace, s.m, s.n, s.k);
    const std::size_t check_elems = static_cast<std::size_t>(kCheckRows * s.n);
    std::vector<std::uint16_t> y_linear(check_elems), y_direct(check_elems), y_fp8(check_elems);

    auto rate = [&](const std::function<void()>& fn, std::vector<std::uint16_t>& result) {
      auto seconds = time_calls(stream, 1 + gemm_reps, fn);
      seconds.erase(seconds.begin());  // the warm-up
      backend.download(y.rows(0, kCheckRows), result.data());
      return flops / median(seconds) * 1e-12;
    };
    const double linear = rate([&] { backend.linear(x, w16, nullptr, y, 1.0f); }, y_linear);
    const double cublas = rate([&] { direct.run(x.data, w16.data, y.data, stream); }, y_direct);
    const double fp8 = rate([&] { backend.linear(x, w8, nullptr, y, 1.0f); }, y_fp8);
    if (linear > best_bf16) {
      best_bf16 = linear;
      best_shape = s;
    }
    // The same product of the same values: they differ by summation order (and split-K) only.
    const double d_direct = relative_difference(y_linear, y_direct);
    const double d_fp8 = relative_difference(y_fp8, y_linear);
    const double bound = 1e-2;
    const bool ok = d_direct <= bound && d_fp8 <= bound;
    if (!ok) status = 1;
    std::printf(
        "  %5lld  %5lld  %5lld | %9.1f  %9.1f  %9.3f | %9.1f  %8.3f | %s cuBLAS %.1e, fp8 %.1e\n",
        static_cast<long long>(s.m), static_cast<long long>(s.n), static_cast<long long>(s.k),
        linear, cublas, linear / cublas, fp8, fp8 / linear, ok ? "ok" : "MISMATCH", d_direct,
        d_fp8);
    std::fflush(stdout);
  }

  // ---- 3: attention ----
  std::printf(
      "\nattention o = softmax(q k^T / sqrt(128)) v, bf16, %lld heads x %lld, L = S; "
      "TFLOP/s = 4*L*S*H*D/s\n  vs GEMM: fraction of the best bf16 linear rate above "
      "(%.1f TFLOP/s at %lldx%lldx%lld)\n",
      static_cast<long long>(kHeads), static_cast<long long>(kHeadDim), best_bf16,
      static_cast<long long>(best_shape.m), static_cast<long long>(best_shape.n),
      static_cast<long long>(best_shape.k));
  std::printf("      L=S  TFLOP/call  calls  median ms  TFLOP/s  vs GEMM\n");
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  double last_rate = 0;
  for (const std::int64_t len : att_lens) {
    const double l = static_cast<double>(len);
    const double flops = 4.0 * l * l * static_cast<double>(kHeads * kHeadDim);
    constexpr int kMinReps = 5;
    if (last_rate > 0) {
      const double projected = (1 + kMinReps) * flops / last_rate;
      if (projected > budget_s) {
        std::printf(
            "  %7lld  %10.2f  skipped: %d calls projected at %.0f s from the previous "
            "size's rate, over the %.0f s budget\n",
            static_cast<long long>(len), flops * 1e-12, 1 + kMinReps, projected, budget_s);
        continue;
      }
    }
    const Shape shape{len, kHeads, kHeadDim};
    const Tensor q = view(q_all, shape);
    const Tensor k = view(k_all, shape);
    const Tensor v = view(v_all, shape);
    const Tensor o = view(o_all, shape);
    const auto call = [&] { backend.attention(q, k, v, scale, nullptr, false, o); };
    const double warm = time_calls(stream, 1, call)[0];
    const int reps =
        std::clamp(static_cast<int>(std::min(3.0, budget_s - warm) / warm), kMinReps, 20);
    const double seconds = median(time_calls(stream, reps, call));
    last_rate = flops / seconds;
    std::printf("  %7lld  %10.2f  %5d  %9.2f  %7.1f  %7.3f\n", static_cast<long long>(len),
                flops * 1e-12, reps, seconds * 1e3, last_rate * 1e-12,
                best_bf16 > 0 ? last_rate * 1e-12 / best_bf16 : 0.0);
    std::fflush(stdout);

    if (len == att_lens[0]) {
      // A float64 reference at a few (query, head) pairs of the first size.
      std::vector<std::uint16_t> hq(static_cast<std::size_t>(q.numel())), hk(hq.size()),
          hv(hq.size()), ho(hq.size());
      backend.download(q, hq.data());
      backend.download(k, hk.data());
      backend.download(v, hv.data());
      backend.download(o, ho.data());
      const auto at = [&](const std::vector<std::uint16_t>& t, std::int64_t row, std::int64_t h,
                          std::int64_t d) {
        return static_cast<double>(
            ferry::bf16_to_f32(t[static_cast<std::size_t>((row * kHeads + h) * kHeadDim + d)]));
      };
      double diff = 0, mag = 0;
      bool finite = true;
      for (std::size_t i = 0; i < ho.size(); ++i) {
        if (!std::isfinite(ferry::bf16_to_f32(ho[i]))) finite = false;
      }
      for (const std::int64_t qi : {std::int64_t{0}, std::int64_t{1}, len / 2, len - 1}) {
        for (const std::int64_t h : {std::int64_t{0}, kHeads - 1}) {
          std::vector<double> p(static_cast<std::size_t>(len));
          double top = -INFINITY;
          for (std::int64_t j = 0; j < len; ++j) {
            double dot = 0;
            for (std::int64_t d = 0; d < kHeadDim; ++d) dot += at(hq, qi, h, d) * at(hk, j, h, d);
            p[static_cast<std::size_t>(j)] = dot * static_cast<double>(scale);
            top = std::max(top, p[static_cast<std::size_t>(j)]);
          }
          double sum = 0;
          for (auto& e : p) sum += (e = std::exp(e - top));
          for (std::int64_t d = 0; d < kHeadDim; ++d) {
            double ref = 0;
            for (std::int64_t j = 0; j < len; ++j) {
              ref += p[static_cast<std::size_t>(j)] * at(hv, j, h, d);
            }
            ref /= sum;
            diff = std::max(diff, std::fabs(at(ho, qi, h, d) - ref));
            mag = std::max(mag, std::fabs(ref));
          }
        }
      }
      const double rel = mag > 0 ? diff / mag : diff;
      const bool ok = finite && rel <= 2e-2;
      if (!ok) status = 1;
      std::printf(
          "           check at L=%lld: %s (all finite: %s; 8 rows vs float64: max diff / "
          "max |o| = %.1e, bound 2e-2)\n",
          static_cast<long long>(len), ok ? "ok" : "MISMATCH", finite ? "yes" : "NO", rel);
    }
  }

  // The backend's cuBLASLt planning over the whole run: one plan per distinct product, however
  // many calls (the plain cuBLASLt calls above query once per shape, outside these counts).
  const ferry::cuda::LtGemmCounters lt_counts = ferry::cuda::lt_gemm_counters();
  std::printf("\ncuBLASLt: %llu heuristic queries, %llu plans, %llu without an algorithm\n",
              static_cast<unsigned long long>(lt_counts.heuristic_queries),
              static_cast<unsigned long long>(lt_counts.plans),
              static_cast<unsigned long long>(lt_counts.no_algorithm));

  const double wall = ferry::bench::seconds_since(wall_start);
  std::printf("\ngpu_ops: %s, %.1f s\n", status == 0 ? "done" : "MISMATCH", wall);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 20;
  double budget = 60;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--reps" && i + 1 < argc) {
      reps = std::max(5, std::atoi(argv[++i]));
    } else if (arg == "--budget" && i + 1 < argc) {
      budget = std::max(1.0, std::atof(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: gpu_ops [--reps N] [--budget S]\n");
      return 2;
    }
  }
  try {
    return run(reps, budget);
  } catch (const ferry::Error& e) {
    if (e.code() == ferry::ErrorCode::kUnsupported) {
      std::printf("gpu_ops: no CUDA device: skipped (%s)\n", e.what());
      return 0;
    }
    std::fprintf(stderr, "gpu_ops: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_ops: %s\n", e.what());
    return 1;
  }
}
