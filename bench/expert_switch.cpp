// expert_switch: Wan 2.2 A14B's switch between its experts, in memory (issue 17, "Must show 2").
// It writes a two-expert model set of synthetic experts with a real model's blocks (Wan 2.1
// T2V-1.3B's, 10 of its 30 blocks of 1536 wide by default: 0.95 GB of bf16 each; the text width the
// demo's umT5 gives), the demo's text encoder and the tiny Wan 2.1 VAE next to them, then runs a
// whole generation through the session API on the CPU backend (the cpu preset with --ram-mib as its
// RAM budget: below one expert, the DiT streams from disk), and prints per step: the expert,
// seconds, bytes read, host RSS and commit (at the step's end and its peak inside it); then per
// expert the plateau (the median RSS of its steps) and the planner's predicted RAM peak for that
// expert's stage, and the RSS after the switch as a fraction of the plateau before it.
//   ./bench/expert_switch [--dir FOLDER] [--blocks 10] [--steps 8] [--ram-mib 1536] [--keep]
// The model folder goes in FOLDER (default: a temporary one), the stats in FOLDER/stats.jsonl.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "core/error.h"
#include "core/io/tensor_set.h"
#include "core/models/wan/demo_model.h"
#include "core/models/wan/dit_layout.h"
#include "core/offload/preset.h"
#include "core/pipeline/session.h"

namespace fs = std::filesystem;
namespace wan = ferry::models::wan;
using ferry::DType;

namespace {

struct Options {
  fs::path dir;
  std::uint64_t blocks = 10;
  int steps = 8;
  std::uint64_t ram_mib = 1536;
  bool keep = false;
};

void print_usage() {
  std::printf(
      "usage: expert_switch [--dir FOLDER] [--blocks N] [--steps N] [--ram-mib N] [--keep]\n");
}

std::optional<Options> parse(int argc, char** argv) {
  Options o;
  ferry::bench::Args args(argc, argv, print_usage);
  while (args.next()) {
    if (args.option() == "--dir") {
      o.dir = args.value();
    } else if (args.option() == "--blocks") {
      o.blocks = std::stoull(args.value());
    } else if (args.option() == "--steps") {
      o.steps = std::stoi(args.value());
    } else if (args.option() == "--ram-mib") {
      o.ram_mib = std::stoull(args.value());
    } else if (args.option() == "--keep") {
      o.keep = true;
    } else {
      args.unknown();
    }
  }
  if (args.help_asked()) return std::nullopt;
  return o;
}

double mib(std::uint64_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

// The two experts (different seeds), the demo's umT5 and the tiny Wan 2.1 VAE in `dir`.
void write_model_set(const fs::path& dir, const Options& o) {
  wan::DitConfig expert = wan::kT2V_1_3B;
  expert.layers = o.blocks;
  expert.text_dim = 64;  // the demo umT5's width
  const std::vector<ferry::io::TensorSpec> specs = wan::dit_tensors(expert, DType::kBF16);
  for (const char* name : {"high_noise_model", "low_noise_model"}) {
    const fs::path file = dir / name / "diffusion_pytorch_model.safetensors";
    if (fs::exists(file)) continue;
    fs::create_directories(file.parent_path());
    std::printf("writing %s (%zu tensors)...\n", file.string().c_str(), specs.size());
    ferry::bench::write_random_checkpoint(file, specs, [](const ferry::io::TensorSpec& t) {
      // Norm weights near 1, everything else small: a forward that stays finite.
      const bool norm = t.name.find("norm") != std::string::npos;
      return ferry::bench::RandomRange{norm ? 0.1f : 0.02f, norm ? 1.0f : 0.0f};
    });
  }
  const fs::path demo = wan::write_demo_model(dir / "demo");
  fs::copy_file(demo / std::string(wan::DemoModel::kTextEncoderFile), dir / "umt5_demo.safetensors",
                fs::copy_options::skip_existing);
  fs::copy_file(fs::path(FERRY_TEST_DATA_DIR) / "wan/vae/wan21_tiny.safetensors",
                dir / "wan_2.1_vae.safetensors", fs::copy_options::skip_existing);
  fs::remove_all(dir / "demo");
}

int run(const Options& o) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a long run shows its progress as it goes
  const fs::path dir = o.dir.empty() ? fs::temp_directory_path() / "ferry-expert-switch" : o.dir;
  fs::create_directories(dir);
  write_model_set(dir, o);

  // The cpu preset with the RAM budget asked for: below one expert, its blocks stream from disk.
  ferry::pipeline::SessionOptions session_options;
  std::vector<ferry::offload::Preset> presets = ferry::offload::builtin_presets();
  for (ferry::offload::Preset& p : presets) {
    if (p.name == "cpu") p.ram_budget_bytes = o.ram_mib << 20;
  }
  session_options.presets = presets;
  const ferry::pipeline::Session session(session_options);
  ferry::pipeline::GenerationRequest r;
  r.model = {dir};
  r.prompt = "a ferry crossing a fjord at dawn";
  r.width = 128;
  r.height = 128;
  r.frames = 9;
  r.steps = o.steps;
  r.shift = 5.0;  // 8 steps: 4 high-noise, 4 low-noise (boundary 0.875)
  r.preset = "cpu";
  r.output = dir / "out.mp4";
  r.stats_jsonl = dir / "stats.jsonl";
  const auto model = session.find(r.model);
  const auto resolved = session.validate(*model, r);
  const auto plan = session.plan(*model, resolved);
  std::map<std::string, std::uint64_t> predicted_ram;
  for (const auto& stage : plan.stages) {
    predicted_ram[stage.stage] = stage.predicted_ram_peak;
    std::printf("plan %-18s weights %8.1f MiB, predicted RAM peak %8.1f MiB\n", stage.stage.c_str(),
                mib(stage.weight_bytes), mib(stage.predicted_ram_peak));
  }

  struct Sink : ferry::pipeline::ProgressSink {
  } sink;
  ferry::pipeline::CancelToken cancel;
  const auto result = session.run(*model, r, sink, cancel);

  std::printf("\n%5s %-18s %8s %10s %10s %10s %10s\n", "step", "expert", "seconds", "read MiB",
              "RSS MiB", "RSS peak", "commit");
  std::map<std::string, std::vector<double>> rss;
  for (const auto& s : result.steps) {
    std::printf("%5d %-18s %8.2f %10.1f %10.1f %10.1f %10.1f\n", s.step, s.phase.c_str(), s.seconds,
                mib(s.bytes_read), mib(s.process.resident_bytes), mib(s.peak_resident_in_step),
                mib(s.process.commit_bytes));
    rss[s.phase].push_back(mib(s.process.resident_bytes));
  }
  // The first step of each expert is its warm-up (the streamer's slots filling); the plateau is
  // the median of the rest.
  const auto plateau = [&](const std::string& phase) {
    std::vector<double> v = rss[phase];
    if (v.size() > 1) v.erase(v.begin());
    return ferry::bench::median(v);
  };
  const double high = plateau("high-noise expert"), low = plateau("low-noise expert");
  double peak_high = 0, peak_low = 0;
  for (const auto& s : result.steps) {
    double& peak = s.phase == "high-noise expert" ? peak_high : peak_low;
    peak = std::max(peak, mib(s.peak_resident_in_step));
  }
  std::printf(
      "\nplateau high-noise %.1f MiB (peak %.1f, predicted %.1f), low-noise %.1f MiB "
      "(peak %.1f, predicted %.1f)\n",
      high, peak_high, mib(predicted_ram["high-noise expert"]), low, peak_low,
      mib(predicted_ram["low-noise expert"]));
  std::printf("after the switch / before it: %.4f (%+.2f%%)\n", low / high,
              (low / high - 1.0) * 100.0);
  if (!o.keep && o.dir.empty()) fs::remove_all(dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ferry::bench::report_errors("expert_switch", [&] {
    const auto options = parse(argc, argv);
    return options ? run(*options) : 0;
  });
}
