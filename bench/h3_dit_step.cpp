// h3_dit_step: MiniMax-H3's DiT at its real widths (minimax_h3.md §C.1: hidden 5376, 56 heads of
// 128, SwiGLU 14336, AdaLN input 2688) in DiffSynth's NF4 layout (§G.2: every block Linear
// bitsandbytes NF4 double-quantised), a few blocks with random data, one T2VA forward (one pass of
// the packed sequence) several ways in the same run:
//   resident      every block in device memory (on the CPU backend: host memory): the floor
//   disk          every block read from the file each pass, unbuffered, through the staging ring
//   pruned *      the same two with the pruned file's blocks (§C.10: AdaLN projections of 8 inputs
//                 instead of 2688, so a block carries 40 % fewer bytes)
//   schedule *    the same forwards asked for the AdaLN rows of a whole schedule's distinct
//                 timesteps (--schedule, default 51: 50 steps and the keyframes' pinned value)
// and prints each as a ratio to the resident one. It answers issue 19's two questions:
//   - streamed over resident: what streaming a step costs once the reads overlap compute;
//   - AdaLN: a full file's AdaLN projections hold 13 of the 33 B parameters. Streamed with their
//     block, they are read every pass (the bytes: full minus pruned) and computed for the pass's
//     1–3 timesteps; precomputed, they would be read once and computed for every timestep of the
//     schedule at the start (the cost: "schedule" minus "pruned schedule", as a fraction of a
//     pass), then kept as a table of schedule × blocks × 96768 bf16 values (printed).
// Each forward's video and audio output must be identical bit for bit between resident and disk
// (streaming does not change results); the bench says so and exits 1 when they are not.
//
// CPU (default): 2 blocks at 128x128, 5 frames (a few hundred rows), since a CPU pass at video
// sizes takes hours. CUDA (--backend cuda, when built with CUDA): 4 blocks at 832x480x124 (the
// 480p T2VA sequence, 15k rows), as tests/gpu/run.sh runs it.
#include <algorithm>
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
#include "core/io/tensor_set.h"
#include "core/models/h3/dit.h"
#include "core/models/h3/dit_sequence.h"
#include "core/models/h3/dit_weights.h"
#include "core/models/h3/synthetic_set.h"
#include "core/offload/planner.h"
#include "core/offload/streamer.h"
#include "core/tensor/convert.h"

namespace {

namespace fs = std::filesystem;
namespace dit = ferry::models::h3::dit;
namespace h3 = ferry::models::h3;
using ferry::Error;
using ferry::ErrorCode;
using ferry::bench::Clock;
using ferry::offload::Placement;
using ferry::offload::Plan;

constexpr double kMiB = 1024.0 * 1024.0;

struct Options {
  bool cuda = false;
  int width = 0, height = 0, frames = 0;  // 0: the backend's default
  int blocks = 0;                         // 0: CPU 2, CUDA 4
  int text_rows = 128;                    // minimax_h3.md §I.2's L
  int passes = 2;                         // measured passes per run, after one warm-up
  int rounds = 2;
  int schedule = 51;
  std::int64_t chunk_tokens = 0;
  fs::path folder = ".";
  bool keep = false;
};

void print_usage() {
  std::printf(
      "usage: h3_dit_step [--backend cpu|cuda] [--size WxHxF] [--blocks N] [--text-rows L]\n"
      "                   [--passes N] [--rounds N] [--schedule N] [--chunk-tokens N]\n"
      "                   [--folder DIR] [--keep]\n"
      "  --size WxHxF     the canvas and frames (17n+5); default CPU 128x128x5, CUDA 832x480x124\n"
      "  --blocks N       blocks with data, and run (default CPU 2, CUDA 4)\n"
      "  --schedule N     distinct timesteps a precomputed AdaLN table holds (default 51)\n"
      "  --folder DIR     where the two synthetic files go (default .; removed unless --keep)\n");
}

std::optional<Options> parse(int argc, char** argv) {
  Options o;
  ferry::bench::Args args(argc, argv, print_usage);
  while (args.next()) {
    const std::string_view arg = args.option();
    if (arg == "--backend") {
      const std::string_view v = args.value();
      if (v != "cpu" && v != "cuda") throw Error(ErrorCode::kBadArgument, "--backend cpu|cuda");
      o.cuda = v == "cuda";
    } else if (arg == "--size") {
      if (std::sscanf(args.value(), "%dx%dx%d", &o.width, &o.height, &o.frames) != 3) {
        throw Error(ErrorCode::kBadArgument, "--size takes WxHxF");
      }
    } else if (arg == "--blocks") {
      o.blocks = std::clamp(std::atoi(args.value()), 1, 50);
    } else if (arg == "--text-rows") {
      o.text_rows = std::clamp(std::atoi(args.value()), 1, 4096);
    } else if (arg == "--passes") {
      o.passes = std::clamp(std::atoi(args.value()), 1, 100);
    } else if (arg == "--rounds") {
      o.rounds = std::clamp(std::atoi(args.value()), 1, 100);
    } else if (arg == "--schedule") {
      o.schedule = std::clamp(std::atoi(args.value()), 2, 1000);
    } else if (arg == "--chunk-tokens") {
      o.chunk_tokens = std::max(0ll, std::atoll(args.value()));
    } else if (arg == "--folder") {
      o.folder = args.value();
    } else if (arg == "--keep") {
      o.keep = true;
    } else {
      args.unknown();
    }
  }
  if (args.help_asked()) return std::nullopt;
  if (o.width == 0) {
    o.width = o.cuda ? 832 : 128;
    o.height = o.cuda ? 480 : 128;
    o.frames = o.cuda ? 124 : 5;
  }
  if (o.frames < 5 || (o.frames - 5) % 17 != 0 || o.width % 32 != 0 || o.height % 32 != 0) {
    throw Error(ErrorCode::kBadArgument, "--size: sides multiples of 32, frames 17n+5");
  }
  if (o.blocks == 0) o.blocks = o.cuda ? 4 : 2;
  return o;
}

// The packed T2VA sequence of the canvas (the family's rules: T' = 5n + 2 latent frames, 16x
// spatial, 40 audio latents a second at 24 fps).
dit::PackedSequence sequence_for(const Options& o) {
  dit::PackedGeometry g;
  g.latent_frames = (o.frames - 5) / 17 * 5 + 2;
  g.latent_height = o.height / 16;
  g.latent_width = o.width / 16;
  g.audio_latents = std::lround(o.frames / 24.0 * 40.0);
  const std::vector<std::uint8_t> tags(static_cast<std::size_t>(o.text_rows), dit::kTextTag);
  return dit::build_packed_sequence(tags, g, {});
}

// `count` timesteps: the pass's own (t_video = t_audio = 0.6: one value) or a schedule's, every
// row reading the first (the AdaLN rows of the others are computed and not read, as a table made
// at the start would be).
dit::RowTimesteps timesteps_for(const dit::PackedSequence& s, int count) {
  dit::RowTimesteps t = dit::row_timesteps(s, 0.6f, 0.6f);
  if (count <= static_cast<int>(t.values.size())) return t;
  const float first = t.values.front();
  t.values.clear();
  for (int i = 0; i < count; ++i) t.values.push_back(first + static_cast<float>(i) / count * 0.3f);
  std::fill(t.index.begin(), t.index.end(), 0);
  return t;
}

std::vector<float> normal_values(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  for (float& x : v) x = normal(rng);
  return v;
}

struct Inputs {
  dit::PackedSequence sequence;
  std::vector<float> video, audio;
  std::vector<std::uint16_t> text;
};

Inputs inputs_for(const Options& o, const dit::DitConfig& c) {
  Inputs in;
  in.sequence = sequence_for(o);
  const dit::PackedSequence& s = in.sequence;
  in.video =
      normal_values(static_cast<std::size_t>((s.condition_rows + s.video_rows) * c.patch_dim), 1);
  in.audio = normal_values(static_cast<std::size_t>(s.audio_rows * c.audio_channels), 2);
  const std::vector<float> text =
      normal_values(static_cast<std::size_t>(s.text_rows * c.text_dim), 3);
  in.text.resize(text.size());
  ferry::convert_from_f32(text.data(), ferry::DType::kBF16, in.text.data(), text.size());
  return in;
}

struct Result {
  double pass_seconds = 0;  // the fastest measured pass (others' load only ever adds time)
  double bytes_read = 0;    // per pass
  double io_wait_seconds = 0;
  std::vector<float> video, audio;  // the last pass's output
};

Result run_passes(ferry::Backend& backend, const dit::DitWeights& weights, const Plan& plan,
                  const Inputs& in, const dit::RowTimesteps& timesteps, const Options& o) {
  const dit::PackedSequence& s = in.sequence;
  ferry::offload::ModelLayout layout =
      weights.model_layout(s.length(), s.text_rows, o.chunk_tokens);
  const std::uint64_t arena_bytes = weights.activation_bytes(
      s.length(), s.text_rows, o.chunk_tokens, static_cast<std::int64_t>(timesteps.values.size()));
  layout.activation_bytes = arena_bytes;
  ferry::offload::StreamerOptions options;
  options.passes = static_cast<std::size_t>(o.passes + 1);
  ferry::offload::WeightStreamer streamer(backend, layout, plan, options);
  const auto memory = backend.allocate(arena_bytes);
  ferry::memory::Arena arena(memory->data(), static_cast<std::size_t>(arena_bytes),
                             backend.device());
  dit::DitInput input;
  input.sequence = &s;
  input.timesteps = &timesteps;
  input.video = in.video;
  input.audio = in.audio;
  input.text = in.text;

  Result r;
  r.pass_seconds = 1e30;
  ferry::offload::StreamStats before;
  for (int pass = 0; pass <= o.passes; ++pass) {
    if (pass == 1) before = streamer.stats();
    const std::size_t mark = arena.mark();  // a forward keeps its tensors: each pass starts empty
    const auto start = Clock::now();
    dit::DitOutput out = dit::dit_forward(backend, weights, streamer, arena, input, o.chunk_tokens);
    const double seconds = ferry::bench::seconds_since(start);
    arena.release_to(mark);
    if (pass > 0) r.pass_seconds = std::min(r.pass_seconds, seconds);
    r.video = std::move(out.video);
    r.audio = std::move(out.audio);
  }
  const ferry::offload::StreamStats after = streamer.stats();
  r.bytes_read = static_cast<double>(after.bytes_read) / (o.passes + 1);
  r.io_wait_seconds = (after.acquire_wait_seconds - before.acquire_wait_seconds) / o.passes;
  for (float v : r.video) {
    if (!std::isfinite(v)) throw Error(ErrorCode::kInternal, "the output is not finite");
  }
  return r;
}

bool same_bits(const Result& a, const Result& b) {
  return a.video.size() == b.video.size() && a.audio.size() == b.audio.size() &&
         std::memcmp(a.video.data(), b.video.data(), a.video.size() * sizeof(float)) == 0 &&
         std::memcmp(a.audio.data(), b.audio.data(), a.audio.size() * sizeof(float)) == 0;
}

Plan resident_plan(const ferry::offload::ModelLayout& layout) {
  Plan plan;
  plan.placement.assign(layout.groups.size(), Placement::kDevice);
  return plan;
}

// The bytes of the blocks' groups (what a pass streams from disk).
double block_bytes(const dit::DitWeights& w) {
  double bytes = 0;
  for (std::int64_t i = 0; i < w.config().layers; ++i) {
    bytes += static_cast<double>(w.group(w.block_group(i)).bytes());
  }
  return bytes;
}

fs::path write_part(const Options& o, bool pruned) {
  h3::SyntheticShapes shapes;
  shapes.dit_layers = o.blocks;
  shapes.pruned = pruned;
  const fs::path path =
      o.folder / (pruned ? "h3_dit_step_pruned.safetensors" : "h3_dit_step_full.safetensors");
  ferry::bench::create_parent_directories(path);
  h3::write_with_data(path, h3::dit_part(shapes, true),
                      [](const ferry::io::TensorSpec&) { return false; });
  return path;
}

std::unique_ptr<ferry::Backend> make_backend(bool cuda) {
  if (!cuda) return std::make_unique<ferry::cpu::CpuBackend>();
  if (!ferry::has_device_provider(ferry::Device::kCuda)) {
    throw Error(ErrorCode::kUnsupported, "--backend cuda: this build has no CUDA");
  }
  std::string why;
  const auto device = ferry::find_device(ferry::Device::kCuda, &why);
  if (!device) {
    std::printf("h3_dit_step: no CUDA device (%s); nothing measured\n", why.c_str());
    return nullptr;
  }
  return ferry::create_backend(*device);
}

int main_checked(const Options& o) {
  const std::unique_ptr<ferry::Backend> backend = make_backend(o.cuda);
  if (!backend) return 0;
  const auto written = Clock::now();
  const fs::path full_path = write_part(o, false);
  const ferry::bench::ScratchFile full_scratch(full_path, o.keep);
  const fs::path pruned_path = write_part(o, true);
  const ferry::bench::ScratchFile pruned_scratch(pruned_path, o.keep);
  const double write_seconds = ferry::bench::seconds_since(written);
  const ferry::io::TensorSet full_set = ferry::io::TensorSet::open(full_path);
  const ferry::io::TensorSet pruned_set = ferry::io::TensorSet::open(pruned_path);
  const dit::DitWeights full = dit::DitWeights::from(full_set);
  const dit::DitWeights pruned = dit::DitWeights::from(pruned_set);
  const dit::DitConfig& c = full.config();
  const Inputs in = inputs_for(o, c);
  const dit::PackedSequence& s = in.sequence;

  std::printf(
      "h3_dit_step: MiniMax-H3 DiT widths (hidden %lld, %lld heads of %lld, SwiGLU %lld, AdaLN "
      "input %lld), DiffSynth NF4 layout, %d of 50 blocks with random data (full %.0f MiB, "
      "pruned %.0f MiB; written in %.1f s)\n"
      "backend %s, %u hardware threads; %dx%d, %d frames, T2VA: %lld rows (%lld text, %lld "
      "audio, %lld video); one pass each, the fastest of %d after 1 warm-up, %d rounds\n",
      static_cast<long long>(c.hidden), static_cast<long long>(c.heads),
      static_cast<long long>(c.head_dim), static_cast<long long>(c.ffn),
      static_cast<long long>(c.time_dim), o.blocks,
      static_cast<double>(fs::file_size(full_path)) / kMiB,
      static_cast<double>(fs::file_size(pruned_path)) / kMiB, write_seconds,
      backend->name().c_str(), std::thread::hardware_concurrency(), o.width, o.height, o.frames,
      static_cast<long long>(s.length()), static_cast<long long>(s.text_rows),
      static_cast<long long>(s.audio_rows), static_cast<long long>(s.video_rows), o.passes,
      o.rounds);

  ferry::offload::Preset preset;
  preset.read_method = ferry::offload::ReadMethod::kDirect;
  const auto layout_of = [&](const dit::DitWeights& w) {
    return w.model_layout(s.length(), s.text_rows, o.chunk_tokens);
  };
  const dit::RowTimesteps pass_t = timesteps_for(s, 1);
  const dit::RowTimesteps schedule_t = timesteps_for(s, o.schedule);
  struct Run {
    const char* name;
    const dit::DitWeights* weights;
    Plan plan;
    const dit::RowTimesteps* timesteps;
  };
  enum { kResident, kDisk, kPrunedResident, kPrunedDisk, kSchedule, kPrunedSchedule, kRuns };
  // The run of the same file and timesteps with the other placement, or -1.
  const auto twin_of = [](int m) {
    switch (m) {
      case kResident:
        return static_cast<int>(kDisk);
      case kDisk:
        return static_cast<int>(kResident);
      case kPrunedResident:
        return static_cast<int>(kPrunedDisk);
      case kPrunedDisk:
        return static_cast<int>(kPrunedResident);
      default:
        return -1;
    }
  };
  const Run runs[kRuns] = {
      {"resident", &full, resident_plan(layout_of(full)), &pass_t},
      {"disk", &full, ferry::offload::streamed_plan(layout_of(full), preset), &pass_t},
      {"pruned resident", &pruned, resident_plan(layout_of(pruned)), &pass_t},
      {"pruned disk", &pruned, ferry::offload::streamed_plan(layout_of(pruned), preset), &pass_t},
      {"schedule", &full, resident_plan(layout_of(full)), &schedule_t},
      {"pruned schedule", &pruned, resident_plan(layout_of(pruned)), &schedule_t},
  };
  Result best[kRuns];
  bool differ = false;
  for (int round = 0; round < o.rounds; ++round) {
    std::printf("  round %d:", round + 1);
    for (int k = 0; k < kRuns; ++k) {
      const int m = (round + k) % kRuns;
      Result r = run_passes(*backend, *runs[m].weights, runs[m].plan, in, *runs[m].timesteps, o);
      std::printf("  %s %.3f s", runs[m].name, r.pass_seconds);
      std::fflush(stdout);
      // Resident and streamed runs of one file must agree bit for bit.
      const int twin = twin_of(m);
      if (twin >= 0 && !best[twin].video.empty() && !same_bits(best[twin], r)) {
        std::printf("\n  OUTPUTS DIFFER: %s vs %s", runs[m].name, runs[twin].name);
        differ = true;
      }
      if (best[m].video.empty() || r.pass_seconds < best[m].pass_seconds) best[m] = std::move(r);
    }
    std::printf("\n");
  }
  const double floor = best[kResident].pass_seconds;
  for (int m = 0; m < kRuns; ++m) {
    std::printf("  %-16s %8.3f s/pass  ratio %.3f  read %7.1f MiB/pass  I/O wait %.3f s/pass\n",
                runs[m].name, best[m].pass_seconds, best[m].pass_seconds / floor,
                best[m].bytes_read / kMiB, best[m].io_wait_seconds);
  }
  const double full_bytes = block_bytes(full), pruned_bytes = block_bytes(pruned);
  const double adaln_share = 1.0 - pruned_bytes / full_bytes;
  const double streamed = best[kDisk].pass_seconds / floor;
  const double in_stream =
      (best[kDisk].pass_seconds - best[kPrunedDisk].pass_seconds) / best[kDisk].pass_seconds;
  const double precompute = (best[kSchedule].pass_seconds - best[kPrunedSchedule].pass_seconds) /
                            best[kDisk].pass_seconds;
  const double table_mib = static_cast<double>(o.schedule) * 50.0 *
                           static_cast<double>(c.modulation_width()) * 2.0 / kMiB;
  std::printf(
      "streamed over resident: %.3f (disk), %.3f (pruned, disk)\n"
      "AdaLN: %.0f %% of a block's bytes (%.1f of %.1f MiB a block); streamed with its block it "
      "costs %.1f %% of a streamed pass here; precomputed for %d timesteps it would cost %.2f "
      "passes' time once (read once, %d rows a block) and a %.0f MiB bf16 table for 50 blocks\n"
      "outputs: %s\n",
      streamed, best[kPrunedDisk].pass_seconds / best[kPrunedResident].pass_seconds,
      100.0 * adaln_share, (full_bytes - pruned_bytes) / o.blocks / kMiB,
      full_bytes / o.blocks / kMiB, 100.0 * in_stream, o.schedule, precompute, o.schedule,
      table_mib,
      differ ? "resident and streamed DIFFER (see above)"
             : "resident and streamed identical bit for bit");
  return differ ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ferry::bench::report_errors("h3_dit_step", [&] {
    const std::optional<Options> o = parse(argc, argv);
    if (!o) return 0;
    return main_checked(*o);
  });
}
