#include <string>

#include "cuda/attention.cuh"
#include "cuda/convert.cuh"
#include "cuda/cuda_log.h"
#include "cuda/launch.cuh"

namespace ferry::cuda {

// ---- flash: bf16, head_dim 128, tensor cores ----

// Outside the anonymous namespace (external linkage): on architectures below sm_80 the kernel
// body is compiled out, and unused internal helpers would be warnings (errors here).
namespace flash {
inline constexpr int kDim = 128;
inline constexpr int kRows = 64;  // queries per block: 4 warps × 16
inline constexpr int kCols = 64;  // keys per tile
inline constexpr int kBlockThreads = 128;
inline constexpr int kChunks = kDim / 8;  // 16-byte chunks per q/k/v row
// bf16 per row of the K (and staged Q) tile, and of the transposed V tile [dim][key]: 8 bf16 of
// padding make the fragment loads conflict-free.
inline constexpr int kKStride = kDim + 8;
inline constexpr int kVStride = kCols + 8;

__device__ __forceinline__ std::uint32_t load_pair(const std::uint16_t* p) {
  return *reinterpret_cast<const std::uint32_t*>(p);
}

// Two f32 → a bf16x2 register (first value in the low half), rounded to nearest even.
__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
  return static_cast<std::uint32_t>(codec::encode_bf16(lo)) |
         (static_cast<std::uint32_t>(codec::encode_bf16(hi)) << 16);
}

__device__ __forceinline__ float round_bf16(float v) {
  return codec::decode_bf16(codec::encode_bf16(v));
}

// d += a · b for one m16n8k16 tile (PTX ISA fragment layouts, g = lane / 4, t = lane % 4):
// a0 (row g, k 2t..2t+1), a1 (row g+8, same k), a2 (row g, k 2t+8..), a3 (row g+8, k 2t+8..);
// b0 (k 2t..2t+1, col g), b1 (k 2t+8.., col g); d0,d1 (row g, cols 2t, 2t+1), d2,d3 (row g+8).
__device__ __forceinline__ void mma_bf16(float (&d)[4], const std::uint32_t (&a)[4],
                                         std::uint32_t b0, std::uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  (void)d, (void)a, (void)b0, (void)b1;
#endif
}
}  // namespace flash

namespace {

__global__ void __launch_bounds__(flash::kBlockThreads) flash_attention_kernel(AttentionArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using namespace flash;
  __shared__ __align__(16) std::uint16_t ks[kCols * kKStride];  // K tile [key][dim]; Q first
  __shared__ __align__(16) std::uint16_t vt[kDim * kVStride];   // V tile transposed [dim][key]
  const auto* q = static_cast<const std::uint16_t*>(a.q);
  const auto* k = static_cast<const std::uint16_t*>(a.k);
  const auto* v = static_cast<const std::uint16_t*>(a.v);
  const std::int64_t head = blockIdx.y;
  const std::int64_t kv_head = head / (a.heads / a.kv_heads);
  const std::int64_t q0 = static_cast<std::int64_t>(blockIdx.x) * kRows;
  const std::int64_t token_stride = a.heads * kDim;  // q: elements from one token to the next
  const std::int64_t kv_stride = a.kv_heads * kDim;  // k and v
  // Causal: keys past the block's last query are masked for every row; the loop stops there.
  const std::int64_t key_end = a.causal ? min(a.keys, q0 + kRows) : a.keys;
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int g = lane / 4;
  const int t = lane % 4;

  // Q tile through shared memory into this warp's A fragments (16 rows × 128 dims).
  for (int idx = tid; idx < kRows * kChunks; idx += kBlockThreads) {
    const int r = idx / kChunks;
    const int c = idx % kChunks;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (q0 + r < a.len)
      val = *reinterpret_cast<const uint4*>(q + (q0 + r) * token_stride + head * kDim + c * 8);
    *reinterpret_cast<uint4*>(ks + r * kKStride + c * 8) = val;
  }
  __syncthreads();
  std::uint32_t qa[kDim / 16][4];
  {
    const std::uint16_t* row_g = ks + (warp * 16 + g) * kKStride + 2 * t;
    const std::uint16_t* row_g8 = row_g + 8 * kKStride;
#pragma unroll
    for (int kc = 0; kc < kDim / 16; ++kc) {
      qa[kc][0] = load_pair(row_g + kc * 16);
      qa[kc][1] = load_pair(row_g8 + kc * 16);
      qa[kc][2] = load_pair(row_g + kc * 16 + 8);
      qa[kc][3] = load_pair(row_g8 + kc * 16 + 8);
    }
  }

  float acc[kDim / 8][4];  // O for rows g, g+8 of this warp: 16 tiles of 8 dims
#pragma unroll
  for (int dt = 0; dt < kDim / 8; ++dt) acc[dt][0] = acc[dt][1] = acc[dt][2] = acc[dt][3] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY};  // running max of rows g, g+8
  float l_run[2] = {0.0f, 0.0f};            // running sum of exp(score - m_run)

  for (std::int64_t t0 = 0; t0 < key_end; t0 += kCols) {
    __syncthreads();  // the previous tile (or the staged Q) is no longer read
    // K: 16-byte chunks along dims, a row per 16 threads (coalesced).
    for (int idx = tid; idx < kCols * kChunks; idx += kBlockThreads) {
      const int j = idx / kChunks;
      const int c = idx % kChunks;
      uint4 val = make_uint4(0, 0, 0, 0);
      if (t0 + j < a.keys)
        val = *reinterpret_cast<const uint4*>(k + (t0 + j) * kv_stride + kv_head * kDim + c * 8);
      *reinterpret_cast<uint4*>(ks + j * kKStride + c * 8) = val;
    }
    // V, transposed: two chunks (one 32-byte sector) per key, 16 keys per warp, so the
    // scattered 16-bit stores conflict at most two ways.
    for (int idx = tid; idx < kCols * kChunks; idx += kBlockThreads) {
      const int c = (idx % 2) + 2 * (idx / (2 * kCols));
      const int j = (idx / 2) % kCols;
      uint4 val = make_uint4(0, 0, 0, 0);
      if (t0 + j < a.keys)
        val = *reinterpret_cast<const uint4*>(v + (t0 + j) * kv_stride + kv_head * kDim + c * 8);
      const std::uint32_t words[4] = {val.x, val.y, val.z, val.w};
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        vt[(c * 8 + 2 * w) * kVStride + j] = static_cast<std::uint16_t>(words[w] & 0xFFFFu);
        vt[(c * 8 + 2 * w + 1) * kVStride + j] = static_cast<std::uint16_t>(words[w] >> 16);
      }
    }
    __syncthreads();

    // S = Q·Kᵀ for this warp's 16 rows × 64 keys (8 tiles of 8 keys).
    float s[kCols / 8][4];
#pragma unroll
    for (int nt = 0; nt < kCols / 8; ++nt) {
      s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
      const std::uint16_t* key_row = ks + (nt * 8 + g) * kKStride + 2 * t;
#pragma unroll
      for (int kc = 0; kc < kDim / 16; ++kc) {
        mma_bf16(s[nt], qa[kc], load_pair(key_row + kc * 16), load_pair(key_row + kc * 16 + 8));
      }
    }

    // Scale, mask keys past the end, and the tile's row maxima (a row lives in a lane quad).
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < kCols / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const std::int64_t key = t0 + nt * 8 + 2 * t + (e & 1);
        const std::int64_t query = q0 + warp * 16 + g + 8 * (e / 2);
        const bool visible = key < a.keys && (!a.causal || key <= query);
        const float score = visible ? s[nt][e] * a.scale : -INFINITY;
        s[nt][e] = score;
        tile_max[e / 2] = fmaxf(tile_max[e / 2], score);
      }
    }
    float m_use[2], alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xFFFFFFFFu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xFFFFFFFFu, tile_max[r], 2));
      const float m_new = fmaxf(m_run[r], tile_max[r]);
      m_use[r] = m_new == -INFINITY ? 0.0f : m_new;  // a row of -inf scores stays NaN-free here
      alpha[r] = expf(m_run[r] - m_use[r]);          // 0 on the first tile
      m_run[r] = m_new;
    }

    // P = exp(S - m), rounded to bf16 and packed straight into A fragments: key tile nt feeds
    // k-chunk nt / 2, low half (a0, a1) for even nt, high half (a2, a3) for odd nt.
    std::uint32_t pa[kCols / 16][4];
    float row_sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int nt = 0; nt < kCols / 8; ++nt) {
      const float p0 = round_bf16(expf(s[nt][0] - m_use[0]));
      const float p1 = round_bf16(expf(s[nt][1] - m_use[0]));
      const float p2 = round_bf16(expf(s[nt][2] - m_use[1]));
      const float p3 = round_bf16(expf(s[nt][3] - m_use[1]));
      row_sum[0] += p0 + p1;
      row_sum[1] += p2 + p3;
      pa[nt / 2][(nt % 2) * 2] = pack_bf16(p0, p1);
      pa[nt / 2][(nt % 2) * 2 + 1] = pack_bf16(p2, p3);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_sum[r] += __shfl_xor_sync(0xFFFFFFFFu, row_sum[r], 1);
      row_sum[r] += __shfl_xor_sync(0xFFFFFFFFu, row_sum[r], 2);
      l_run[r] = l_run[r] * alpha[r] + row_sum[r];
    }

    // O = O·alpha + P·V.
#pragma unroll
    for (int dt = 0; dt < kDim / 8; ++dt) {
      acc[dt][0] *= alpha[0];
      acc[dt][1] *= alpha[0];
      acc[dt][2] *= alpha[1];
      acc[dt][3] *= alpha[1];
      const std::uint16_t* dim_row = vt + (dt * 8 + g) * kVStride + 2 * t;
#pragma unroll
      for (int kk = 0; kk < kCols / 16; ++kk) {
        mma_bf16(acc[dt], pa[kk], load_pair(dim_row + kk * 16), load_pair(dim_row + kk * 16 + 8));
      }
    }
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const std::int64_t row = q0 + warp * 16 + g + 8 * r;
    if (row >= a.len) continue;
    const std::int64_t base = (row * a.heads + head) * kDim + 2 * t;
#pragma unroll
    for (int dt = 0; dt < kDim / 8; ++dt) {
      store_f32(a.o, a.o_dtype, base + dt * 8, acc[dt][2 * r] / l_run[r]);
      store_f32(a.o, a.o_dtype, base + dt * 8 + 1, acc[dt][2 * r + 1] / l_run[r]);
    }
  }
#else
  (void)a;
  __trap();  // the host never launches this below sm_80
#endif
}

// ---- tiled: any float dtypes, head_dim ≤ 1024, optional T5 bias ----

namespace tiled {
constexpr int kRows = 16;   // queries per block
constexpr int kLanes = 16;  // threads per query: each holds dims lane, lane+16, ...
constexpr int kThreads = kRows * kLanes;
constexpr int kKeys = 8;  // keys per shared-memory chunk
}  // namespace tiled

// kPer dims per thread: head_dim ≤ 16·kPer. q and the output accumulator live in registers.
template <int kPer>
__global__ void __launch_bounds__(tiled::kThreads) tiled_attention_kernel(AttentionArgs a) {
  using namespace tiled;
  extern __shared__ float chunk[];  // [kKeys][dim]: K, then V, of the current keys
  const int row = threadIdx.x / kLanes;
  const int lane = threadIdx.x % kLanes;
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kRows + row;
  const std::int64_t head = blockIdx.y;
  const std::int64_t kv_head = head / (a.heads / a.kv_heads);
  const std::int64_t dim = a.dim;
  const bool active = i < a.len;
  // Causal: no row of this block sees keys past its last query.
  const std::int64_t block_end = static_cast<std::int64_t>(blockIdx.x + 1) * kRows;
  const std::int64_t key_end = a.causal ? min(a.keys, block_end) : a.keys;

  float qr[kPer], acc[kPer];
#pragma unroll
  for (int p = 0; p < kPer; ++p) {
    const std::int64_t d = lane + kLanes * p;
    qr[p] = active && d < dim ? load_f32(a.q, a.q_dtype, (i * a.heads + head) * dim + d) : 0.0f;
    acc[p] = 0.0f;
  }
  float m_run = -INFINITY;
  float l_run = 0.0f;

  for (std::int64_t j0 = 0; j0 < key_end; j0 += kKeys) {
    const int n = key_end - j0 < kKeys ? static_cast<int>(key_end - j0) : kKeys;
    __syncthreads();
    for (std::int64_t idx = threadIdx.x; idx < n * dim; idx += kThreads) {
      chunk[idx] =
          load_f32(a.k, a.k_dtype, ((j0 + idx / dim) * a.kv_heads + kv_head) * dim + idx % dim);
    }
    __syncthreads();

    float s[kKeys];
    float tile_max = -INFINITY;
#pragma unroll
    for (int jj = 0; jj < kKeys; ++jj) {
      float part = 0.0f;
      if (jj < n) {
#pragma unroll
        for (int p = 0; p < kPer; ++p) {
          const std::int64_t d = lane + kLanes * p;
          if (d < dim) part += qr[p] * chunk[jj * dim + d];
        }
      }
      // The 16 lanes of a query: xor offsets below 16 stay in the group; lane 0's total then
      // goes to all, so every lane uses the same score.
      for (int offset = kLanes / 2; offset > 0; offset /= 2) {
        part += __shfl_xor_sync(0xFFFFFFFFu, part, offset);
      }
      part = __shfl_sync(0xFFFFFFFFu, part, 0, kLanes);
      float score = -INFINITY;
      if (jj < n && (!a.causal || j0 + jj <= i)) {
        score = part * a.scale;
        if (a.rel != nullptr) {
          const int bucket = codec::t5_bucket(j0 + jj - i, a.log16);
          score += load_f32(a.rel, a.rel_dtype, bucket * a.heads + head);
        }
      }
      s[jj] = score;
      tile_max = fmaxf(tile_max, score);
    }
    const float m_new = fmaxf(m_run, tile_max);
    const float m_use = m_new == -INFINITY ? 0.0f : m_new;
    const float alpha = expf(m_run - m_use);
    float p_sum = 0.0f;
#pragma unroll
    for (int jj = 0; jj < kKeys; ++jj) {
      s[jj] = expf(s[jj] - m_use);  // masked keys: exp(-inf) = 0
      p_sum += s[jj];
    }
    l_run = l_run * alpha + p_sum;
    m_run = m_new;

    __syncthreads();
    for (std::int64_t idx = threadIdx.x; idx < n * dim; idx += kThreads) {
      chunk[idx] =
          load_f32(a.v, a.v_dtype, ((j0 + idx / dim) * a.kv_heads + kv_head) * dim + idx % dim);
    }
    __syncthreads();
#pragma unroll
    for (int p = 0; p < kPer; ++p) {
      const std::int64_t d = lane + kLanes * p;
      float o = acc[p] * alpha;
      if (d < dim) {
#pragma unroll
        for (int jj = 0; jj < kKeys; ++jj) {
          if (jj < n) o += s[jj] * chunk[jj * dim + d];
        }
      }
      acc[p] = o;
    }
  }

  if (!active) return;
#pragma unroll
  for (int p = 0; p < kPer; ++p) {
    const std::int64_t d = lane + kLanes * p;
    if (d < dim) store_f32(a.o, a.o_dtype, (i * a.heads + head) * dim + d, acc[p] / l_run);
  }
}

template <int kPer>
void launch_tiled(const AttentionArgs& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((a.len + tiled::kRows - 1) / tiled::kRows),
                  static_cast<unsigned>(a.heads));
  const std::size_t smem = static_cast<std::size_t>(tiled::kKeys * a.dim) * sizeof(float);
  tiled_attention_kernel<kPer><<<grid, tiled::kThreads, smem, stream>>>(a);
  check_launch("tiled attention kernel");
}

bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

// The float dtypes the kernels read and write (the kernels library does not link the core's
// dtype_name).
const char* float_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kF8E4M3:
      return "f8_e4m3";
    case DType::kF8E5M2:
      return "f8_e5m2";
    default:
      return "other";
  }
}

// With FERRY_CUDA_LOG set: which kernel ran for which arguments, once per distinct line.
void log_kernel(const char* kernel, const AttentionArgs& a) {
  if (!kernel_log_enabled()) return;
  log_once(
      std::string("attention: ") + kernel + " kernel, L " + std::to_string(a.len) + " S " +
      std::to_string(a.keys) + " H " + std::to_string(a.heads) + " Hk " +
      std::to_string(a.kv_heads) + " D " + std::to_string(a.dim) + (a.causal ? " causal" : "") +
      ", q " + float_name(a.q_dtype) + " k " + float_name(a.k_dtype) + " v " +
      float_name(a.v_dtype) + " o " + float_name(a.o_dtype) +
      (a.rel != nullptr ? ", T5 relative bias" : "") +
      ((aligned16(a.q) && aligned16(a.k) && aligned16(a.v)) ? "" : ", q/k/v not 16-byte aligned"));
}

}  // namespace

bool flash_attention_applies(const AttentionArgs& a, int compute_capability) {
  return compute_capability >= 80 && a.dim == flash::kDim && a.rel == nullptr &&
         a.q_dtype == DType::kBF16 && a.k_dtype == DType::kBF16 && a.v_dtype == DType::kBF16 &&
         aligned16(a.q) && aligned16(a.k) && aligned16(a.v) && a.heads <= 65535;
}

void launch_flash_attention(const AttentionArgs& a, cudaStream_t stream) {
  log_kernel("flash", a);
  const dim3 grid(static_cast<unsigned>((a.len + flash::kRows - 1) / flash::kRows),
                  static_cast<unsigned>(a.heads));
  flash_attention_kernel<<<grid, flash::kBlockThreads, 0, stream>>>(a);
  check_launch("flash attention kernel");
}

void launch_tiled_attention(const AttentionArgs& a, cudaStream_t stream) {
  log_kernel("tiled", a);
  if (a.dim <= 64) return launch_tiled<4>(a, stream);
  if (a.dim <= 128) return launch_tiled<8>(a, stream);
  if (a.dim <= 256) return launch_tiled<16>(a, stream);
  if (a.dim <= 512) return launch_tiled<32>(a, stream);
  if (a.dim <= kMaxTiledHeadDim) return launch_tiled<64>(a, stream);
  throw Error(ErrorCode::kInternal, "attention: head_dim " + std::to_string(a.dim) + " above " +
                                        std::to_string(kMaxTiledHeadDim));
}

}  // namespace ferry::cuda
