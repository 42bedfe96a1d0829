// The Wan VAEs (wan.md §C): Wan 2.1 (z = 16, 4×8×8) and Wan 2.2 (z = 48, 4×16×16), encoder and
// decoder, f32 arithmetic, run as the official code runs them: chunk by chunk in time (encoder
// chunks of 1, then 4 frames; decoder one latent frame per chunk) with a frame cache per causal
// convolution, so memory is bounded by one chunk and the cache slots.
//
// Memory: everything comes from the caller's Arena (backend memory). A call first takes the
// cache slots (sized once from the latent's spatial size), then each chunk marks the arena,
// computes, and releases to the mark. Nothing is allocated per chunk beyond that.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/backend/backend.h"
#include "core/memory/arena.h"
#include "core/models/wan/vae_weights.h"

namespace ferry::models::wan {

// Frame counts (wan.md §C.6): pixel frames F = 4k + 1 ↔ latent frames T = k + 1.
std::int64_t vae_latent_frames(std::int64_t pixel_frames);
std::int64_t vae_pixel_frames(std::int64_t latent_frames);

// How a WanVae computes. activations: the dtype of every activation and cache slot (F32, or
// BF16 to halve the arena; the ops still compute in f32 and round once to it). The public
// tensors stay F32 either way: decode's pixels, encode's latent, and the inputs it takes.
struct VaeOptions {
  DType activations = DType::kF32;
};

class WanVae {
 public:
  // Called once per decoded chunk with its first frame index and pixels [3, n, H, W] (F32 on the
  // backend, not clamped), valid during the call.
  using ChunkSink = std::function<void(std::int64_t first_frame, const Tensor& pixels)>;

  // Keeps references: both must outlive the WanVae.
  WanVae(Backend& backend, const VaeWeights& weights, const VaeOptions& options = {});

  const VaeConfig& config() const { return weights_.config(); }
  const VaeWeights& weights() const { return weights_; }
  Backend& backend() const { return backend_; }
  const VaeOptions& options() const { return options_; }

  // video [3, F, H, W] F32 in [-1, 1] on the backend, F = 4k + 1, H and W multiples of
  // config().spatial → latent [z, T, H/s, W/s] F32 (normalised: (mu - mean) / std).
  void encode(const Tensor& video, memory::Arena& arena, const Tensor& latent);

  // latent [z, T, h, w] F32 (normalised) → one sink call per chunk (F = 4(T-1) + 1 frames).
  void decode_chunks(const Tensor& latent, memory::Arena& arena, const ChunkSink& sink);
  // The untiled decode: pixels [3, F, H, W] on the host, clamped to [-1, 1] (the reference
  // every tiled decode is compared with).
  void decode(const Tensor& latent, memory::Arena& arena, std::span<float> pixels);

  // Arena bytes a decode of a latent of h × w positions (any frame count; the steady state
  // from the third latent frame on) takes: the cache slots plus the peak of one chunk. Needs only
  // the weights' shapes (VaeWeights::shapes_only), for the planner. `options` as the WanVae's.
  static std::size_t decode_arena_bytes(const VaeWeights& weights, std::int64_t h, std::int64_t w,
                                        const VaeOptions& options = {});
  // The part of it the cache slots take (what a decode keeps from one chunk to the next).
  static std::size_t decode_cache_bytes(const VaeWeights& weights, std::int64_t h, std::int64_t w,
                                        const VaeOptions& options = {});
  // The same for an encode of `frames` frames of height × width pixels.
  static std::size_t encode_arena_bytes(const VaeWeights& weights, std::int64_t frames,
                                        std::int64_t height, std::int64_t width,
                                        const VaeOptions& options = {});

 private:
  Backend& backend_;
  const VaeWeights& weights_;
  VaeOptions options_;
};

// One decode of h × w latent positions in progress, a latent frame at a time, whose cache slots
// can be parked in host memory between frames: the chunk-major tiled decode (vae_tiling.h) keeps
// one per tile, so every tile advances one chunk before any advances two and frames come out as
// soon as their chunk is done.
class VaeChunkDecoder {
 public:
  VaeChunkDecoder(WanVae& vae, std::int64_t h, std::int64_t w);
  ~VaeChunkDecoder();
  VaeChunkDecoder(VaeChunkDecoder&&) noexcept;
  VaeChunkDecoder& operator=(VaeChunkDecoder&&) noexcept;

  // Arena bytes of the cache slots (WanVae::decode_cache_bytes).
  std::size_t cache_bytes() const;
  // Takes the cache slots from `arena`: empty before the first frame, else the parked caches
  // uploaded again. They stay valid until the arena is released below them.
  void take_caches(memory::Arena& arena);
  // Decodes the next latent frame [z, 1, h, w] (F32, normalised) → pixels [3, n, H, W] from the
  // arena above the caches (n = 1 for the first frame, else 4), not clamped.
  Tensor decode_next(const Tensor& frame, memory::Arena& arena);
  // Copies the caches into host memory (cache_bytes() of it), so the arena may be released.
  void park();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ferry::models::wan
