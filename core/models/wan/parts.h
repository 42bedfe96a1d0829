// The Wan family's parts (core/models/family.h): the model set found in a folder, with every
// part's files opened once, so the rules, the plans and every stage read the same opened headers.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/io/tensor_set.h"
#include "core/models/family.h"
#include "core/models/wan/model_set.h"

namespace ferry::models::wan {

class WanParts final : public ModelParts {
 public:
  // Error(kBadModelFile) / Error(kIo) as find_model_set and TensorSet::open say.
  explicit WanParts(const std::vector<std::filesystem::path>& paths);

  const ModelSet& set() const { return set_; }
  // The diffusion model: the only one, or the high-noise expert (then low_noise_dit() is open).
  const io::TensorSet& dit() const { return dit_; }
  const io::TensorSet& low_noise_dit() const { return low_noise_dit_; }
  // Expert 0 (the high-noise one, or the only one) or 1 (the low-noise one).
  const io::TensorSet& expert(int index) const { return index == 0 ? dit_ : low_noise_dit_; }
  const io::TensorSet& text_encoder() const { return text_encoder_; }
  const io::TensorSet& vae() const { return vae_; }
  // The TAEHV preview decoder (ModelSet::preview_decoder), or null when the set has none.
  const io::TensorSet* preview_decoder() const {
    return set_.preview_decoder.empty() ? nullptr : &preview_decoder_;
  }

  std::string_view family() const override { return "wan"; }
  std::string name() const override { return std::string(set_.dit_config.name); }
  bool is_demo() const override { return set_.is_demo(); }
  std::vector<std::string> describe() const override;
  std::vector<PartFile> files() const override;
  RequestRules rules() const override;
  ResolvedRequest resolve(const GenerationRequest& request,
                          std::optional<std::pair<int, int>> image_size) const override;
  LoraReport check_lora(const std::filesystem::path& path) const override;
  std::vector<TensorLayout> noise_layout(const ResolvedRequest& request) const override;
  std::vector<TensorLayout> latent_layout(const ResolvedRequest& request) const override;
  GenerationPlan plan(const ResolvedRequest& request, const offload::Preset& preset,
                      const offload::MachineInfo& machine, bool stream_all) const override;
  std::unique_ptr<FamilyRun> start(const ResolvedRequest& request, const GenerationPlan& plan,
                                   FrameImages images) const override;

 private:
  StagePlan draft_decode_stage(const ResolvedRequest& r, const offload::Preset& preset,
                               const offload::MachineInfo& machine) const;

  ModelSet set_;
  io::TensorSet dit_;
  io::TensorSet low_noise_dit_;
  io::TensorSet text_encoder_;
  io::TensorSet vae_;
  io::TensorSet preview_decoder_;
};

// The plan's stage of expert `expert` (0: the only one or the high-noise one, 1: the low-noise
// one).
std::string_view dit_stage_name(const ModelSet& set, int expert);

// Expert `expert`'s layout (dit_model_layout), named after the model set: "Wan DiT t2v-a14b,
// high-noise expert (40 blocks, D=5120)" for two experts.
offload::ModelLayout expert_model_layout(const WanParts& parts, int expert, int width, int height,
                                         int frames, std::int64_t chunk_tokens);

// The LoRAs that adapt expert `expert`: all of them for a one-expert model; for two experts, those
// whose file name does not say they are for the other (LightX2V's *_high_noise_* / *_low_noise_*
// pairs; a LoRA that names neither adapts both).
std::vector<LoraChoice> expert_loras(const std::vector<LoraChoice>& loras, const ModelSet& set,
                                     int expert);

// The stage names of Wan's GenerationPlan, in order.
inline constexpr std::string_view kTextStage = "text encoder";
inline constexpr std::string_view kImageStage = "VAE encode";
inline constexpr std::string_view kDitStage = "diffusion model";
// A two-expert model's denoising is two stages of the plan, one per expert (each expert's
// streamer, cache and device slots are released before the next is built).
inline constexpr std::string_view kHighNoiseStage = "high-noise expert";
inline constexpr std::string_view kLowNoiseStage = "low-noise expert";
inline constexpr std::string_view kDecodeStage = "VAE decode";
// A draft (VideoDecoder::kTaehvDraft): the TAEHV preview decoder decodes the video instead.
inline constexpr std::string_view kDraftDecodeStage = "TAEHV draft decode";

}  // namespace ferry::models::wan
