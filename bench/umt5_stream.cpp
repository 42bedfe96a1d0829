// umt5_stream: the full-size umT5-XXL text encoder (24 blocks, d 4096, d_ff 10240, 256 384
// embedding rows: 5.7 B parameters, 11.4 GB in F16 — the umt5_xxl_fp16 file's layout and
// shapes, random weights) encoding one 512-token prompt on the CPU backend under the cpu preset
// with a 4 GB RAM budget, every block streamed from disk (unbuffered reads). It prints the peak
// resident set against the budget, the seconds, and the streamer's read time as a ratio to the
// raw read time of the same bytes (DirectReader, sequential, measured in the same run).
//
// The checkpoint is written once (to --file; kept with --keep, and reused when it is there:
// writing 11.4 GB takes a minute or two). The embedding table is never loaded, only the rows
// the prompt needs.
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
#include "core/io/safetensors_writer.h"
#include "core/memory/aligned_buffer.h"
#include "core/memory/process_memory.h"
#include "core/models/umt5/encoder.h"
#include "core/models/umt5/encoder_weights.h"
#include "core/offload/planner.h"
#include "core/offload/preset.h"
#include "core/tensor/convert.h"

namespace {

namespace fs = std::filesystem;
namespace umt5 = ferry::models::umt5;
using ferry::Error;
using ferry::ErrorCode;
using ferry::bench::Clock;

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * kMiB;

struct Options {
  fs::path file = "umt5_xxl_synthetic.safetensors";
  int tokens = 512;
  std::uint64_t ram_mib = 4096;
  bool keep = false;
};

void print_usage() {
  std::printf(
      "usage: umt5_stream [--file PATH] [--tokens N] [--ram-mib M] [--keep]\n"
      "  --file PATH   the synthetic umT5-XXL checkpoint (11.4 GB; written when absent;\n"
      "                default ./umt5_xxl_synthetic.safetensors)\n"
      "  --tokens N    prompt length, EOS included (default 512, the most)\n"
      "  --ram-mib M   the preset's RAM budget (default 4096)\n"
      "  --keep        keep the checkpoint afterwards (one found in place is always kept)\n");
}

std::optional<Options> parse(int argc, char** argv) {
  Options o;
  ferry::bench::Args args(argc, argv, print_usage);
  while (args.next()) {
    const std::string_view arg = args.option();
    if (arg == "--file") {
      o.file = args.value();
    } else if (arg == "--tokens") {
      o.tokens = std::clamp(std::atoi(args.value()), 1, 512);
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

// Random F16 weights, uniform with variance 1/fan-in, so that the activations stay finite
// through 24 blocks; the RMSNorms' gains near 1.
void write_checkpoint(const fs::path& path) {
  ferry::bench::write_random_checkpoint(
      path,
      umt5::encoder_tensor_specs(umt5::kUmt5Xxl, umt5::KeyLayout::kHuggingFace, ferry::DType::kF16),
      [](const ferry::io::TensorSpec& spec) {
        if (spec.shape.size() == 1) return ferry::bench::RandomRange{0.1f, 1.0f};
        if (spec.name.find("relative_attention_bias") != std::string::npos) {
          return ferry::bench::RandomRange{0.5f, 0.0f};
        }
        if (spec.name == "shared.weight") return ferry::bench::RandomRange{1.0f, 0.0f};
        return ferry::bench::RandomRange{std::sqrt(3.0f / static_cast<float>(spec.shape.back())),
                                         0.0f};
      });
}

// Seconds to read every byte range of the groups the plan streams from disk with plain
// sequential unbuffered reads of up to 64 MiB: the floor the streamer's IO thread is compared
// with.
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

int main_checked(const Options& o) {
  const bool found = fs::exists(o.file);
  const auto written = Clock::now();
  if (!found) write_checkpoint(o.file);
  const double write_seconds = ferry::bench::seconds_since(written);
  const ferry::bench::ScratchFile scratch(o.file, o.keep || found);
  const ferry::io::TensorSet set = ferry::io::TensorSet::open(o.file);
  const umt5::EncoderWeights weights = umt5::EncoderWeights::from(set);
  const ferry::offload::ModelLayout layout = weights.model_layout();

  ferry::offload::Preset preset = ferry::offload::find_preset(ferry::offload::builtin_presets(),
                                                              "cpu", ferry::offload::MachineInfo{});
  preset.ram_budget_bytes = o.ram_mib << 20;
  const ferry::memory::SystemMemory system = ferry::memory::sample_system_memory();
  const ferry::offload::MachineInfo machine{false, 0, 0, system.total_bytes,
                                            system.available_bytes};
  const ferry::offload::Plan plan = ferry::offload::make_plan(layout, preset, machine);
  std::size_t disk_groups = 0;
  for (const auto placement : plan.placement) {
    disk_groups += placement == ferry::offload::Placement::kDisk;
  }
  std::printf(
      "umt5_stream: umT5-XXL shapes (%lld blocks, d %lld, d_ff %lld, %lld embedding rows), F16 "
      "random weights, %.2f GiB (%s %s)\n"
      "cpu preset with a %llu MiB RAM budget: %zu of %zu blocks from disk (unbuffered), "
      "look-ahead %zu; one prompt of %d tokens; %u hardware threads\n",
      static_cast<long long>(umt5::kUmt5Xxl.layers), static_cast<long long>(umt5::kUmt5Xxl.dim),
      static_cast<long long>(umt5::kUmt5Xxl.ffn_dim),
      static_cast<long long>(umt5::kUmt5Xxl.vocab_rows),
      static_cast<double>(fs::file_size(o.file)) / kGiB, found ? "found at" : "written in",
      found ? o.file.string().c_str() : (std::to_string(write_seconds) + " s").c_str(),
      static_cast<unsigned long long>(o.ram_mib), disk_groups,
      static_cast<std::size_t>(umt5::kUmt5Xxl.layers), plan.look_ahead, o.tokens,
      std::thread::hardware_concurrency());

  std::uint64_t raw_bytes = 0;
  const double raw_seconds = raw_read_seconds(o.file, layout, plan, raw_bytes);
  std::printf("raw read of the streamed bytes: %.2f GiB in %.2f s (%.2f GB/s)\n",
              static_cast<double>(raw_bytes) / kGiB, raw_seconds,
              static_cast<double>(raw_bytes) / raw_seconds / 1e9);

  // Token ids spread over the table, EOS (1) last, as the tokenizer gives them.
  std::vector<std::int32_t> ids(static_cast<std::size_t>(o.tokens));
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::int32_t> id(
      2, static_cast<std::int32_t>(umt5::kUmt5Xxl.vocab_rows - 1));
  for (auto& v : ids) v = id(rng);
  ids.back() = 1;
  const std::vector<std::vector<std::int32_t>> prompts = {ids};

  ferry::cpu::CpuBackend backend;
  ferry::memory::reset_peak_resident();
  const auto before = ferry::memory::sample_process_memory();
  const auto start = Clock::now();
  const umt5::EncodeResult result = umt5::encode(backend, weights, plan, prompts);
  const double seconds = ferry::bench::seconds_since(start);
  const auto after = ferry::memory::sample_process_memory();

  double sum = 0;
  bool finite = true;
  const umt5::TextEmbedding& e = result.embeddings.front();
  for (std::int64_t r = 0; r < e.rows; ++r) {
    for (std::int64_t c = 0; c < e.dim; c += 97) {
      const float v = e.at(r, c);
      finite = finite && std::isfinite(v);
      sum += std::abs(v);
    }
  }
  const double peak =
      static_cast<double>(std::max(after.peak_resident_bytes, before.resident_bytes));
  const double budget = static_cast<double>(o.ram_mib) * kMiB;
  std::printf(
      "encode: %.1f s; read %.2f GiB in %.2f s of IO-thread time (%.2f x the raw read), compute "
      "waited %.2f s for weights\n"
      "peak RSS %.0f MiB against the %.0f MiB budget: %s; activation arena %.1f MiB (peak %.1f)\n"
      "output %lld x %lld, %s (mean |y| %.3f on a sample)\n",
      seconds, static_cast<double>(result.stream.bytes_read) / kGiB, result.stream.read_seconds,
      result.stream.read_seconds / raw_seconds, result.stream.acquire_wait_seconds, peak / kMiB,
      budget / kMiB, peak <= budget ? "within" : "OVER BUDGET",
      static_cast<double>(result.activation_bytes) / kMiB,
      static_cast<double>(result.activation_peak) / kMiB, static_cast<long long>(e.rows),
      static_cast<long long>(e.dim), finite ? "finite" : "NOT FINITE",
      sum / static_cast<double>(e.rows * ((e.dim + 96) / 97)));
  return peak <= budget && finite ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return ferry::bench::report_errors("umt5_stream", [&] {
    const std::optional<Options> o = parse(argc, argv);
    if (!o) return 0;
    return main_checked(*o);
  });
}
