// Draft decodes with TAEHV (issue 27): a whole video decoded by the tiny decoder instead of the
// model's VAE, at the video's full size and frame count (the published decoder's options), a
// latent frame at a time with each MemBlock's memory kept (TaehvStream::Memory::kKept), every
// frame handed on as it comes: its memory does not grow with the frame count, and it takes
// seconds where the VAE takes minutes. The planner's side: the decoder's weights and one latent
// frame's working memory, checked against the preset's budget like every other stage.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "core/backend/backend.h"
#include "core/io/tensor_set.h"
#include "core/offload/preset.h"

namespace ferry::models::taehv {

struct TaehvDraftPlan {
  std::uint64_t weight_bytes = 0;
  std::uint64_t arena_bytes = 0;  // the stream's working frames and one latent frame's input
  std::uint64_t host_bytes = 0;   // one latent frame and one decoded frame, on the host
  std::uint64_t predicted_vram_peak = 0;
  std::uint64_t predicted_ram_peak = 0;
  std::string detail;  // "full size, frame by frame, 21 latent frames"
};

// The draft decode of a latent [channels, frames, h, w] into `video_frames` frames of
// `width` × `height` under `preset` on `machine`. Reads only the file's header.
// Error(kBadModelFile) when the decoder does not make that video from that latent (another latent
// space, another scale); Error(kDoesNotFit) when its memory exceeds the preset's budget.
TaehvDraftPlan make_taehv_draft_plan(const io::TensorSet& set, const offload::Preset& preset,
                                     const offload::MachineInfo& machine, std::int64_t channels,
                                     std::int64_t frames, std::int64_t h, std::int64_t w,
                                     int video_frames, int width, int height);

class TaehvDraft {
 public:
  // Called once per video frame, in order: its pixels [3, 1, H, W] in [0, 1] on the host, valid
  // during the call.
  using FrameSink = std::function<void(std::span<const float> pixels)>;

  // Loads the decoder and allocates what `plan` says, once, for latents of [channels, frames, h,
  // w]. The errors of TaehvWeights::load.
  TaehvDraft(Backend& backend, const io::TensorSet& set, const TaehvDraftPlan& plan,
             std::int64_t channels, std::int64_t frames, std::int64_t h, std::int64_t w);
  ~TaehvDraft();

  // Decodes latent frame `t` of `latent` ([channels, frames, h, w] F32 on the host; frames in
  // order from 0): its video frames to `sink`. Allocates nothing on the backend.
  void push(std::span<const float> latent, std::int64_t t, const FrameSink& sink);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ferry::models::taehv
