// Inside the own GEMM: its register-blocked micro-kernels (gemm_kernels.cpp) and the packed,
// cache-blocked driver that runs them (gemm.cpp). gemm.h is the interface; tests and the
// benchmark come here to run every kernel this CPU has, not only the fastest.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "core/backend/cpu/thread_pool.h"

namespace ferry::cpu::gemm_detail {

// C[0:mr, 0:nr] = alpha * Ap · Bp + beta * C (beta == 0: C is not read) for one whole tile,
// from packed micro-panels: Ap holds kc steps of mr values of A's rows, Bp kc steps of nr
// values of op(B)'s columns (zero-padded past the matrix's edge). The driver runs edge tiles
// into a scratch tile and copies what lies inside C.
using MicroKernelFn = void (*)(std::size_t kc, const float* ap, const float* bp, float* c,
                               std::size_t ldc, float alpha, float beta);

// The largest mr * nr of any kernel (the driver's scratch tile).
inline constexpr std::size_t kMaxTile = 8 * 32;

struct MicroKernel {
  std::string_view name;  // "avx512", "avx2", "portable"
  std::size_t mr;         // tile rows (A values broadcast per step)
  std::size_t nr;         // tile columns (B values loaded as vectors per step)
  // Cache blocking: a kc x nr B micro-panel stays in L1 while the mc x kc A block streams from
  // L2; the kc x nc B panel is shared by all threads from L3. nc is a multiple of nr.
  std::size_t kc;
  std::size_t mc;
  std::size_t nc;
  MicroKernelFn fn;
};

// The kernels this CPU can run, fastest first; the portable one (plain C++ that the compiler
// vectorises for the baseline ISA) is always there and always last.
std::span<const MicroKernel> micro_kernels();

enum class BFormat { kF32, kBF16, kF16 };

// The own GEMM with the given kernel; arguments as gemm_f32 documents them, already checked
// (gemm.cpp). B's elements are floats, or bf16 / f16 bit patterns in the [N,K] layout.
void gemm_own(std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
              std::size_t lda, const void* b, std::size_t ldb, BFormat b_format, bool b_transposed,
              float beta, float* c, std::size_t ldc, ThreadPool& pool, const MicroKernel& kernel);

// Takes this thread's packing buffers at their reserved size (64 Ki floats each), which covers
// every A block of the kernels' blocking: the ThreadPool's workers call it when they start.
void reserve_thread_buffers();

// OpenBLAS's build and core ("OpenBLAS 0.3.21 ... Haswell, 2 threads"); empty without it.
std::string openblas_description();

}  // namespace ferry::cpu::gemm_detail
