// quant_plan: what quantized weights save where it matters — the bytes a DiT step streams and the
// plan's predicted peaks. For Wan 2.2 TI2V-5B and Wan 2.1 T2V-14B it writes the DiT as GGUF files
// with the real shapes (bf16, and city96's Q8_0 and Q4_K_M type mixes, formats_lora_moe.md §1.3;
// the data section left a sparse hole: only the header and the sizes matter here), then plans the
// diffusion stage exactly as `ferry-cli plan` does (models::block_stage_plan) under a preset at a
// size, on a described machine, and prints per file:
//   weights    the DiT's bytes as stored
//   blocks     the bytes of the 30/40 blocks: what a step streams when every block streams
//              (the `stream_all` plan), with their ratio to bf16's
//   streamed   bytes read from disk or copied from the pinned cache per step (one CFG pass)
//              under the preset's plan
//   VRAM/RAM   the stage's predicted peaks
// and each file's streamed bytes as a ratio to bf16's, in the same run.
//   ./bench/quant_plan [--preset laptop-8gb] [--width 832 --height 480 --frames 81]
//                      [--vram-gib 8 --ram-gib 24] [--dir FOLDER]
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/io/gguf_writer.h"
#include "core/io/tensor_set.h"
#include "core/models/stage_plan.h"
#include "core/models/wan/dit_layout.h"
#include "core/offload/preset.h"

namespace fs = std::filesystem;
namespace wan = ferry::models::wan;
using ferry::DType;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// city96's choice for one tensor (§1.3): what llama-quantize with lcpp.patch does to a bf16 DiT.
DType city96_type(const ferry::io::TensorSpec& t, std::string_view mix) {
  const std::string& n = t.name;
  std::uint64_t numel = 1;
  for (std::uint64_t d : t.shape) numel *= d;
  if (n == "patch_embedding.weight" || t.shape.size() == 1 || numel <= 1024 ||
      n.find(".modulation") != std::string::npos) {
    return DType::kF32;
  }
  const bool block_weight = n.starts_with("blocks.") && n.ends_with("weight") && t.shape.size() == 2;
  if (!block_weight || mix == "BF16") return DType::kBF16;
  if (mix == "Q8_0") return DType::kQ8_0;
  const bool high = n.ends_with(".v.weight") || n.ends_with("ffn.2.weight");
  const DType wanted = high ? DType::kQ6_K : DType::kQ4_K;
  return t.shape.back() % 256 == 0 ? wanted : DType::kF16;
}

fs::path write_dit(const fs::path& dir, const wan::DitConfig& config, std::string_view mix) {
  std::vector<ferry::io::TensorSpec> specs = wan::dit_tensors(config, DType::kBF16);
  for (auto& s : specs) s.dtype = city96_type(s, mix);
  const fs::path path = dir / (std::string(config.name) + "-" + std::string(mix) + ".gguf");
  ferry::io::write_gguf(path, {{"general.architecture", ferry::io::gguf_string("wan")}}, specs, {});
  return path;
}

std::string arg(int argc, char** argv, std::string_view name, std::string fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (argv[i] == std::string("--") + std::string(name)) return argv[i + 1];
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string preset_name = arg(argc, argv, "preset", "laptop-8gb");
  const int width = std::atoi(arg(argc, argv, "width", "832").c_str());
  const int height = std::atoi(arg(argc, argv, "height", "480").c_str());
  const int frames = std::atoi(arg(argc, argv, "frames", "81").c_str());
  ferry::offload::MachineInfo machine;
  machine.has_gpu = true;
  machine.total_vram_bytes = machine.free_vram_bytes =
      static_cast<std::uint64_t>(std::atof(arg(argc, argv, "vram-gib", "8").c_str()) * kGiB);
  machine.total_ram_bytes = machine.available_ram_bytes =
      static_cast<std::uint64_t>(std::atof(arg(argc, argv, "ram-gib", "24").c_str()) * kGiB);
  const fs::path dir = arg(argc, argv, "dir", (fs::temp_directory_path() / "ferry-quant-plan").string());
  fs::create_directories(dir);
  const ferry::offload::Preset preset =
      ferry::offload::find_preset(ferry::offload::builtin_presets(), preset_name, machine);

  std::printf("quant_plan: Wan DiT stage at %dx%dx%d, preset %s, machine %.0f GiB VRAM / %.0f GiB RAM\n",
              width, height, frames, preset.name.c_str(), machine.total_vram_bytes / kGiB,
              machine.total_ram_bytes / kGiB);
  std::printf("%-10s %-7s %10s %10s %8s %14s %8s %10s %10s\n", "model", "format", "weights",
              "blocks", "vs bf16", "streamed/step", "vs bf16", "VRAM peak", "RAM peak");
  for (const wan::DitConfig* config : {&wan::kTI2V_5B, &wan::kT2V_14B}) {
    double bf16_streamed = 0, bf16_blocks = 0;
    for (std::string_view mix : {"BF16", "Q8_0", "Q4_K_M"}) {
      const fs::path path = write_dit(dir, *config, mix);
      const ferry::io::TensorSet set = ferry::io::TensorSet::open(path);
      const auto layout = wan::dit_model_layout(set, width, height, frames, preset.chunk_tokens);
      const ferry::models::StagePlan s =
          ferry::models::block_stage_plan("diffusion model", layout, preset, machine, false);
      double streamed = 0, blocks = 0;
      for (std::size_t g = 0; g < layout.groups.size(); ++g) {
        if (!layout.groups[g].always_resident) blocks += static_cast<double>(layout.groups[g].bytes());
        if (s.plan.placement[g] != ferry::offload::Placement::kDevice) {
          streamed += static_cast<double>(layout.groups[g].bytes());
        }
      }
      if (mix == "BF16") {
        bf16_streamed = streamed;
        bf16_blocks = blocks;
      }
      std::printf("%-10s %-7s %8.2f G %8.2f G %8.3f %12.2f G %8.3f %8.2f G %8.2f G\n",
                  std::string(config->name).c_str(), std::string(mix).c_str(),
                  s.weight_bytes / kGiB, blocks / kGiB, blocks / bf16_blocks, streamed / kGiB,
                  bf16_streamed > 0 ? streamed / bf16_streamed : 0.0,
                  s.predicted_vram_peak / kGiB, s.predicted_ram_peak / kGiB);
      fs::remove(path);
    }
  }
  return 0;
} catch (const ferry::Error& e) {
  std::fprintf(stderr, "quant_plan: %s\n", e.what());
  return 1;
}
