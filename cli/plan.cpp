// `ferry-cli plan --model PATH --preset NAME [--width --height --frames]`: the residency plan of
// each stage the model folder holds (the text encoder, the diffusion model, the VAE decode) on
// this machine (or on one described by --vram-mib / --ram-mib) and the predicted VRAM and RAM
// peaks. Exit code 3 when a stage does not fit.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/machine.h"
#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/io/model_folder.h"
#include "core/io/safetensors_set.h"
#include "core/models/umt5/encoder_weights.h"
#include "core/models/wan/dit_layout.h"
#include "core/models/wan/vae_weights.h"
#include "core/offload/planner.h"
#include "core/models/wan/vae_plan.h"

namespace ferry::cli {
namespace {

namespace fs = std::filesystem;

// The safetensors sets at `path`: the file or index itself, or every one a model folder holds.
std::vector<fs::path> model_sets(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return {path};
  return io::find_safetensors_sets(path, nullptr);
}

bool is_dit(const io::SafetensorsSet& set) {
  return set.find("patch_embedding.weight") != nullptr ||
         set.find("model.diffusion_model.patch_embedding.weight") != nullptr;
}

bool is_text_encoder(const io::SafetensorsSet& set) {
  return set.find("token_embedding.weight") != nullptr || set.find("shared.weight") != nullptr ||
         set.find("encoder.embed_tokens.weight") != nullptr;
}

bool is_vae(const io::SafetensorsSet& set) {
  return set.find("decoder.conv1.weight") != nullptr ||
         set.find("decoder.conv_in.weight") != nullptr;
}

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

// One stage's plan: where each group lives, the fixed buffers and the predicted peaks.
void print_stage(const char* stage, const offload::ModelLayout& layout,
                 const offload::Preset& preset, const offload::MachineInfo& machine) {
  std::printf("\n== %s: %s, %s of weights\n", stage, layout.name.c_str(),
              human_bytes(layout.weight_bytes()).c_str());
  const offload::Plan plan = offload::make_plan(layout, preset, machine);
  std::printf("  %-12s %-11s %10s\n", "group", "placement", "bytes");
  for (std::size_t i = 0; i < layout.groups.size(); ++i) {
    std::printf("  %-12s %-11s %10s\n", layout.groups[i].name.c_str(),
                placement_name(plan.placement[i]), human_bytes(layout.groups[i].bytes()).c_str());
  }
  std::printf("resident on the %s: %zu groups, %s\n", preset.device == Device::kCpu ? "CPU" : "GPU",
              plan.count(offload::Placement::kDevice), human_bytes(plan.resident_bytes).c_str());
  std::printf("cached in pinned RAM: %zu groups, %s\n",
              plan.count(offload::Placement::kPinnedCache),
              human_bytes(plan.pinned_cache_bytes).c_str());
  std::printf("streamed from disk: %zu groups (%s reads)\n", plan.count(offload::Placement::kDisk),
              plan.read_method == offload::ReadMethod::kDirect ? "unbuffered" : "mapped");
  std::printf("device slots: %zu x %s, look-ahead %zu; staging ring: %zu x %s\n", plan.device_slots,
              human_bytes(plan.device_slot_bytes).c_str(), plan.look_ahead, plan.staging_slots,
              human_bytes(plan.staging_slot_bytes).c_str());
  std::printf("working memory: %s\n", human_bytes(plan.activation_bytes).c_str());
  std::printf("predicted peaks: VRAM %s, RAM %s\n", human_bytes(plan.predicted_vram_peak).c_str(),
              human_bytes(plan.predicted_ram_peak).c_str());
}

// The VAE decode: tile, overlap, where the tiles' caches live, and the predicted peaks.
void print_vae_stage(const io::SafetensorsSet& set, const offload::Preset& preset,
                     const offload::MachineInfo& machine, int width, int height, int frames) {
  const auto weights = models::wan::VaeWeights::shapes_only(set);
  std::printf("\n== VAE decode: %s, %s of weights on the device\n",
              std::string(models::wan::vae_kind_name(weights.config().kind)).c_str(),
              human_bytes(weights.bytes()).c_str());
  const models::wan::VaePlan plan =
      models::wan::make_vae_plan(weights, preset, machine, width, height, frames);
  if (plan.mode == models::wan::VaeDecodeMode::kUntiled) {
    std::printf("tile: none (the whole frame at once)\n");
  } else {
    const long long s = weights.config().spatial;
    std::printf("tile: %d px (%lld latent positions), overlap %lld px; %lld tiles\n", plan.tile_px,
                static_cast<long long>(plan.tiling.tile),
                static_cast<long long>(plan.tiling.overlap) * s,
                static_cast<long long>(plan.tiles));
  }
  std::printf("mode: %s%s\n", models::wan::vae_decode_mode_name(plan.mode),
              plan.mode != models::wan::VaeDecodeMode::kTiledStreamed ? ""
              : plan.caches == models::wan::VaeTileCaches::kHost  ? " (tile caches parked in RAM)"
                                                                  : " (tile caches on the device)");
  std::printf("working memory: %s (%s activations); host buffers: %s\n",
              human_bytes(plan.arena_bytes).c_str(),
              plan.activations == DType::kBF16 ? "bf16" : "f32",
              human_bytes(plan.host_bytes).c_str());
  std::printf("predicted peaks: VRAM %s, RAM %s\n", human_bytes(plan.predicted_vram_peak).c_str(),
              human_bytes(plan.predicted_ram_peak).c_str());
}

}  // namespace

int run_plan(const std::vector<std::string>& argv) {
  const Args args(argv, {"model", "preset", "width", "height", "frames", "vram-mib", "ram-mib"},
                  {});
  const auto model = args.value("model");
  if (!model || !args.positional().empty()) {
    throw Error(ErrorCode::kBadArgument,
                "usage: ferry-cli plan --model PATH [--preset NAME] [--width W --height H "
                "--frames F] [--vram-mib N --ram-mib N]");
  }
  const int width = static_cast<int>(args.integer_or("width", 1280, 32, 8192));
  const int height = static_cast<int>(args.integer_or("height", 704, 32, 8192));
  const int frames = static_cast<int>(args.integer_or("frames", 121, 1, 1001));
  if (width % 32 != 0 || height % 32 != 0 || (frames - 1) % 4 != 0) {
    throw Error(ErrorCode::kBadArgument,
                "width and height must be multiples of 32 and frames of the form 4k+1 (81, 121)");
  }
  const offload::MachineInfo machine = describe_machine(
      args.integer_or("vram-mib", -1, 0, 1 << 22), args.integer_or("ram-mib", -1, 1024, 1 << 24));
  const std::vector<offload::Preset> presets = offload::load_presets(user_presets_dir());
  const offload::Preset preset =
      offload::find_preset(presets, args.value_or("preset", "auto"), machine);

  std::vector<io::SafetensorsSet> dits, encoders, vaes;
  for (const fs::path& p : model_sets(io::detail::path_from_utf8(*model))) {
    io::SafetensorsSet set = io::SafetensorsSet::open(p);
    if (is_dit(set)) {
      dits.push_back(std::move(set));
    } else if (is_text_encoder(set)) {
      encoders.push_back(std::move(set));
    } else if (is_vae(set)) {
      vaes.push_back(std::move(set));
    }
  }
  if (dits.empty() && encoders.empty() && vaes.empty()) {
    throw Error(ErrorCode::kBadModelFile,
                "no Wan diffusion model (DiT), umT5 text encoder or Wan VAE in " + *model);
  }

  std::printf("video:   %dx%d, %d frames\n", width, height, frames);
  std::printf("machine: %s\n",
              machine.has_gpu ? ("GPU with " + human_bytes(machine.free_vram_bytes) + " free of " +
                                 human_bytes(machine.total_vram_bytes) + ", RAM " +
                                 human_bytes(machine.available_ram_bytes) + " available of " +
                                 human_bytes(machine.total_ram_bytes))
                                    .c_str()
                              : ("no NVIDIA GPU, RAM " + human_bytes(machine.available_ram_bytes) +
                                 " available of " + human_bytes(machine.total_ram_bytes))
                                    .c_str());
  std::printf("preset:  %s (%s) - %s\n", preset.name.c_str(), preset.source.c_str(),
              preset.description.c_str());

  // Each stage plans alone: the previous one has freed everything (architecture.md §3.5).
  if (!encoders.empty()) {
    const auto weights = models::umt5::EncoderWeights::from(encoders.front());
    print_stage("text encoder", weights.model_layout(), preset, machine);
  }
  if (!dits.empty()) {
    print_stage(
        "diffusion model",
        models::wan::dit_model_layout(dits.front(), width, height, frames, preset.ffn_chunk_tokens),
        preset, machine);
  }
  if (!vaes.empty()) print_vae_stage(vaes.front(), preset, machine, width, height, frames);
  return 0;
}

}  // namespace ferry::cli
