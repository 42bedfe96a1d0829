// H3's packed sequence (minimax_h3.md §C.2–C.3): the one row list the DiT denoises, built as
// diffusers' MiniMaxH3PrepareLayoutStep.build_packed_sequence builds it for T2VA, I2VA (first or
// last frame) and FL2VA: [text (L) | keyframe rows (K·R) | audio (2A: channel 0, then channel 1) |
// target video (T'·R)], no padding (diffusers packs one attention document; DiffSynth's inert
// padding to 64 changes nothing). Every row has a modality tag (its AdaLN row: 0 video, 1 text,
// 2 audio), a timestep and a fractional 3-axis MM-RoPE position built in f64, as the reference
// does, and cast to f32 by the model. Also the patchify of video latents into rows (§C.2).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace ferry::models::h3::dit {

// AdaLN modality tags (diffusers' MINIMAX_H3_MODALITY_NUM rows per timestep).
inline constexpr std::uint8_t kVideoTag = 0;
inline constexpr std::uint8_t kTextTag = 1;
inline constexpr std::uint8_t kAudioTag = 2;
inline constexpr std::int64_t kModalities = 3;
inline constexpr std::int64_t kAudioChannels = 2;  // stereo, packed channel-major
// Keyframe rows carry max(t_video, this) (the noise augmentation of their latents).
inline constexpr float kKeyframeNoiseAug = 0.999f;

enum class KeyframeAnchor { kFirst, kLast };

// The target's latent geometry: T' frames of h × w latent cells, patches of 2 × 2 (one row per
// patch), A audio latents per channel.
struct PackedGeometry {
  std::int64_t latent_frames = 0;
  std::int64_t latent_height = 0;
  std::int64_t latent_width = 0;
  std::int64_t audio_latents = 0;
  std::int64_t patch = 2;

  std::int64_t rows_per_frame() const { return (latent_height / patch) * (latent_width / patch); }
};

struct PackedSequence {
  std::int64_t text_rows = 0;
  std::int64_t condition_rows = 0;  // K·R keyframe rows
  std::int64_t audio_rows = 0;      // 2A
  std::int64_t video_rows = 0;      // T'·R target rows
  // Per row: the modality tag and the (t, h, w) position, f64.
  std::vector<std::uint8_t> tags;
  std::vector<std::array<double, 3>> positions;

  std::int64_t length() const { return text_rows + condition_rows + audio_rows + video_rows; }
  std::int64_t condition_start() const { return text_rows; }
  std::int64_t audio_start() const { return text_rows + condition_rows; }
  std::int64_t video_start() const { return audio_start() + audio_rows; }
  // diffusers' video_indices (keyframe rows, then target rows) and audio_indices.
  std::vector<std::int64_t> video_indices() const;
  std::vector<std::int64_t> audio_indices() const;
};

// The layout of one request: `text_tags` are the presentation's tags (1, or 0 inside a keyframe's
// vision block), `anchors` one per keyframe block in packed order (none for T2VA, one for I2VA,
// first then last for FL2VA). Error(kBadArgument) for an empty prompt, odd latent sides, no
// frames or audio, or more than two keyframes.
PackedSequence build_packed_sequence(std::span<const std::uint8_t> text_tags,
                                     const PackedGeometry& geometry,
                                     std::span<const KeyframeAnchor> anchors);

// One step's timesteps (§C.2): text and target video rows t_video, target audio rows t_audio,
// keyframe rows max(t_video, 0.999), all f32; `values` are the distinct ones ascending
// (torch.unique) and `index` the position of each row's in them.
struct RowTimesteps {
  std::vector<float> values;
  std::vector<std::int32_t> index;  // one per row
};
RowTimesteps row_timesteps(const PackedSequence& sequence, float t_video, float t_audio);

// Video latent [C, T', h, w] (f32, channels first) → rows [T'·R, C·4]: row (f·h/2 + y)·w/2 + x
// holds latent[c, f, 2y + ph, 2x + pw] at c·4 + 2·ph + pw (diffusers' patchify_video_latents), and
// back.
std::vector<float> patchify_video(std::span<const float> latent, std::int64_t channels,
                                  const PackedGeometry& geometry);
std::vector<float> unpatchify_video(std::span<const float> rows, std::int64_t channels,
                                    const PackedGeometry& geometry);

}  // namespace ferry::models::h3::dit
