#include "core/models/h3/video_vae_plan.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "core/models/h3/video_vae_encoder.h"
#include "core/offload/budget.h"
#include "core/offload/planner.h"

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

StagePlan keyframe_encode_stage_plan(const VideoVaeWeights& weights, std::int64_t width,
                                     std::int64_t height, int keyframes,
                                     const offload::Preset& preset,
                                     const offload::MachineInfo& machine) {
  const VideoVaeEncoder encoder = VideoVaeEncoder::shapes_only(weights);
  const std::vector<std::uint8_t> frame(static_cast<std::size_t>(3 * width * height), 0);
  const FrameMoments m = encoder.encode_frame(frame, height, width);
  const TileOptions tiles;
  const std::int64_t ratio = encoder.spatial_ratio();
  const std::int64_t count = static_cast<std::int64_t>(
      split_tiles(height, tiles.tile_px, tiles.min_overlap_px, ratio).starts.size() *
      split_tiles(width, tiles.tile_px, tiles.min_overlap_px, ratio).starts.size());
  StagePlan s;
  s.stage = "keyframe encode";
  s.layout = "MiniMax-H3 video VAE encoder (" + std::to_string(encoder.levels()) + " levels)";
  s.weight_bytes = encoder.weight_bytes();
  s.activation_bytes = encoder.activation_peak();
  const offload::Budget budget = offload::budget_for(preset, machine);
  const std::uint64_t device = s.weight_bytes + s.activation_bytes;
  // The host holds a frame's pixels (8-bit and normalised), one tile's crop and the moments.
  const std::uint64_t host =
      static_cast<std::uint64_t>(3 * width * height) * (1 + sizeof(float)) +
      static_cast<std::uint64_t>(3 * tiles.tile_px * tiles.tile_px) * sizeof(float) +
      static_cast<std::uint64_t>(2 * m.channels * m.height * m.width) * 2 * sizeof(float);
  s.predicted_vram_peak = budget.device_is_host ? 0 : device;
  s.predicted_ram_peak = offload::kProcessBaseBytes + host + (budget.device_is_host ? device : 0);
  if ((!budget.device_is_host && device > budget.device_bytes) ||
      s.predicted_ram_peak > budget.ram_bytes) {
    const bool vram = !budget.device_is_host && device > budget.device_bytes;
    throw Error(ErrorCode::kDoesNotFit,
                "encoding the keyframes needs " + mib(vram ? device : s.predicted_ram_peak) +
                    " of " + (vram ? "VRAM" : "RAM") + " (" + mib(s.weight_bytes) +
                    " of encoder weights, tiles of " + std::to_string(tiles.tile_px) +
                    " px), but preset '" + preset.name + "' has " +
                    mib(vram ? budget.device_bytes : budget.ram_bytes) + " here");
  }
  s.detail = std::to_string(keyframes) + " keyframe" + (keyframes > 1 ? "s" : "") + " of " +
             std::to_string(width) + "x" + std::to_string(height) + ", " + std::to_string(count) +
             " tile" + (count > 1 ? "s" : "") + " of " +
             std::to_string(std::min<std::int64_t>(tiles.tile_px, std::max(width, height))) +
             " px each, one at a time";
  return s;
}

}  // namespace ferry::models::h3::vae
