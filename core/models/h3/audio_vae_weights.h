// The decoder half of MiniMax-H3's audio VAE (minimax_h3.md §F: `dec_in_proj` and the BigVGAN
// `decoder.*`) on a backend, in one allocation made at load:
// - every weight-normed convolution folded to its weight W = g·v/‖v‖ (in f64, rounded to f32 once),
//   laid out as a conv3d weight [Co, Ci, 1, 1, k];
// - each transposed upsampler rewritten as one ordinary convolution with r·Co outputs (its r
//   output phases, see AudioVaeStage), whose output a permute interleaves;
// - the pipeline's per-channel de-normalisation z·σ + μ folded into dec_in_proj (W·diag(σ),
//   b + W·μ), so the decoder takes the DiT's normalised latents;
// - SnakeBeta α, β and the Kaiser-sinc filters as stored (the filters computed as alias-free-torch
//   does when a file lacks the buffers).
// Widths, kernels and stage count come from the shapes; the upsampling rates, the AMP dilations
// and μ, σ are not in the file (config.json's), so they come from AudioVaeConfig, whose defaults
// are the release's. The encoder side (`encoder.*`, `pre_block.*`, `mean_proj`, `logs_proj`) is
// ignored. Weights are read in F32, BF16 or F16 (the release and Comfy's files are f32,
// DiffSynth's convolutions bf16); the decoder always runs in f32 (§1: bf16 is ~20 dB worse).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/io/tensor_set.h"

namespace ferry::models::h3 {

// H3's audio latent normalisation (OF audio_vae/config.json, minimax_h3.md §F.1).
extern const std::array<float, 32> kAudioLatentMean;
extern const std::array<float, 32> kAudioLatentStd;

struct AudioVaeConfig {
  std::vector<int> rates = {5, 5, 2, 2, 2, 2, 2};  // decoder_rates: their product is the hop
  std::vector<int> dilations = {1, 3, 5};          // of every AMP block
  // Per latent channel; empty: H3's (kAudioLatentMean / kAudioLatentStd, 32 channels).
  std::vector<float> latents_mean, latents_std;
  int sample_rate = 32000;

  std::int64_t hop() const;
};

// One upsampling stage: the transposed convolution as a polyphase convolution, then the AMP
// blocks. Output phase q of input position u reads inputs u + c for c in [-pad_left, taps -
// pad_left): up_weight [rate·Co, Ci, 1, 1, taps], row q·Co + o.
struct AudioVaeStage {
  int rate = 0;
  std::int64_t in_channels = 0, channels = 0;
  int taps = 0, pad_left = 0;
  Tensor up_weight, up_bias;
  // AMP block j, dilation i: conv1 (dilated) and conv2, each after its own activation.
  struct Unit {
    Tensor conv1_weight, conv1_bias, conv2_weight, conv2_bias;
    int kernel = 0, dilation = 1;
    Tensor act1_alpha, act1_beta, act1_filters, act2_alpha, act2_beta, act2_filters;
  };
  std::vector<std::vector<Unit>> blocks;
};

class AudioVaeWeights {
 public:
  // Reads the decoder's tensors of `set`, folds and uploads them. Error(kMissingTensor) naming
  // the tensor when one is absent; Error(kBadModelFile) naming the file when shapes disagree
  // with each other or with `config` (stage count, μ/σ length), or a dtype is not F32/BF16/F16.
  static AudioVaeWeights load(Backend& backend, const io::TensorSet& set,
                              const AudioVaeConfig& config = {});
  // The same checks and layout with no data: what the planner needs (bytes(), the shapes).
  static AudioVaeWeights shapes_only(const io::TensorSet& set, const AudioVaeConfig& config = {});

  const AudioVaeConfig& config() const { return config_; }
  std::int64_t latent_channels() const { return latent_channels_; }
  std::int64_t latent_dim() const { return latent_dim_; }
  std::int64_t initial_channels() const { return initial_channels_; }

  const Tensor& in_weight() const { return in_weight_; }  // [latent_dim, C, 1, 1, 1]
  const Tensor& in_bias() const { return in_bias_; }
  const Tensor& pre_weight() const { return pre_weight_; }  // [initial, latent_dim, 1, 1, 7]
  const Tensor& pre_bias() const { return pre_bias_; }
  const std::vector<AudioVaeStage>& stages() const { return stages_; }
  const Tensor& post_alpha() const { return post_alpha_; }
  const Tensor& post_beta() const { return post_beta_; }
  const Tensor& post_filters() const { return post_filters_; }
  const Tensor& post_weight() const { return post_weight_; }  // [1, channels, 1, 1, 7], no bias

  std::size_t bytes() const { return bytes_; }

 private:
  class Builder;
  static AudioVaeWeights build(Backend* backend, const io::TensorSet& set,
                               const AudioVaeConfig& config);
  AudioVaeConfig config_;
  std::int64_t latent_channels_ = 0, latent_dim_ = 0, initial_channels_ = 0;
  std::unique_ptr<DeviceBuffer> buffer_;
  Tensor in_weight_, in_bias_, pre_weight_, pre_bias_;
  std::vector<AudioVaeStage> stages_;
  Tensor post_alpha_, post_beta_, post_filters_, post_weight_;
  std::size_t bytes_ = 0;
};

// A tensor of `set` as f32 values, read whole (the audio VAE's tensors are small): F32, BF16 and
// F16 widened; a bitsandbytes 4-bit weight — also one whose blocks straddle rows, which
// core/io/bnb4.h keeps flat (DiffSynth's NF4 audio VAE: the encoder's 32-wide Linears) —
// dequantised whole as bitsandbytes' dequantize_4bit does (rounded to its state's dtype), in
// its [out, in] order. Error(kBadModelFile) naming the file for another dtype.
std::vector<float> read_tensor_f32(const io::TensorSet& set, const std::string& name);

// alias-free-torch's kaiser_sinc_filter1d(cutoff 0.25, half_width 0.3, 12 taps), the filter of
// both resamplers of a ratio-2 activation (minimax_h3.md §F.2), for files without the buffers.
std::array<float, 12> alias_free_filter();

}  // namespace ferry::models::h3
