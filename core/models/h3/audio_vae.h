// MiniMax-H3's audio decoder (minimax_h3.md §F.3: dec_in_proj, then BigVGAN) on the Backend
// ops, in Ferry's channels-first [C, T] layout: the DiT's normalised audio latents → 32 kHz PCM,
// each stereo channel decoded alone (the VAE is mono; H3 carries stereo as two batch items).
// - 1-D convolutions are conv3d over [C, 1, 1, T]; a dilated one (dilation d) is conv3d over the
//   samples folded into [C, 1, ⌈T/d⌉, d], whose rows are then d samples apart, zero-padded to a
//   whole number of rows;
// - a transposed upsampler is one conv3d with r·Co outputs (its r output phases, the weight
//   rewritten at load) and a permute that interleaves them;
// - the anti-aliased SnakeBeta is Backend::snake_beta_alias_free;
// - the mean over the AMP blocks is Σ (1/K)·block, the clamp Backend::clamp.
// Memory: every activation comes from the caller's Arena, sized by decode_arena_bytes (measured
// by running the same allocation code on an arena with no memory behind it): eight buffers of
// the largest stage (for the release at 207 latents: 512 channels × 1,035 or 8 × 165,600
// samples, about 42 MB in all).
#pragma once

#include <cstdint>

#include "core/backend/backend.h"
#include "core/media/audio.h"
#include "core/memory/arena.h"
#include "core/models/h3/audio_vae_weights.h"

namespace ferry::models::h3 {

class AudioVaeDecoder {
 public:
  // Keeps references: both must outlive the decoder.
  AudioVaeDecoder(Backend& backend, const AudioVaeWeights& weights);

  // Samples per channel the decode of `latents` latents gives (hop · latents).
  std::int64_t samples(std::int64_t latents) const;

  // latents [N, C, A] F32 on the backend, normalised (what the DiT denoises; diffusers'
  // decode-step layout: channel n's latent is [C, A]) → pcm [N, hop·A] F32 in [-1, 1], channel by
  // channel. Error(kInternal) for other shapes.
  void decode(const Tensor& latents, memory::Arena& arena, const Tensor& pcm) const;
  static std::size_t decode_arena_bytes(const AudioVaeWeights& weights, std::int64_t latents);

  // decode() into pcm taken from `arena`, downloaded and interleaved: the soundtrack the video
  // writer takes (VideoSettings::audio), at the configuration's rate, N channels (H3: 2).
  media::AudioTrack decode_soundtrack(const Tensor& latents, memory::Arena& arena) const;
  // decode_arena_bytes and the pcm.
  static std::size_t soundtrack_arena_bytes(const AudioVaeWeights& weights, std::int64_t channels,
                                            std::int64_t latents);

 private:
  struct Run;
  Backend& backend_;
  const AudioVaeWeights& weights_;
};

}  // namespace ferry::models::h3
