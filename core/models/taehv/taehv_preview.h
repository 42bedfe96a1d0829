// Live previews with TAEHV: each step's x0 estimate, one latent frame of it, decoded by the tiny
// decoder at reduced cost into an 8-bit image, and the budget that keeps the previews' time under
// a share of the steps' (formats_lora_moe.md §7.2: decode x0, not the noisy x).
//
// The preview decoder (preview_options()): time upscaling off (one picture per latent frame, the
// TGrows' last rows: the latest of the frames a latent frame stands for) and the last upsample
// off (half the video's size: 640 × 352 for 1280 × 704). The chosen latent frame is decoded with
// empty memory, as a video's first frame is: one frame's work, whatever the frame count.
// The small animated preview (frames_options()): every latent frame, time upscaling and every
// upsample off (the latent's size × the patch: 160 × 88 for 1280 × 704), decoded as a video (each
// MemBlock remembering the previous frame): about as much work as the one-frame preview per
// latent frame at a sixteenth of its pixels in the widest stages.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/backend/backend.h"
#include "core/io/tensor_set.h"
#include "core/media/image.h"
#include "core/memory/arena.h"
#include "core/models/taehv/taehv_decoder.h"
#include "core/models/taehv/taehv_weights.h"

namespace ferry::models::taehv {

TaehvOptions preview_options();
TaehvOptions frames_options();

class TaehvPreview {
 public:
  // Loads the decoder from `set` and allocates everything the previews of a latent of
  // [channels, frames, h, w] take, once. Error(kBadModelFile) when the decoder's latent channels
  // are not `channels`; the errors of TaehvWeights::load otherwise.
  // With `all_frames`, decode_all() is possible too (its memory allocated as well).
  TaehvPreview(Backend& backend, const io::TensorSet& set, std::int64_t channels,
               std::int64_t frames, std::int64_t h, std::int64_t w, bool all_frames = false);
  ~TaehvPreview();

  // The middle latent frame of `latent` ([channels, frames, h, w] F32 on the host) as a picture.
  // Allocates nothing on the backend.
  media::RgbImage decode(std::span<const float> latent);
  // Every latent frame of `latent` as a small picture, in order (the animated preview; needs
  // `all_frames`). Allocates nothing on the backend.
  std::vector<media::RgbImage> decode_all(std::span<const float> latent);

  // Backend bytes a TaehvPreview takes (weights, working frames, input; the animated preview's
  // included): what the planner adds to the denoising stage. Reads only the file's header.
  static std::uint64_t device_bytes(const io::TensorSet& set, std::int64_t h, std::int64_t w);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Keeps previews under `share` of the step time: each step earns share · its seconds; a preview
// is due when the credit covers what the last one cost. The first is always due (it measures the
// cost); its excess is paid back by the steps that follow.
class PreviewBudget {
 public:
  static constexpr double kShare = 0.05;
  explicit PreviewBudget(double share = kShare) : share_(share) {}
  bool due(double step_seconds);
  void spent(double preview_seconds);

 private:
  double share_;
  double credit_ = 0;
  double last_cost_ = -1;  // none made yet
};

}  // namespace ferry::models::taehv
