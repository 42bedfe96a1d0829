#include "cuda/gemm.h"

#include <memory>
#include <string>

#include "core/error.h"

namespace ferry::cuda {
namespace {

void check_lt(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw Error(ErrorCode::kInternal,
                std::string("cuBLASLt ") + what + ": " + cublasLtGetStatusString(status));
  }
}

// RAII for the per-call descriptors (host objects; creating them allocates no device memory).
struct MatmulDesc {
  cublasLtMatmulDesc_t desc = nullptr;
  MatmulDesc() {
    check_lt(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul descriptor");
  }
  ~MatmulDesc() { cublasLtMatmulDescDestroy(desc); }
  MatmulDesc(const MatmulDesc&) = delete;
  MatmulDesc& operator=(const MatmulDesc&) = delete;
};

struct Layout {
  cublasLtMatrixLayout_t layout = nullptr;
  Layout(cudaDataType_t type, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
    check_lt(cublasLtMatrixLayoutCreate(&layout, type, static_cast<std::uint64_t>(rows),
                                        static_cast<std::uint64_t>(cols), ld),
             "matrix layout");
  }
  ~Layout() { cublasLtMatrixLayoutDestroy(layout); }
  Layout(const Layout&) = delete;
  Layout& operator=(const Layout&) = delete;
};

struct Preference {
  cublasLtMatmulPreference_t pref = nullptr;
  Preference() { check_lt(cublasLtMatmulPreferenceCreate(&pref), "preference"); }
  ~Preference() { cublasLtMatmulPreferenceDestroy(pref); }
  Preference(const Preference&) = delete;
  Preference& operator=(const Preference&) = delete;
  template <typename T>
  void set(cublasLtMatmulPreferenceAttributes_t attribute, T value) {
    check_lt(cublasLtMatmulPreferenceSetAttribute(pref, attribute, &value, sizeof value),
             "preference attribute");
  }
};

// The largest power of two (up to 256) dividing the address: what the heuristic may assume.
std::uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t a = 256;
  while (a > 1 && address % a != 0) a /= 2;
  return a;
}

// Whether an algorithm rounds a 16-bit D once: no split of K, or partial sums kept in f32.
bool rounds_once(const cublasLtMatmulAlgo_t& algo) {
  std::int32_t splits = 1;
  std::uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
  std::size_t written = 0;
  check_lt(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                                sizeof splits, &written),
           "algorithm split-K");
  check_lt(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                                &scheme, sizeof scheme, &written),
           "algorithm reduction scheme");
  return splits <= 1 || scheme == CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
}

}  // namespace

LtGemm::LtGemm(void* workspace, std::size_t workspace_bytes)
    : workspace_(workspace), workspace_bytes_(workspace_bytes) {
  check_lt(cublasLtCreate(&handle_), "create");
}

LtGemm::~LtGemm() {
  cublasLtDestroy(handle_);
}

void LtGemm::run(const GemmCall& c, cudaStream_t stream) {
  MatmulDesc op;
  const cublasOperation_t trans_a = c.a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t trans_b = c.b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_lt(cublasLtMatmulDescSetAttribute(op.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a,
                                          sizeof trans_a),
           "transa");
  check_lt(cublasLtMatmulDescSetAttribute(op.desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b,
                                          sizeof trans_b),
           "transb");
  // Stored shapes: A is [m×k] (or [k×m] transposed), B is [k×n] (or [n×k]).
  const Layout a(c.a.type, c.a.transposed ? c.k : c.m, c.a.transposed ? c.m : c.k, c.a.ld);
  const Layout b(c.b.type, c.b.transposed ? c.n : c.k, c.b.transposed ? c.k : c.n, c.b.ld);
  const Layout d(c.d_type, c.m, c.n, c.ldd);

  // A 16-bit D must be rounded once: no split-K that adds partial sums in the output type (in
  // place or in the workspace). An f32 D may use any scheme: every partial sum is f32 anyway.
  // The mask asks the heuristic for that; rounds_once() checks what it returns, and when the
  // masked query finds nothing, unfiltered candidates are searched for one that qualifies.
  const bool narrow_d = c.d_type != CUDA_R_32F;
  auto preference = [&](bool masked) {
    auto p = std::make_unique<Preference>();
    p->set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<std::uint64_t>(workspace_bytes_));
    if (masked) {
      p->set(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
             static_cast<std::uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE));
    }
    p->set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment_of(c.a.data));
    p->set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment_of(c.b.data));
    p->set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment_of(c.d));
    p->set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment_of(c.d));
    return p;
  };
  const cublasLtMatmulAlgo_t* algo = nullptr;
  constexpr int kCandidates = 8;
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  for (const bool masked : {narrow_d, false}) {
    const auto pref = preference(masked);
    int found = 0;
    const cublasStatus_t status =
        cublasLtMatmulAlgoGetHeuristic(handle_, op.desc, a.layout, b.layout, d.layout, d.layout,
                                       pref->pref, kCandidates, results, &found);
    if (status != CUBLAS_STATUS_SUCCESS && status != CUBLAS_STATUS_NOT_SUPPORTED)
      check_lt(status, "heuristic");
    for (int i = 0; i < found && algo == nullptr; ++i) {
      if (results[i].state == CUBLAS_STATUS_SUCCESS &&
          (!narrow_d || rounds_once(results[i].algo))) {
        algo = &results[i].algo;
      }
    }
    if (algo != nullptr || !masked) break;
  }
  if (algo == nullptr) {
    throw Error(ErrorCode::kInternal, "cuBLASLt has no algorithm for a " + std::to_string(c.m) +
                                          "x" + std::to_string(c.n) + "x" + std::to_string(c.k) +
                                          " product of these types and alignments" +
                                          (narrow_d ? " that rounds a 16-bit result once" : ""));
  }
  check_lt(
      cublasLtMatmul(handle_, op.desc, &c.alpha, c.a.data, a.layout, c.b.data, b.layout, &c.beta,
                     c.d, d.layout, c.d, d.layout, algo, workspace_, workspace_bytes_, stream),
      "matmul");
}

}  // namespace ferry::cuda
