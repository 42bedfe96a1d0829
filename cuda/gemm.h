// Matrix products through cuBLASLt, with the numerics the backend promises: f32 compute for
// every input type (no TF32 for f32 inputs), and no split-K scheme that would add up partial
// sums in a 16-bit output type (only the f32 "compute type" reduction is allowed), so a 16-bit
// result is rounded once. The descriptors and the heuristic's algorithm are planned once per
// distinct product (cuda/gemm_cache.h) and reused: conv3d issues thousands of calls per VAE
// decode, all of a few shapes.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace ferry::cuda {

// Column-major, as cuBLAS sees memory: D[m×n] = alpha · op(A)[m×k] · op(B)[k×n] + beta · D.
struct GemmOperand {
  const void* data = nullptr;
  cudaDataType_t type = CUDA_R_32F;
  std::int64_t ld = 0;
  bool transposed = false;  // op(X) = Xᵀ: X is stored [k×m] (A) or [n×k] (B)
};

struct GemmCall {
  std::int64_t m = 0, n = 0, k = 0;
  GemmOperand a, b;
  void* d = nullptr;
  cudaDataType_t d_type = CUDA_R_32F;
  std::int64_t ldd = 0;
  float alpha = 1.0f;
  float beta = 0.0f;  // nonzero: D's old contents (a preloaded bias) are added
};

// Process-wide counts of cuBLASLt's planning work, for the GPU check and the tests: every
// heuristic query, every plan made (one per distinct product), and the plans for which the
// heuristic had no suitable algorithm.
struct LtGemmCounters {
  std::uint64_t heuristic_queries = 0;
  std::uint64_t plans = 0;
  std::uint64_t no_algorithm = 0;
};
LtGemmCounters lt_gemm_counters();

class LtGemm {
 public:
  // `workspace` (device memory, 256-byte aligned) is lent to cuBLASLt for split-K partial sums.
  LtGemm(void* workspace, std::size_t workspace_bytes);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // Whether cuBLASLt has an algorithm for this product (with the numerics above). Plans it on
  // first sight: a caller that has another way (linear's f32 path) asks before run().
  bool can_run(const GemmCall& call);

  // Queues the product on `stream`. A 16-bit A/B pair must have the same type; f32 A/B need an
  // f32 D. Throws Error(kInternal) when cuBLASLt refuses the call or has no algorithm for it.
  void run(const GemmCall& call, cudaStream_t stream);

 private:
  struct Plan;
  struct Plans;
  const Plan& plan(const GemmCall& call);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  std::unique_ptr<Plans> plans_;
};

}  // namespace ferry::cuda
