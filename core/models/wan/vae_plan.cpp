#include "core/models/wan/vae_plan.h"

#include <algorithm>
#include <optional>
#include <string>

#include "core/error.h"
#include "core/models/wan/vae.h"
#include "core/offload/planner.h"

namespace ferry::models::wan {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

std::string mib(std::uint64_t bytes) {
  return std::to_string((bytes + kMiB - 1) / kMiB) + " MiB";
}

struct Size {
  std::int64_t t, h, w;  // latent frames and positions
  std::int64_t spatial;
};

// One way to run the decode, with its fixed costs filled in.
struct Candidate {
  VaePlan plan;
  std::uint64_t device_need = 0;  // weights + latent + arena
  std::uint64_t ram_need = 0;     // the whole stage's host memory
};

class Planner {
 public:
  Planner(const VaeWeights& w, const offload::Budget& budget, DType activations, Size s)
      : weights_(w), budget_(budget), options_{activations}, size_(s) {
    latent_bytes_ = static_cast<std::uint64_t>(w.config().z_dim * s.t * s.h * s.w) * sizeof(float);
  }

  Candidate make(VaeDecodeMode mode, std::int64_t tile, VaeTileCaches caches) const {
    Candidate c;
    VaePlan& p = c.plan;
    p.mode = mode;
    p.caches = caches;
    p.activations = options_.activations;
    p.weight_bytes = weights_.bytes();
    p.latent_bytes = latent_bytes_;
    const std::int64_t s = size_.spatial, h = size_.h, w = size_.w;
    const auto floats = [](std::int64_t n) {
      return static_cast<std::uint64_t>(n) * sizeof(float);
    };
    if (mode == VaeDecodeMode::kUntiled) {
      p.arena_bytes = WanVae::decode_arena_bytes(weights_, h, w, options_);
      p.host_bytes = floats(3 * 4 * h * s * w * s);  // one chunk, downloaded by the caller
    } else {
      p.tiling = VaeTiling{tile, std::min(tile - 1, std::max<std::int64_t>(2, tile / 4))};
      p.tile_px = static_cast<int>(tile * s);
      p.tiles = static_cast<std::int64_t>(vae_tile_starts(h, p.tiling).size() *
                                          vae_tile_starts(w, p.tiling).size());
      if (mode == VaeDecodeMode::kTiledStreamed) {
        p.arena_bytes = tiled_chunks_decode_arena_bytes(weights_, p.tiling, h, w, caches, options_);
        p.host_bytes = tiled_chunks_decode_host_bytes(weights_, p.tiling, h, w, caches, options_);
      } else {
        p.arena_bytes = tiled_decode_arena_bytes(weights_, p.tiling, size_.t, h, w, options_);
        p.host_bytes = tiled_decode_host_bytes(weights_, p.tiling, h, w) +
                       floats(3 * vae_pixel_frames(size_.t) * h * s * w * s);
      }
    }
    const bool host = budget_.device_is_host;
    c.device_need = p.weight_bytes + p.latent_bytes + p.arena_bytes;
    c.ram_need = offload::kProcessBaseBytes + p.host_bytes + (host ? c.device_need : 0);
    p.predicted_vram_peak = host ? 0 : c.device_need;
    p.predicted_ram_peak = c.ram_need;
    return c;
  }

  bool fits(const Candidate& c) const {
    if (budget_.device_is_host) return c.ram_need <= budget_.ram_bytes;
    return c.device_need <= budget_.device_bytes && c.ram_need <= budget_.ram_bytes;
  }

  // The best way to run tiles of `tile` positions, if one fits.
  std::optional<Candidate> best_for_tile(std::int64_t tile) const {
    const Candidate resident = make(VaeDecodeMode::kTiledStreamed, tile, VaeTileCaches::kDevice);
    if (fits(resident)) return resident;
    const Candidate parked = make(VaeDecodeMode::kTiledStreamed, tile, VaeTileCaches::kHost);
    const Candidate whole = make(VaeDecodeMode::kTiledWhole, tile, VaeTileCaches::kDevice);
    const bool p = fits(parked), w = fits(whole);
    if (p && (!w || parked.ram_need <= whole.ram_need)) return parked;
    if (w) return whole;
    return std::nullopt;
  }

  std::uint64_t device_budget() const { return budget_.device_bytes; }

 private:
  const VaeWeights& weights_;
  const offload::Budget& budget_;
  VaeOptions options_;
  Size size_;
  std::uint64_t latent_bytes_ = 0;
};

}  // namespace

const char* vae_decode_mode_name(VaeDecodeMode mode) {
  switch (mode) {
    case VaeDecodeMode::kUntiled:
      return "untiled";
    case VaeDecodeMode::kTiledStreamed:
      return "tiled, frames streamed";
    case VaeDecodeMode::kTiledWhole:
      return "tiled, whole video on the host";
  }
  return "?";
}

VaePlan make_vae_plan(const VaeWeights& weights, const offload::Preset& preset,
                      const offload::MachineInfo& machine, int width, int height, int frames) {
  const VaeConfig& cfg = weights.config();
  if (!cfg.has_decoder) {
    throw Error(ErrorCode::kBadModelFile,
                std::string(vae_kind_name(cfg.kind)) + ": the file has no decoder");
  }
  const offload::Budget budget = offload::budget_for(preset, machine);
  const std::int64_t s = cfg.spatial;
  if (width <= 0 || height <= 0 || width % s != 0 || height % s != 0) {
    throw Error(ErrorCode::kBadArgument, "the video's size (" + std::to_string(width) + "x" +
                                             std::to_string(height) + ") must be a multiple of " +
                                             std::to_string(s) + " for this VAE");
  }
  const Size size{vae_latent_frames(frames), height / s, width / s, s};
  const Planner planner(weights, budget, preset.vae_activations, size);
  const std::int64_t longest = std::max(size.h, size.w);
  const std::int64_t smallest = std::min(longest, std::max<std::int64_t>(1, kMinVaeTilePx / s));
  const std::int64_t cap =
      preset.vae_tile_px > 0 ? std::max(smallest, preset.vae_tile_px / s) : longest;

  if (cap >= longest) {
    const Candidate untiled = planner.make(VaeDecodeMode::kUntiled, 0, VaeTileCaches::kDevice);
    if (planner.fits(untiled)) return untiled.plan;
  }
  for (std::int64_t tile = std::min(cap, longest); tile >= smallest; --tile) {
    if (tile >= longest && cap >= longest) continue;  // one tile is the untiled decode
    if (const auto best = planner.best_for_tile(tile)) return best->plan;
  }

  // Nothing fits: say what the smallest tile needs.
  const Candidate least =
      planner.make(VaeDecodeMode::kTiledStreamed, smallest, VaeTileCaches::kHost);
  const Candidate whole =
      planner.make(VaeDecodeMode::kTiledWhole, smallest, VaeTileCaches::kDevice);
  const bool device_short =
      !budget.device_is_host &&
      std::min(least.device_need, whole.device_need) > planner.device_budget();
  if (device_short) {
    const std::uint64_t need = std::min(least.device_need, whole.device_need);
    throw Error(ErrorCode::kDoesNotFit,
                "the VAE decode needs at least " + mib(need) + " of VRAM at this size (" +
                    mib(weights.bytes()) + " of weights, tiles of " + std::to_string(smallest * s) +
                    " px), but preset '" + preset.name + "' has " + mib(planner.device_budget()) +
                    " here: choose a smaller size");
  }
  const std::uint64_t need = std::min(least.ram_need, whole.ram_need);
  throw Error(ErrorCode::kDoesNotFit,
              "the VAE decode needs at least " + mib(need) + " of RAM at this size (tiles of " +
                  std::to_string(smallest * s) + " px), but preset '" + preset.name + "' allows " +
                  mib(budget.ram_bytes) + ": choose a smaller size or fewer frames");
}

VaeEncodePlan make_vae_encode_plan(const VaeWeights& weights, const offload::Preset& preset,
                                   const offload::MachineInfo& machine, int width, int height,
                                   int frames) {
  const offload::Budget budget = offload::budget_for(preset, machine);
  const VaeConfig& cfg = weights.config();
  const std::int64_t s = cfg.spatial;
  const std::int64_t h = height / s, w = width / s;
  VaeEncodePlan p;
  p.activations = preset.vae_activations;
  p.weight_bytes = weights.bytes();
  p.io_bytes = static_cast<std::uint64_t>(3 * std::int64_t{frames} * width * height +
                                          cfg.z_dim * vae_latent_frames(frames) * h * w) *
               sizeof(float);
  const VaeOptions options{p.activations};
  const auto device_need = [&] { return p.weight_bytes + p.arena_bytes + p.io_bytes; };
  const auto fits = [&] { return budget.device_is_host || device_need() <= budget.device_bytes; };

  p.arena_bytes = WanVae::encode_arena_bytes(weights, frames, height, width, options);
  const std::int64_t longest = std::max(h, w);
  const std::int64_t smallest = std::min(longest, std::max<std::int64_t>(1, kMinVaeTilePx / s));
  for (std::int64_t tile = longest - 1; !fits() && tile >= smallest; --tile) {
    p.tiling = VaeTiling{tile, std::min(tile - 1, std::max<std::int64_t>(2, tile / 4))};
    p.tile_px = static_cast<int>(tile * s);
    p.tiles = static_cast<std::int64_t>(vae_tile_starts(h, p.tiling).size() *
                                        vae_tile_starts(w, p.tiling).size());
    p.arena_bytes = tiled_encode_arena_bytes(weights, p.tiling, frames, height, width, options);
  }
  const char* what = frames == 1 ? "encoding the start image" : "encoding the conditioning video";
  // The host holds the pixels and the latent it downloads (and, tiled, the latent it blends).
  const std::uint64_t ram_need =
      offload::kProcessBaseBytes + p.io_bytes + (budget.device_is_host ? device_need() : 0);
  p.predicted_vram_peak = budget.device_is_host ? 0 : device_need();
  p.predicted_ram_peak = ram_need;
  if (!fits()) {
    throw Error(ErrorCode::kDoesNotFit,
                std::string(what) + " needs " + mib(device_need()) + " of VRAM at " +
                    std::to_string(width) + "x" + std::to_string(height) +
                    (p.tiling.tile > 0 ? " in tiles of " + std::to_string(p.tile_px) + " px" : "") +
                    ", but preset '" + preset.name + "' has " + mib(budget.device_bytes) +
                    " here: choose a smaller size");
  }
  if (ram_need > budget.ram_bytes) {
    throw Error(ErrorCode::kDoesNotFit,
                std::string(what) + " needs " + mib(ram_need) + " of RAM at " +
                    std::to_string(width) + "x" + std::to_string(height) + ", but preset '" +
                    preset.name + "' allows " + mib(budget.ram_bytes) + ": choose a smaller size");
  }
  return p;
}

}  // namespace ferry::models::wan
