// The Backend: what every model (umT5, the Wan DiT, the Wan VAEs) asks of the hardware. Two
// implementations: the CPU backend (core/backend/cpu, the readable reference and the fallback
// without an NVIDIA GPU) and the CUDA backend (cuda/). Models never see which one runs.
//
// Conventions, for every op:
// - Tensors are contiguous row-major views (core/tensor/tensor.h) on this backend's device.
// - Inputs are widened to f32, the op computes in f32 (f64 where the reference does), and the
//   result is rounded once, to the output tensor's dtype: the rounding points of wan.md §1 are
//   the dtypes the model gives its outputs. Matrix products round their left operand to the
//   output dtype first (a bf16 op has bf16 inputs, as under PyTorch autocast).
// - Activations are F32, BF16 or F16 (weights may also be F8); integer tensors only where an op
//   says so (embedding ids).
// - Outputs may alias their first input only where an op says so (the row-wise ops — norms,
//   modulate, elementwise, softmax, convert — all allow it).
// - Work may run asynchronously (CUDA: on the backend's compute stream); download() and
//   synchronize() wait for it.
// - A shape or dtype the op cannot take is a bug in the caller: Error(kInternal).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/device.h"
#include "core/memory/aligned_buffer.h"
#include "core/memory/fence.h"
#include "core/tensor/quant.h"
#include "core/tensor/tensor.h"

namespace ferry {

// Memory a backend allocated; freed by destroying the owner.
class DeviceBuffer {
 public:
  virtual ~DeviceBuffer() = default;
  virtual void* data() const = 0;
  virtual std::size_t size() const = 0;
};

// Host-to-device copies that run beside compute (the weight streamer's uploads). CUDA: a copy
// stream of its own; CPU: one worker thread.
class CopyQueue {
 public:
  virtual ~CopyQueue() = default;
  // Queues a copy of `bytes` from host memory (a staging slot or the pinned cache) to device
  // memory. Both must stay untouched until a fence recorded after this call has completed.
  virtual void copy_to_device(void* device_dst, const void* host_src, std::size_t bytes) = 0;
  // A fence that completes when every copy queued so far has completed.
  virtual std::shared_ptr<memory::Fence> record() = 0;
  // Copies queued after this call start once `fence` (this backend's: a compute fence from
  // record_compute()) has completed. The caller does not wait: CUDA makes the copy stream wait
  // for the event; the CPU's worker waits before its next copy (holding the fence till then).
  virtual void wait_for(const std::shared_ptr<memory::Fence>& fence) = 0;
};

// A 3-D convolution's stride and zero padding. Causal convolutions pad only in front in time
// (2·pt frames, fewer when cached frames are prepended to the input); Wan's 2-D downsampling pads
// only the bottom and right.
struct Conv3dParams {
  int stride_t = 1, stride_h = 1, stride_w = 1;
  int pad_front = 0, pad_back = 0;
  int pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
};

// Geometry of Wan's 3-D rotary embedding: tokens are ordered (frame, row, column). x may hold
// a run of the video's tokens: its row 0 is token `first` (a chunk of the DiT's tokens).
struct RopeGrid {
  std::int64_t frames = 1;
  std::int64_t height = 1;
  std::int64_t width = 1;
  std::int64_t first = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Device device() const = 0;
  virtual std::string name() const = 0;
  // What the device can do (core/backend/device.h). A backend that declares nothing gets the
  // plain data path: device memory of its own, reached through staging copies.
  virtual DeviceCapabilities capabilities() const { return DeviceCapabilities{}; }

  // ---- memory ----
  // A block of this backend's memory (device memory on CUDA); Error(kOutOfMemory) if refused.
  virtual std::unique_ptr<DeviceBuffer> allocate(std::size_t bytes) = 0;
  // Host bytes laid out as dst (its dtype and shape) → dst. The host bytes may be reused once
  // synchronize() (or a download) has returned.
  virtual void upload(const Tensor& dst, const void* host) = 0;
  // src → host bytes; waits for the work that writes src.
  virtual void download(const Tensor& src, void* host) = 0;
  virtual void synchronize() = 0;

  // ---- streaming (core/offload) ----
  // Where host buffers that feed the device come from: pinned memory on CUDA (so copies run
  // asynchronously), plain page-aligned memory on the CPU.
  virtual memory::HostAllocator& host_allocator() = 0;
  virtual std::unique_ptr<CopyQueue> create_copy_queue() = 0;
  // Later compute waits for `fence` (this backend's: a copy queue's record()). CUDA:
  // cudaStreamWaitEvent on the compute stream, no host wait; CPU: fence.wait().
  virtual void wait_for(memory::Fence& fence) = 0;
  // A fence that completes when all compute queued so far has completed (CUDA: an event on the
  // compute stream; CPU: already complete, since CPU ops are synchronous).
  virtual std::shared_ptr<memory::Fence> record_compute() = 0;

  // ---- matrix products ----
  // y[M,N] = round(x)[M,K] · (scale · w[N,K])ᵀ + bias[N]. w is F32, BF16, F16, F8, a GGUF block
  // type (kQ*) or bitsandbytes 4-bit codes (kBnb4, with w_scaling.bnb4); it is dequantised on the
  // fly, a panel at a time, never into a whole-weight copy. scale is w_scaling.scale (the
  // per-tensor scale of scaled fp8; 1 otherwise). bias (optional) is a float dtype.
  virtual void linear(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y,
                      const WeightScaling& w_scaling = {}) = 0;
  // y[M,N] += round(x)[M,K] · (scale · w[N,K])ᵀ: linear's product (the same weights, the same
  // rounding of x to y's dtype) added in f32 to what y holds, the sum rounded once to y's dtype.
  // Runtime LoRAs (core/models/lora) add their low-rank and full-delta terms with it, on any base
  // weights, without touching them.
  virtual void linear_add(const Tensor& x, const Tensor& w, const Tensor& y,
                          const WeightScaling& w_scaling = {}) = 0;

  // ---- normalisation ----
  // Per row of x[R,C]: n = x · rsqrt(mean(x²) + eps), rounded to x's dtype, then y = n · weight[C]
  // (T5 RMSNorm; Wan's q/k RMSNorm over all heads: the same math over C = heads · head_dim).
  virtual void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) = 0;
  // Per row of x[R,C]: (x - mean) · rsqrt(var + eps) (· weight[C] + bias[C] when given).
  virtual void layer_norm(const Tensor& x, const Tensor* weight, const Tensor* bias, float eps,
                          const Tensor& y) = 0;
  // x[C,S] (channels first): y = x / max(‖x[:, s]‖₂, 1e-12) · √C · gamma[C] (the Wan VAE's RMS).
  virtual void channel_rms_norm(const Tensor& x, const Tensor& gamma, const Tensor& y) = 0;

  // ---- elementwise ----
  // y[R,C] = x · (1 + scale) + shift; scale and shift are [C] (one row for all) or [R,C].
  virtual void modulate(const Tensor& x, const Tensor& scale, const Tensor& shift,
                        const Tensor& y) = 0;
  // x[R,C] += y · gate, gate [C] or [R,C] or none (plain residual add). x is updated in place.
  virtual void gated_add(const Tensor& x, const Tensor& y, const Tensor* gate) = 0;
  // x += alpha · y (same shapes), in f32, rounded to x's dtype; x is updated in place (a LoRA's
  // full deltas on biases, norm weights and modulation, into a copy of the model's tensor).
  virtual void add_scaled(const Tensor& x, const Tensor& y, float alpha) = 0;
  // out = a + b, out = a · b (same shapes; out may alias a).
  virtual void add(const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  virtual void mul(const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  // y = 0.5 x (1 + tanh(√(2/π)(x + 0.044715 x³))), y = x · sigmoid(x). y may alias x.
  virtual void gelu_tanh(const Tensor& x, const Tensor& y) = 0;
  virtual void silu(const Tensor& x, const Tensor& y) = 0;
  // y = min(max(x, lo), hi) (a ReLU is lo 0, hi +∞; TAEHV's pixels are clamped to [0, 1]);
  // y = limit · tanh(x / limit) (TAEHV's soft clamp of its input latent, limit 3). y may alias x.
  virtual void clamp(const Tensor& x, float lo, float hi, const Tensor& y) = 0;
  virtual void tanh_clamp(const Tensor& x, float limit, const Tensor& y) = 0;
  // y = 0.5 x (1 + erf(x / √2)): the exact GELU (torch's nn.GELU(); Qwen3-VL's patch mergers).
  // y may alias x.
  virtual void gelu_erf(const Tensor& x, const Tensor& y) = 0;
  // BigVGAN's anti-aliased SnakeBeta (minimax_h3.md §F.2; core/backend/snake_beta.h) on each
  // channel of x[C,T]: 2× up with filters[0], u + sin²(e^alpha[c]·u) / (e^beta[c] + 1e-9), 2× down
  // with filters[1]. alpha, beta [C] (log space, as stored) and filters [2, 12] are F32. y [C,T]
  // may alias x. The default runs snake_beta.h's row code on the host (download, compute,
  // upload, synchronize): right on any backend; the CPU backend overrides it in place.
  virtual void snake_beta_alias_free(const Tensor& x, const Tensor& alpha, const Tensor& beta,
                                     const Tensor& filters, const Tensor& y);
  // Softmax over each row of x[R,C], in f32. y may alias x.
  virtual void softmax(const Tensor& x, const Tensor& y) = 0;
  // Element conversion: y = x rounded to y's dtype (same shapes).
  virtual void convert(const Tensor& x, const Tensor& y) = 0;

  // ---- attention ----
  // o[L,H,D] = softmax(q·kᵀ · scale + bias) · v per head, with q[L,H,D], k and v [S,Hk,D], Hk
  // dividing H: query head h reads key/value head ⌊h / (H/Hk)⌋ (grouped-query attention, as
  // Qwen3's 64 query heads share 8; Hk = H is plain multi-head). The optional T5
  // relative-position table rel[32,H] adds rel[bucket(j - i), h] to the score of query i and key
  // j (bidirectional, 32 buckets, max distance 128: wan.md §A.2). `causal` (needs L = S): query i
  // sees keys 0…i only (a decoder's prefill). Softmax in f32; the L×S score matrix is never held
  // whole.
  virtual void attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                         const Tensor* relative_bias, bool causal, const Tensor& o) = 0;
  // Rotary embedding by halves (Qwen's rotate_half) on x[L,H,D] in place: for every head and
  // j < R/2 the pair (x[j], x[j + R/2]) is rotated by the angle whose cosine and sine are
  // cos[l, j] and sin[l, j] ([L, R/2], any float dtype). R = D rotates the whole head; R < D
  // (H3's DiT: 96 of 128) leaves dims R…D-1 as they are. The caller builds the angles (1-D or
  // multi-axis positions) and rounds the tables where its reference does; the rotation is f32,
  // rounded once to x's dtype.
  virtual void rope_halves(const Tensor& x, const Tensor& cos, const Tensor& sin) = 0;
  // Wan's 3-D RoPE on x[L,H,D] in place, x holding tokens first … first + L - 1 of the grid's
  // frames · height · width (wan.md §B.7).
  virtual void rope_3d(const Tensor& x, const RopeGrid& grid) = 0;

  // ---- convolutions and resampling (video tensors are [C, T, H, W]) ----
  // y[Co,T',H',W'] = w[Co,Ci,kt,kh,kw] ⋆ zero-padded x[Ci,T,H,W] + bias[Co]. A 2-D convolution
  // applied per frame is the kt = 1 case.
  virtual void conv3d(const Tensor& x, const Tensor& w, const Tensor* bias,
                      const Conv3dParams& params, const Tensor& y) = 0;
  // y[C,T,2H,2W]: every pixel repeated 2×2.
  virtual void upsample_nearest_2x(const Tensor& x, const Tensor& y) = 0;
  // Wan 2.2 VAE shortcuts (wan.md §C.3), T a multiple of ft (the caller pads the front):
  // avg_down_3d: y[Co, T/ft, H/fs, W/fs], channels expanded in (c, ft, fs_h, fs_w) order and
  // averaged in consecutive groups of Ci·ft·fs²/Co.
  virtual void avg_down_3d(const Tensor& x, int ft, int fs, const Tensor& y) = 0;
  // dup_up_3d: y[Co, T·ft, H·fs, W·fs], each channel repeated Co·ft·fs²/Ci times, the copies
  // read as (co, ft, fs_h, fs_w) and scattered into time and space.
  virtual void dup_up_3d(const Tensor& x, int ft, int fs, const Tensor& y) = 0;

  // ---- data movement (copies) ----
  // y = x with its dimensions reordered: y.shape[i] = x.shape[order[i]].
  virtual void permute(const Tensor& x, const std::vector<int>& order, const Tensor& y) = 0;
  // y = a and b joined along `dim`.
  virtual void concat(const Tensor& a, const Tensor& b, int dim, const Tensor& y) = 0;
  // y = x[..., begin : begin + y.shape[dim], ...] along `dim`.
  virtual void slice(const Tensor& x, int dim, std::int64_t begin, const Tensor& y) = 0;
  // y[L,D] = table[ids[l], :] with ids I32 or I64. An id outside the table is
  // Error(kBadModelFile) (the tokenizer does not match the encoder); the CUDA backend checks on
  // the device and reads the verdict back before returning (one sync per prompt).
  virtual void embedding(const Tensor& table, const Tensor& ids, const Tensor& y) = 0;
};

// The T5 relative-position bucket of key position minus query position (wan.md §A.2).
int t5_relative_bucket(std::int64_t relative_position);

}  // namespace ferry
