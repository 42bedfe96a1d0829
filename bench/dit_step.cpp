// dit_step: one denoising step of Wan 2.2 TI2V-5B (a CFG pair of DiT passes, guidance and the
// UniPC step: pipeline::denoise) with the real shapes, on a synthetic checkpoint with random bf16
// weights, three ways in the same run:
//   resident  every block in device memory (on the CPU backend: host memory): the floor
//   pinned    every block in pinned RAM (kPinnedCache), copied to a device slot each step
//   disk      offload::streamed_plan: every block read from the file each step, unbuffered
//             (DirectReader), through the staging ring
// and prints each step time as a ratio to the resident one, with the bytes read per step and the
// time compute waited for weights (I/O wait). The first step of each run is a warm-up; the runs go
// in rounds, each starting with the next way, and each way is taken at its fastest step of all
// rounds (load from other processes only ever adds time). The final latents of every run must be
// identical bit for bit (streaming does not change results; a difference is a copy/compute race):
// the bench says so and exits 1 when they are not.
//
// CPU (default): only a few blocks (--blocks 2) at a small size (256x256, 5 frames: 128 tokens),
// since a CPU step at video sizes takes minutes. CUDA (--backend cuda, when built with CUDA): all
// 30 blocks at 832x480x81 and 1280x704x121; target <= 1.05 at 720p.
//
// --lora-rank R adds a fourth run, "lora": resident, with a synthetic rank-R LoRA on every Linear
// of every block (runtime form: the base weights untouched, two extra GEMMs per Linear), and its
// ratio to the resident run is the LoRA's cost (target <= 1.06: the extra GEMMs are about 4 % of
// the FLOPs at rank 64). Its latent differs, by design, and is not compared.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench/bench_support.h"
#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/device.h"
#include "core/error.h"
#include "core/io/safetensors_writer.h"
#include "core/io/tensor_set.h"
#include "core/models/wan/denoise.h"
#include "core/models/wan/dit.h"
#include "core/models/wan/dit_layout.h"
#include "core/models/wan/dit_loras.h"
#include "core/offload/planner.h"
#include "core/offload/streamer.h"
#include "core/tensor/convert.h"

namespace fs = std::filesystem;
namespace wan = ferry::models::wan;
using ferry::Error;
using ferry::ErrorCode;
using ferry::bench::Clock;
using ferry::offload::Placement;
using ferry::offload::Plan;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kTarget720p = 1.05;

struct Size {
  int width = 0, height = 0, frames = 0;
};

struct Options {
  bool cuda = false;
  std::vector<Size> sizes;  // empty: the backend's defaults
  int frames = 0;           // > 0: overrides the frames of every size
  int blocks = 0;           // 0: the backend's default (CPU 2, CUDA 30)
  int steps = 0;            // measured steps per run; 0: CPU 2, CUDA 3
  int rounds = 2;           // rounds of the three runs
  std::size_t look_ahead = 1;
  std::size_t staging_slots = 4;
  std::size_t staging_mib = 64;
  std::int64_t chunk_tokens = 0;
  int lora_rank = 0;  // > 0: the "lora" run
  fs::path file = "bench-data/dit_step.safetensors";
  bool keep = false;
};

void print_usage() {
  std::printf(
      "usage: dit_step [--backend cpu|cuda] [--size W*H]... [--frames F] [--blocks N] [--steps S]\n"
      "                [--rounds R] [--look-ahead L] [--staging-slots K] [--staging-mib M] "
      "[--chunk T]\n"
      "                [--lora-rank R] [--file PATH] [--keep]\n"
      "  --backend    cpu (default) or cuda (when built with CUDA)\n"
      "  --size W*H   pixels, official order (repeatable); default cpu 256*256, cuda 832*480\n"
      "               and 1280*704\n"
      "  --frames F   video frames; default cpu 5, cuda 81 at 832*480 and 121 at 1280*704\n"
      "  --blocks N   DiT blocks in the synthetic checkpoint (default cpu 2, cuda 30 = all)\n"
      "  --steps S    measured steps per run, after one warm-up step (default cpu 2, cuda 3);\n"
      "               the fastest is reported\n"
      "  --rounds R   rounds of the resident, pinned and disk runs, each round starting with the\n"
      "               next; each is reported at its fastest round (default 2)\n"
      "  --look-ahead, --staging-slots, --staging-mib   the streamed plans' (default 1, 4, 64)\n"
      "  --chunk T  tokens per chunk of a block's work (default 0: unchunked)\n"
      "  --lora-rank R  also a resident run with a rank-R LoRA on every block Linear: its cost\n"
      "  --file PATH  the synthetic checkpoint (default bench-data/dit_step.safetensors; written\n"
      "               and removed unless --keep)\n");
}

Size parse_size(std::string_view text) {
  const std::size_t sep = text.find_first_of("*x");
  if (sep == std::string_view::npos) throw Error(ErrorCode::kBadArgument, "--size wants W*H");
  Size s;
  s.width = std::atoi(std::string(text.substr(0, sep)).c_str());
  s.height = std::atoi(std::string(text.substr(sep + 1)).c_str());
  if (s.width < 32 || s.height < 32 || s.width % 32 != 0 || s.height % 32 != 0) {
    throw Error(ErrorCode::kBadArgument, "--size: width and height must be multiples of 32");
  }
  return s;
}

std::optional<Options> parse(int argc, char** argv) {
  Options o;
  ferry::bench::Args args(argc, argv, print_usage);
  while (args.next()) {
    const std::string_view arg = args.option();
    auto number = [&] { return std::atoll(args.value()); };
    if (arg == "--backend") {
      const std::string_view b = args.value();
      if (b != "cpu" && b != "cuda") throw Error(ErrorCode::kBadArgument, "--backend cpu|cuda");
      o.cuda = b == "cuda";
    } else if (arg == "--size") {
      o.sizes.push_back(parse_size(args.value()));
    } else if (arg == "--frames") {
      o.frames = std::max(1, static_cast<int>(number()));
    } else if (arg == "--blocks") {
      o.blocks = std::max(1, static_cast<int>(number()));
    } else if (arg == "--steps") {
      o.steps = std::max(1, static_cast<int>(number()));
    } else if (arg == "--rounds") {
      o.rounds = std::max(1, static_cast<int>(number()));
    } else if (arg == "--look-ahead") {
      o.look_ahead = static_cast<std::size_t>(std::max(1ll, number()));
    } else if (arg == "--staging-slots") {
      o.staging_slots = static_cast<std::size_t>(std::max(2ll, number()));
    } else if (arg == "--staging-mib") {
      o.staging_mib = static_cast<std::size_t>(std::max(1ll, number()));
    } else if (arg == "--chunk") {
      o.chunk_tokens = std::max(0ll, number());
    } else if (arg == "--lora-rank") {
      o.lora_rank = std::max(0, static_cast<int>(number()));
    } else if (arg == "--file") {
      o.file = args.value();
    } else if (arg == "--keep") {
      o.keep = true;
    } else {
      args.unknown();
    }
  }
  if (args.help_asked()) return std::nullopt;
  if (o.sizes.empty()) {
    if (o.cuda) {
      o.sizes = {{832, 480, 81}, {1280, 704, 121}};
    } else {
      o.sizes = {{256, 256, 5}};
    }
  }
  for (Size& s : o.sizes) {
    if (o.frames > 0) s.frames = o.frames;
    if (s.frames == 0) s.frames = o.cuda ? 121 : 5;
    if ((s.frames - 1) % 4 != 0) throw Error(ErrorCode::kBadArgument, "frames must be 4k+1");
  }
  if (o.blocks == 0) o.blocks = o.cuda ? static_cast<int>(wan::kTI2V_5B.layers) : 2;
  if (o.steps == 0) o.steps = o.cuda ? 3 : 2;
  return o;
}

// Random bf16 weights, uniform with variance 1/fan-in; norms near 1, modulations and biases small.
void write_checkpoint(const fs::path& path, const wan::DitConfig& config) {
  ferry::bench::write_random_checkpoint(
      path, wan::dit_tensors(config, ferry::DType::kBF16), [](const ferry::io::TensorSpec& spec) {
        const std::string& name = spec.name;
        std::uint64_t fan_in = 1;
        for (std::size_t d = 1; d < spec.shape.size(); ++d) fan_in *= spec.shape[d];
        if (name.ends_with("modulation")) return ferry::bench::RandomRange{0.1f, 0.0f};
        if (name.find("norm") != std::string::npos && name.ends_with(".weight")) {
          return ferry::bench::RandomRange{0.1f, 1.0f};
        }
        if (name.ends_with(".bias")) return ferry::bench::RandomRange{0.01f, 0.0f};
        return ferry::bench::RandomRange{std::sqrt(3.0f / static_cast<float>(fan_in)), 0.0f};
      });
}

// A LoRA of `rank` on every Linear of every block (dit_lora_tensors, bf16, alpha = rank), B·A
// small beside the weights.
void write_lora(const fs::path& path, const wan::DitConfig& config, int rank) {
  const auto specs =
      wan::dit_lora_tensors(config, static_cast<std::uint64_t>(rank), ferry::DType::kBF16);
  ferry::bench::write_random_checkpoint(path, specs, [&](const ferry::io::TensorSpec& spec) {
    if (spec.shape.empty()) return ferry::bench::RandomRange{0.0f, static_cast<float>(rank)};
    return ferry::bench::RandomRange{spec.name.ends_with("lora_up.weight")
                                         ? 0.01f
                                         : std::sqrt(3.0f / static_cast<float>(spec.shape[1])),
                                     0.0f};
  });
}

struct Owned {
  std::unique_ptr<ferry::DeviceBuffer> memory;
  ferry::Tensor tensor;
};

Owned upload_random(ferry::Backend& backend, const ferry::Shape& shape, std::uint32_t seed) {
  const std::size_t n = static_cast<std::size_t>(shape.numel());
  std::vector<float> values(n);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  for (float& v : values) v = normal(rng);
  std::vector<std::byte> raw(n * 2);
  ferry::convert_from_f32(values.data(), ferry::DType::kBF16, raw.data(), n);
  Owned o;
  o.memory = backend.allocate(raw.size());
  o.tensor = ferry::Tensor{o.memory->data(), ferry::DType::kBF16, shape, backend.device()};
  backend.upload(o.tensor, raw.data());
  return o;
}

struct Result {
  double step_seconds = 0;     // the fastest measured step (others' load only ever adds time)
  double mean_seconds = 0;     // the mean of the measured steps
  double bytes_read = 0;       // per step: every pass reads the same, so total / passes
  double read_seconds = 0;     // per step: the IO thread reading, total / passes
  double io_wait_seconds = 0;  // per measured step: compute waiting in acquire()
  std::vector<float> latent;   // the final latent, compared bit for bit between the runs
};

Result run_steps(ferry::Backend& backend, const ferry::io::TensorSet& set,
                 const ferry::offload::ModelLayout& model_layout, const Plan& plan,
                 const Size& size, const Options& o,
                 std::span<const ferry::models::LoraChoice> loras = {}) {
  ferry::offload::ModelLayout layout = model_layout;
  const std::int64_t tokens =
      wan::dit_tokens(wan::infer_dit_config(set), size.width, size.height, size.frames);
  const ferry::models::lora::LoraBinding bound =
      wan::bind_dit_loras(loras, set, layout, tokens, o.chunk_tokens);
  wan::WanDit dit(backend, set, layout, bound.terms());
  ferry::offload::StreamerOptions options;
  options.passes = static_cast<std::size_t>(o.steps + 1);
  ferry::offload::WeightStreamer streamer(backend, layout, plan, options);

  const wan::LatentGrid grid{static_cast<int>(dit.config().in_dim), (size.frames - 1) / 4 + 1,
                             size.height / 16, size.width / 16};
  const std::uint64_t arena_bytes = wan::dit_activation_bytes(
      dit.config(), static_cast<std::int64_t>(grid.tokens()), o.chunk_tokens, 2, 1,
      wan::WanDit::lora_scratch_rank(bound.terms()));
  const auto arena_memory = backend.allocate(arena_bytes);
  ferry::memory::Arena arena(arena_memory->data(), arena_bytes, backend.device());
  const auto text = static_cast<std::int64_t>(dit.config().text_dim);
  const Owned cond = upload_random(backend, ferry::Shape{120, text}, 1);
  const Owned uncond = upload_random(backend, ferry::Shape{80, text}, 2);
  const ferry::Tensor contexts[2] = {cond.tensor, uncond.tensor};

  std::vector<float> latent(grid.size());
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (float& v : latent) v = normal(rng);

  ferry::models::wan::DenoiseSettings settings;
  settings.steps = o.steps + 1;
  settings.chunk_tokens = o.chunk_tokens;
  std::vector<Clock::time_point> starts;
  ferry::offload::StreamStats before;
  ferry::models::wan::DenoiseHooks hooks;
  hooks.before_step = [&](int step) {
    starts.push_back(Clock::now());
    if (step == 1) before = streamer.stats();
  };
  ferry::models::wan::denoise(backend, dit, streamer, arena, contexts, grid, {}, settings, latent,
                              hooks);
  starts.push_back(Clock::now());
  const ferry::offload::StreamStats after = streamer.stats();
  for (float v : latent) {
    if (!std::isfinite(v)) throw Error(ErrorCode::kInternal, "the latent is not finite");
  }
  Result r;
  r.step_seconds = 1e30;
  for (std::size_t i = 1; i + 1 < starts.size(); ++i) {
    r.step_seconds =
        std::min(r.step_seconds, std::chrono::duration<double>(starts[i + 1] - starts[i]).count());
  }
  r.mean_seconds = std::chrono::duration<double>(starts.back() - starts[1]).count() / o.steps;
  const double passes = o.steps + 1;
  r.bytes_read = static_cast<double>(after.bytes_read) / passes;
  r.read_seconds = after.read_seconds / passes;
  r.io_wait_seconds = (after.acquire_wait_seconds - before.acquire_wait_seconds) / o.steps;
  r.latent = std::move(latent);
  return r;
}

Plan resident_plan(const ferry::offload::ModelLayout& layout) {
  Plan plan;
  plan.placement.assign(layout.groups.size(), Placement::kDevice);
  return plan;
}

void print_result(const char* name, const Result& r, double floor) {
  std::printf(
      "  %-9s %8.3f s/step (its round's mean %.3f)  ratio %.3f  read %6.1f MiB/step (%.3f s)  "
      "I/O wait %.3f s/step\n",
      name, r.step_seconds, r.mean_seconds, r.step_seconds / floor, r.bytes_read / kMiB,
      r.read_seconds, r.io_wait_seconds);
}

// Values of `got` whose bits differ from `want`'s, and the largest difference among them.
struct LatentDiff {
  std::size_t differing = 0;
  double max_abs = 0;
};
LatentDiff compare_bits(const std::vector<float>& want, const std::vector<float>& got) {
  LatentDiff d;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&want[i], &got[i], sizeof(float)) != 0) {
      ++d.differing;
      d.max_abs = std::max(d.max_abs, std::fabs(static_cast<double>(want[i]) - got[i]));
    }
  }
  return d;
}

int main_checked(const Options& o) {
  std::unique_ptr<ferry::Backend> backend;
  if (o.cuda) {
    if (!ferry::has_device_provider(ferry::Device::kCuda)) {
      throw Error(ErrorCode::kUnsupported, "--backend cuda: this build has no CUDA");
    }
    std::string why;
    const auto device = ferry::find_device(ferry::Device::kCuda, &why);
    if (!device) {
      std::printf("dit_step: no CUDA device (%s); nothing measured\n", why.c_str());
      return 0;
    }
    backend = ferry::create_backend(*device);
  } else {
    backend = std::make_unique<ferry::cpu::CpuBackend>();
  }

  wan::DitConfig config = wan::kTI2V_5B;
  config.layers = static_cast<std::uint64_t>(o.blocks);
  const auto written = Clock::now();
  write_checkpoint(o.file, config);
  const ferry::bench::ScratchFile scratch(o.file, o.keep);
  const ferry::io::TensorSet set = ferry::io::TensorSet::open(o.file);
  const fs::path lora_file = fs::path(o.file).replace_extension(".lora.safetensors");
  std::optional<ferry::bench::ScratchFile> lora_scratch;
  std::vector<ferry::models::LoraChoice> loras;
  if (o.lora_rank > 0) {
    write_lora(lora_file, config, o.lora_rank);
    lora_scratch.emplace(lora_file, o.keep);
    loras.push_back({lora_file, 1.0f});
  }
  std::printf(
      "dit_step: Wan 2.2 TI2V-5B shapes (D %llu, F %llu), %d of %llu blocks, bf16 random weights "
      "(%.0f MiB, written in %.1f s to %s)\n"
      "backend %s, %u hardware threads; one step = CFG pair + guidance + UniPC "
      "(models::wan::denoise), the fastest of %d after 1 warm-up, %d rounds\n"
      "streamed plans: look-ahead %zu, staging %zu x %zu MiB, disk reads unbuffered "
      "(DirectReader)\n",
      static_cast<unsigned long long>(config.dim), static_cast<unsigned long long>(config.ffn_dim),
      o.blocks, static_cast<unsigned long long>(wan::kTI2V_5B.layers),
      static_cast<double>(fs::file_size(o.file)) / kMiB, ferry::bench::seconds_since(written),
      o.file.string().c_str(), backend->name().c_str(), std::thread::hardware_concurrency(),
      o.steps, o.rounds, o.look_ahead, o.staging_slots, o.staging_mib);

  bool latents_differ = false;
  for (const Size& size : o.sizes) {
    const ferry::offload::ModelLayout layout =
        wan::dit_model_layout(set, size.width, size.height, size.frames, o.chunk_tokens);
    ferry::offload::Preset preset;
    preset.look_ahead = o.look_ahead;
    preset.staging_slots = o.staging_slots;
    preset.staging_slot_bytes = static_cast<std::uint64_t>(o.staging_mib) << 20;
    preset.read_method = ferry::offload::ReadMethod::kDirect;
    const Plan disk = ferry::offload::streamed_plan(layout, preset);
    Plan pinned = disk;
    for (std::size_t g = 0; g < layout.groups.size(); ++g) {
      if (!layout.groups[g].always_resident) pinned.placement[g] = Placement::kPinnedCache;
    }
    double block_bytes = 0;
    for (const auto& g : layout.groups) {
      if (!g.always_resident) block_bytes += static_cast<double>(g.slot_bytes());
    }
    std::printf(
        "\n%dx%d, %d frames: %lld tokens per pass; blocks %.0f MiB per step\n", size.width,
        size.height, size.frames,
        static_cast<long long>(wan::dit_tokens(config, size.width, size.height, size.frames)),
        block_bytes / kMiB);

    // Rounds of the three runs, each round starting with the next one, so that load from other
    // processes falls on all three; each is then taken at its fastest round.
    const char* names[4] = {"resident", "pinned", "disk", "lora"};
    const Plan plans[4] = {resident_plan(layout), pinned, disk, resident_plan(layout)};
    const int runs = loras.empty() ? 3 : 4;
    Result best[4];
    std::vector<float> first_latent;  // of the first run; every other run must match it
    const char* first_name = "";
    bool differ = false;
    for (int round = 0; round < o.rounds; ++round) {
      std::printf("  round %d:", round + 1);
      for (int k = 0; k < runs; ++k) {
        const int m = (round + k) % runs;
        Result r =
            run_steps(*backend, set, layout, plans[m], size, o,
                      m == 3 ? std::span(loras) : std::span<const ferry::models::LoraChoice>{});
        std::printf("  %s %.3f s", names[m], r.step_seconds);
        std::fflush(stdout);
        if (m == 3) {
          // A LoRA changes the result: nothing to compare.
        } else if (first_latent.empty()) {
          first_latent = r.latent;
          first_name = names[m];
        } else {
          const LatentDiff d = compare_bits(first_latent, r.latent);
          if (d.differing > 0) {
            std::printf(
                "\n  LATENTS DIFFER: %s (round %d) vs %s: %zu of %zu values, max |diff| %.3g",
                names[m], round + 1, first_name, d.differing, r.latent.size(), d.max_abs);
            differ = true;
          }
        }
        if (round == 0 || r.step_seconds < best[m].step_seconds) best[m] = r;
      }
      std::printf("\n");
    }
    const double floor = best[0].step_seconds;
    for (int m = 0; m < runs; ++m) print_result(names[m], best[m], floor);
    if (runs == 4) {
      std::printf(
          "  LoRA cost: rank %d on every block Linear, %.3f x the resident step (target "
          "<= 1.06)\n",
          o.lora_rank, best[3].step_seconds / floor);
    }
    std::printf("  final latents: %s\n", differ ? "DIFFER between the runs (see above)"
                                                : "identical bit for bit in every run");
    latents_differ = latents_differ || differ;
    const Result& in_ram = best[1];
    const Result& from_disk = best[2];
    if (o.cuda && size.width * size.height >= 1280 * 704) {
      const bool met = std::max(in_ram.step_seconds, from_disk.step_seconds) / floor <= kTarget720p;
      std::printf("  720p target: streamed <= %.2f x resident: %s\n", kTarget720p,
                  met ? "met" : "TARGET MISSED");
    }
  }
  return latents_differ ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ferry::bench::report_errors("dit_step", [&] {
    const std::optional<Options> o = parse(argc, argv);
    if (!o) return 0;
    return main_checked(*o);
  });
}
