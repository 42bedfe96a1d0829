#include "cuda/gemm.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "cuda/cuda_log.h"
#include "cuda/gemm_cache.h"

namespace ferry::cuda {
namespace {

void check_lt(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw Error(ErrorCode::kInternal,
                std::string("cuBLASLt ") + what + ": " + cublasLtGetStatusString(status));
  }
}

// Owners of a plan's descriptors (host objects; creating them allocates no device memory).
struct DescDestroy {
  void operator()(cublasLtMatmulDesc_t d) const noexcept { cublasLtMatmulDescDestroy(d); }
};
struct LayoutDestroy {
  void operator()(cublasLtMatrixLayout_t l) const noexcept { cublasLtMatrixLayoutDestroy(l); }
};
struct PreferenceDestroy {
  void operator()(cublasLtMatmulPreference_t p) const noexcept {
    cublasLtMatmulPreferenceDestroy(p);
  }
};
using DescOwner = std::unique_ptr<std::remove_pointer_t<cublasLtMatmulDesc_t>, DescDestroy>;
using LayoutOwner = std::unique_ptr<std::remove_pointer_t<cublasLtMatrixLayout_t>, LayoutDestroy>;
using PreferenceOwner =
    std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, PreferenceDestroy>;

LayoutOwner make_layout(cudaDataType_t type, std::int64_t rows, std::int64_t cols,
                        std::int64_t ld) {
  cublasLtMatrixLayout_t layout = nullptr;
  check_lt(cublasLtMatrixLayoutCreate(&layout, type, static_cast<std::uint64_t>(rows),
                                      static_cast<std::uint64_t>(cols), ld),
           "matrix layout");
  return LayoutOwner(layout);
}

template <typename T>
void set_preference(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attribute,
                    T value) {
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, attribute, &value, sizeof value),
           "preference attribute");
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

GemmPlanKey key_of(const GemmCall& c) {
  GemmPlanKey key;
  key.m = c.m;
  key.n = c.n;
  key.k = c.k;
  key.lda = c.a.ld;
  key.ldb = c.b.ld;
  key.ldd = c.ldd;
  key.a_type = static_cast<int>(c.a.type);
  key.b_type = static_cast<int>(c.b.type);
  key.d_type = static_cast<int>(c.d_type);
  key.trans_a = c.a.transposed;
  key.trans_b = c.b.transposed;
  key.adds_d = c.beta != 0.0f;
  key.align_a = alignment_of(c.a.data);
  key.align_b = alignment_of(c.b.data);
  key.align_d = alignment_of(c.d);
  return key;
}

const char* type_name(int type) {
  switch (type) {
    case CUDA_R_32F:
      return "f32";
    case CUDA_R_16BF:
      return "bf16";
    case CUDA_R_16F:
      return "f16";
    default:
      return "other";
  }
}

// "3072x27280x3072 bf16*bf16->bf16 (T,N) ld 3072/3072/3072, aligned 256/2/256, + D"
std::string describe(const GemmPlanKey& k) {
  return std::to_string(k.m) + "x" + std::to_string(k.n) + "x" + std::to_string(k.k) + " " +
         type_name(k.a_type) + "*" + type_name(k.b_type) + "->" + type_name(k.d_type) + " (" +
         (k.trans_a ? "T" : "N") + "," + (k.trans_b ? "T" : "N") + ") ld " + std::to_string(k.lda) +
         "/" + std::to_string(k.ldb) + "/" + std::to_string(k.ldd) + ", aligned " +
         std::to_string(k.align_a) + "/" + std::to_string(k.align_b) + "/" +
         std::to_string(k.align_d) + (k.adds_d ? ", + D" : "");
}

std::atomic<std::uint64_t> g_heuristic_queries{0};
std::atomic<std::uint64_t> g_plans{0};
std::atomic<std::uint64_t> g_no_algorithm{0};

}  // namespace

LtGemmCounters lt_gemm_counters() {
  return {g_heuristic_queries.load(), g_plans.load(), g_no_algorithm.load()};
}

// One product's descriptors and algorithm (found = false: the heuristic had none that keeps the
// numerics; run() then refuses it and callers with another way take it).
struct LtGemm::Plan {
  DescOwner op;
  LayoutOwner a, b, d;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;
};

struct LtGemm::Plans {
  std::mutex mutex;  // one backend's ops are queued from one thread; this keeps it safe anyway
  GemmPlanCache<Plan> cache;
};

LtGemm::LtGemm(void* workspace, std::size_t workspace_bytes)
    : workspace_(workspace), workspace_bytes_(workspace_bytes), plans_(std::make_unique<Plans>()) {
  check_lt(cublasLtCreate(&handle_), "create");
}

LtGemm::~LtGemm() {
  plans_.reset();  // the descriptors before the handle
  cublasLtDestroy(handle_);
}

const LtGemm::Plan& LtGemm::plan(const GemmCall& c) {
  const std::lock_guard lock(plans_->mutex);
  return plans_->cache.get(key_of(c), [&](const GemmPlanKey& key) {
    Plan p;
    cublasLtMatmulDesc_t op = nullptr;
    check_lt(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul descriptor");
    p.op.reset(op);
    const cublasOperation_t trans_a = c.a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t trans_b = c.b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    check_lt(
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a),
        "transa");
    check_lt(
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b),
        "transb");
    // Stored shapes: A is [m×k] (or [k×m] transposed), B is [k×n] (or [n×k]).
    p.a = make_layout(c.a.type, c.a.transposed ? c.k : c.m, c.a.transposed ? c.m : c.k, c.a.ld);
    p.b = make_layout(c.b.type, c.b.transposed ? c.n : c.k, c.b.transposed ? c.k : c.n, c.b.ld);
    p.d = make_layout(c.d_type, c.m, c.n, c.ldd);

    // A 16-bit D must be rounded once: no split-K that adds partial sums in the output type (in
    // place or in the workspace). An f32 D may use any scheme: every partial sum is f32 anyway.
    // The mask asks the heuristic for that; rounds_once() checks what it returns, and when the
    // masked query finds nothing, unfiltered candidates are searched for one that qualifies.
    const bool narrow_d = c.d_type != CUDA_R_32F;
    constexpr int kCandidates = 8;
    cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
    for (const bool masked : {narrow_d, false}) {
      cublasLtMatmulPreference_t pref = nullptr;
      check_lt(cublasLtMatmulPreferenceCreate(&pref), "preference");
      const PreferenceOwner pref_owner(pref);
      set_preference(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                     static_cast<std::uint64_t>(workspace_bytes_));
      if (masked) {
        set_preference(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                       static_cast<std::uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE));
      }
      set_preference(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_a);
      set_preference(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_b);
      set_preference(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_d);
      set_preference(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_d);
      int found = 0;
      ++g_heuristic_queries;
      const cublasStatus_t status =
          cublasLtMatmulAlgoGetHeuristic(handle_, op, p.a.get(), p.b.get(), p.d.get(), p.d.get(),
                                         pref, kCandidates, results, &found);
      if (status != CUBLAS_STATUS_SUCCESS && status != CUBLAS_STATUS_NOT_SUPPORTED)
        check_lt(status, "heuristic");
      for (int i = 0; i < found && !p.found; ++i) {
        if (results[i].state == CUBLAS_STATUS_SUCCESS &&
            (!narrow_d || rounds_once(results[i].algo))) {
          p.algo = results[i].algo;
          p.found = true;
        }
      }
      if (p.found || !masked) break;
    }
    ++g_plans;
    if (!p.found) {
      ++g_no_algorithm;
      log_once("cuBLASLt has no algorithm for " + describe(key) +
               (narrow_d ? " that rounds a 16-bit result once" : ""));
    }
    return p;
  });
}

bool LtGemm::can_run(const GemmCall& c) {
  return plan(c).found;
}

void LtGemm::run(const GemmCall& c, cudaStream_t stream) {
  const Plan& p = plan(c);
  if (!p.found) {
    throw Error(ErrorCode::kInternal,
                "cuBLASLt has no algorithm for a " + describe(key_of(c)) + " product");
  }
  check_lt(cublasLtMatmul(handle_, p.op.get(), &c.alpha, c.a.data, p.a.get(), c.b.data, p.b.get(),
                          &c.beta, c.d, p.d.get(), c.d, p.d.get(), &p.algo, workspace_,
                          workspace_bytes_, stream),
           "matmul");
}

}  // namespace ferry::cuda
