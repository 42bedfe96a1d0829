// bench/quant_gemm: the CPU dequant-GEMM (gemm_quant_weights: a block-quantised weight
// dequantised into the packed panels) against the bf16-weight GEMM (gemm_bf16_weights: widened
// while packing) at the TI2V-5B DiT's Linear shapes (D = 3072, F = 14336): y[T, 3072] =
// x·Wᵀ with W [3072, 3072] (attention), [14336, 3072] (FFN up), and [3072, 14336] (FFN down).
// The figure is the ratio quant / bf16 of GFLOP/s, measured in the same run: in each round every
// quantised weight runs right after a bf16 run and is divided by it, so load from other processes
// falls on both sides of a ratio alike; the median of a type's ratios over the rounds.
// It also times the dequantisation alone (one thread, the whole weight through the GEMM's
// dequantize_range / dequantize_bnb4), in ns per value, to say where the time goes.
//
// Usage: quant_gemm [--tokens T,T,...] [--reps N] [--threads N] [--path own|openblas]
//   --tokens   rows of x (default 256,1024)
//   --path     the GEMM the CPU backend would use by default (OpenBLAS when built with it), or
//              the one named
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "bench/bench_support.h"
#include "core/backend/cpu/gemm.h"
#include "core/backend/cpu/quant_blocks.h"
#include "core/backend/cpu/thread_pool.h"
#include "core/tensor/convert.h"
#include "core/tensor/tensor.h"

namespace {

using ferry::DType;
using ferry::bench::Clock;
using ferry::bench::median;
using ferry::bench::seconds_since;
using ferry::cpu::GemmPath;

struct Shape {
  std::size_t n, k;
  const char* what;
};

// A weight [n, k] in one storage type, with what it needs besides its bytes.
struct Weight {
  DType dtype;
  const char* name;
  std::vector<std::uint8_t> bytes;
  // bitsandbytes: nested state (absmax codes, nested absmax and map, NF4 code book).
  std::vector<std::uint8_t> absmax;
  std::vector<float> nested_absmax, nested_code, code;
  ferry::Bnb4State state;
};

std::vector<std::size_t> half_fields(DType dtype) {
  switch (dtype) {
    case DType::kQ4_1:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
      return {0, 2};
    case DType::kQ2_K:
      return {80, 82};
    case DType::kQ3_K:
      return {108};
    case DType::kQ6_K:
      return {208};
    default:
      return {0};
  }
}

ferry::Tensor view(void* data, DType dtype, std::int64_t n) {
  ferry::Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.shape = ferry::Shape{n};
  return t;
}

std::unique_ptr<Weight> make_weight(DType dtype, const char* name, std::size_t n, std::size_t k,
                                    std::mt19937& rng) {
  auto w = std::make_unique<Weight>();
  w->dtype = dtype;
  w->name = name;
  const std::uint64_t count = std::uint64_t{n} * k;
  w->bytes.resize(static_cast<std::size_t>(ferry::dtype_storage_bytes(dtype, count)));
  for (auto& b : w->bytes) b = static_cast<std::uint8_t>(rng());
  std::normal_distribution<float> scale(0.0f, 0.01f);
  if (dtype == DType::kBF16) {
    auto* v = reinterpret_cast<std::uint16_t*>(w->bytes.data());
    for (std::uint64_t i = 0; i < count; ++i) v[i] = ferry::f32_to_bf16(scale(rng));
  } else if (dtype == DType::kBnb4) {
    const std::size_t blocks = static_cast<std::size_t>(count / 64);
    w->absmax.resize(blocks);
    for (auto& a : w->absmax) a = static_cast<std::uint8_t>(rng());
    w->nested_absmax.assign((blocks + 255) / 256, 0.02f);
    w->nested_code.resize(256);
    for (std::size_t i = 0; i < 256; ++i)
      w->nested_code[i] = (static_cast<float>(i) - 127.5f) / 128;
    w->code = {-1.0f,         -0.6961928f, -0.52507305f, -0.39491749f, -0.28444138f, -0.18477343f,
               -0.091050036f, 0.0f,        0.079580299f, 0.1609302f,   0.2461123f,   0.33791524f,
               0.44070983f,   0.562617f,   0.72295684f,  1.0f};
    w->state.absmax = view(w->absmax.data(), DType::kU8, static_cast<std::int64_t>(blocks));
    w->state.code = view(w->code.data(), DType::kF32, 16);
    w->state.nested_absmax = view(w->nested_absmax.data(), DType::kF32,
                                  static_cast<std::int64_t>(w->nested_absmax.size()));
    w->state.nested_code = view(w->nested_code.data(), DType::kF32, 256);
    w->state.nested_offset = 0.03f;
  } else {
    const std::size_t block = ferry::dtype_block_bytes(dtype);
    for (std::size_t at = 0; at < w->bytes.size(); at += block) {
      for (std::size_t field : half_fields(dtype)) {
        const std::uint16_t half = ferry::f32_to_f16(scale(rng));
        std::memcpy(w->bytes.data() + at + field, &half, sizeof half);
      }
    }
  }
  return w;
}

void run_gemm(const Weight& w, std::size_t m, const Shape& s, const float* x, float* y,
              ferry::cpu::ThreadPool& pool, GemmPath path) {
  if (w.dtype == DType::kBF16) {
    ferry::cpu::gemm_bf16_weights(m, s.n, s.k, 1.0f, x, s.k,
                                  reinterpret_cast<const std::uint16_t*>(w.bytes.data()), s.k, 0.0f,
                                  y, s.n, pool, path);
  } else {
    ferry::cpu::gemm_quant_weights(m, s.n, s.k, 1.0f, x, s.k, w.dtype, w.bytes.data(),
                                   w.dtype == DType::kBnb4 ? &w.state : nullptr, 0.0f, y, s.n, pool,
                                   path);
  }
}

// ns per value to dequantise the whole weight on one thread, row by row in runs of 512 (as the
// own GEMM's packing does).
double dequant_ns_per_value(const Weight& w, const Shape& s) {
  std::vector<float> run(512);
  const std::size_t row_bytes = static_cast<std::size_t>(ferry::dtype_storage_bytes(w.dtype, s.k));
  const Clock::time_point start = Clock::now();
  for (std::size_t r = 0; r < s.n; ++r) {
    for (std::size_t c = 0; c < s.k; c += run.size()) {
      const std::size_t len = std::min(run.size(), s.k - c);
      if (w.dtype == DType::kBnb4) {
        ferry::cpu::dequantize_bnb4(w.state, w.bytes.data(), static_cast<std::int64_t>(r * s.k + c),
                                    run.data(), static_cast<std::int64_t>(len));
      } else {
        ferry::cpu::dequantize_range(w.dtype, w.bytes.data() + r * row_bytes,
                                     static_cast<std::int64_t>(c), run.data(),
                                     static_cast<std::int64_t>(len));
      }
    }
  }
  return seconds_since(start) * 1e9 / static_cast<double>(s.n * s.k);
}

std::vector<std::size_t> parse_list(const char* text) {
  std::vector<std::size_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::strtoull(item.c_str(), nullptr, 10));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::size_t> token_counts = {256, 1024};
  int reps = 3;
  unsigned threads = 0;
  GemmPath path = ferry::cpu::default_gemm_path();
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--tokens" && i + 1 < argc) {
      token_counts = parse_list(argv[++i]);
    } else if (arg == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--threads" && i + 1 < argc) {
      threads = static_cast<unsigned>(std::atoi(argv[++i]));
    } else if (arg == "--path" && i + 1 < argc && std::string_view(argv[i + 1]) == "own") {
      path = GemmPath::kOwn;
      ++i;
    } else if (arg == "--path" && i + 1 < argc && std::string_view(argv[i + 1]) == "openblas") {
      path = GemmPath::kOpenBlas;
      ++i;
    } else {
      std::fprintf(stderr,
                   "usage: quant_gemm [--tokens T,T,...] [--reps N] [--threads N] "
                   "[--path own|openblas]\n");
      return 2;
    }
  }
  if (!ferry::cpu::gemm_path_available(path)) {
    std::fprintf(stderr, "quant_gemm: this build has no OpenBLAS\n");
    return 2;
  }
  ferry::cpu::ThreadPool pool(threads);
  std::printf("quant_gemm: %s GEMM (%s), %u threads, %d rounds, medians\n",
              path == GemmPath::kOwn ? "own" : "OpenBLAS",
              std::string(ferry::cpu::own_gemm_kernel_name()).c_str(), pool.size(), reps);

  const Shape shapes[] = {{3072, 3072, "attn  [T,3072]x[3072,3072]^T"},
                          {14336, 3072, "ffn up [T,3072]x[14336,3072]^T"},
                          {3072, 14336, "ffn dn [T,14336]x[3072,14336]^T"}};
  const std::pair<DType, const char*> types[] = {
      {DType::kBF16, "bf16"}, {DType::kQ8_0, "Q8_0"}, {DType::kQ4_K, "Q4_K"},
      {DType::kQ6_K, "Q6_K"}, {DType::kQ5_K, "Q5_K"}, {DType::kQ3_K, "Q3_K"},
      {DType::kQ2_K, "Q2_K"}, {DType::kQ4_0, "Q4_0"}, {DType::kBnb4, "NF4"}};
  std::mt19937 rng(1);
  double worst = 1e9;
  for (const Shape& s : shapes) {
    std::vector<std::unique_ptr<Weight>> weights;
    for (const auto& [dtype, name] : types)
      weights.push_back(make_weight(dtype, name, s.n, s.k, rng));
    std::printf("\n%s\n  dequant alone, 1 thread (ns/value):", s.what);
    for (std::size_t i = 1; i < weights.size(); ++i) {
      std::printf(" %s %.2f", weights[i]->name, dequant_ns_per_value(*weights[i], s));
    }
    std::printf("\n");
    for (std::size_t m : token_counts) {
      std::vector<float> x(m * s.k);
      std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
      for (float& v : x) v = unit(rng);
      std::vector<float> y(m * s.n);
      for (std::size_t w = 0; w < weights.size(); ++w) {  // warm-up: buffers, pages, caches
        run_gemm(*weights[w], m, s, x.data(), y.data(), pool, path);
      }
      const auto timed = [&](std::size_t w) {
        const Clock::time_point start = Clock::now();
        run_gemm(*weights[w], m, s, x.data(), y.data(), pool, path);
        return seconds_since(start);
      };
      // Each quantised weight is timed right after a bf16 run, and its ratio taken against that
      // run: load from other processes then falls on both sides of a ratio alike, where overall
      // medians would compare runs seconds apart. The figure is the median of a type's ratios.
      std::vector<double> bf16_seconds;
      std::vector<std::vector<double>> ratios(weights.size());
      for (int round = 0; round < reps; ++round) {
        for (std::size_t w = 1; w < weights.size(); ++w) {
          const double bf16 = timed(0);
          bf16_seconds.push_back(bf16);
          ratios[w].push_back(bf16 / timed(w));
        }
      }
      const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(s.n * s.k);
      std::printf("  T=%-5zu bf16 %6.1f GFLOP/s |", m, flops / median(bf16_seconds) / 1e9);
      for (std::size_t w = 1; w < weights.size(); ++w) {
        const double ratio = median(ratios[w]);
        worst = std::min(worst, ratio);
        std::printf(" %s %.2fx", weights[w]->name, ratio);
      }
      std::printf("\n");
    }
  }
  std::printf("\nworst quant/bf16 ratio: %.2f (target >= 0.8)\n", worst);
  return 0;
}
