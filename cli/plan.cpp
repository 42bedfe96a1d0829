// `ferry-cli plan --model PATH [--preset NAME] [--width --height --frames] [--image FILE]
// [--decode taehv] [--latents FILE] [--json]`: the plan of every stage of a generation with the
// model set at PATH, exactly as a run on this machine (or on one described by --vram-mib /
// --ram-mib) would make it — the same session calls the app's preset panel makes — and the
// predicted VRAM and RAM peaks. --json prints the same for scripts: every stage, every group's
// placement, the peaks, in bytes. Exit code 3 when a stage does not fit. A draft (--decode taehv)
// plans the TAEHV decode instead of the VAE's; saved latents (--latents) plan only the decode.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/machine.h"
#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/pipeline/session.h"

namespace ferry::cli {
namespace {

const char* placement_name(offload::Placement p) {
  switch (p) {
    case offload::Placement::kDevice:
      return "resident";
    case offload::Placement::kPinnedCache:
      return "pinned RAM";
    case offload::Placement::kDisk:
      return "disk";
  }
  return "?";
}

void print_stage(const models::StagePlan& s, bool gpu) {
  std::printf("\n== %s: %s, %s of weights\n", s.stage.c_str(), s.layout.c_str(),
              human_bytes(s.weight_bytes).c_str());
  if (!s.implemented) {
    std::printf("%s\n", s.detail.c_str());
    return;
  }
  if (!s.detail.empty() && s.streams_blocks()) std::printf("%s\n", s.detail.c_str());
  if (s.streams_blocks()) {
    const offload::Plan& plan = s.plan;
    std::printf("  %-12s %-11s %10s\n", "group", "placement", "bytes");
    for (std::size_t i = 0; i < s.group_table.size(); ++i) {
      std::printf("  %-12s %-11s %10s\n", s.group_table[i].name.c_str(),
                  placement_name(plan.placement[i]), human_bytes(s.group_table[i].bytes).c_str());
    }
    std::printf("resident on the %s: %zu groups, %s\n", gpu ? "GPU" : "CPU", s.resident_groups,
                human_bytes(s.resident_bytes).c_str());
    std::printf("cached in pinned RAM: %zu groups, %s\n", s.pinned_groups,
                human_bytes(s.pinned_cache_bytes).c_str());
    std::printf("streamed from disk: %zu groups (%s reads)\n", s.disk_groups,
                plan.read_method == offload::ReadMethod::kDirect ? "unbuffered" : "mapped");
    std::printf("device slots: %zu x %s, look-ahead %zu; staging ring: %zu x %s\n",
                plan.device_slots, human_bytes(plan.device_slot_bytes).c_str(), plan.look_ahead,
                plan.staging_slots, human_bytes(plan.staging_slot_bytes).c_str());
  } else {
    std::printf("%s\n", s.detail.c_str());
  }
  std::printf("working memory: %s\n", human_bytes(s.activation_bytes).c_str());
  std::printf("predicted peaks: VRAM %s, RAM %s\n", human_bytes(s.predicted_vram_peak).c_str(),
              human_bytes(s.predicted_ram_peak).c_str());
}

nlohmann::json plan_json(const pipeline::Session& session, const models::ModelParts& model,
                         const pipeline::RunTarget& target, const models::ResolvedRequest& r,
                         const models::GenerationPlan& plan) {
  const offload::MachineInfo& m = session.machine();
  nlohmann::json j;
  j["model"] = {{"family", std::string(model.family())}, {"name", model.name()}};
  j["video"] = {{"width", r.width}, {"height", r.height}, {"frames", r.frames}};
  j["machine"] = {{"gpu", m.has_gpu},
                  {"vram_total_bytes", m.total_vram_bytes},
                  {"vram_free_bytes", m.free_vram_bytes},
                  {"ram_total_bytes", m.total_ram_bytes},
                  {"ram_available_bytes", m.available_ram_bytes}};
  j["preset"] = {{"name", target.preset.name},
                 {"on_gpu", target.on_gpu},
                 {"fell_back_to_cpu", target.fell_back_to_cpu}};
  if (target.fell_back_to_cpu) j["preset"]["reason"] = target.reason;
  nlohmann::json stages = nlohmann::json::array();
  for (const models::StagePlan& s : plan.stages) {
    nlohmann::json st = {{"stage", s.stage},
                         {"layout", s.layout},
                         {"weight_bytes", s.weight_bytes},
                         {"activation_bytes", s.activation_bytes},
                         {"predicted_vram_peak_bytes", s.predicted_vram_peak},
                         {"predicted_ram_peak_bytes", s.predicted_ram_peak}};
    if (!s.detail.empty()) st["detail"] = s.detail;
    if (!s.implemented) st["implemented"] = false;
    if (s.streams_blocks()) {
      nlohmann::json groups = nlohmann::json::array();
      for (std::size_t i = 0; i < s.group_table.size(); ++i) {
        groups.push_back({{"name", s.group_table[i].name},
                          {"bytes", s.group_table[i].bytes},
                          {"placement", placement_name(s.plan.placement[i])}});
      }
      st["groups"] = std::move(groups);
      st["resident_bytes"] = s.resident_bytes;
      st["pinned_cache_bytes"] = s.pinned_cache_bytes;
    }
    stages.push_back(std::move(st));
  }
  j["stages"] = std::move(stages);
  j["predicted_vram_peak_bytes"] = plan.predicted_vram_peak;
  j["predicted_ram_peak_bytes"] = plan.predicted_ram_peak;
  return j;
}

}  // namespace

int run_plan(const std::vector<std::string>& argv) {
  const Args args(argv,
                  {"model", "preset", "width", "height", "frames", "image", "end-image", "vram-mib",
                   "ram-mib", "lora", "decode", "latents"},
                  {"json"});
  const auto model_path = args.value("model");
  if (!model_path || !args.positional().empty()) {
    throw Error(ErrorCode::kBadArgument,
                "usage: ferry-cli plan --model PATH [--preset NAME] [--width W --height H "
                "--frames F] [--image FILE [--end-image FILE]] [--lora FILE[:S]]... [--decode "
                "vae|taehv] [--latents FILE] [--vram-mib N --ram-mib N] [--json]");
  }
  const pipeline::Session session(session_options(args));
  std::vector<std::filesystem::path> model_paths;
  for (const std::string& m : args.values("model")) {
    model_paths.push_back(io::detail::path_from_utf8(m));
  }
  const pipeline::ModelHandle model = session.find(model_paths);
  models::GenerationRequest request;
  request.preset = args.value_or("preset", "auto");
  request.width = static_cast<int>(args.integer_or("width", 0, 0, 8192));
  request.height = static_cast<int>(args.integer_or("height", 0, 0, 8192));
  request.frames = static_cast<int>(args.integer_or("frames", 0, 0, 1001));
  if (const auto image = args.value("image")) request.image = io::detail::path_from_utf8(*image);
  if (const auto end = args.value("end-image")) {
    request.end_image = io::detail::path_from_utf8(*end);
  }
  for (const std::string& lora : args.values("lora")) request.loras.push_back(lora_option(lora));
  request.decoder = decoder_option(args);
  if (const auto f = args.value("latents")) request.latents = io::detail::path_from_utf8(*f);
  const models::ResolvedRequest r = session.validate(*model, request);
  const pipeline::RunTarget target = session.target(request.preset);
  const models::GenerationPlan plan = session.plan(*model, r);

  if (args.flag("json")) {
    std::printf("%s\n", plan_json(session, *model, target, r, plan).dump(2).c_str());
    return 0;
  }
  std::printf("model:   %s (%s)\n", model->name().c_str(), std::string(model->family()).c_str());
  std::printf("video:   %dx%d, %d frames\n", r.width, r.height, r.frames);
  std::printf("machine: %s\n", session.machine_summary().c_str());
  std::printf("preset:  %s (%s) - %s\n", target.preset.name.c_str(), target.preset.source.c_str(),
              target.preset.description.c_str());
  if (target.fell_back_to_cpu)
    std::printf("         (%s: the cpu preset runs)\n", target.reason.c_str());
  // Each stage plans alone: the previous one has freed everything (architecture.md §3.5).
  for (const models::StagePlan& s : plan.stages) print_stage(s, target.on_gpu);
  const bool partial = std::any_of(plan.stages.begin(), plan.stages.end(),
                                   [](const models::StagePlan& s) { return !s.implemented; });
  std::printf("\npredicted peaks of the whole run: VRAM %s, RAM %s%s\n",
              human_bytes(plan.predicted_vram_peak).c_str(),
              human_bytes(plan.predicted_ram_peak).c_str(),
              partial ? " (of the stages implemented so far)" : "");
  return 0;
}

}  // namespace ferry::cli
