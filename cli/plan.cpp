// `ferry-cli plan --model PATH --preset NAME [--width --height --frames]`: the residency plan
// for a model on this machine (or on one described by --vram-mib / --ram-mib) and the predicted
// VRAM and RAM peaks. Exit code 3 when it does not fit.
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
#include "core/models/wan/dit_layout.h"
#include "core/offload/planner.h"

namespace ferry::cli {
namespace {

namespace fs = std::filesystem;

// The DiT checkpoint at `path`: the file or index itself, or the one a model folder holds.
io::SafetensorsSet open_dit(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return io::SafetensorsSet::open(path);
  const std::vector<fs::path> candidates = io::find_safetensors_sets(path, nullptr);
  for (const fs::path& p : candidates) {
    io::SafetensorsSet set = io::SafetensorsSet::open(p);
    if (set.find("patch_embedding.weight") != nullptr ||
        set.find("model.diffusion_model.patch_embedding.weight") != nullptr) {
      return set;
    }
  }
  throw Error(ErrorCode::kBadModelFile, "no Wan diffusion model (DiT) found in " + io::detail::display(path));
}

const char* placement_name(offload::Placement p) {
  switch (p) {
    case offload::Placement::kDevice: return "resident";
    case offload::Placement::kPinnedCache: return "pinned RAM";
    case offload::Placement::kDisk: return "disk";
  }
  return "?";
}

}  // namespace

int run_plan(const std::vector<std::string>& argv) {
  const Args args(argv, {"model", "preset", "width", "height", "frames", "vram-mib", "ram-mib"}, {});
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
  const offload::MachineInfo machine = describe_machine(args.integer_or("vram-mib", -1, 0, 1 << 22),
                                                        args.integer_or("ram-mib", -1, 1024, 1 << 24));
  const std::vector<offload::Preset> presets = offload::load_presets(user_presets_dir());
  const offload::Preset preset = offload::find_preset(presets, args.value_or("preset", "auto"), machine);

  const io::SafetensorsSet set = open_dit(io::detail::path_from_utf8(*model));
  const offload::ModelLayout layout =
      models::wan::dit_model_layout(set, width, height, frames, preset.ffn_chunk_tokens);

  std::printf("model:   %s, %s of weights\n", layout.name.c_str(), human_bytes(layout.weight_bytes()).c_str());
  std::printf("video:   %dx%d, %d frames\n", width, height, frames);
  std::printf("machine: %s\n", machine.has_gpu
                                   ? ("GPU with " + human_bytes(machine.free_vram_bytes) + " free of " +
                                      human_bytes(machine.total_vram_bytes) + ", RAM " +
                                      human_bytes(machine.available_ram_bytes) + " available of " +
                                      human_bytes(machine.total_ram_bytes)).c_str()
                                   : ("no NVIDIA GPU, RAM " + human_bytes(machine.available_ram_bytes) +
                                      " available of " + human_bytes(machine.total_ram_bytes)).c_str());
  std::printf("preset:  %s (%s) - %s\n", preset.name.c_str(), preset.source.c_str(), preset.description.c_str());

  const offload::Plan plan = offload::make_plan(layout, preset, machine);

  std::printf("\n  %-12s %-11s %10s\n", "group", "placement", "bytes");
  for (std::size_t i = 0; i < layout.groups.size(); ++i) {
    std::printf("  %-12s %-11s %10s\n", layout.groups[i].name.c_str(), placement_name(plan.placement[i]),
                human_bytes(layout.groups[i].bytes()).c_str());
  }
  std::printf("\nresident on the %s: %zu groups, %s\n", preset.device == Device::kCpu ? "CPU" : "GPU",
              plan.count(offload::Placement::kDevice), human_bytes(plan.resident_bytes).c_str());
  std::printf("cached in pinned RAM: %zu groups, %s\n", plan.count(offload::Placement::kPinnedCache),
              human_bytes(plan.pinned_cache_bytes).c_str());
  std::printf("streamed from disk: %zu groups (%s reads)\n", plan.count(offload::Placement::kDisk),
              plan.read_method == offload::ReadMethod::kDirect ? "unbuffered" : "mapped");
  std::printf("device slots: %zu x %s, look-ahead %zu; staging ring: %zu x %s\n", plan.device_slots,
              human_bytes(plan.device_slot_bytes).c_str(), plan.look_ahead, plan.staging_slots,
              human_bytes(plan.staging_slot_bytes).c_str());
  std::printf("working memory: %s\n", human_bytes(plan.activation_bytes).c_str());
  std::printf("predicted peaks: VRAM %s, RAM %s\n", human_bytes(plan.predicted_vram_peak).c_str(),
              human_bytes(plan.predicted_ram_peak).c_str());
  return 0;
}

}  // namespace ferry::cli
