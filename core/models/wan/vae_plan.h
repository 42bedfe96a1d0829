// The VAE decode stage's plan (architecture.md §3.6: the VAE peak is budgeted like every other
// stage): whether to tile and with which tile, where the tiles' caches live, whether frames leave
// chunk by chunk or as one whole video, and the predicted VRAM and RAM peaks. The arena figures
// are the VAE's own estimates (shape-only runs of the real code), so the prediction is the
// measured peak. Deterministic; Error(kDoesNotFit) with the budget that would fit when even the
// smallest sensible tile does not. Wan policy on top of the generic offload::Budget.
#pragma once

#include <cstdint>

#include "core/models/wan/vae_tiling.h"
#include "core/models/wan/vae_weights.h"
#include "core/offload/budget.h"
#include "core/offload/preset.h"

namespace ferry::models::wan {

// The smallest tile the planner considers, in pixels: below it the tiles' seams dominate.
inline constexpr int kMinVaeTilePx = 128;

enum class VaeDecodeMode {
  kUntiled,        // WanVae::decode_chunks: frames leave chunk by chunk
  kTiledStreamed,  // decode_tiled_chunks: frames leave chunk by chunk, caches per `caches`
  kTiledWhole,     // decode_tiled: the whole video is held on the host in f32
};

struct VaePlan {
  VaeDecodeMode mode = VaeDecodeMode::kUntiled;
  VaeTiling tiling;  // tile and overlap in latent positions; tile 0 when untiled
  int tile_px = 0;   // tiling.tile in pixels
  VaeTileCaches caches = VaeTileCaches::kDevice;
  std::int64_t tiles = 1;
  DType activations = DType::kF32;  // the preset's vae_activations

  std::uint64_t weight_bytes = 0;  // the VAE's weights (F32) on the device
  std::uint64_t latent_bytes = 0;  // the latent being decoded, on the device
  std::uint64_t arena_bytes = 0;   // the decode's activation arena (caches included)
  std::uint64_t host_bytes = 0;    // the decode's host buffers (frames, parked caches, weights)
  std::uint64_t predicted_vram_peak = 0;
  std::uint64_t predicted_ram_peak = 0;

  bool streams_frames() const { return mode != VaeDecodeMode::kTiledWhole; }
};

// The decode of `frames` frames of width × height pixels (multiples of the VAE's spatial factor,
// frames 4k + 1) with the VAE `weights` describes (VaeWeights::shapes_only is enough), on
// `machine` under `preset`. The tile is the largest (in latent positions) whose decode fits the
// usable device budget, at most the preset's vae_tile_px when set; untiled when the preset has
// no tile and the whole decode fits. Among the ways to run a tile it prefers, in order: every
// tile's caches on the device; then, of caches parked in host RAM and the whole video on the
// host, the one with the lower RAM peak.
VaePlan make_vae_plan(const VaeWeights& weights, const offload::Preset& preset,
                      const offload::MachineInfo& machine, int width, int height, int frames);

const char* vae_decode_mode_name(VaeDecodeMode mode);

// The encode of a start image or a conditioning video: the VAE's weights, the pixels and their
// latent on the device, and the encode's arena (the VAE's own shape-only estimate), untiled or in
// spatial tiles (encode_tiled).
struct VaeEncodePlan {
  VaeTiling tiling;  // tile and overlap in latent positions; tile 0 when untiled
  int tile_px = 0;   // tiling.tile in pixels
  std::int64_t tiles = 1;
  DType activations = DType::kF32;
  std::uint64_t weight_bytes = 0;
  std::uint64_t arena_bytes = 0;
  std::uint64_t io_bytes = 0;  // the image and its latent
  std::uint64_t predicted_vram_peak = 0;
  std::uint64_t predicted_ram_peak = 0;
};

// The encode of `frames` frames (TI2V's start image: 1; A14B I2V's conditioning video: all of
// the video's), the whole video and its latent held on the device. Untiled when that fits (the
// official code's encode, and the only one at the sizes the references run), else in the
// largest spatial tile that fits, down to kMinVaeTilePx: a 1280×720×81 conditioning video needs
// about 12 GiB untiled. Error(kDoesNotFit) when even the smallest tile does not fit the preset's
// budget on `machine`.
VaeEncodePlan make_vae_encode_plan(const VaeWeights& weights, const offload::Preset& preset,
                                   const offload::MachineInfo& machine, int width, int height,
                                   int frames = 1);

}  // namespace ferry::models::wan
