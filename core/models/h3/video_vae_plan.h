// The video decode stage's plan (architecture.md §3.6): the ViT decoder's blocks placed by the
// offload planner like any block stage (resident, pinned or streamed), its arena that of one
// tile-chunk (decoder_arena_bytes, the measured peak), the host's chunk of frames and tile edges
// on top of the planner's RAM. The tiles are the reference's (256 px, overlaps ≥ 64): they are
// part of the output ("the released frames are the blended-tile ones"), so a decode that does not
// fit is refused, never re-tiled. Error(kDoesNotFit) saying what it needs.
#pragma once

#include <cstdint>
#include <string>

#include "core/models/h3/video_vae_chunks.h"
#include "core/models/h3/video_vae_weights.h"
#include "core/models/stage_plan.h"
#include "core/offload/preset.h"

namespace ferry::models::h3::vae {

// What the family's run reads back (StagePlan::family_plan).
struct VideoDecodePlan {
  std::int64_t width = 0, height = 0, frames = 0;  // pixels
  std::int64_t latent_frames = 0, chunks = 0, tiles = 0;
  std::int64_t tile_px = 0, tile_tokens = 0;  // tokens of one tile-chunk (registers included)
  std::uint64_t arena_bytes = 0;
  std::uint64_t host_bytes = 0;  // frames, edges, one tile, the latent
};

// The stage for a video of width × height × frames (multiples of the VAE's 16 px; frames 17n + 5)
// under `preset` on `machine` (with `stream_all`, every block from disk each pass).
StagePlan video_decode_stage_plan(const VideoVaeWeights& weights, std::int64_t width,
                                  std::int64_t height, std::int64_t frames,
                                  const offload::Preset& preset,
                                  const offload::MachineInfo& machine, bool stream_all);

// The keyframe encode: `keyframes` frames of width × height encoded one after another by the
// encoder (its weights on the device; activations of one 256 px tile at a time, as the
// shapes-only encoder counts them: VideoVaeEncoder::activation_peak). Error(kDoesNotFit) when
// the weights and one tile's activations do not fit the preset's device budget (or RAM).
StagePlan keyframe_encode_stage_plan(const VideoVaeWeights& weights, std::int64_t width,
                                     std::int64_t height, int keyframes,
                                     const offload::Preset& preset,
                                     const offload::MachineInfo& machine);

}  // namespace ferry::models::h3::vae
