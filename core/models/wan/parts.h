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
  const io::TensorSet& dit() const { return dit_; }
  const io::TensorSet& text_encoder() const { return text_encoder_; }
  const io::TensorSet& vae() const { return vae_; }

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
  ModelSet set_;
  io::TensorSet dit_;
  io::TensorSet text_encoder_;
  io::TensorSet vae_;
};

// The stage names of Wan's GenerationPlan, in order.
inline constexpr std::string_view kTextStage = "text encoder";
inline constexpr std::string_view kImageStage = "VAE encode";
inline constexpr std::string_view kDitStage = "diffusion model";
inline constexpr std::string_view kDecodeStage = "VAE decode";

}  // namespace ferry::models::wan
