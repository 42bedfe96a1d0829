// h3_conditioner_stream: H3's conditioner, the Qwen3-VL-32B language model, at its real shapes in
// DiffSynth's NF4 layout (minimax_h3.md §B.1, §G.2: hidden 5120, 64 query / 8 KV heads of 128,
// MLP 25 600, 151 936 embedding rows; each Linear bitsandbytes NF4 double-quantised, in the order
// the safetensors library writes the file) encoding one 512-token prompt on the CPU backend under
// the cpu preset with a 4 GB RAM budget, every layer streamed from disk (unbuffered reads). It
// prints the peak resident set against the budget and against the plan's predicted RAM peak, and
// the streamer's IO-thread read time as a ratio to a raw read of the same bytes (DirectReader,
// sequential, measured in the same run), as umt5_stream does for umT5.
//
// The file is the whole 50-layer text encoder (14.3 GiB as the real one, vision tower included);
// the first --layers layers hold random data, the rest of the file is sparse holes, and the run
// encodes through those layers only (--layers 50: all of it; a 2-core machine takes ~25 s a layer).
// The embedding table holds data (the prompt's ids are drawn from its first 8192 rows). The plan
// for all 50 layers under the same budget is printed beside it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench/bench_support.h"
#include "core/backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/io/direct_reader.h"
#include "core/io/tensor_set.h"
#include "core/memory/aligned_buffer.h"
#include "core/memory/process_memory.h"
#include "core/models/h3/synthetic_set.h"
#include "core/models/h3/text_encoder.h"
#include "core/models/h3/text_encoder_weights.h"
#include "core/offload/planner.h"
#include "core/offload/preset.h"

namespace {

namespace fs = std::filesystem;
namespace h3 = ferry::models::h3;
using ferry::bench::Clock;

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * kMiB;
// Prompt ids are drawn below this: the embedding rows written with data.
constexpr std::int32_t kIdRows = 8192;

struct Options {
  fs::path file = "h3_text_encoder_nf4_synthetic.safetensors";
  int tokens = 512;
  int layers = 8;
  std::uint64_t ram_mib = 4096;
  bool keep = false;
};

void print_usage() {
  std::printf(
      "usage: h3_conditioner_stream [--file PATH] [--layers N] [--tokens N] [--ram-mib M] "
      "[--keep]\n"
      "  --file PATH   the synthetic NF4 text encoder (14.3 GiB logical, N layers of data;\n"
      "                written when absent; default ./h3_text_encoder_nf4_synthetic.safetensors)\n"
      "  --layers N    layers with data, and run (default 8, at most 50)\n"
      "  --tokens N    prompt length (default 512)\n"
      "  --ram-mib M   the preset's RAM budget (default 4096)\n"
      "  --keep        keep the file afterwards (one found in place is always kept)\n");
}

std::optional<Options> parse(int argc, char** argv) {
  Options o;
  ferry::bench::Args args(argc, argv, print_usage);
  while (args.next()) {
    const std::string_view arg = args.option();
    if (arg == "--file") {
      o.file = args.value();
    } else if (arg == "--layers") {
      o.layers = std::clamp(std::atoi(args.value()), 1, 50);
    } else if (arg == "--tokens") {
      o.tokens = std::clamp(std::atoi(args.value()), 1, 4096);
    } else if (arg == "--ram-mib") {
      o.ram_mib = static_cast<std::uint64_t>(std::max(1024ll, std::atoll(args.value())));
    } else if (arg == "--keep") {
      o.keep = true;
    } else {
      args.unknown();
    }
  }
  if (args.help_asked()) return std::nullopt;
  return o;
}

// The decoder layer a tensor belongs to, or -1.
int layer_of(const std::string& name) {
  constexpr std::string_view kPrefix = "model.language_model.layers.";
  if (!name.starts_with(kPrefix)) return -1;
  return std::atoi(name.c_str() + kPrefix.size());
}

void write_file(const fs::path& path, int layers) {
  const h3::SyntheticPart part = h3::text_encoder_part(h3::SyntheticShapes{}, true);
  // The embedding table holds data (1.45 GiB): the encoder reads the prompt's rows from it.
  h3::write_with_data(path, part, [&](const ferry::io::TensorSpec& t) {
    if (t.name == "model.language_model.embed_tokens.weight") return false;
    const int layer = layer_of(t.name);
    return layer < 0 || layer >= layers;  // the vision tower and the layers not run: holes
  });
}

// Seconds to read every byte range of the groups the plan streams from disk with plain
// sequential unbuffered reads of up to 64 MiB: the floor the IO thread is compared with.
double raw_read_seconds(const fs::path& file, const ferry::offload::ModelLayout& layout,
                        const ferry::offload::Plan& plan, std::uint64_t& bytes) {
  const ferry::io::DirectReader reader = ferry::io::DirectReader::open(file);
  ferry::memory::AlignedBuffer buffer(ferry::io::DirectReader::kMaxReadBytes + reader.alignment(),
                                      reader.alignment());
  bytes = 0;
  const auto start = Clock::now();
  for (std::size_t g = 0; g < layout.groups.size(); ++g) {
    if (plan.placement[g] != ferry::offload::Placement::kDisk) continue;
    for (const ferry::offload::WeightRef& w : layout.groups[g].weights) {
      for (std::uint64_t done = 0; done < w.tensor->bytes;) {
        const std::uint64_t offset = w.tensor->offset + done;
        const std::uint64_t length = std::min<std::uint64_t>(
            w.tensor->bytes - done,
            reader.max_cover_length(offset, ferry::io::DirectReader::kMaxReadBytes));
        reader.read_cover(offset, length, {buffer.data(), buffer.size()});
        done += length;
        bytes += length;
      }
    }
  }
  return ferry::bench::seconds_since(start);
}

std::size_t count(const ferry::offload::Plan& plan, ferry::offload::Placement p) {
  return static_cast<std::size_t>(std::count(plan.placement.begin(), plan.placement.end(), p));
}

int main_checked(const Options& o) {
  const bool found = fs::exists(o.file);
  const auto written = Clock::now();
  if (!found) write_file(o.file, o.layers);
  const double write_seconds = ferry::bench::seconds_since(written);
  const ferry::bench::ScratchFile scratch(o.file, o.keep || found);
  const ferry::io::TensorSet set = ferry::io::TensorSet::open(o.file);
  const h3::TextEncoderWeights all = h3::TextEncoderWeights::from(set);
  const h3::TextEncoderWeights weights = h3::TextEncoderWeights::from(set, o.layers);
  const h3::TextEncoderConfig& c = weights.config();

  ferry::offload::Preset preset = ferry::offload::find_preset(ferry::offload::builtin_presets(),
                                                              "cpu", ferry::offload::MachineInfo{});
  preset.ram_budget_bytes = o.ram_mib << 20;
  const ferry::memory::SystemMemory system = ferry::memory::sample_system_memory();
  const ferry::offload::MachineInfo machine{false, 0, 0, system.total_bytes,
                                            system.available_bytes};
  // The whole conditioner's plan under the budget (what a run of all 50 layers would do), and the
  // run's: every layer from disk.
  const ferry::offload::ModelLayout full_layout = all.model_layout(o.tokens);
  const ferry::offload::Plan full = ferry::offload::make_plan(full_layout, preset, machine);
  const ferry::offload::ModelLayout layout = weights.model_layout(o.tokens);
  const ferry::offload::Plan plan = ferry::offload::streamed_plan(layout, preset, machine);
  const double layer_bytes = static_cast<double>(layout.groups.front().bytes());
  std::printf(
      "h3_conditioner_stream: Qwen3-VL-32B language model, DiffSynth NF4 layout (hidden %lld, "
      "%lld/%lld heads of %lld, MLP %lld, %lld embedding rows), %.2f GiB file (%s %s)\n"
      "one layer: %.1f MiB in the file (%zu tensors); %d of 50 layers with data and run\n"
      "plan of all 50 layers under the cpu preset at %llu MiB: %zu resident, %zu pinned, %zu "
      "from disk; predicted RAM peak %.0f MiB\n"
      "this run: every layer from disk (%s reads), look-ahead %zu, staging %zu x %.0f MiB; "
      "predicted RAM peak %.0f MiB; %d tokens; %u hardware threads\n",
      static_cast<long long>(c.dim), static_cast<long long>(c.heads),
      static_cast<long long>(c.kv_heads), static_cast<long long>(c.head_dim),
      static_cast<long long>(c.ffn_dim), static_cast<long long>(c.vocab_rows),
      static_cast<double>(fs::file_size(o.file)) / kGiB, found ? "found at" : "written in",
      found ? o.file.string().c_str() : (std::to_string(write_seconds) + " s").c_str(),
      layer_bytes / kMiB, layout.groups.front().weights.size(), o.layers,
      static_cast<unsigned long long>(o.ram_mib), count(full, ferry::offload::Placement::kDevice),
      count(full, ferry::offload::Placement::kPinnedCache),
      count(full, ferry::offload::Placement::kDisk),
      static_cast<double>(full.predicted_ram_peak) / kMiB,
      plan.read_method == ferry::offload::ReadMethod::kDirect ? "unbuffered" : "mapped",
      plan.look_ahead, plan.staging_slots, static_cast<double>(plan.staging_slot_bytes) / kMiB,
      static_cast<double>(plan.predicted_ram_peak) / kMiB, o.tokens,
      std::thread::hardware_concurrency());

  std::uint64_t raw_bytes = 0;
  const double raw_seconds = raw_read_seconds(o.file, layout, plan, raw_bytes);
  std::printf("raw read of the streamed bytes: %.2f GiB in %.2f s (%.2f GB/s)\n",
              static_cast<double>(raw_bytes) / kGiB, raw_seconds,
              static_cast<double>(raw_bytes) / raw_seconds / 1e9);

  h3::TextEncoderInput input;
  input.ids.resize(static_cast<std::size_t>(o.tokens));
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::int32_t> id(0, kIdRows - 1);
  for (auto& v : input.ids) v = id(rng);

  ferry::cpu::CpuBackend backend;
  ferry::memory::reset_peak_resident();
  const auto before = ferry::memory::sample_process_memory();
  const auto start = Clock::now();
  const h3::TextEncodeResult result = h3::encode(backend, weights, plan, input);
  const double seconds = ferry::bench::seconds_since(start);
  const auto after = ferry::memory::sample_process_memory();

  double sum = 0;
  bool finite = true;
  const h3::TextStates& s = result.states;
  for (std::int64_t r = 0; r < s.rows; ++r) {
    for (std::int64_t col = 0; col < s.dim; col += 97) {
      const float v = s.at(r, col);
      finite = finite && std::isfinite(v);
      sum += std::abs(v);
    }
  }
  const double peak =
      static_cast<double>(std::max(after.peak_resident_bytes, before.resident_bytes));
  const double budget = static_cast<double>(o.ram_mib) * kMiB;
  const double grown = peak - static_cast<double>(before.resident_bytes);
  std::printf(
      "encode: %.1f s (%.1f s a layer); read %.2f GiB in %.2f s of IO-thread time (%.2f x the raw "
      "read), compute waited %.2f s for weights\n"
      "RSS before %.0f MiB, peak %.0f MiB against the %.0f MiB budget: %s\n"
      "peak above the baseline %.0f MiB vs the plan's predicted RAM peak %.0f MiB (%.2f x); "
      "activation arena %.1f MiB (peak %.1f)\n"
      "output %lld x %lld, %s (mean |y| %.3f on a sample)\n",
      seconds, seconds / o.layers, static_cast<double>(result.stream.bytes_read) / kGiB,
      result.stream.read_seconds, result.stream.read_seconds / raw_seconds,
      result.stream.acquire_wait_seconds, static_cast<double>(before.resident_bytes) / kMiB,
      peak / kMiB, budget / kMiB, peak <= budget ? "within" : "OVER BUDGET", grown / kMiB,
      static_cast<double>(plan.predicted_ram_peak) / kMiB,
      grown / static_cast<double>(plan.predicted_ram_peak),
      static_cast<double>(result.activation_bytes) / kMiB,
      static_cast<double>(result.activation_peak) / kMiB, static_cast<long long>(s.rows),
      static_cast<long long>(s.dim), finite ? "finite" : "NOT FINITE",
      sum / static_cast<double>(s.rows * ((s.dim + 96) / 97)));
  return peak <= budget && finite ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return ferry::bench::report_errors("h3_conditioner_stream", [&] {
    const std::optional<Options> o = parse(argc, argv);
    if (!o) return 0;
    return main_checked(*o);
  });
}
