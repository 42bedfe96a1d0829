// H3's causal 3-D CNN video encoder on one frame (minimax_h3.md §E.2): what a keyframe needs.
// With one frame the causal convolutions see two zero frames in front of it, so each reads only
// the last temporal tap of its kernel, and the temporal strides leave the one frame as it is;
// spatially: reflect padding, GroupNorm per frame, SiLU, residual blocks, and a stride-2
// downsampling per level that has one (every such level halves space in the release and in
// diffusers' test configuration). f32 activations; convolution weights as stored (f32, f16 or
// bf16: Backend::conv3d widens them).
//
// Memory: each activation is a backend allocation freed as soon as the next one is made (a
// keyframe is encoded once per run), at most a tile's (256 px) at a time; the encoder's weights
// stay on the device while it exists.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/backend/backend.h"
#include "core/models/h3/video_vae_chunks.h"
#include "core/models/h3/video_vae_weights.h"

namespace ferry::models::h3::vae {

// The encoder's posterior for one frame: mean and log-variance [channels, 1, h, w] f32 (the
// log-variance as quant_conv gives it, not yet clamped).
struct FrameMoments {
  std::int64_t channels = 0, height = 0, width = 0;
  std::vector<float> mean, logvar;
};

class VideoVaeEncoder {
 public:
  // Uploads the encoder's and quant_conv's tensors. `groups`: GroupNorm's groups (32 in the
  // release; not in the weights). Error(kBadModelFile) when the file has no encoder or its shapes
  // disagree, kMissingTensor naming an absent tensor.
  static VideoVaeEncoder load(Backend& backend, const VideoVaeWeights& weights,
                              std::int64_t groups = 32);
  // The same tensors' shapes, nothing read or allocated: its encode_frame computes nothing and
  // returns zeros, but counts the activations a real one allocates (activation_peak), for the
  // planner.
  static VideoVaeEncoder shapes_only(const VideoVaeWeights& weights, std::int64_t groups = 32);
  VideoVaeEncoder(VideoVaeEncoder&&) noexcept;
  VideoVaeEncoder& operator=(VideoVaeEncoder&&) noexcept;
  ~VideoVaeEncoder();

  // One frame of 8-bit RGB, planar [3, height, width] → its moments at height/ratio ×
  // width/ratio (rounded as the strided convolutions round). The ImageNet normalisation
  // (v/255 − mean)/std is done here. A frame larger than the tile is encoded as diffusers does by
  // default: in pixel tiles (split_tiles), their moments blended in latent space (TileStitcher),
  // which also bounds the activations by the tile. Error(kBadArgument) for a frame smaller than
  // 2 × 2 at some level, of the wrong size, or tiled and not a multiple of the ratio.
  FrameMoments encode_frame(std::span<const std::uint8_t> rgb, std::int64_t height,
                            std::int64_t width, const TileOptions& tiles = {}) const;
  // Pixels per latent position, each axis: 2 per level with a downsampling (16 in the release).
  std::int64_t spatial_ratio() const;

  // Device bytes of the weights (the kernels' last taps in the stored dtype, f32 biases and norm
  // affines).
  std::uint64_t weight_bytes() const;
  // The most activation bytes the last encode_frame held at once (each allocation as requested).
  std::uint64_t activation_peak() const;

  std::int64_t levels() const;
  std::int64_t latent_channels() const;

 private:
  struct State;
  explicit VideoVaeEncoder(std::unique_ptr<State> state);
  static VideoVaeEncoder build(Backend* backend, const VideoVaeWeights& weights,
                               std::int64_t groups);
  std::unique_ptr<State> state_;
};

// The keyframe's latent as diffusers' encode_vae_condition makes it (§E.2): z = mean +
// exp(clamp(logvar, −30, 20)/2)·noise, rounded to f16, then (z − latents_mean)/latents_std.
// `noise` is [channels, 1, h, w]. Error(kBadArgument) when the sizes disagree.
std::vector<float> keyframe_latent(const FrameMoments& moments, std::span<const float> noise,
                                   const VideoVaeConfig& config);

}  // namespace ferry::models::h3::vae
