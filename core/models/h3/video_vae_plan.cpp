#include "core/models/h3/video_vae_plan.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "core/offload/budget.h"

namespace ferry::models::h3::vae {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

std::string mib(std::uint64_t bytes) {
  return std::to_string((bytes + kMiB - 1) / kMiB) + " MiB";
}

}  // namespace

StagePlan video_decode_stage_plan(const VideoVaeWeights& weights, std::int64_t width,
                                  std::int64_t height, std::int64_t frames,
                                  const offload::Preset& preset,
                                  const offload::MachineInfo& machine, bool stream_all) {
  const VideoVaeConfig& c = weights.config();
  if (width <= 0 || height <= 0 || width % c.patch != 0 || height % c.patch != 0 ||
      frames < kChunkMainFrames + kChunkOverlapFrames ||
      (frames - kChunkOverlapFrames) % kChunkMainFrames != 0) {
    throw Error(ErrorCode::kBadArgument,
                "the video decoder takes multiples of " + std::to_string(c.patch) +
                    " px and 17n + 5 frames, not " + std::to_string(width) + "x" +
                    std::to_string(height) + "x" + std::to_string(frames));
  }
  const std::int64_t h = height / c.patch, w = width / c.patch;
  VideoDecodePlan d;
  d.width = width;
  d.height = height;
  d.frames = frames;
  d.latent_frames = latent_frames_for(frames);
  d.chunks = decode_chunks_for(d.latent_frames);
  const TileOptions tiles;
  const DecodeShape shape = decode_shape(c, h, w, tiles);
  d.tiles = shape.tiles();
  d.tile_px = std::max(shape.rows.length, shape.cols.length);
  d.tile_tokens =
      (kChunkLatents + kChunkOverlapLatents) * shape.tile_h * shape.tile_w + c.registers + 1;
  d.arena_bytes = decode_arena_bytes(weights, h, w, tiles);
  const std::uint64_t latent_bytes =
      static_cast<std::uint64_t>(c.latent_channels * d.latent_frames * h * w) * sizeof(float);
  d.host_bytes = decode_host_bytes(c, h, w, tiles) + latent_bytes;

  StagePlan s = block_stage_plan("video decode", decoder_layout(weights, h, w, tiles), preset,
                                 machine, stream_all);
  s.predicted_ram_peak += d.host_bytes;
  const offload::Budget budget = offload::budget_for(preset, machine);
  if (s.predicted_ram_peak > budget.ram_bytes) {
    throw Error(ErrorCode::kDoesNotFit,
                "the video decode at " + std::to_string(width) + "x" + std::to_string(height) +
                    " needs " + mib(s.predicted_ram_peak) + " of RAM (" + mib(d.host_bytes) +
                    " of it for one chunk's 22 frames and the tiles' edges), but preset '" +
                    preset.name + "' allows " + mib(budget.ram_bytes) + ": choose a smaller size");
  }
  s.detail = "tile " + std::to_string(d.tile_px) + " px, " + std::to_string(d.tiles) + " tiles x " +
             std::to_string(d.chunks) + " chunks of 17 frames, " + std::to_string(d.tile_tokens) +
             " tokens a tile-chunk, frames streamed chunk by chunk";
  s.family_plan = d;
  return s;
}

}  // namespace ferry::models::h3::vae
