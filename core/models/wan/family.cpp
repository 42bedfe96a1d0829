// The Wan family (Wan 2.1 T2V, Wan 2.2 TI2V): its parts, rules, plans and demo model, behind the
// interface of core/models/family.h. The stages themselves are in run.cpp.
#include <any>
#include <string>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/models/taehv/taehv_draft.h"
#include "core/models/taehv/taehv_preview.h"
#include "core/models/umt5/encoder_weights.h"
#include "core/models/wan/demo_model.h"
#include "core/models/wan/dit_layout.h"
#include "core/models/wan/dit_loras.h"
#include "core/models/wan/parts.h"
#include "core/models/wan/request_rules.h"
#include "core/models/wan/vae_plan.h"
#include "core/models/wan/vae_weights.h"

namespace ferry::models::wan {
namespace {

class WanFamily final : public ModelFamily {
 public:
  std::string_view name() const override { return "wan"; }
  std::unique_ptr<ModelParts> open(const std::vector<std::filesystem::path>& paths) const override {
    return std::make_unique<WanParts>(paths);
  }
  std::optional<PartSketch> sketch_part(const io::TensorSet& set) const override {
    return wan::sketch_part(set);
  }
  std::optional<std::filesystem::path> write_demo_model(
      const std::filesystem::path& folder) const override {
    return wan::write_demo_model(folder);
  }
};

// A VAE stage as the user reads it, from the VAE's own plan (VaePlan or VaeEncodePlan), which
// the run reads back from family_plan.
template <typename Plan>
StagePlan vae_stage(std::string_view stage, const Plan& vae, const VaeConfig& config,
                    std::string detail) {
  StagePlan s;
  s.stage = std::string(stage);
  s.layout = std::string(vae_kind_name(config.kind));
  s.weight_bytes = vae.weight_bytes;
  s.activation_bytes = vae.arena_bytes;
  s.predicted_vram_peak = vae.predicted_vram_peak;
  s.predicted_ram_peak = vae.predicted_ram_peak;
  s.detail = std::move(detail);
  if (vae.activations == DType::kBF16) s.detail += ", bf16 activations";
  s.family_plan = vae;
  return s;
}

StagePlan decode_stage(const VaePlan& vae, const VaeConfig& config) {
  return vae_stage(
      kDecodeStage, vae, config,
      vae.mode == VaeDecodeMode::kUntiled
          ? std::string("untiled")
          : "tile " + std::to_string(vae.tile_px) + " px, " + std::to_string(vae.tiles) + " tiles");
}

StagePlan encode_stage(const VaeEncodePlan& vae, const VaeConfig& config, const char* what) {
  std::string detail = what;
  if (vae.tiling.tile > 0) {
    detail +=
        ", tile " + std::to_string(vae.tile_px) + " px, " + std::to_string(vae.tiles) + " tiles";
  }
  return vae_stage(kImageStage, vae, config, std::move(detail));
}

}  // namespace

const ModelFamily& family() {
  static const WanFamily instance;
  return instance;
}

WanParts::WanParts(const std::vector<std::filesystem::path>& paths) {
  OpenedParts opened;
  set_ = find_model_set(paths, &opened);
  dit_ = std::move(opened.dit);
  low_noise_dit_ = std::move(opened.low_noise_dit);
  text_encoder_ = std::move(opened.text_encoder);
  vae_ = std::move(opened.vae);
  preview_decoder_ = std::move(opened.preview_decoder);
}

std::vector<std::string> WanParts::describe() const {
  return wan::describe(set_);
}

std::vector<PartFile> WanParts::files() const {
  std::vector<PartFile> files;
  const auto add = [&](const char* role, const io::TensorSet& set) {
    for (const io::TensorFile& f : set.files()) files.push_back({role, f.path(), f.file_size()});
  };
  if (set_.two_experts()) {
    add("diffusion model (high-noise expert)", dit_);
    add("diffusion model (low-noise expert)", low_noise_dit_);
  } else {
    add("diffusion model", dit_);
  }
  add("text encoder", text_encoder_);
  add("VAE", vae_);
  if (preview_decoder() != nullptr) add("preview decoder", preview_decoder_);
  return files;
}

RequestRules WanParts::rules() const {
  RequestRules rules = request_rules(set_);
  rules.draft_decode = preview_decoder() != nullptr;
  if (!rules.draft_decode) {
    rules.preview_decoder_help =
        "put " + std::string(preview_decoder_file(set_.dit_config.out_dim)) +
        " (github.com/madebyollin/taehv, in its safetensors/ folder) next to the diffusion "
        "model, in " +
        io::detail::display(set_.dit.parent_path());
  }
  rules.decodes_saved_latents = true;
  return rules;
}

ResolvedRequest WanParts::resolve(const GenerationRequest& request,
                                  std::optional<std::pair<int, int>> image_size) const {
  ResolvedRequest r = wan::resolve(request, set_, image_size);
  if (request.decoder == VideoDecoder::kTaehvDraft && preview_decoder() == nullptr) {
    throw Error(ErrorCode::kBadArgument,
                "a draft decode needs the TAEHV decoder for this model's latents: " +
                    rules().preview_decoder_help);
  }
  // Every LoRA is checked before any work (a refusal is exit 2); modules that adapt nothing in
  // this model are said once per file, never silently dropped.
  for (const LoraChoice& l : request.loras) {
    const LoraReport report = check_lora(l.path);
    if (report.matched < report.modules) r.warnings.push_back("LoRA " + lora::describe(report));
  }
  return r;
}

// A two-expert model's LoRA is checked against the expert its name says (both are the same
// shape, so either does for one that names neither).
LoraReport WanParts::check_lora(const std::filesystem::path& path) const {
  return check_dit_lora(path, expert(expert_role(path) == ExpertRole::kLowNoise ? 1 : 0));
}

std::string_view dit_stage_name(const ModelSet& set, int expert) {
  if (!set.two_experts()) return kDitStage;
  return expert == 0 ? kHighNoiseStage : kLowNoiseStage;
}

offload::ModelLayout expert_model_layout(const WanParts& parts, int expert, int width, int height,
                                         int frames, std::int64_t chunk_tokens) {
  offload::ModelLayout layout =
      dit_model_layout(parts.expert(expert), width, height, frames, chunk_tokens);
  const ModelSet& set = parts.set();
  if (set.two_experts()) {
    const DitConfig& c = set.dit_config;
    layout.name = "Wan DiT " + std::string(c.name) + ", " +
                  std::string(dit_stage_name(set, expert)) + " (" + std::to_string(c.layers) +
                  " blocks, D=" + std::to_string(c.dim) + ")";
  }
  return layout;
}

std::vector<LoraChoice> expert_loras(const std::vector<LoraChoice>& loras, const ModelSet& set,
                                     int expert) {
  if (!set.two_experts()) return loras;
  const ExpertRole other = expert == 0 ? ExpertRole::kLowNoise : ExpertRole::kHighNoise;
  std::vector<LoraChoice> out;
  for (const LoraChoice& l : loras) {
    if (expert_role(l.path) != other) out.push_back(l);
  }
  return out;
}

// Wan's noise and final latent are one tensor each, [C, T, h, w] in f32 (the official layout).

std::vector<TensorLayout> WanParts::noise_layout(const ResolvedRequest& r) const {
  return {
      {"noise",
       {set_.dit_config.out_dim, static_cast<std::uint64_t>(r.latent_frames),
        static_cast<std::uint64_t>(r.latent_height), static_cast<std::uint64_t>(r.latent_width)}}};
}

std::vector<TensorLayout> WanParts::latent_layout(const ResolvedRequest& r) const {
  std::vector<TensorLayout> layout = noise_layout(r);
  layout.front().name = "latent";
  return layout;
}

// The draft decode's stage (taehv_draft.h), which the run reads back from family_plan.
StagePlan WanParts::draft_decode_stage(const ResolvedRequest& r, const offload::Preset& preset,
                                       const offload::MachineInfo& machine) const {
  const taehv::TaehvDraftPlan draft = taehv::make_taehv_draft_plan(
      preview_decoder_, preset, machine, set_.dit_config.out_dim, r.latent_frames, r.latent_height,
      r.latent_width, r.frames, r.width, r.height);
  StagePlan s;
  s.stage = std::string(kDraftDecodeStage);
  s.layout = "TAEHV " + io::detail::display(set_.preview_decoder.filename());
  s.weight_bytes = draft.weight_bytes;
  s.activation_bytes = draft.arena_bytes;
  s.predicted_vram_peak = draft.predicted_vram_peak;
  s.predicted_ram_peak = draft.predicted_ram_peak;
  s.detail = draft.detail;
  s.family_plan = draft;
  return s;
}

GenerationPlan WanParts::plan(const ResolvedRequest& r, const offload::Preset& preset,
                              const offload::MachineInfo& machine, bool stream_all) const {
  GenerationPlan g;
  g.preset = preset.name;
  const bool draft = r.request.decoder == VideoDecoder::kTaehvDraft;
  const VaeWeights vae = VaeWeights::shapes_only(vae_);
  const auto decode = [&] {
    if (draft) return draft_decode_stage(r, preset, machine);
    return decode_stage(make_vae_plan(vae, preset, machine, r.width, r.height, r.frames),
                        vae.config());
  };
  // Saved latents are only decoded: the other stages do not run, so nothing else is planned.
  if (!r.request.latents.empty()) {
    g.add(decode());
    return g;
  }
  g.add(block_stage_plan(std::string(kTextStage),
                         umt5::EncoderWeights::from(text_encoder_).model_layout(), preset, machine,
                         stream_all));
  if (r.request.image) {
    // TI2V encodes the start image; A14B I2V the conditioning video, every frame.
    const int frames = set_.dit_config.in_dim == kI2V_A14B.in_dim ? r.frames : 1;
    g.add(encode_stage(make_vae_encode_plan(vae, preset, machine, r.width, r.height, frames),
                       vae.config(), frames == 1 ? "the start image" : "the conditioning video"));
  }
  // One stage per expert: each is planned alone, as it runs alone. The LoRAs' tensors join their
  // blocks' groups: the plan counts them like the DiT's own.
  const int experts = set_.two_experts() ? 2 : 1;
  for (int e = 0; e < experts; ++e) {
    offload::ModelLayout dit =
        expert_model_layout(*this, e, r.width, r.height, r.frames, preset.chunk_tokens);
    // The live preview's decoder lives beside the DiT for the whole stage (run.cpp).
    if (preview_decoder() != nullptr) {
      dit.activation_bytes +=
          taehv::TaehvPreview::device_bytes(preview_decoder_, r.latent_height, r.latent_width);
    }
    const lora::LoraBinding loras = bind_dit_loras(
        expert_loras(r.request.loras, set_, e), expert(e), dit,
        dit_tokens(set_.dit_config, r.width, r.height, r.frames), preset.chunk_tokens);
    g.add(block_stage_plan(std::string(dit_stage_name(set_, e)), dit, preset, machine, stream_all));
  }
  g.add(decode());
  return g;
}

}  // namespace ferry::models::wan
