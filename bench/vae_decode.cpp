// vae_decode: the Wan VAE decode's memory, predicted and measured.
//
// 1. Estimates (no run), real shapes from header-only checkpoints: the untiled decode's arena at
//    480×832 and 704×1280, and the laptop-8gb plan for 704×1280×121 and 480×832×81 (tile,
//    overlap, how frames leave, VRAM and RAM peaks), next to the other ways to run that tile.
// 2. A run on the CPU: Wan 2.2 with the real channel widths and random weights at a small size
//    (default 256×256, 9 frames), untiled and tiled, printing each decode's measured arena peak
//    against its estimate and the host resident set it reached. The estimates are the steady
//    state (every cache slot full, from the third latent frame on): the ratio is 1.000 from 9
//    frames on and below 1 for shorter clips.
// 3. With --backend cuda (when built with CUDA), instead of 2: the same random real-width Wan 2.2
//    decoder on the GPU at 480×832×81 and 704×1280×121 (or the one size given), each decoded as
//    the laptop-8gb plan says (its tile, mode and cache placement), printing the measured arena
//    peak against the plan's arena, and the driver-reported VRAM (cudaMemGetInfo, sampled every
//    2 ms during the decode) against the plan's predicted VRAM peak (weights + latent + arena).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
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
#include "core/io/safetensors_writer.h"
#include "core/memory/arena.h"
#include "core/memory/process_memory.h"
#include "core/models/wan/vae.h"
#include "core/models/wan/vae_plan.h"
#include "core/models/wan/vae_synth.h"
#include "core/models/wan/vae_tiling.h"
#include "core/offload/planner.h"
#include "core/tensor/convert.h"

namespace fs = std::filesystem;
using namespace ferry;
using namespace ferry::models::wan;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
double gib(std::uint64_t bytes) {
  return static_cast<double>(bytes) / kGiB;
}

struct Options {
  fs::path dir = "bench-data";
  int width = 256, height = 256, frames = 9;
  int tile_px = 0;          // 0: the laptop-8gb plan's tile, or 192 px when that plan does not tile
  bool size_given = false;  // --width, --height or --frames: CUDA decodes only that size
  bool run = true;
  bool keep = false;
  bool cuda = false;
};

VaeWeights shapes(VaeKind kind, const fs::path& dir) {
  const fs::path path =
      dir / (kind == VaeKind::kWan22 ? "vae22_shapes.safetensors" : "vae21_shapes.safetensors");
  write_header_only_safetensors(path, wan_vae_tensor_specs(kind));
  VaeWeights w = VaeWeights::shapes_only(io::TensorSet::open(path));
  fs::remove(path);
  return w;
}

offload::MachineInfo laptop() {
  const std::uint64_t gb = 1ull << 30;
  return offload::MachineInfo{true, 8 * gb, 8 * gb, 32 * gb, 24 * gb};
}

offload::Preset laptop_preset() {
  return offload::find_preset(offload::builtin_presets(), "laptop-8gb", laptop());
}

// How `p` decodes: "tiled, ..., tile 256 px (16), overlap 4, 28 tiles (caches parked in RAM)".
std::string plan_text(const models::wan::VaePlan& p) {
  char text[160];
  std::snprintf(text, sizeof text, "%s, tile %d px (%lld), overlap %lld, %lld tiles%s",
                models::wan::vae_decode_mode_name(p.mode), p.tile_px,
                static_cast<long long>(p.tiling.tile), static_cast<long long>(p.tiling.overlap),
                static_cast<long long>(p.tiles),
                p.mode == models::wan::VaeDecodeMode::kTiledStreamed
                    ? (p.caches == VaeTileCaches::kHost ? " (caches parked in RAM)"
                                                        : " (caches on the device)")
                    : "");
  return text;
}

void print_plan(const VaeWeights& w, const char* name, int width, int height, int frames) {
  const offload::Preset preset = laptop_preset();
  const models::wan::VaePlan p =
      models::wan::make_vae_plan(w, preset, laptop(), width, height, frames);
  const std::int64_t s = w.config().spatial, h = height / s, wd = width / s;
  std::printf("%s %dx%dx%d, laptop-8gb (usable VRAM %.2f GiB): %s\n", name, width, height, frames,
              gib(offload::usable_device_bytes(preset, laptop())), plan_text(p).c_str());
  std::printf(
      "    VRAM %.2f GiB (weights %.2f, latent %.3f, arena %.2f), RAM %.2f GiB (decode "
      "buffers %.2f)\n",
      gib(p.predicted_vram_peak), gib(p.weight_bytes), gib(p.latent_bytes), gib(p.arena_bytes),
      gib(p.predicted_ram_peak), gib(p.host_bytes));
  if (p.mode == models::wan::VaeDecodeMode::kUntiled) return;
  const std::int64_t t = vae_latent_frames(frames);
  const auto video = static_cast<std::uint64_t>(3 * frames * height * width) * sizeof(float);
  std::printf(
      "    at this tile: caches on device: arena %.2f GiB, RAM %.2f GiB | caches parked: "
      "arena %.2f GiB, RAM %.2f GiB | tile-major, whole video: arena %.2f GiB, RAM "
      "%.2f GiB (video %.2f)\n",
      gib(tiled_chunks_decode_arena_bytes(w, p.tiling, h, wd, VaeTileCaches::kDevice)),
      gib(tiled_chunks_decode_host_bytes(w, p.tiling, h, wd, VaeTileCaches::kDevice)),
      gib(tiled_chunks_decode_arena_bytes(w, p.tiling, h, wd, VaeTileCaches::kHost)),
      gib(tiled_chunks_decode_host_bytes(w, p.tiling, h, wd, VaeTileCaches::kHost)),
      gib(tiled_decode_arena_bytes(w, p.tiling, t, h, wd)),
      gib(tiled_decode_host_bytes(w, p.tiling, h, wd) + video), gib(video));
}

void estimates(const fs::path& dir) {
  std::printf("== estimates (shape-only runs of the real code; activations F32)\n");
  for (VaeKind kind : {VaeKind::kWan22, VaeKind::kWan21}) {
    const VaeWeights w = shapes(kind, dir);
    const char* name = kind == VaeKind::kWan22 ? "Wan 2.2" : "Wan 2.1";
    const std::int64_t s = w.config().spatial;
    std::printf("%s VAE: weights %.2f GiB (%.2f GB)\n", name, gib(w.bytes()),
                static_cast<double>(w.bytes()) / 1e9);
    for (const auto& [hh, ww] : {std::pair{480, 832}, std::pair{704, 1280}}) {
      std::printf("  untiled decode %dx%d: arena %.2f GiB (caches %.2f GiB)\n", ww, hh,
                  gib(WanVae::decode_arena_bytes(w, hh / s, ww / s)),
                  gib(WanVae::decode_cache_bytes(w, hh / s, ww / s)));
    }
    std::printf("  encode 1 frame 1280x704: arena %.2f GiB; 81 frames 832x480: %.2f GiB\n",
                gib(WanVae::encode_arena_bytes(w, 1, 704, 1280)),
                gib(WanVae::encode_arena_bytes(w, 81, 480, 832)));
    print_plan(w, name, 1280, 704, 121);
    print_plan(w, name, 832, 480, 81);
  }
}

// Random F16 weights of the real Wan 2.2 decoder widths, scaled so activations stay O(1).
fs::path write_random_decoder(const fs::path& dir) {
  std::vector<io::TensorSpec> specs;
  for (io::TensorSpec& t : wan_vae_tensor_specs(VaeKind::kWan22)) {
    if (t.name.rfind("encoder.", 0) != 0 && t.name.rfind("conv1.", 0) != 0) specs.push_back(t);
  }
  const fs::path path = dir / "vae22_random_decoder.safetensors";
  std::mt19937 rng(1);
  io::write_safetensors(
      path, specs, {}, [&](std::size_t i, std::uint64_t, std::span<std::byte> out) {
        const io::TensorSpec& t = specs[i];
        const bool gamma = t.name.find("gamma") != std::string::npos;
        const bool bias = t.name.find("bias") != std::string::npos;
        double fan_in = 1;
        for (std::size_t d = 1; d < t.shape.size(); ++d) fan_in *= static_cast<double>(t.shape[d]);
        std::normal_distribution<float> normal(0.0f, static_cast<float>(1.0 / std::sqrt(fan_in)));
        std::vector<float> f(out.size() / 2);
        for (float& v : f) v = gamma ? 1.0f : bias ? 0.0f : normal(rng);
        convert_from_f32(f.data(), DType::kF16, out.data(), f.size());
      });
  return path;
}

std::uint64_t rss_peak() {
  return memory::sample_process_memory().peak_resident_bytes;
}

struct Size {
  int width, height, frames;
};

// A latent [48, t, h, w] of standard normal values (the same seed at every size) on `backend`,
// with the host values it was uploaded from.
struct Latent {
  std::vector<float> host;
  std::unique_ptr<DeviceBuffer> memory;
  Tensor tensor;
};

Latent random_latent(Backend& backend, std::int64_t t, std::int64_t h, std::int64_t w) {
  Latent latent;
  latent.host.resize(static_cast<std::size_t>(48 * t * h * w));
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : latent.host) v = normal(rng);
  latent.memory = backend.allocate(latent.host.size() * sizeof(float));
  latent.tensor.data = latent.memory->data();
  latent.tensor.shape = Shape{48, t, h, w};
  latent.tensor.device = backend.device();
  backend.upload(latent.tensor, latent.host.data());
  return latent;
}

// Where a decode's pixels land (untiled: each chunk over the last; tile-major: the whole video),
// held by the caller, who decides whether freeing them is timed with the decode.
struct Pixels {
  std::vector<float> chunk, video;
};

// One decode of `latent` of a `size` video as `mode` runs it (tiled: at `tiling`; tiled with
// frames streamed: caches per `caches`); `frames_left` runs each time frames leave the decode.
void decode(WanVae& vae, Backend& backend, const Tensor& latent, memory::Arena& arena,
            models::wan::VaeDecodeMode mode, const VaeTiling& tiling, VaeTileCaches caches,
            const Size& size, Pixels& out, const std::function<void()>& frames_left) {
  if (mode == models::wan::VaeDecodeMode::kUntiled) {
    vae.decode_chunks(latent, arena, [&](std::int64_t, const Tensor& px) {
      out.chunk.resize(static_cast<std::size_t>(px.numel()));
      backend.download(px, out.chunk.data());
      frames_left();
    });
  } else if (mode == models::wan::VaeDecodeMode::kTiledStreamed) {
    decode_tiled_chunks(vae, latent, arena, tiling, caches,
                        [&](std::int64_t, const Shape&, std::span<const float>) { frames_left(); });
  } else {
    out.video.resize(static_cast<std::size_t>(3) * size.frames * size.height * size.width);
    decode_tiled(vae, backend, latent, arena, tiling, out.video);
  }
}

void run(const Options& o) {
  std::printf("\n== run: Wan 2.2 decoder, real widths, random weights, %dx%d, %d frames, CPU\n",
              o.width, o.height, o.frames);
  const fs::path path = write_random_decoder(o.dir);
  cpu::CpuBackend backend;
  const VaeWeights weights = VaeWeights::load(backend, io::TensorSet::open(path));
  if (!o.keep) fs::remove(path);
  WanVae vae(backend, weights);
  const std::int64_t s = 16, h = o.height / s, w = o.width / s, t = vae_latent_frames(o.frames);
  const Latent latent = random_latent(backend, t, h, w);

  int tile_px = o.tile_px;
  if (tile_px == 0) {
    const models::wan::VaePlan p =
        models::wan::make_vae_plan(weights, laptop_preset(), laptop(), o.width, o.height, o.frames);
    std::printf("laptop-8gb plans this size as: %s, tile %d px\n",
                models::wan::vae_decode_mode_name(p.mode), p.tile_px);
    tile_px = p.mode == models::wan::VaeDecodeMode::kUntiled ? 192 : p.tile_px;
  }
  const std::int64_t tile = tile_px / s;
  const VaeTiling tiling{tile,
                         std::min<std::int64_t>(tile - 1, std::max<std::int64_t>(2, tile / 4))};
  std::printf("weights %.2f GiB; host RSS after load %.2f GiB\n", gib(weights.bytes()),
              gib(memory::sample_process_memory().resident_bytes));

  struct Case {
    const char* name;
    std::size_t estimate;
    models::wan::VaeDecodeMode mode;  // tiled with frames streamed: caches parked
  };
  const Case cases[] = {
      {"untiled, frames streamed", WanVae::decode_arena_bytes(weights, h, w),
       models::wan::VaeDecodeMode::kUntiled},
      {"tiled, frames streamed, caches parked",
       tiled_chunks_decode_arena_bytes(weights, tiling, h, w, VaeTileCaches::kHost),
       models::wan::VaeDecodeMode::kTiledStreamed},
      {"tiled, whole video (tile-major)", tiled_decode_arena_bytes(weights, tiling, t, h, w),
       models::wan::VaeDecodeMode::kTiledWhole},
  };
  std::printf("tile %lld positions (%d px), overlap %lld\n", static_cast<long long>(tiling.tile),
              tile_px, static_cast<long long>(tiling.overlap));
  for (const Case& c : cases) {
    auto buffer = backend.allocate(c.estimate);
    memory::Arena arena(buffer->data(), c.estimate, backend.device());
    memory::reset_peak_resident();
    const std::uint64_t before = memory::sample_process_memory().resident_bytes;
    const auto start = bench::Clock::now();
    Pixels pixels;
    decode(vae, backend, latent.tensor, arena, c.mode, tiling, VaeTileCaches::kHost,
           {o.width, o.height, o.frames}, pixels, [] {});
    const double seconds = bench::seconds_since(start);
    std::printf(
        "%-40s arena peak %.3f GiB, estimate %.3f GiB, measured/estimate %.3f; host RSS "
        "peak %.2f GiB (+%.3f GiB over the start); %.1f s\n",
        c.name, gib(arena.peak()), gib(c.estimate),
        static_cast<double>(arena.peak()) / static_cast<double>(c.estimate), gib(rss_peak()),
        gib(rss_peak() - before), seconds);
  }
}

// The largest driver-reported VRAM in use (cudaMemGetInfo) while it lives, sampled every 2 ms on
// a thread of its own, so that what the CUDA runtime takes behind the backend's back (modules
// loaded lazily on a kernel's first launch) counts too.
class VramPeak {
 public:
  explicit VramPeak(const DeviceProperties& device)
      : device_(device), thread_([this] {
          while (!stop_.load()) {
            sample();
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
          }
        }) {}
  ~VramPeak() {
    stop_.store(true);
    thread_.join();
  }
  VramPeak(const VramPeak&) = delete;
  VramPeak& operator=(const VramPeak&) = delete;

  void sample() {
    try {
      const std::uint64_t used = sample_device_memory(device_).used_bytes();
      std::uint64_t peak = peak_.load();
      while (used > peak && !peak_.compare_exchange_weak(peak, used)) {
      }
    } catch (const Error&) {
      // A failed query leaves the peak as it was; the decode's own errors are reported by it.
    }
  }
  std::uint64_t peak() const { return peak_.load(); }

 private:
  const DeviceProperties& device_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> peak_{0};
  std::thread thread_;
};

void run_cuda(const Options& o) {
  std::string why;
  const auto device = find_device(Device::kCuda, &why);
  if (!device) {
    std::printf("\n== run on CUDA: no CUDA device (%s); nothing measured\n", why.c_str());
    return;
  }
  std::vector<Size> sizes{{832, 480, 81}, {1280, 704, 121}};
  if (o.size_given) sizes = {{o.width, o.height, o.frames}};
  std::printf(
      "\n== run on CUDA (%s, %.1f GiB): Wan 2.2 decoder, real widths, random weights, the "
      "laptop-8gb plan at each size\n",
      device->name.c_str(), gib(device->memory.total_bytes));
  // In use before Ferry allocates anything: the CUDA context (and any other process).
  const std::uint64_t context = sample_device_memory(*device).used_bytes();
  const fs::path path = write_random_decoder(o.dir);
  const std::unique_ptr<Backend> backend_owner = create_backend(*device);
  Backend& backend = *backend_owner;
  const std::uint64_t with_backend = sample_device_memory(*device).used_bytes();
  const VaeWeights weights = VaeWeights::load(backend, io::TensorSet::open(path));
  if (!o.keep) fs::remove(path);
  WanVae vae(backend, weights);
  backend.synchronize();
  const std::uint64_t with_weights = sample_device_memory(*device).used_bytes();
  std::printf(
      "driver-reported VRAM in use: %.3f GiB with the context, %.3f GiB with the backend's "
      "workspaces, %.3f GiB with the weights (%.3f GiB of tensors)\n",
      gib(context), gib(with_backend), gib(with_weights), gib(weights.bytes()));

  const offload::Preset preset = laptop_preset();
  for (const Size& size : sizes) {
    const models::wan::VaePlan p =
        models::wan::make_vae_plan(weights, preset, laptop(), size.width, size.height, size.frames);
    const std::int64_t s = 16, h = size.height / s, w = size.width / s;
    const std::int64_t t = vae_latent_frames(size.frames);
    std::printf("\n%dx%dx%d: %s\n", size.width, size.height, size.frames, plan_text(p).c_str());
    const Latent latent = random_latent(backend, t, h, w);
    auto arena_buffer = backend.allocate(p.arena_bytes);
    memory::Arena arena(arena_buffer->data(), p.arena_bytes, backend.device());

    memory::reset_peak_resident();
    const std::uint64_t rss_before = memory::sample_process_memory().resident_bytes;
    std::uint64_t vram_peak = 0;
    const auto start = bench::Clock::now();
    {
      VramPeak sampler(*device);
      Pixels pixels;
      decode(vae, backend, latent.tensor, arena, p.mode, p.tiling, p.caches, size, pixels,
             [&] { sampler.sample(); });
      backend.synchronize();
      sampler.sample();
      vram_peak = sampler.peak();
    }
    const double seconds = bench::seconds_since(start);
    // What the decode added to the VRAM in use before it (the backend's): weights, latent, arena
    // and anything the runtime took on the side; the plan predicts the first three.
    const std::uint64_t decode_vram = vram_peak > with_backend ? vram_peak - with_backend : 0;
    std::printf(
        "  arena peak %.3f GiB, plan's arena %.3f GiB, measured/estimate %.3f\n"
        "  driver-reported VRAM peak %.3f GiB in all; over the context and workspaces %.3f GiB, "
        "plan's predicted VRAM peak %.3f GiB (weights + latent + arena), measured/predicted "
        "%.3f\n"
        "  host RSS peak %.2f GiB (+%.3f GiB over the start), plan's RAM peak %.2f GiB; "
        "decode %.1f s\n",
        gib(arena.peak()), gib(p.arena_bytes),
        static_cast<double>(arena.peak()) / static_cast<double>(p.arena_bytes), gib(vram_peak),
        gib(decode_vram), gib(p.predicted_vram_peak),
        static_cast<double>(decode_vram) / static_cast<double>(p.predicted_vram_peak),
        gib(rss_peak()), gib(rss_peak() - rss_before), gib(p.predicted_ram_peak), seconds);
    std::printf("result %dx%dx%d: arena %.3f, VRAM %.3f of the plan (%.2f of %.2f GiB), %.1f s\n",
                size.width, size.height, size.frames,
                static_cast<double>(arena.peak()) / static_cast<double>(p.arena_bytes),
                static_cast<double>(decode_vram) / static_cast<double>(p.predicted_vram_peak),
                gib(decode_vram), gib(p.predicted_vram_peak), seconds);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line as it is measured, even into a file
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--dir") {
      o.dir = next();
    } else if (a == "--width") {
      o.width = std::atoi(next());
      o.size_given = true;
    } else if (a == "--height") {
      o.height = std::atoi(next());
      o.size_given = true;
    } else if (a == "--frames") {
      o.frames = std::atoi(next());
      o.size_given = true;
    } else if (a == "--backend") {
      const std::string_view b = next();
      if (b != "cpu" && b != "cuda") {
        std::fprintf(stderr, "--backend cpu|cuda\n");
        return 2;
      }
      o.cuda = b == "cuda";
    } else if (a == "--tile-px") {
      o.tile_px = std::atoi(next());
    } else if (a == "--estimates-only") {
      o.run = false;
    } else if (a == "--keep") {
      o.keep = true;
    } else {
      std::printf(
          "usage: vae_decode [--backend cpu|cuda] [--dir DIR] [--width W --height H --frames F]\n"
          "                  [--tile-px P] [--estimates-only] [--keep]\n"
          "  cpu (default): one decode at W x H x F (256x256x9), tile P px (the plan's)\n"
          "  cuda: the laptop-8gb plan at 832x480x81 and 1280x704x121 (or W x H x F only)\n");
      return a == "--help" ? 0 : 2;
    }
  }
  try {
    fs::create_directories(o.dir);
    estimates(o.dir);
    if (o.run && o.cuda) {
      if (!has_device_provider(Device::kCuda)) {
        std::fprintf(stderr, "vae_decode: --backend cuda: this build has no CUDA\n");
        return 1;
      }
      run_cuda(o);
    } else if (o.run) {
      run(o);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "vae_decode: %s\n", e.what());
    return 1;
  }
  return 0;
}
