// taehv_preview: what a live TAEHV preview costs next to a denoising step of Wan 2.2 TI2V-5B at
// its real shapes (1280 × 704, 121 frames: a 48 × 31 × 44 × 80 latent), measured in one run:
//   preview  TaehvPreview::decode (core/models/taehv/taehv_preview.h, the code the run calls):
//            one latent frame of x0 decoded by a taew2_2-shaped decoder (real widths 256, 128,
//            64, 64; random fp16 weights) at half the video's size, host latent in, image out
//   step     the DiT step's FLOPs at that shape (a CFG pair of passes through 30 blocks:
//            projections, attention, FFN; norms and elementwise ops left out) divided by the rate
//            this backend reaches on the DiT's main op, a bf16 Linear of 3072 × 3072 over 1024
//            tokens, measured here. Attention and the rest run slower than that GEMM, so this is
//            a lower bound on the step, and the printed fraction an upper bound on the preview's
//            share (a real CPU step at this shape takes hours: not measured).
// The fraction is what the run's PreviewBudget compares with 5%.
//
//   taehv_preview [--backend cpu|cuda] [--runs N] [--file PATH] [--keep]
#include "core/models/taehv/taehv_preview.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/device.h"
#include "core/error.h"
#include "core/io/tensor_set.h"
#include "core/models/wan/dit_layout.h"

namespace fs = std::filesystem;
namespace taehv = ferry::models::taehv;
using ferry::DType;
using ferry::Error;
using ferry::ErrorCode;
using ferry::bench::Clock;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// TI2V-5B at 1280 × 704 × 121: latent [48, 31, 44, 80], 31 · 22 · 40 DiT tokens.
constexpr std::int64_t kChannels = 48, kFrames = 31, kHeight = 44, kWidth = 80;

struct Options {
  bool cuda = false;
  int runs = 0;  // timed previews after one warm-up; 0: CPU 2, CUDA 20
  fs::path file = fs::temp_directory_path() / "ferry_bench_taew2_2.safetensors";
  bool keep = false;
};

void print_usage() {
  std::printf("usage: taehv_preview [--backend cpu|cuda] [--runs N] [--file PATH] [--keep]\n");
}

// The published taew2_2 decoder's tensors (taehv_weights.h: z 48, patch 2, widths 256, 128, 64,
// 64; decoder.7 with the 512 rows the published files keep), fp16.
std::vector<ferry::io::TensorSpec> taew2_2_specs() {
  std::vector<ferry::io::TensorSpec> s;
  const auto conv = [&](int index, std::uint64_t co, std::uint64_t ci, bool bias) {
    const std::string p = "decoder." + std::to_string(index);
    s.push_back({p + ".weight", DType::kF16, {co, ci, 3, 3}});
    if (bias) s.push_back({p + ".bias", DType::kF16, {co}});
  };
  const std::uint64_t n[4] = {256, 128, 64, 64};
  conv(1, n[0], 48, true);
  for (int stage = 0; stage < 3; ++stage) {
    for (int b = 0; b < 3; ++b) {
      const std::string p =
          "decoder." + std::to_string(taehv::kMemBlocks[stage * 3 + b]) + ".conv.";
      for (int which : {0, 2, 4}) {
        const std::uint64_t ci = which == 0 ? 2 * n[stage] : n[stage];
        s.push_back({p + std::to_string(which) + ".weight", DType::kF16, {n[stage], ci, 3, 3}});
        s.push_back({p + std::to_string(which) + ".bias", DType::kF16, {n[stage]}});
      }
    }
    s.push_back({"decoder." + std::to_string(taehv::kTGrows[stage]) + ".conv.weight",
                 DType::kF16,
                 {2 * n[stage], n[stage], 1, 1}});
    conv(stage == 0 ? 8 : stage == 1 ? 14 : 20, n[stage + 1], n[stage], false);
  }
  conv(22, 12, n[3], true);
  return s;
}

// FLOPs of one denoising step (two passes) of `c` over `tokens` tokens.
double dit_step_flops(const ferry::models::wan::DitConfig& c, double tokens) {
  const double d = static_cast<double>(c.dim), f = static_cast<double>(c.ffn_dim);
  const double text = static_cast<double>(ferry::models::wan::kDitTextLen);
  const double block = 2 * tokens * 4 * d * d         // self-attention q, k, v, o
                       + 2 * 2 * tokens * tokens * d  // q·kᵀ and p·v
                       + 2 * tokens * 2 * d * d       // cross-attention q, o
                       + 2 * text * 2 * d * d         // cross-attention k, v (the text)
                       + 2 * 2 * tokens * text * d    // cross-attention scores and values
                       + 2 * tokens * 2 * d * f;      // FFN
  return 2 * static_cast<double>(c.layers) * block;
}

struct Owned {
  std::unique_ptr<ferry::DeviceBuffer> memory;
  ferry::Tensor tensor;
};
Owned owned(ferry::Backend& b, DType dtype, const ferry::Shape& shape) {
  Owned o;
  o.memory = b.allocate(static_cast<std::size_t>(shape.numel()) * ferry::dtype_size(dtype));
  o.tensor = ferry::Tensor{o.memory->data(), dtype, shape, b.device()};
  std::vector<std::byte> zeros(o.tensor.bytes());
  b.upload(o.tensor, zeros.data());
  b.synchronize();
  return o;
}

// FLOP/s of a bf16 Linear [1024 × 3072] · [3072 × 3072]ᵀ on `b` (its fastest of `runs`).
double linear_rate(ferry::Backend& b, int runs) {
  const std::int64_t m = 1024, k = 3072, n = 3072;
  const Owned x = owned(b, DType::kBF16, ferry::Shape{m, k});
  const Owned w = owned(b, DType::kBF16, ferry::Shape{n, k});
  const Owned y = owned(b, DType::kBF16, ferry::Shape{m, n});
  double best = 1e30;
  for (int i = 0; i <= runs; ++i) {
    const auto start = Clock::now();
    b.linear(x.tensor, w.tensor, nullptr, y.tensor);
    b.synchronize();
    if (i > 0) best = std::min(best, ferry::bench::seconds_since(start));
  }
  return 2.0 * static_cast<double>(m * k * n) / best;
}

int run(const Options& o) {
  std::unique_ptr<ferry::Backend> backend;
  if (o.cuda) {
    if (!ferry::has_device_provider(ferry::Device::kCuda)) {
      throw Error(ErrorCode::kUnsupported, "--backend cuda: this build has no CUDA");
    }
    std::string why;
    const auto device = ferry::find_device(ferry::Device::kCuda, &why);
    if (!device) {
      std::printf("taehv_preview: no CUDA device (%s); nothing measured\n", why.c_str());
      return 0;
    }
    backend = ferry::create_backend(*device);
  } else {
    backend = std::make_unique<ferry::cpu::CpuBackend>();
  }
  const int runs = o.runs > 0 ? o.runs : o.cuda ? 20 : 2;

  ferry::bench::create_parent_directories(o.file);
  ferry::bench::write_random_checkpoint(
      o.file, taew2_2_specs(), [](const ferry::io::TensorSpec& s) {
        std::uint64_t fan_in = 1;
        for (std::size_t d = 1; d < s.shape.size(); ++d) fan_in *= s.shape[d];
        if (s.name.ends_with(".bias")) return ferry::bench::RandomRange{0.05f, 0.0f};
        return ferry::bench::RandomRange{std::sqrt(3.0f / static_cast<float>(fan_in)), 0.0f};
      });
  const ferry::bench::ScratchFile scratch(o.file, o.keep);
  const ferry::io::TensorSet set = ferry::io::TensorSet::open(o.file);

  std::vector<float> latent(static_cast<std::size_t>(kChannels * kFrames * kHeight * kWidth));
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (float& v : latent) v = normal(rng);

  taehv::TaehvPreview preview(*backend, set, kChannels, kFrames, kHeight, kWidth);
  const double device_mib =
      static_cast<double>(taehv::TaehvPreview::device_bytes(set, kHeight, kWidth)) / kMiB;
  std::vector<double> times;
  ferry::media::RgbImage image;
  for (int i = 0; i <= runs; ++i) {
    const auto start = Clock::now();
    image = preview.decode(latent);
    if (i > 0) times.push_back(ferry::bench::seconds_since(start));
  }
  const double preview_s = ferry::bench::median(times);

  const double rate = linear_rate(*backend, o.cuda ? 20 : 3);
  const double tokens = static_cast<double>(kFrames * (kHeight / 2) * (kWidth / 2));
  const double flops = dit_step_flops(ferry::models::wan::kTI2V_5B, tokens);
  const double step_s = flops / rate;

  std::printf("taehv_preview on %s: latent [%lld, %lld, %lld, %lld] (TI2V-5B 1280x704x121)\n",
              backend->name().c_str(), static_cast<long long>(kChannels),
              static_cast<long long>(kFrames), static_cast<long long>(kHeight),
              static_cast<long long>(kWidth));
  std::printf(
      "  preview: one latent frame -> %dx%d image, median of %d: %.3f s "
      "(planner's count: %.1f MiB of device memory)\n",
      image.width, image.height, runs, preview_s, device_mib);
  std::printf(
      "  DiT step: %.3g FLOPs (2 passes, %.0f tokens) at the bf16 Linear rate %.3g FLOP/s "
      "measured here: >= %.1f s\n",
      flops, tokens, rate, step_s);
  std::printf("  preview / step <= %.4f (%.2f%%; the budget allows 5%%: %s)\n", preview_s / step_s,
              100.0 * preview_s / step_s,
              preview_s / step_s <= 0.05 ? "a preview every step" : "previews spaced out");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ferry::bench::report_errors("taehv_preview", [&] {
    Options o;
    ferry::bench::Args args(argc, argv, print_usage);
    while (args.next()) {
      if (args.option() == "--backend") {
        const std::string v = args.value();
        if (v != "cpu" && v != "cuda") throw Error(ErrorCode::kBadArgument, "--backend cpu|cuda");
        o.cuda = v == "cuda";
      } else if (args.option() == "--runs") {
        o.runs = std::stoi(args.value());
      } else if (args.option() == "--file") {
        o.file = args.value();
      } else if (args.option() == "--keep") {
        o.keep = true;
      } else {
        args.unknown();
      }
    }
    if (args.help_asked()) return 0;
    return run(o);
  });
}
