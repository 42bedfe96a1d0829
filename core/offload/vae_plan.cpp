#include "core/offload/vae_plan.h"

#include <algorithm>
#include <optional>
#include <string>

#include "core/error.h"
#include "core/models/wan/vae.h"
#include "core/offload/planner.h"

namespace ferry::offload {
namespace {

using models::wan::VaeTileCaches;
using models::wan::VaeTiling;
using models::wan::WanVae;

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
  Planner(const models::wan::VaeWeights& w, const Preset& p, const MachineInfo& m, Size s)
      : weights_(w),
        preset_(p),
        options_{p.vae_activations},
        size_(s),
        cpu_(p.device == Device::kCpu) {
    device_budget_ = usable_device_bytes(p, m);
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
      p.tiles = static_cast<std::int64_t>(models::wan::vae_tile_starts(h, p.tiling).size() *
                                          models::wan::vae_tile_starts(w, p.tiling).size());
      if (mode == VaeDecodeMode::kTiledStreamed) {
        p.arena_bytes = models::wan::tiled_chunks_decode_arena_bytes(weights_, p.tiling, h, w,
                                                                     caches, options_);
        p.host_bytes =
            models::wan::tiled_chunks_decode_host_bytes(weights_, p.tiling, h, w, caches, options_);
      } else {
        p.arena_bytes =
            models::wan::tiled_decode_arena_bytes(weights_, p.tiling, size_.t, h, w, options_);
        p.host_bytes = models::wan::tiled_decode_host_bytes(weights_, p.tiling, h, w) +
                       floats(3 * models::wan::vae_pixel_frames(size_.t) * h * s * w * s);
      }
    }
    c.device_need = p.weight_bytes + p.latent_bytes + p.arena_bytes;
    c.ram_need = kProcessBaseBytes + p.host_bytes + (cpu_ ? c.device_need : 0);
    p.predicted_vram_peak = cpu_ ? 0 : c.device_need;
    p.predicted_ram_peak = c.ram_need;
    return c;
  }

  bool fits(const Candidate& c) const {
    if (cpu_) return c.ram_need <= preset_.ram_budget_bytes;
    return c.device_need <= device_budget_ && c.ram_need <= preset_.ram_budget_bytes;
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

  std::uint64_t device_budget() const { return device_budget_; }

 private:
  const models::wan::VaeWeights& weights_;
  const Preset& preset_;
  models::wan::VaeOptions options_;
  Size size_;
  bool cpu_;
  std::uint64_t device_budget_ = 0;
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

VaePlan make_vae_plan(const models::wan::VaeWeights& weights, const Preset& preset,
                      const MachineInfo& machine, int width, int height, int frames) {
  const models::wan::VaeConfig& cfg = weights.config();
  if (!cfg.has_decoder) {
    throw Error(ErrorCode::kBadModelFile,
                std::string(models::wan::vae_kind_name(cfg.kind)) + ": the file has no decoder");
  }
  if (preset.device == Device::kCuda && !machine.has_gpu) {
    throw Error(ErrorCode::kUnsupported, "preset '" + preset.name +
                                             "' needs an NVIDIA GPU and none was found: use the "
                                             "cpu preset (slow) or a machine with a GPU");
  }
  const std::int64_t s = cfg.spatial;
  if (width <= 0 || height <= 0 || width % s != 0 || height % s != 0) {
    throw Error(ErrorCode::kBadArgument, "the video's size (" + std::to_string(width) + "x" +
                                             std::to_string(height) + ") must be a multiple of " +
                                             std::to_string(s) + " for this VAE");
  }
  const Size size{models::wan::vae_latent_frames(frames), height / s, width / s, s};
  const Planner planner(weights, preset, machine, size);
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
  const bool cpu = preset.device == Device::kCpu;
  const bool device_short =
      !cpu && std::min(least.device_need, whole.device_need) > planner.device_budget();
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
                  mib(preset.ram_budget_bytes) + ": choose a smaller size or fewer frames");
}

}  // namespace ferry::offload
