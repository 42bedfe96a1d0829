// The CPU backend's matrix product: C = alpha * A · op(B) + beta * C, row-major, through OpenBLAS
// where the build has it and through Ferry's own packed, cache-blocked GEMM everywhere (the only
// one in the mingw lane). Both accumulate in f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/backend/cpu/thread_pool.h"
#include "core/tensor/dtype.h"
#include "core/tensor/quant.h"

namespace ferry::cpu {

enum class GemmPath { kOwn, kOpenBlas };

// kOpenBlas when the build has OpenBLAS, else kOwn.
GemmPath default_gemm_path();
// kOwn always; kOpenBlas when the build has it. Asking for a path that is missing throws
// Error(kUnsupported).
bool gemm_path_available(GemmPath path);
// The own GEMM's micro-kernel on this CPU, e.g. "avx512 8x32" (for logs and benchmarks).
std::string_view own_gemm_kernel_name();

// C[M,N] = alpha * A[M,K] · op(B) + beta * C with leading dimensions (row strides, in elements):
// B is [N,K] and op(B) = Bᵀ when b_transposed (the PyTorch Linear weight layout, y = x·Wᵀ), else
// B is [K,N]. As BLAS defines it: beta == 0 means C is not read (NaN there is overwritten), and
// alpha == 0 or K == 0 means A and B are not read. Leading dimensions must cover a row
// (lda >= K, ldb >= K or N, ldc >= N) where there is more than one row; else Error(kBadArgument).
// `pool` runs the own GEMM and the weight conversion; OpenBLAS uses its own threads.
void gemm_f32(std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
              std::size_t lda, const float* b, std::size_t ldb, bool b_transposed, float beta,
              float* c, std::size_t ldc, ThreadPool& pool = default_thread_pool(),
              GemmPath path = default_gemm_path());

// The same with B given as bf16 (or f16) bit patterns, always in the [N,K] layout. B is widened
// to f32 a block at a time (into the own GEMM's packed panels, or a bounded scratch for OpenBLAS):
// a bf16 weight never needs an f32 copy of itself.
void gemm_bf16_weights(std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
                       std::size_t lda, const std::uint16_t* b, std::size_t ldb, float beta,
                       float* c, std::size_t ldc, ThreadPool& pool = default_thread_pool(),
                       GemmPath path = default_gemm_path());
void gemm_f16_weights(std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
                      std::size_t lda, const std::uint16_t* b, std::size_t ldb, float beta,
                      float* c, std::size_t ldc, ThreadPool& pool = default_thread_pool(),
                      GemmPath path = default_gemm_path());

// The same with B a block-quantised weight [N,K] in host memory: a ggml block type (rows of K / 32
// or K / 256 whole blocks, contiguous) or kBnb4 codes with their `bnb4` state (K a multiple of
// its blocksize). B is dequantised into the packed panels as bf16 is widened (quant_blocks.h,
// bit-exact), so the product is the f32 GEMM of the dequantised weight, summed in the same order
// as gemm_f32 sums it. Error(kBadArgument) for another dtype, a K that is not whole blocks, or a
// kBnb4 weight without its state.
void gemm_quant_weights(std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
                        std::size_t lda, DType b_dtype, const void* b, const Bnb4State* bnb4,
                        float beta, float* c, std::size_t ldc,
                        ThreadPool& pool = default_thread_pool(),
                        GemmPath path = default_gemm_path());

// The same with B int8 codes [N,K] (row-major, contiguous) whose row j is scaled by row_scale[j]:
// B's row j is widened to codes · row_scale[j] in f32 where gemm_f32 packs its values, so the
// product is gemm_f32's on that f32 weight, summed in the same order. Error(kBadArgument) when
// row_scale is null.
void gemm_i8_row_scaled_weights(std::size_t m, std::size_t n, std::size_t k, float alpha,
                                const float* a, std::size_t lda, const std::int8_t* b,
                                const float* row_scale, float beta, float* c, std::size_t ldc,
                                ThreadPool& pool = default_thread_pool(),
                                GemmPath path = default_gemm_path());

}  // namespace ferry::cpu
