// The Wan VAEs (wan.md §C): Wan 2.1 (z = 16, 4×8×8) and Wan 2.2 (z = 48, 4×16×16), encoder and
// decoder, fp32, run as the official code runs them: chunk by chunk in time (encoder chunks of
// 1, then 4 frames; decoder one latent frame per chunk) with a frame cache per causal
// convolution, so memory is bounded by one chunk and the cache slots.
//
// Memory: everything comes from the caller's Arena (backend memory). A call first takes the
// cache slots (sized once from the latent's spatial size), then each chunk marks the arena,
// computes, and releases to the mark. Nothing is allocated per chunk beyond that.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "core/backend/backend.h"
#include "core/memory/arena.h"
#include "core/models/wan/vae_weights.h"

namespace ferry::models::wan {

// Frame counts (wan.md §C.6): pixel frames F = 4k + 1 ↔ latent frames T = k + 1.
std::int64_t vae_latent_frames(std::int64_t pixel_frames);
std::int64_t vae_pixel_frames(std::int64_t latent_frames);

class WanVae {
 public:
  // Called once per decoded chunk with its first frame index and pixels [3, n, H, W] (F32 on the
  // backend, not clamped), valid during the call.
  using ChunkSink = std::function<void(std::int64_t first_frame, const Tensor& pixels)>;

  // Keeps references: both must outlive the WanVae.
  WanVae(Backend& backend, const VaeWeights& weights);

  const VaeConfig& config() const { return weights_.config(); }

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
  // the weights' shapes (VaeWeights::shapes_only), for the planner.
  static std::size_t decode_arena_bytes(const VaeWeights& weights, std::int64_t h, std::int64_t w);
  // The same for an encode of `frames` frames of height × width pixels.
  static std::size_t encode_arena_bytes(const VaeWeights& weights, std::int64_t frames,
                                        std::int64_t height, std::int64_t width);

 private:
  Backend& backend_;
  const VaeWeights& weights_;
};

}  // namespace ferry::models::wan
