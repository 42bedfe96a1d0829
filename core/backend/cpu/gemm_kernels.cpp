// The own GEMM's micro-kernels, one per ISA, picked at run time: a portable one in plain C++
// that the compiler vectorises for the baseline ISA (the only one under MSVC, which has no
// target attributes), and with GCC or Clang on x86-64 the same loop on vector types inside
// functions that target AVX2+FMA and AVX-512.
#include "core/backend/cpu/gemm_kernels.h"

#include <array>
#include <cstring>

namespace ferry::cpu::gemm_detail {
namespace {

#if defined(__GNUC__) || defined(__clang__)
#define FERRY_GEMM_INLINE [[gnu::always_inline]] inline
// Fully unrolled loops let the accumulators live in registers; without this GCC interchanges
// the loops and keeps them in memory.
#define FERRY_GEMM_UNROLL _Pragma("GCC unroll 64")
#else
#define FERRY_GEMM_INLINE inline
#define FERRY_GEMM_UNROLL
#endif

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define FERRY_GEMM_X86_VARIANTS 1
#else
#define FERRY_GEMM_X86_VARIANTS 0
#endif

// The portable kernel, plain C++: mr x nr accumulators in a local array that the compiler keeps
// in vector registers, the nr loop vectorised for the baseline ISA (SSE2 on x86-64, NEON on
// arm64). 4 x 8: 8 accumulators of 4 floats among SSE2's 16 registers.
template <std::size_t kMr, std::size_t kNr>
FERRY_GEMM_INLINE void portable_kernel(std::size_t kc, const float* __restrict ap,
                                       const float* __restrict bp, float* __restrict c,
                                       std::size_t ldc, float alpha, float beta) {
  float acc[kMr][kNr] = {};
  for (std::size_t p = 0; p < kc; ++p) {
    FERRY_GEMM_UNROLL
    for (std::size_t i = 0; i < kMr; ++i) {
      FERRY_GEMM_UNROLL
      for (std::size_t j = 0; j < kNr; ++j) acc[i][j] += ap[i] * bp[j];
    }
    ap += kMr;
    bp += kNr;
  }
  // Only compile-time indices touch acc: a run-time bound here would make the compiler keep the
  // accumulators in memory (edge tiles go through a scratch tile in the driver instead).
  if (beta == 0.0f) {
    FERRY_GEMM_UNROLL
    for (std::size_t i = 0; i < kMr; ++i) {
      FERRY_GEMM_UNROLL
      for (std::size_t j = 0; j < kNr; ++j) c[i * ldc + j] = alpha * acc[i][j];
    }
  } else {
    FERRY_GEMM_UNROLL
    for (std::size_t i = 0; i < kMr; ++i) {
      FERRY_GEMM_UNROLL
      for (std::size_t j = 0; j < kNr; ++j) {
        c[i * ldc + j] = alpha * acc[i][j] + beta * c[i * ldc + j];
      }
    }
  }
}

void kernel_portable(std::size_t kc, const float* ap, const float* bp, float* c, std::size_t ldc,
                     float alpha, float beta) {
  portable_kernel<4, 8>(kc, ap, bp, c, ldc, alpha, beta);
}

#if FERRY_GEMM_X86_VARIANTS
// The same loop written on GCC's vector types (one V holds a register's worth of floats), so
// that the tile sits in registers by construction instead of by the auto-vectoriser's choice,
// which on wider tiles spilled and shuffled. `acc += a * b` with a scalar a broadcasts it, and
// GCC contracts the multiply-add into one FMA (its default -ffp-contract=fast).
using V8 = float __attribute__((vector_size(32)));
using V16 = float __attribute__((vector_size(64)));

template <class V, std::size_t kRows, std::size_t kVecs>
FERRY_GEMM_INLINE void vector_kernel(std::size_t kc, const float* __restrict ap,
                                     const float* __restrict bp, float* __restrict c,
                                     std::size_t ldc, float alpha, float beta) {
  constexpr std::size_t kWidth = sizeof(V) / sizeof(float);
  // C's tile is read and written once per K panel, after the loop: start fetching it now.
  FERRY_GEMM_UNROLL
  for (std::size_t i = 0; i < kRows; ++i) {
    FERRY_GEMM_UNROLL
    for (std::size_t j = 0; j < kVecs * kWidth; j += 16) __builtin_prefetch(c + i * ldc + j, 1);
  }
  V acc[kRows][kVecs] = {};
  for (std::size_t p = 0; p < kc; ++p) {
    V b[kVecs];
    FERRY_GEMM_UNROLL
    for (std::size_t v = 0; v < kVecs; ++v) std::memcpy(&b[v], bp + v * kWidth, sizeof(V));
    FERRY_GEMM_UNROLL
    for (std::size_t i = 0; i < kRows; ++i) {
      const float a = ap[i];
      FERRY_GEMM_UNROLL
      for (std::size_t v = 0; v < kVecs; ++v) acc[i][v] += a * b[v];
    }
    ap += kRows;
    bp += kVecs * kWidth;
  }
  FERRY_GEMM_UNROLL
  for (std::size_t i = 0; i < kRows; ++i) {
    FERRY_GEMM_UNROLL
    for (std::size_t v = 0; v < kVecs; ++v) {
      float* out = c + i * ldc + v * kWidth;
      V value = alpha * acc[i][v];
      if (beta != 0.0f) {
        V old;
        std::memcpy(&old, out, sizeof(V));
        value += beta * old;
      }
      std::memcpy(out, &value, sizeof(V));
    }
  }
}

// 6 x 16: 12 ymm accumulators, 2 for B and 1 broadcast: 15 of the 16 registers.
__attribute__((target("avx2,fma"))) void kernel_avx2(std::size_t kc, const float* ap,
                                                     const float* bp, float* c, std::size_t ldc,
                                                     float alpha, float beta) {
  vector_kernel<V8, 6, 2>(kc, ap, bp, c, ldc, alpha, beta);
}

// 8 x 32: 16 zmm accumulators of the 32 registers.
__attribute__((target("avx512f,avx2,fma"))) void kernel_avx512(std::size_t kc, const float* ap,
                                                               const float* bp, float* c,
                                                               std::size_t ldc, float alpha,
                                                               float beta) {
  vector_kernel<V16, 8, 2>(kc, ap, bp, c, ldc, alpha, beta);
}
#endif

struct KernelTable {
  std::array<MicroKernel, 3> kernels;
  std::size_t count = 0;
};

static_assert(8 * 32 <= kMaxTile && 6 * 16 <= kMaxTile && 4 * 8 <= kMaxTile);

// Blocking (kc, mc, nc) for the x86 kernels: the kc x nr B micro-panel stays in L1 (16 KiB at
// most; kc 128 measured about 10% faster than 256 on Zen 5, the A stream and C leaving L1
// room), the mc x kc A block in L2 (96 KiB), the kc x nc B panel in L3 (1.5 MiB).
KernelTable make_table() {
  KernelTable table;
#if FERRY_GEMM_X86_VARIANTS
  __builtin_cpu_init();
  const bool fma = __builtin_cpu_supports("fma");
  if (fma && __builtin_cpu_supports("avx512f")) {
    table.kernels[table.count++] = {"avx512", 8, 32, 128, 192, 3072, kernel_avx512};
  }
  if (fma && __builtin_cpu_supports("avx2")) {
    table.kernels[table.count++] = {"avx2", 6, 16, 128, 192, 3072, kernel_avx2};
  }
#endif
  table.kernels[table.count++] = {"portable", 4, 8, 256, 192, 3072, kernel_portable};
  return table;
}

}  // namespace

std::span<const MicroKernel> micro_kernels() {
  static const KernelTable table = make_table();
  return {table.kernels.data(), table.count};
}

}  // namespace ferry::cpu::gemm_detail
