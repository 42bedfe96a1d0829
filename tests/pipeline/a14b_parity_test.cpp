// Wan 2.2 A14B parity (issue 17, "Must show 1"): Ferry's whole generation path (the session API on
// the CPU backend) against the official A14B loops (text2video.py / image2video.py @ 42bf4cf, and
// diffusers' last_image for the end frame) run by tools/reference/make_a14b_reference.py on tiny
// random two-expert models (tests/data/wan/a14b/): the demo's umT5, 4 UniPC steps (shift 5), the
// high-noise expert for t = 999, 937 and the low-noise one for 833, 624, each with its own guide
// scale, the Wan 2.1 VAE. Both start from the reference's noise; the final latent and the decoded
// pixels are compared, and for I2V the conditioning pieces on their own (the bicubic resize, the
// mask, the conditioning video's encode).
//
// Needs FFmpeg (the start and end images are read from PNG files); compiles to nothing without it.
#if defined(FERRY_HAVE_FFMPEG)

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/io/tensor_file.h"
#include "core/io/tensor_set.h"
#include "core/media/image.h"
#include "core/memory/arena.h"
#include "core/models/wan/demo_model.h"
#include "core/models/wan/i2v.h"
#include "core/models/wan/request_rules.h"
#include "core/models/wan/vae.h"
#include "core/models/wan/vae_weights.h"
#include "core/offload/planner.h"
#include "core/pipeline/session.h"
#include "tests/test_support.h"

namespace ferry::pipeline {
namespace {

namespace fs = std::filesystem;
namespace wan = models::wan;

// ---- Bounds ----
//
// The floor (the reference's `floor`, make_a14b_reference.py): how far the official loop's final
// latent moves (max, rms) when (a) its initial noise is perturbed by ±1e-6 (worst of 4), and (b)
// its umT5 runs in f32 rather than bf16 (the size of Ferry's text drift, see
// pipeline_parity_test.cpp):
//   t2v  (a) 0.018 / 0.0045   (b) 0.022 / 0.0054
//   i2v  (a) 0.027 / 0.0069   (b) 0.036 / 0.0078
//   flf  (a) 0.030 / 0.0069   (b) 0.031 / 0.0079
// against latents of max 4.6–5.7. The bounds are twice the larger floor of the three cases (one
// bound for all: the cases share everything but the conditioning). What they catch (the
// reference's own "catches", final latent max / rms): the two guide scales swapped 0.54–0.80 /
// 0.12–0.18, the experts swapped 5.8–7.2 / 1.5–1.7, the switch one step late 2.1–3.6 / 0.66–0.83,
// y's channel order reversed 2.4–2.6 / 0.75, the mask zeroed 1.3–1.6 / 0.37–0.43, the end frame
// dropped 0.91 / 0.20 — each above the max bound by 7× or more, and above the RMS bound by 7×.
constexpr double kLatentMaxBound = 0.072;
constexpr double kLatentRmsBound = 0.016;
// The pixels: the Wan 2.1 VAE decode of latents that differ as above; the reference's pixel floors
// are max 0.048–0.066, RMS 0.0031–0.0048: twice the largest of each.
constexpr double kPixelMaxBound = 0.13;
constexpr double kPixelRmsBound = 0.01;
// The bicubic resize in f32 against torch's F.interpolate: the same arithmetic, an ulp or two of
// summation order apart (values up to 1.1).
constexpr double kResizeMaxBound = 1e-5;
// The conditioning video's latent: the Wan 2.1 VAE encode in f32 on both sides, of the same
// pixels (the reference's resized images), as the TI2V test's z0 (kZ0MaxBound there).
constexpr double kConditionMaxBound = 1e-4;

constexpr offload::MachineInfo kMachine{false, 0, 0, 16ull << 30, 12ull << 30};
constexpr int kCanvas = 64, kFrames = 5, kSteps = 4;

struct Case {
  std::string name;     // t2v, i2v, flf
  std::string experts;  // the folder of the two experts
  float guide_high, guide_low;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

const io::TensorFile& reference(const std::string& name) {
  static std::map<std::string, io::TensorFile> files;
  auto it = files.find(name);
  if (it == files.end()) {
    it = files
             .emplace(name, io::TensorFile::open(
                                test::data_path("wan/a14b/" + name + "_reference.safetensors")))
             .first;
  }
  return it->second;
}

template <typename T>
std::vector<T> read(const std::string& file, const std::string& tensor) {
  const io::TensorInfo& info = reference(file).at(tensor);
  std::vector<T> out(info.element_count());
  EXPECT_EQ(info.bytes, out.size() * sizeof(T)) << tensor;
  reference(file).map(info).copy_to(0, std::as_writable_bytes(std::span(out)));
  return out;
}

std::string text(const std::string& file, const std::string& tensor) {
  const std::vector<std::uint8_t> b = read<std::uint8_t>(file, tensor);
  return std::string(b.begin(), b.end());
}

// A stored U8 [H, W, 3] image.
media::RgbImage image(const std::string& file, const std::string& tensor) {
  const io::TensorInfo& info = reference(file).at(tensor);
  return media::RgbImage{static_cast<int>(info.shape[1]), static_cast<int>(info.shape[0]),
                         read<std::uint8_t>(file, tensor)};
}

const fs::path& demo_text_encoder() {
  static const test::ScratchDir dir;
  static const fs::path file =
      wan::write_demo_model(dir / "demo") / std::string(wan::DemoModel::kTextEncoderFile);
  return file;
}

using test::Difference;
using test::difference;

struct Output {
  std::vector<float> latent;
  std::vector<float> pixels;  // [3, F, H, W], clamped to [-1, 1]
  GenerationResult result;
  std::vector<std::string> phases;  // each step's
};

Output generate(const Case& c, const fs::path& dir) {
  const bool images = c.name != "t2v";
  GenerationRequest r;
  r.model = {test::data_path("wan/a14b/" + c.experts), demo_text_encoder(),
             test::data_path("wan/vae/wan21_tiny.safetensors")};
  r.prompt = text(c.name, "prompt");
  r.negative_prompt = text(c.name, "negative_prompt");
  if (images) {
    media::save_png(image(c.name, "image"), dir / "start.png");
    r.image = dir / "start.png";
  }
  if (c.name == "flf") {
    media::save_png(image(c.name, "end_image"), dir / "end.png");
    r.end_image = dir / "end.png";
  }
  r.width = r.height = kCanvas;  // the area; I2V's aspect is the start image's
  r.frames = kFrames;
  r.steps = kSteps;
  r.guide_scale = c.guide_high;
  r.low_noise_guide_scale = c.guide_low;
  r.shift = 5.0;
  r.sampler = "unipc";
  r.preset = "cpu";
  r.output = dir / (c.name + ".mp4");

  const std::vector<float> noise = read<float>(c.name, "noise");
  Output o;
  GeneratorOptions options;
  options.initial_noise = [&](std::span<float> latent) {
    ASSERT_EQ(latent.size(), noise.size());
    std::copy(noise.begin(), noise.end(), latent.begin());
  };
  options.final_latent = [&](std::span<const float> latent) {
    o.latent.assign(latent.begin(), latent.end());
  };
  std::vector<std::vector<float>> chunks;
  std::int64_t decoded = 0;
  options.decoded_frames = [&](std::int64_t first, std::int64_t count,
                               std::span<const float> pixels) {
    EXPECT_EQ(first, decoded);
    decoded += count;
    chunks.emplace_back(pixels.begin(), pixels.end());
  };
  SessionOptions session_options;
  session_options.machine = kMachine;
  session_options.presets = offload::builtin_presets();
  session_options.generator = options;
  const Session session(session_options);
  struct Sink : ProgressSink {
    std::vector<std::string>* phases;
    void step(const StepProgress& p) override { phases->push_back(p.stats.phase); }
  } sink;
  sink.phases = &o.phases;
  CancelToken cancel;
  o.result = session.run(*session.find(r.model), r, sink, cancel);

  // The chunks [3, n, H, W] laid out as [3, F, H, W].
  const std::size_t plane =
      static_cast<std::size_t>(o.result.settings.width) * o.result.settings.height;
  o.pixels.assign(3 * kFrames * plane, NAN);
  std::size_t frame = 0;
  for (const std::vector<float>& chunk : chunks) {
    const std::size_t n = chunk.size() / (3 * plane);
    for (std::size_t ch = 0; ch < 3; ++ch) {
      for (std::size_t f = 0; f < n; ++f) {
        for (std::size_t i = 0; i < plane; ++i) {
          o.pixels[(ch * kFrames + frame + f) * plane + i] =
              std::clamp(chunk[(ch * n + f) * plane + i], -1.0f, 1.0f);
        }
      }
    }
    frame += n;
  }
  return o;
}

class A14bParity : public ::testing::TestWithParam<Case> {};

TEST_P(A14bParity, FinalLatentAndPixelsMatchTheOfficialLoop) {
  const Case& c = GetParam();
  const test::ScratchDir dir;
  const Output o = generate(c, dir.path());

  // The size rule and the expert split are the reference's.
  const std::vector<std::int32_t> size = read<std::int32_t>(c.name, "size");  // (h, w)
  EXPECT_EQ(o.result.settings.height, size[0]);
  EXPECT_EQ(o.result.settings.width, size[1]);
  const std::vector<std::int32_t> experts = read<std::int32_t>(c.name, "experts");
  ASSERT_EQ(o.phases.size(), experts.size());
  for (std::size_t i = 0; i < experts.size(); ++i) {
    EXPECT_EQ(o.phases[i], experts[i] == 0 ? "high-noise expert" : "low-noise expert") << i;
  }

  const Difference latent = difference(o.latent, read<float>(c.name, "latent"));
  const Difference pixels = difference(o.pixels, read<float>(c.name, "pixels"));
  const std::vector<float> floor = read<float>(c.name, "floor");
  std::printf("%s: latent max %.3g rms %.3g; pixels max %.3g rms %.3g (floor rows: %s)\n",
              c.name.c_str(), latent.max, latent.rms, pixels.max, pixels.rms,
              [&] {
                std::string s;
                for (float f : floor) s += std::to_string(f) + " ";
                return s;
              }()
                  .c_str());
  EXPECT_LE(latent.max, kLatentMaxBound) << c.name;
  EXPECT_LE(latent.rms, kLatentRmsBound) << c.name;
  EXPECT_LE(pixels.max, kPixelMaxBound) << c.name;
  EXPECT_LE(pixels.rms, kPixelRmsBound) << c.name;
  EXPECT_EQ(o.result.settings.fps, 16);  // A14B's own default
}

INSTANTIATE_TEST_SUITE_P(Cases, A14bParity,
                         ::testing::Values(Case{"t2v", "t2v", 4.0f, 3.0f},
                                           Case{"i2v", "i2v", 4.5f, 3.5f},
                                           Case{"flf", "i2v", 4.5f, 3.5f}),
                         [](const auto& param_info) { return param_info.param.name; });

// The start and end images resized as torch's bicubic F.interpolate resizes them, overshoot kept.
TEST(A14bConditioning, BicubicResizeIsTorchs) {
  for (const char* tensor : {"image", "end_image"}) {
    const media::RgbImage source = image("flf", tensor);
    const std::vector<float> ours = wan::bicubic_resize(source, 64, 48);
    const Difference d = difference(ours, read<float>("flf", std::string(tensor) + ".resized"));
    std::printf("%s: bicubic resize max %.3g\n", tensor, d.max);
    EXPECT_LE(d.max, kResizeMaxBound) << tensor;
  }
}

// y = concat(mask, latent of [start, 0, 0, 0, end]) as the reference builds it: the mask exactly,
// the latent from the same pixels through the Wan 2.1 VAE encode.
TEST(A14bConditioning, ConditionIsTheOfficialOne) {
  for (const std::string name : {"i2v", "flf"}) {
    const bool end = name == "flf";
    const std::vector<float> reference_y = read<float>(name, "y");  // [20, 2, 6, 8]
    const std::vector<float> mask = wan::i2v_mask(kFrames, 6, 8, end);
    ASSERT_EQ(mask.size(), 4u * 2 * 6 * 8);
    EXPECT_TRUE(std::equal(mask.begin(), mask.end(), reference_y.begin())) << name;

    const std::vector<float> start = read<float>(name, "image.resized");
    const std::vector<float> last =
        end ? read<float>(name, "end_image.resized") : std::vector<float>{};
    const std::vector<float> video = wan::i2v_conditioning_video(start, last, kFrames, 64, 48);
    cpu::CpuBackend backend;
    const io::TensorSet vae_file =
        io::TensorSet::open(test::data_path("wan/vae/wan21_tiny.safetensors"));
    const wan::VaeWeights weights = wan::VaeWeights::load(backend, vae_file);
    wan::WanVae vae(backend, weights);
    const std::size_t arena_bytes = wan::WanVae::encode_arena_bytes(weights, kFrames, 48, 64);
    std::vector<std::byte> arena_memory(arena_bytes);
    memory::Arena arena(arena_memory.data(), arena_bytes, backend.device());
    std::vector<float> pixels = video;
    std::vector<float> latent(16 * 2 * 6 * 8);
    vae.encode(Tensor{pixels.data(), DType::kF32, Shape{3, kFrames, 48, 64}, Device::kCpu}, arena,
               Tensor{latent.data(), DType::kF32, Shape{16, 2, 6, 8}, Device::kCpu});
    const std::vector<float> y = wan::i2v_condition(mask, latent);
    const Difference d = difference(y, reference_y);
    std::printf("%s: y max %.3g rms %.3g\n", name.c_str(), d.max, d.rms);
    EXPECT_LE(d.max, kConditionMaxBound) << name;
  }
}

}  // namespace
}  // namespace ferry::pipeline

#endif  // FERRY_HAVE_FFMPEG
