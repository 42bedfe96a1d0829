// bench/ops: the CPU backend's GEMM, y = x·Wᵀ (the Linear layout), in GFLOP/s: the own blocked
// GEMM against OpenBLAS's sgemm measured in the same run, and bf16 weights (widened while
// packing) against f32 weights on each path. Every variant runs once per round, round after
// round, so load from other processes falls on all of them alike; the figures are medians.
//
// Usage: ops [--reps N] [--threads T] [--all-kernels]
//   --threads T     size of the pool the own GEMM runs on (default: the machine's threads);
//                   OpenBLAS takes its thread count from OPENBLAS_NUM_THREADS
//   --all-kernels   also time every other micro-kernel this CPU can run (down to "portable",
//                   the kernel of MSVC builds and of CPUs without AVX2)
// Exit code 1 when the own and OpenBLAS results disagree beyond f32 rounding.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "bench/bench_support.h"
#include "core/backend/cpu/gemm.h"
#include "core/backend/cpu/gemm_kernels.h"
#include "core/backend/cpu/thread_pool.h"
#include "core/tensor/convert.h"

namespace {

using ferry::bench::median;
using ferry::cpu::GemmPath;
using ferry::cpu::ThreadPool;
namespace detail = ferry::cpu::gemm_detail;

struct Size {
  std::size_t m, n, k;
  const char* what;
};

struct Variant {
  std::string name;
  std::function<void(float* c)> run;
  std::vector<double> seconds;
  std::vector<float> result;
};

// Largest |x - y| over the largest |y|: f32 GEMMs that agree sit near K * 2^-24 or below.
double relative_difference(const std::vector<float>& x, const std::vector<float>& y) {
  double diff = 0;
  double scale = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, std::fabs(double{x[i]} - double{y[i]}));
    scale = std::max(scale, std::fabs(double{y[i]}));
  }
  return scale > 0 ? diff / scale : diff;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  unsigned threads = 0;
  bool all_kernels = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--reps" && i + 1 < argc) {
      reps = std::max(3, std::atoi(argv[++i]));
    } else if (arg == "--threads" && i + 1 < argc) {
      threads = static_cast<unsigned>(std::atoi(argv[++i]));
    } else if (arg == "--all-kernels") {
      all_kernels = true;
    } else {
      std::fprintf(stderr, "usage: ops [--reps N] [--threads T] [--all-kernels]\n");
      return 2;
    }
  }

  ThreadPool pool(threads);
  const bool have_openblas = ferry::cpu::gemm_path_available(GemmPath::kOpenBlas);
  std::printf("own GEMM: kernel %s, %u threads\n",
              std::string(ferry::cpu::own_gemm_kernel_name()).c_str(), pool.size());
  std::printf("OpenBLAS: %s\n",
              have_openblas ? detail::openblas_description().c_str() : "not in this build");
  std::printf("y = x * W^T, x f32 [M,K], W [N,K]; median of %d rounds; GFLOP/s = 2MNK / s\n\n",
              reps);

  const Size sizes[] = {
      {512, 3072, 3072, "Wan 5B linear, 512 tokens"},
      {1024, 1024, 1024, "square"},
      {777, 1001, 513, "odd"},
  };

  int status = 0;
  for (const Size& size : sizes) {
    const std::size_t m = size.m;  // not a structured binding: lambdas capture these
    const std::size_t n = size.n;
    const std::size_t k = size.k;
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<float> x(m * k);
    std::vector<float> w(n * k);
    std::vector<std::uint16_t> w_bf16(n * k);
    for (float& v : x) v = uniform(rng);
    for (std::size_t i = 0; i < w.size(); ++i) {
      w_bf16[i] = ferry::f32_to_bf16(uniform(rng));
      w[i] = ferry::bf16_to_f32(w_bf16[i]);  // the same values in both formats
    }

    std::vector<Variant> variants;
    auto add = [&](std::string name, std::function<void(float*)> run) {
      variants.push_back({std::move(name), std::move(run), {}, std::vector<float>(m * n)});
    };
    add("own f32", [&](float* y) {
      ferry::cpu::gemm_f32(m, n, k, 1.0f, x.data(), k, w.data(), k, true, 0.0f, y, n, pool,
                           GemmPath::kOwn);
    });
    add("own bf16", [&](float* y) {
      ferry::cpu::gemm_bf16_weights(m, n, k, 1.0f, x.data(), k, w_bf16.data(), k, 0.0f, y, n, pool,
                                    GemmPath::kOwn);
    });
    if (have_openblas) {
      add("OpenBLAS f32", [&](float* y) {
        ferry::cpu::gemm_f32(m, n, k, 1.0f, x.data(), k, w.data(), k, true, 0.0f, y, n, pool,
                             GemmPath::kOpenBlas);
      });
      add("OpenBLAS bf16", [&](float* y) {
        ferry::cpu::gemm_bf16_weights(m, n, k, 1.0f, x.data(), k, w_bf16.data(), k, 0.0f, y, n,
                                      pool, GemmPath::kOpenBlas);
      });
    }
    if (all_kernels) {
      const auto kernels = detail::micro_kernels();
      for (std::size_t i = 1; i < kernels.size(); ++i) {
        const auto& kernel = kernels[i];
        add("own f32, " + std::string(kernel.name), [&, &kernel = kernel](float* y) {
          detail::gemm_own(m, n, k, 1.0f, x.data(), k, w.data(), k, detail::BFormat::kF32, true,
                           0.0f, y, n, pool, kernel);
        });
      }
    }

    for (auto& variant : variants) variant.run(variant.result.data());  // warm up
    for (int round = 0; round < reps; ++round) {
      for (auto& variant : variants) {
        const auto start = ferry::bench::Clock::now();
        variant.run(variant.result.data());
        variant.seconds.push_back(ferry::bench::seconds_since(start));
      }
    }

    std::printf("M=%zu N=%zu K=%zu (%s)\n", m, n, k, size.what);
    const double flops =
        2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    std::vector<double> gflops;
    for (const auto& variant : variants) {
      const double s = median(variant.seconds);
      gflops.push_back(flops / s * 1e-9);
    }
    for (std::size_t i = 0; i < variants.size(); ++i) {
      std::printf("  %-22s %9.3f ms  %7.1f GFLOP/s", variants[i].name.c_str(),
                  median(variants[i].seconds) * 1e3, gflops[i]);
      if (have_openblas) std::printf("  %5.2f x OpenBLAS f32", gflops[i] / gflops[2]);
      std::printf("\n");
    }
    std::printf("  own bf16 / own f32           %.2f\n", gflops[1] / gflops[0]);
    if (have_openblas) {
      std::printf("  own f32 / OpenBLAS f32       %.2f\n", gflops[0] / gflops[2]);
      std::printf("  own bf16 / OpenBLAS bf16     %.2f\n", gflops[1] / gflops[3]);
      std::printf("  OpenBLAS bf16 / OpenBLAS f32 %.2f\n", gflops[3] / gflops[2]);
    }
    // Every variant computes the same product of the same values.
    const double bound = 4.0 * static_cast<double>(k) * std::ldexp(1.0, -24);
    for (std::size_t i = 1; i < variants.size(); ++i) {
      const double diff = relative_difference(variants[i].result, variants[0].result);
      if (diff > bound) {
        std::printf("  MISMATCH: %s differs from %s by %.3g of the largest output (bound %.3g)\n",
                    variants[i].name.c_str(), variants[0].name.c_str(), diff, bound);
        status = 1;
      }
    }
    std::printf("\n");
  }
  return status;
}
