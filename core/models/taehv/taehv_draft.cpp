#include "core/models/taehv/taehv_draft.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "core/error.h"
#include "core/memory/arena.h"
#include "core/models/taehv/taehv_decoder.h"
#include "core/models/taehv/taehv_weights.h"
#include "core/offload/budget.h"
#include "core/offload/planner.h"

namespace ferry::models::taehv {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

std::string mib(std::uint64_t bytes) {
  return std::to_string((bytes + kMiB - 1) / kMiB) + " MiB";
}

std::uint64_t floats(std::int64_t n) {
  return static_cast<std::uint64_t>(n) * sizeof(float);
}

}  // namespace

TaehvDraftPlan make_taehv_draft_plan(const io::TensorSet& set, const offload::Preset& preset,
                                     const offload::MachineInfo& machine, std::int64_t channels,
                                     std::int64_t frames, std::int64_t h, std::int64_t w,
                                     int video_frames, int width, int height) {
  const TaehvWeights weights = TaehvWeights::shapes_only(set);
  const TaehvConfig& config = weights.config();
  const std::string file = set.path().filename().string();
  if (config.latent_channels != channels) {
    throw Error(ErrorCode::kBadModelFile,
                "the TAEHV decoder " + file + " decodes " + std::to_string(config.latent_channels) +
                    "-channel latents, but this model's have " + std::to_string(channels) +
                    " (Wan 2.2 TI2V-5B: taew2_2; Wan 2.1 and A14B: taew2_1)");
  }
  const TaehvOptions options;  // the published decoder: every upsample, time grown 4×
  // Refused here rather than when the stage starts (TaehvDecoder checks the same).
  for (std::size_t k = 0; k < 3; ++k) {
    const std::int64_t need =
        static_cast<std::int64_t>(config.widths[k]) * (options.time_upscale[k] ? 2 : 1);
    if (config.tgrow_rows[k] < need) {
      throw Error(ErrorCode::kBadModelFile,
                  "the TAEHV decoder " + file + " cannot grow time (decoder." +
                      std::to_string(kTGrows[k]) + " has " + std::to_string(config.tgrow_rows[k]) +
                      " rows, " + std::to_string(need) +
                      " needed): a draft needs the published "
                      "taew2_1 or taew2_2 file");
    }
  }
  // The published decoder's geometry (taehv.py): time grown 4× less the first 3 frames, 8 ·
  // patch pixels per latent position.
  const TaehvOutput out{4 * frames - 3, h * config.spatial(), w * config.spatial()};
  if (out.frames != video_frames || out.height != height || out.width != width) {
    throw Error(ErrorCode::kBadModelFile,
                "the TAEHV decoder " + file + " makes " + std::to_string(out.width) + "x" +
                    std::to_string(out.height) + "x" + std::to_string(out.frames) +
                    " from this latent, not the video's " + std::to_string(width) + "x" +
                    std::to_string(height) + "x" + std::to_string(video_frames));
  }
  TaehvDraftPlan p;
  p.weight_bytes = weights.bytes();
  p.arena_bytes = memory::Arena::footprint(floats(channels * h * w)) +
                  TaehvStream::arena_bytes(weights, options, h, w, TaehvStream::Memory::kKept);
  p.host_bytes = floats(channels * h * w) + floats(3 * std::int64_t{width} * height);
  const offload::Budget budget = offload::budget_for(preset, machine);
  const std::uint64_t device_need = p.weight_bytes + p.arena_bytes;
  const std::uint64_t ram_need =
      offload::kProcessBaseBytes + p.host_bytes + (budget.device_is_host ? device_need : 0);
  p.predicted_vram_peak = budget.device_is_host ? 0 : device_need;
  p.predicted_ram_peak = ram_need;
  p.detail = "draft: full size, frame by frame, " + std::to_string(frames) + " latent frames";
  if (!budget.device_is_host && device_need > budget.device_bytes) {
    throw Error(ErrorCode::kDoesNotFit, "the TAEHV draft decode needs " + mib(device_need) +
                                            " of VRAM at " + std::to_string(width) + "x" +
                                            std::to_string(height) + ", but preset '" +
                                            preset.name + "' has " + mib(budget.device_bytes) +
                                            " here: choose a smaller size");
  }
  if (ram_need > budget.ram_bytes) {
    throw Error(ErrorCode::kDoesNotFit,
                "the TAEHV draft decode needs " + mib(ram_need) + " of RAM at " +
                    std::to_string(width) + "x" + std::to_string(height) + ", but preset '" +
                    preset.name + "' allows " + mib(budget.ram_bytes) + ": choose a smaller size");
  }
  return p;
}

struct TaehvDraft::State {
  Backend& backend;
  TaehvWeights weights;
  TaehvDecoder decoder;
  std::int64_t channels, frames, h, w;
  std::unique_ptr<DeviceBuffer> memory;
  memory::Arena arena;
  Tensor input;  // [channels, 1, h, w]
  std::optional<TaehvStream> stream;
  std::vector<float> frame;   // the latent frame being decoded, host
  std::vector<float> pixels;  // [3, 1, H, W], host

  State(Backend& b, const io::TensorSet& set, const TaehvDraftPlan& plan, std::int64_t c,
        std::int64_t t, std::int64_t hh, std::int64_t ww)
      : backend(b),
        weights(TaehvWeights::load(b, set)),
        decoder(b, weights, TaehvOptions{}),
        channels(c),
        frames(t),
        h(hh),
        w(ww) {
    const auto bytes = static_cast<std::size_t>(plan.arena_bytes);
    memory = b.allocate(bytes);
    arena = memory::Arena(memory->data(), bytes, b.device());
    input = arena.allocate(DType::kF32, Shape{c, 1, h, w});
    stream.emplace(decoder, h, w, arena, TaehvStream::Memory::kKept);
    frame.resize(static_cast<std::size_t>(c * h * w));
  }
};

TaehvDraft::TaehvDraft(Backend& backend, const io::TensorSet& set, const TaehvDraftPlan& plan,
                       std::int64_t channels, std::int64_t frames, std::int64_t h, std::int64_t w)
    : state_(std::make_unique<State>(backend, set, plan, channels, frames, h, w)) {}

TaehvDraft::~TaehvDraft() = default;

void TaehvDraft::push(std::span<const float> latent, std::int64_t t, const FrameSink& sink) {
  State& s = *state_;
  const std::size_t plane = static_cast<std::size_t>(s.h * s.w);
  require(latent.size() == static_cast<std::size_t>(s.channels * s.frames) * plane && t >= 0 &&
              t < s.frames,
          "TaehvDraft::push", "latent of ", latent.size(), " values, frame ", t);
  for (std::int64_t c = 0; c < s.channels; ++c) {
    const auto from = latent.begin() + static_cast<std::ptrdiff_t>((c * s.frames + t) * s.h * s.w);
    std::copy_n(from, plane, s.frame.begin() + static_cast<std::ptrdiff_t>(c * s.h * s.w));
  }
  s.backend.upload(s.input, s.frame.data());
  s.stream->push(s.input, [&](std::int64_t, const Tensor& pixels) {
    s.pixels.resize(static_cast<std::size_t>(pixels.numel()));
    s.backend.download(pixels, s.pixels.data());
    sink(s.pixels);
  });
}

}  // namespace ferry::models::taehv
