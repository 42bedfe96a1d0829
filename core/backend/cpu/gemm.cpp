// The GEMM entry points: argument checks, the trivial cases (nothing to multiply), OpenBLAS, and
// the own GEMM's driver (packing and cache blocking around gemm_kernels.cpp's micro-kernels).
#include "core/backend/cpu/gemm.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "core/backend/cpu/gemm_kernels.h"
#include "core/backend/cpu/quant_blocks.h"
#include "core/error.h"
#include "core/tensor/convert.h"

#if defined(FERRY_HAVE_OPENBLAS)
#include <cblas.h>
#endif

namespace ferry::cpu {
namespace gemm_detail {
namespace {

constexpr std::size_t kCacheLine = 64;

std::size_t round_up(std::size_t value, std::size_t step) {
  return (value + step - 1) / step * step;
}

void prefetch(const void* address) {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(address);
#else
  (void)address;
#endif
}

// C = beta * C, for the cases where the product adds nothing (K == 0, alpha == 0).
void scale_c(std::size_t m, std::size_t n, float beta, float* c, std::size_t ldc) {
  if (beta == 1.0f) return;
  for (std::size_t i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    if (beta == 0.0f) {
      std::fill_n(row, n, 0.0f);
    } else {
      for (std::size_t j = 0; j < n; ++j) row[j] *= beta;
    }
  }
}

// B beyond the element formats of BFormat: a ggml block type, bitsandbytes 4-bit codes, or int8
// codes with one f32 scale per row, always in the [N,K] layout (b_format is then unused).
enum class BQuant { kNone, kBlocks, kBnb4, kI8Rows };

struct Operands {
  std::size_t m, n, k;
  float alpha;
  const float* a;
  std::size_t lda;
  const void* b;
  std::size_t ldb;
  BFormat b_format;
  bool b_transposed;
  float beta;
  float* c;
  std::size_t ldc;
  BQuant b_quant;
  DType b_dtype;             // kBlocks: the ggml block type (rows of ldb values, whole blocks)
  const Bnb4State* b_bnb4;   // kBnb4: the codes' state (rows of ldb == K values)
  const float* b_row_scale;  // kI8Rows: the scale of each of the N rows
};

// Bytes of B from the start of row `row` to value `col` (B in the [N,K] layout).
std::size_t b_offset_bytes(const Operands& op, std::size_t row, std::size_t col) {
  if (op.b_quant == BQuant::kBlocks) {
    const auto elems = static_cast<std::size_t>(dtype_block_elems(op.b_dtype));
    return (row * (op.ldb / elems) + col / elems) * dtype_block_bytes(op.b_dtype);
  }
  if (op.b_quant == BQuant::kBnb4) return (row * op.ldb + col) / 2;
  if (op.b_quant == BQuant::kI8Rows) return row * op.ldb + col;
  switch (op.b_format) {
    case BFormat::kF32:
      return (row * op.ldb + col) * sizeof(float);
    case BFormat::kBF16:
    case BFormat::kF16:
      return (row * op.ldb + col) * sizeof(std::uint16_t);
  }
  return 0;
}

// Widens values [col, col + count) of B's row `row` (the [N,K] layout, or row-major f32 when not
// transposed) to f32: a bf16 or f16 value by value, a block type by dequantising its blocks.
void widen(const Operands& op, std::size_t row, std::size_t col, float* dst, std::size_t count) {
  const auto* bytes = static_cast<const unsigned char*>(op.b);
  if (op.b_quant == BQuant::kBlocks) {
    dequantize_range(op.b_dtype, bytes + b_offset_bytes(op, row, 0), static_cast<std::int64_t>(col),
                     dst, static_cast<std::int64_t>(count));
    return;
  }
  if (op.b_quant == BQuant::kBnb4) {
    dequantize_bnb4(*op.b_bnb4, static_cast<const std::uint8_t*>(op.b),
                    static_cast<std::int64_t>(row * op.ldb + col), dst,
                    static_cast<std::int64_t>(count));
    return;
  }
  if (op.b_quant == BQuant::kI8Rows) {
    // q · s in f32, the value comfy-kitchen's dequantiser gives before it rotates.
    const auto* codes = static_cast<const std::int8_t*>(op.b) + row * op.ldb + col;
    const float scale = op.b_row_scale[row];
    for (std::size_t i = 0; i < count; ++i) dst[i] = static_cast<float>(codes[i]) * scale;
    return;
  }
  switch (op.b_format) {
    case BFormat::kF32:
      std::copy_n(static_cast<const float*>(op.b) + row * op.ldb + col, count, dst);
      return;
    case BFormat::kBF16:
      convert_to_f32(DType::kBF16, bytes + b_offset_bytes(op, row, col), dst, count);
      return;
    case BFormat::kF16:
      convert_to_f32(DType::kF16, bytes + b_offset_bytes(op, row, col), dst, count);
      return;
  }
}

// Packs op(B)[pc:pc+kc, j0:j0+cols] as kc steps of nr values, zero past cols. The runs of B it
// reads are short (nr or kc elements) and a row apart, too far apart for the hardware prefetcher:
// it asks for the run a few rows ahead while it copies this one.
constexpr std::size_t kRowsAhead = 4;

void pack_b_panel(const Operands& op, std::size_t pc, std::size_t kc, std::size_t j0,
                  std::size_t cols, std::size_t nr, float* dst) {
  if (!op.b_transposed) {
    // B is [K,N] f32: each step is a contiguous run of a row.
    const auto* b = static_cast<const float*>(op.b);
    for (std::size_t p = 0; p < kc; ++p) {
      const float* src = b + (pc + p) * op.ldb + j0;
      if (p + kRowsAhead < kc) {
        const float* ahead = src + kRowsAhead * op.ldb;
        for (std::size_t at = 0; at < cols; at += kCacheLine / sizeof(float)) prefetch(ahead + at);
      }
      float* out = dst + p * nr;
      std::copy_n(src, cols, out);
      std::fill(out + cols, out + nr, 0.0f);
    }
    return;
  }
  // B is [N,K]: widen a run of each row, then scatter it down the panel's column.
  const auto* bytes = static_cast<const unsigned char*>(op.b);
  // The bytes of one row's run (a block type's run starts and ends inside blocks at worst).
  const std::size_t run_bytes = b_offset_bytes(op, 0, pc + kc) - b_offset_bytes(op, 0, pc) + 1;
  std::array<float, 512> run;
  for (std::size_t j = 0; j < cols; ++j) {
    if (j0 + j + kRowsAhead < op.n) {
      const unsigned char* ahead = bytes + b_offset_bytes(op, j0 + j + kRowsAhead, pc);
      for (std::size_t at = 0; at < run_bytes; at += kCacheLine) prefetch(ahead + at);
    }
    for (std::size_t p0 = 0; p0 < kc; p0 += run.size()) {
      const std::size_t len = std::min(run.size(), kc - p0);
      widen(op, j0 + j, pc + p0, run.data(), len);
      float* out = dst + p0 * nr + j;
      for (std::size_t p = 0; p < len; ++p) out[p * nr] = run[p];
    }
  }
  for (std::size_t j = cols; j < nr; ++j) {
    for (std::size_t p = 0; p < kc; ++p) dst[p * nr + j] = 0.0f;
  }
}

// Packs A[i0:i0+rows, pc:pc+kc] as micro-panels of mr rows (kc steps of mr values), zero past
// rows.
void pack_a_block(const Operands& op, std::size_t i0, std::size_t rows, std::size_t pc,
                  std::size_t kc, std::size_t mr, float* dst) {
  for (std::size_t ir = 0; ir < rows; ir += mr) {
    const std::size_t panel_rows = std::min(mr, rows - ir);
    float* panel = dst + ir * kc;
    for (std::size_t i = 0; i < panel_rows; ++i) {
      const float* src = op.a + (i0 + ir + i) * op.lda + pc;
      for (std::size_t p = 0; p < kc; ++p) panel[p * mr + i] = src[p];
    }
    for (std::size_t i = panel_rows; i < mr; ++i) {
      for (std::size_t p = 0; p < kc; ++p) panel[p * mr + i] = 0.0f;
    }
  }
}

// A tile that C's edge cuts: the kernel writes the whole product into a scratch tile, and the
// part inside C is merged from there.
void edge_tile(const MicroKernel& kernel, std::size_t kc, const float* ap, const float* bp,
               float* c, std::size_t ldc, std::size_t rows, std::size_t cols, float alpha,
               float beta) {
  float tile[kMaxTile];
  kernel.fn(kc, ap, bp, tile, kernel.nr, 1.0f, 0.0f);
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t j = 0; j < cols; ++j) {
      float& out = c[i * ldc + j];
      const float product = alpha * tile[i * kernel.nr + j];
      out = beta == 0.0f ? product : product + beta * out;
    }
  }
}

// The packing buffers, per thread and kept for the thread's life, so a GEMM allocates nothing
// once its thread has run one of that size: the B panel of the GEMMs a thread calls, and the A
// block of the tasks it runs. A thread never needs two of either at once (a nested GEMM, from
// inside a chunk, runs inline on its own thread after the outer one's chunk has packed). They are
// plain vectors, aligned by hand: not an AlignedBuffer, whose static host allocator may be gone
// when a pool's workers exit; not the aligned operator new, whose delete from a thread_local's
// destructor at thread exit crashes in mingw-w64's static runtime (Wine: _aligned_free of a
// garbage pointer; a plain vector there is fine).
constexpr std::size_t kReservedPanelFloats = std::size_t{1} << 16;
constexpr std::size_t kAlignFloats = kCacheLine / sizeof(float);

struct ThreadBuffer {
  std::vector<float> storage;
  float* data = nullptr;  // storage's first cache-line-aligned float
  std::size_t floats = 0;
};

float* thread_buffer(ThreadBuffer& buffer, std::size_t floats) {
  if (buffer.floats < floats) {
    const std::size_t size = std::max(floats, kReservedPanelFloats);
    buffer.storage.assign(size + kAlignFloats, 0.0f);
    const auto address = reinterpret_cast<std::uintptr_t>(buffer.storage.data());
    const std::size_t skip = (kCacheLine - address % kCacheLine) % kCacheLine / sizeof(float);
    buffer.data = buffer.storage.data() + skip;
    buffer.floats = size;
  }
  return buffer.data;
}

float* thread_b_panel(std::size_t floats) {
  thread_local ThreadBuffer buffer;
  return thread_buffer(buffer, floats);
}

float* thread_a_block(std::size_t floats) {
  thread_local ThreadBuffer buffer;
  return thread_buffer(buffer, floats);
}

}  // namespace

void reserve_thread_buffers() {
  thread_b_panel(kReservedPanelFloats);
  thread_a_block(kReservedPanelFloats);
}

namespace {

// Splits `extent` into the fewest blocks of at most `limit`, of (about) equal size rounded up to
// a multiple of `step`: no thin last block that costs a full pass for little work.
std::size_t balanced_block(std::size_t extent, std::size_t limit, std::size_t step) {
  const std::size_t blocks = (extent + limit - 1) / limit;
  return round_up((extent + blocks - 1) / blocks, step);
}

// The Goto/BLIS loop nest: for each kc x nc panel of op(B) (packed once, by all threads), the
// C block [M, nc] is cut into tasks of mc rows (and, when there are too few row blocks to keep
// every thread busy, slices of the panel's columns); a task packs its A block and runs the
// micro-kernel over it, micro-panel of B by micro-panel of B.
// Block sizes depend on the shape and the kernel only, never on the thread count: every
// element of C is summed in the same order whatever the pool.
void run_own(const Operands& op, ThreadPool& pool, const MicroKernel& kernel) {
  const std::size_t mr = kernel.mr;
  const std::size_t nr = kernel.nr;
  const std::size_t kc_max = balanced_block(op.k, kernel.kc, 1);
  const std::size_t nc_max = balanced_block(op.n, kernel.nc, nr);
  const std::size_t mc = balanced_block(op.m, kernel.mc, mr);
  const std::size_t m_blocks = (op.m + mc - 1) / mc;
  const std::size_t threads = pool.size();

  float* packed_b = thread_b_panel(kc_max * nc_max);
  const std::size_t a_floats = mc * kc_max;

  for (std::size_t jc = 0; jc < op.n; jc += nc_max) {
    const std::size_t nc = std::min(nc_max, op.n - jc);
    const std::size_t slivers = (nc + nr - 1) / nr;
    // Four tasks per thread, so that uneven tasks and a thread the OS slows down cost little;
    // but a slice of columns packs its A block again, so none is narrower than 8 micro-panels.
    const std::size_t n_parts =
        std::max<std::size_t>(1, std::min(slivers / 8, (4 * threads + m_blocks - 1) / m_blocks));

    for (std::size_t pc = 0; pc < op.k; pc += kc_max) {
      const std::size_t kc = std::min(kc_max, op.k - pc);
      const float beta = pc == 0 ? op.beta : 1.0f;

      pool.parallel_for(slivers, 1, [&](std::size_t s0, std::size_t s1) {
        for (std::size_t s = s0; s < s1; ++s) {
          pack_b_panel(op, pc, kc, jc + s * nr, std::min(nr, nc - s * nr), nr,
                       packed_b + s * nr * kc);
        }
      });

      pool.parallel_for(m_blocks * n_parts, 1, [&](std::size_t t0, std::size_t t1) {
        float* packed_a = thread_a_block(a_floats);
        std::size_t packed_block = m_blocks;  // none yet
        for (std::size_t t = t0; t < t1; ++t) {
          const std::size_t block = t / n_parts;
          const std::size_t part = t % n_parts;
          const std::size_t i0 = block * mc;
          const std::size_t rows = std::min(mc, op.m - i0);
          if (block != packed_block) {
            pack_a_block(op, i0, rows, pc, kc, mr, packed_a);
            packed_block = block;
          }
          const std::size_t s_begin = part * slivers / n_parts;
          const std::size_t s_end = (part + 1) * slivers / n_parts;
          for (std::size_t s = s_begin; s < s_end; ++s) {
            const std::size_t j = s * nr;
            const std::size_t cols = std::min(nr, nc - j);
            const float* bp = packed_b + s * nr * kc;
            for (std::size_t ir = 0; ir < rows; ir += mr) {
              float* tile_c = op.c + (i0 + ir) * op.ldc + jc + j;
              const std::size_t tile_rows = std::min(mr, rows - ir);
              if (tile_rows == mr && cols == nr) {
                kernel.fn(kc, packed_a + ir * kc, bp, tile_c, op.ldc, op.alpha, beta);
              } else {
                edge_tile(kernel, kc, packed_a + ir * kc, bp, tile_c, op.ldc, tile_rows, cols,
                          op.alpha, beta);
              }
            }
          }
        }
      });
    }
  }
}

#if defined(FERRY_HAVE_OPENBLAS)
bool fits_blasint(std::size_t value) {
  return value <= static_cast<std::size_t>(std::numeric_limits<blasint>::max());
}

// OpenBLAS checks every leading dimension against its row even where there is one row.
blasint blas_ld(std::size_t ld, std::size_t row, std::size_t rows) {
  return static_cast<blasint>(rows <= 1 ? std::max({ld, row, std::size_t{1}}) : ld);
}

// Columns and depth of one f32 block of a bf16/f16 weight: 256 x 4096 floats = 4 MiB of scratch
// whatever the weight's size.
constexpr std::size_t kWidenColumns = 256;
constexpr std::size_t kWidenDepth = 4096;

void run_openblas(const Operands& op, ThreadPool& pool) {
  const auto m = static_cast<blasint>(op.m);
  if (op.b_format == BFormat::kF32 && op.b_quant == BQuant::kNone) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, op.b_transposed ? CblasTrans : CblasNoTrans, m,
                static_cast<blasint>(op.n), static_cast<blasint>(op.k), op.alpha, op.a,
                blas_ld(op.lda, op.k, op.m), static_cast<const float*>(op.b),
                blas_ld(op.ldb, op.b_transposed ? op.k : op.n, op.b_transposed ? op.n : op.k),
                op.beta, op.c, blas_ld(op.ldc, op.n, op.m));
    return;
  }
  const std::size_t columns = std::min(op.n, kWidenColumns);
  const std::size_t depth = std::min(op.k, kWidenDepth);
  // Per calling thread, kept: a linear on bf16 weights allocates nothing after its first call.
  // The chunks below run on other threads too, so they get this thread's buffer by pointer (a
  // thread_local named inside them would be their own thread's).
  thread_local std::vector<float> scratch_buffer;
  if (scratch_buffer.size() < columns * depth) scratch_buffer.resize(columns * depth);
  float* const scratch = scratch_buffer.data();
  for (std::size_t j0 = 0; j0 < op.n; j0 += columns) {
    const std::size_t nb = std::min(columns, op.n - j0);
    for (std::size_t k0 = 0; k0 < op.k; k0 += depth) {
      const std::size_t kb = std::min(depth, op.k - k0);
      pool.parallel_for(nb, 16, [&](std::size_t j_begin, std::size_t j_end) {
        for (std::size_t j = j_begin; j < j_end; ++j) {
          widen(op, j0 + j, k0, scratch + j * kb, kb);
        }
      });
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, static_cast<blasint>(nb),
                  static_cast<blasint>(kb), op.alpha, op.a + k0, blas_ld(op.lda, kb, op.m), scratch,
                  blas_ld(kb, kb, nb), k0 == 0 ? op.beta : 1.0f, op.c + j0,
                  blas_ld(op.ldc, nb, op.m));
    }
  }
}
#endif

void run(const Operands& op, ThreadPool& pool, GemmPath path, const char* name) {
  if (!gemm_path_available(path)) {
    throw Error(ErrorCode::kUnsupported,
                std::string(name) + ": this build has no OpenBLAS; use GemmPath::kOwn");
  }
  auto require = [&](bool ok, const char* what) {
    if (!ok) throw Error(ErrorCode::kBadArgument, std::string(name) + ": " + what);
  };
  const std::size_t b_rows = op.b_transposed ? op.n : op.k;
  const std::size_t b_row = op.b_transposed ? op.k : op.n;
  require(op.m <= 1 || op.lda >= op.k, "lda is shorter than a row of A (K)");
  require(b_rows <= 1 || op.ldb >= b_row, "ldb is shorter than a row of B");
  require(op.m <= 1 || op.ldc >= op.n, "ldc is shorter than a row of C (N)");
  if (op.m == 0 || op.n == 0) return;
  require(op.c != nullptr, "C is null");
  if (op.k == 0 || op.alpha == 0.0f) {
    scale_c(op.m, op.n, op.beta, op.c, op.ldc);
    return;
  }
  require(op.a != nullptr && op.b != nullptr, "A or B is null");

#if defined(FERRY_HAVE_OPENBLAS)
  if (path == GemmPath::kOpenBlas && fits_blasint(op.m) && fits_blasint(op.n) &&
      fits_blasint(op.k) && fits_blasint(op.lda) && fits_blasint(op.ldb) && fits_blasint(op.ldc)) {
    run_openblas(op, pool);
    return;
  }
#endif
  run_own(op, pool, micro_kernels().front());
}

}  // namespace

void gemm_own(std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
              std::size_t lda, const void* b, std::size_t ldb, BFormat b_format, bool b_transposed,
              float beta, float* c, std::size_t ldc, ThreadPool& pool, const MicroKernel& kernel) {
  const Operands op{
      m,    n, k,   alpha,         a,           lda,     b,      ldb, b_format, b_transposed,
      beta, c, ldc, BQuant::kNone, DType::kF32, nullptr, nullptr};
  if (m == 0 || n == 0) return;
  if (k == 0 || alpha == 0.0f) {
    scale_c(m, n, beta, c, ldc);
    return;
  }
  run_own(op, pool, kernel);
}

std::string openblas_description() {
#if defined(FERRY_HAVE_OPENBLAS)
  return std::string(openblas_get_config()) + ", core " + openblas_get_corename() + ", " +
         std::to_string(openblas_get_num_threads()) + " threads";
#else
  return {};
#endif
}

}  // namespace gemm_detail

using gemm_detail::BFormat;
using gemm_detail::BQuant;
using gemm_detail::Operands;

GemmPath default_gemm_path() {
#if defined(FERRY_HAVE_OPENBLAS)
  return GemmPath::kOpenBlas;
#else
  return GemmPath::kOwn;
#endif
}

bool gemm_path_available(GemmPath path) {
  return path == GemmPath::kOwn || default_gemm_path() == GemmPath::kOpenBlas;
}

std::string_view own_gemm_kernel_name() {
  static const std::string name = [] {
    const auto& kernel = gemm_detail::micro_kernels().front();
    return std::string(kernel.name) + " " + std::to_string(kernel.mr) + "x" +
           std::to_string(kernel.nr);
  }();
  return name;
}

void gemm_f32(std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
              std::size_t lda, const float* b, std::size_t ldb, bool b_transposed, float beta,
              float* c, std::size_t ldc, ThreadPool& pool, GemmPath path) {
  gemm_detail::run({m, n, k, alpha, a, lda, b, ldb, BFormat::kF32, b_transposed, beta, c, ldc,
                    BQuant::kNone, DType::kF32, nullptr, nullptr},
                   pool, path, "gemm_f32");
}

void gemm_bf16_weights(std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
                       std::size_t lda, const std::uint16_t* b, std::size_t ldb, float beta,
                       float* c, std::size_t ldc, ThreadPool& pool, GemmPath path) {
  gemm_detail::run({m, n, k, alpha, a, lda, b, ldb, BFormat::kBF16, true, beta, c, ldc,
                    BQuant::kNone, DType::kBF16, nullptr, nullptr},
                   pool, path, "gemm_bf16_weights");
}

void gemm_f16_weights(std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
                      std::size_t lda, const std::uint16_t* b, std::size_t ldb, float beta,
                      float* c, std::size_t ldc, ThreadPool& pool, GemmPath path) {
  gemm_detail::run({m, n, k, alpha, a, lda, b, ldb, BFormat::kF16, true, beta, c, ldc,
                    BQuant::kNone, DType::kF16, nullptr, nullptr},
                   pool, path, "gemm_f16_weights");
}

void gemm_quant_weights(std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
                        std::size_t lda, DType b_dtype, const void* b, const Bnb4State* bnb4,
                        float beta, float* c, std::size_t ldc, ThreadPool& pool, GemmPath path) {
  const char* name = "gemm_quant_weights";
  auto require = [&](bool ok, const std::string& what) {
    if (!ok) throw Error(ErrorCode::kBadArgument, std::string(name) + ": " + what);
  };
  const bool bnb = b_dtype == DType::kBnb4;
  require(bnb || (dtype_is_blocked(b_dtype) && b_dtype != DType::kBnb4),
          std::string(dtype_name(b_dtype)) + " is not a block-quantised dtype");
  require(!bnb || bnb4 != nullptr, "a bitsandbytes 4-bit weight needs its quant state");
  const auto block = static_cast<std::size_t>(bnb ? bnb4->blocksize : dtype_block_elems(b_dtype));
  require(block > 0 && k % block == 0, "K = " + std::to_string(k) + " is not a whole number of " +
                                           std::to_string(block) + "-value blocks of " +
                                           std::string(dtype_name(b_dtype)));
  gemm_detail::run({m, n, k, alpha, a, lda, b, k, BFormat::kF32, true, beta, c, ldc,
                    bnb ? BQuant::kBnb4 : BQuant::kBlocks, b_dtype, bnb4, nullptr},
                   pool, path, name);
}

void gemm_i8_row_scaled_weights(std::size_t m, std::size_t n, std::size_t k, float alpha,
                                const float* a, std::size_t lda, const std::int8_t* b,
                                const float* row_scale, float beta, float* c, std::size_t ldc,
                                ThreadPool& pool, GemmPath path) {
  const char* name = "gemm_i8_row_scaled_weights";
  if (n > 0 && k > 0 && row_scale == nullptr) {
    throw Error(ErrorCode::kBadArgument,
                std::string(name) + ": int8 weights need their row scales");
  }
  gemm_detail::run({m, n, k, alpha, a, lda, b, k, BFormat::kF32, true, beta, c, ldc,
                    BQuant::kI8Rows, DType::kI8, nullptr, row_scale},
                   pool, path, name);
}

}  // namespace ferry::cpu
