// The whole generation path through the session API (core/pipeline/session.h, generator.h) on
// the demo model set: prompt → MP4 that FFmpeg decodes back, the same request twice, streamed
// against resident, a start image, cancellation with a per-run token, a budget that does not fit,
// and metadata that names model files without their folders. Needs FFmpeg; compiles to nothing
// without it (the mingw lane).
#if defined(FERRY_HAVE_FFMPEG)

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/io/tensor_file.h"
#include "core/io/safetensors_writer.h"
#include "core/media/video_reader.h"
#include "core/memory/process_memory.h"
#include "core/models/wan/demo_model.h"
#include "core/models/wan/request_rules.h"
#include "core/pipeline/run_log.h"
#include "core/pipeline/session.h"
#include "tests/test_support.h"

namespace ferry::pipeline {
namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t kGiB = 1ull << 30;

const fs::path& demo_folder() {
  static const test::ScratchDir dir;
  static const fs::path folder = models::wan::write_demo_model(dir / "demo");
  return folder;
}

offload::MachineInfo cpu_machine() {
  return offload::MachineInfo{false, 0, 0, 16 * kGiB, 12 * kGiB};
}

GenerationRequest small_request(const fs::path& out) {
  GenerationRequest r;
  r.model = {demo_folder()};
  r.prompt = "a ferry crossing a fjord at dawn";
  r.width = 64;
  r.height = 64;
  r.frames = 5;
  r.steps = 3;
  r.seed = 1234;
  r.preset = "cpu";
  r.output = out;
  return r;
}

struct Recorder final : ProgressSink {
  std::vector<Stage> stages;
  std::vector<int> steps;
  int previews = 0;
  std::function<void(int)> on_step;
  void stage(Stage s) override { stages.push_back(s); }
  void step(const StepProgress& p) override {
    steps.push_back(p.step);
    if (on_step) on_step(p.step);
  }
  void preview(const media::RgbImage& image) override {
    previews += image.width > 0 && image.height > 0;
  }
};

// A session on a described CPU machine (the test machine may have a GPU or not: the same plans).
Session cpu_session(std::vector<offload::Preset> presets = offload::builtin_presets(),
                    GeneratorOptions options = {}) {
  SessionOptions o;
  o.machine = cpu_machine();
  o.presets = std::move(presets);
  o.generator = std::move(options);
  return Session(std::move(o));
}

GenerationResult run_with(const Session& session, const GenerationRequest& request,
                          ProgressSink& sink, CancelToken& cancel) {
  return session.run(*session.find(request.model), request, sink, cancel);
}

GenerationResult run(const GenerationRequest& request, Recorder& sink, bool stream_all = false) {
  GeneratorOptions options;
  options.stream_all = stream_all;
  CancelToken cancel;
  return run_with(cpu_session(offload::builtin_presets(), options), request, sink, cancel);
}

TEST(Generator, MakesAnMp4ThatDecodesBackWithItsSettings) {
  test::ScratchDir dir;
  Recorder sink;
  GenerationRequest request = small_request(dir / "clip.mp4");
  request.stats_jsonl = dir / "stats.jsonl";
  const GenerationResult result = run(request, sink);

  EXPECT_EQ(sink.stages,
            (std::vector<Stage>{Stage::kText, Stage::kDenoise, Stage::kDecode, Stage::kWrite}));
  EXPECT_EQ(sink.steps, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(sink.previews, 3);
  ASSERT_EQ(result.steps.size(), 3u);

  const media::VideoInfo info = media::probe_video(dir / "clip.mp4");
  EXPECT_EQ(info.frames, 5);
  EXPECT_EQ(info.width, 64);
  EXPECT_EQ(info.height, 64);
  EXPECT_DOUBLE_EQ(info.fps, 24.0);  // the TI2V default
  EXPECT_EQ(info.metadata.at("title"), request.prompt);
  const auto settings = nlohmann::json::parse(info.metadata.at("comment"));
  EXPECT_EQ(settings["seed"], 1234);
  EXPECT_EQ(settings["steps"], 3);
  EXPECT_EQ(settings["preset"], "cpu");
  EXPECT_EQ(settings["negative_prompt"], std::string(models::wan::kWanDefaultNegativePrompt));
  EXPECT_EQ(settings["family"], "wan");
  // Model files by name, size and fingerprint: no folder of the user's leaks into a shared clip.
  ASSERT_EQ(settings["model_files"].size(), 3u);
  for (const auto& f : settings["model_files"]) {
    const std::string name = f["name"];
    EXPECT_EQ(name.find_first_of("/\\"), std::string::npos) << name;
    EXPECT_TRUE(fs::exists(demo_folder() / name)) << name;
    EXPECT_EQ(f["bytes"].get<std::uint64_t>(), fs::file_size(demo_folder() / name));
    EXPECT_EQ(f["fingerprint"].get<std::string>().rfind("fp1:", 0), 0u);
  }
  EXPECT_EQ(info.metadata.at("comment").find(demo_folder().parent_path().string()),
            std::string::npos);

  // The sidecar holds the same settings; one stats line per step.
  const auto sidecar_bytes = test::read_file(dir / "clip.json");
  const auto sidecar = nlohmann::json::parse(
      std::string(reinterpret_cast<const char*>(sidecar_bytes.data()), sidecar_bytes.size()));
  EXPECT_EQ(sidecar, settings);
  // One line per step and per stage, in the order they ended.
  const auto stats_bytes = test::read_file(dir / "stats.jsonl");
  std::istringstream lines(
      std::string(reinterpret_cast<const char*>(stats_bytes.data()), stats_bytes.size()));
  std::vector<std::string> order;
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line);
    order.push_back(j.contains("stage") ? j["stage"].get<std::string>()
                                        : "step " + std::to_string(j["step"].get<int>()));
    EXPECT_GT(j.contains("stage") ? j["rss_peak_in_stage"].get<std::uint64_t>()
                                  : j["rss_bytes"].get<std::uint64_t>(),
              0u);
  }
  EXPECT_EQ(order,
            (std::vector<std::string>{"text", "step 1", "step 2", "step 3", "denoise", "decode"}));
  ASSERT_EQ(result.stages.size(), 3u);
  EXPECT_EQ(result.stages[1].stage, "denoise");
  EXPECT_GE(result.stages[1].peak_resident_in_stage, result.steps[2].process.resident_bytes);
  // Only the finished files: no partial names left behind.
  for (const auto& e : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().string().find(".partial"), std::string::npos) << e.path();
  }
}

TEST(Generator, TheSameRequestGivesTheSameFramesStreamedOrResident) {
  test::ScratchDir dir;
  Recorder a, b, c;
  run(small_request(dir / "a.mp4"), a);
  run(small_request(dir / "b.mp4"), b);
  run(small_request(dir / "c.mp4"), c, /*stream_all=*/true);
  const auto fa = media::read_video_frames(dir / "a.mp4");
  const auto fb = media::read_video_frames(dir / "b.mp4");
  const auto fc = media::read_video_frames(dir / "c.mp4");
  ASSERT_EQ(fa.size(), 5u);
  ASSERT_EQ(fb.size(), 5u);
  ASSERT_EQ(fc.size(), 5u);
  bool varied = false;
  for (std::size_t i = 0; i < fa.size(); ++i) {
    EXPECT_EQ(fa[i].rgb, fb[i].rgb) << "frame " << i;
    EXPECT_EQ(fa[i].rgb, fc[i].rgb) << "frame " << i << " (streamed from disk)";
    varied |= std::adjacent_find(fa[i].rgb.begin(), fa[i].rgb.end(), std::not_equal_to<>()) !=
              fa[i].rgb.end();
  }
  EXPECT_TRUE(varied) << "the frames are one flat colour";
  // Another seed, another video.
  GenerationRequest other = small_request(dir / "d.mp4");
  other.seed = 99;
  Recorder d;
  run(other, d);
  EXPECT_NE(media::read_video_frames(dir / "d.mp4")[2].rgb, fa[2].rgb);
}

TEST(Generator, AStartImageBecomesTheFirstLatentFrame) {
  test::ScratchDir dir;
  Recorder sink;
  GenerationRequest request = small_request(dir / "i2v.mp4");
  request.image = test::data_path("media/start.png");  // 96×64: the aspect sets the size
  request.width = 96;
  request.height = 64;
  const GenerationResult result = run(request, sink);
  EXPECT_EQ(sink.stages, (std::vector<Stage>{Stage::kText, Stage::kImage, Stage::kDenoise,
                                             Stage::kDecode, Stage::kWrite}));
  const media::VideoInfo info = media::probe_video(dir / "i2v.mp4");
  EXPECT_EQ(info.width, result.settings.width);
  EXPECT_EQ(info.height, result.settings.height);
  EXPECT_EQ(result.settings.width * 2, result.settings.height * 3);  // 3:2 like the image
  EXPECT_EQ(info.frames, 5);
}

// A real run through a RunLog: every stage and step is in the log as it happened, then the
// stages' stats and the video; the caller's sink still sees every event.
TEST(Generator, ARunLogRecordsTheWholeRun) {
  test::ScratchDir dir;
  Recorder sink;
  RunLog log(dir / "logs", sink);
  const GenerationRequest request = small_request(dir / "clip.mp4");
  log.started(request, cpu_machine(), "cpu");
  CancelToken cancel;
  log.finished(run_with(cpu_session(), request, log, cancel));

  EXPECT_EQ(sink.steps, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(sink.previews, 3);
  std::ifstream in(log.path(), std::ios::binary);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line.substr(line.find("] ") + 2));
  const auto index_of = [&](const std::string& prefix) {
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (lines[i].rfind(prefix, 0) == 0) return static_cast<int>(i);
    }
    ADD_FAILURE() << "no line starts with '" << prefix << "'";
    return -1;
  };
  // In the order the run went.
  const std::vector<int> order = {
      index_of("Ferry "),           index_of("stage: encoding the prompt"),
      index_of("stage: denoising"), index_of("step 1/3 {"),
      index_of("step 2/3 {"),       index_of("step 3/3 {"),
      index_of("stage: decoding"),  index_of("stage: writing"),
      index_of("stage text {"),     index_of("stage denoise {"),
      index_of("stage decode {"),   index_of("finished: ")};
  EXPECT_TRUE(std::is_sorted(order.begin(), order.end()) && order.front() >= 0);
  EXPECT_NE(lines[static_cast<std::size_t>(index_of("finished: "))].find("clip.mp4"),
            std::string::npos);
}

// A preset with bf16 VAE activations decodes the same latent to frames close to the f32
// decode's (the denoising is untouched: the final latents are identical), and the whole job
// still fits its plan.
TEST(Generator, ABf16VaePresetDecodesCloseToTheF32Decode) {
  std::vector<offload::Preset> presets = offload::builtin_presets();
  offload::Preset bf16 = offload::find_preset(presets, "cpu", cpu_machine());
  bf16.name = "cpu-bf16-vae";
  bf16.vae_activations = DType::kBF16;
  presets.push_back(bf16);

  const auto decode = [&](const std::string& preset, std::vector<float>& latent) {
    test::ScratchDir dir;
    GenerationRequest request = small_request(dir / "clip.mp4");
    request.preset = preset;
    GeneratorOptions options;
    std::vector<float> pixels;
    options.final_latent = [&](std::span<const float> z) { latent.assign(z.begin(), z.end()); };
    options.decoded_frames = [&](std::int64_t, std::int64_t, std::span<const float> p) {
      pixels.insert(pixels.end(), p.begin(), p.end());
    };
    Recorder sink;
    CancelToken cancel;
    run_with(cpu_session(presets, options), request, sink, cancel);
    return pixels;
  };
  std::vector<float> latent_f32, latent_bf16;
  const std::vector<float> f32 = decode("cpu", latent_f32);
  const std::vector<float> bf16_pixels = decode("cpu-bf16-vae", latent_bf16);
  EXPECT_EQ(latent_f32, latent_bf16);
  ASSERT_EQ(f32.size(), bf16_pixels.size());
  ASSERT_FALSE(f32.empty());
  double max_error = 0;
  for (std::size_t i = 0; i < f32.size(); ++i) {
    max_error = std::max(max_error, static_cast<double>(std::abs(f32[i] - bf16_pixels[i])));
  }
  // The VAE tests' bf16 bound on the tiny random VAEs (they amplify rounding far more than a
  // trained VAE); and not identical: the option took effect.
  EXPECT_LT(max_error, 0.2);
  EXPECT_GT(max_error, 0.0);
}

TEST(Generator, CancelStopsWithinTheStepAndLeavesNothing) {
  test::ScratchDir dir;
  const Session session = cpu_session();
  Recorder sink;
  CancelToken cancel;
  sink.on_step = [&](int step) {
    if (step == 1) cancel.cancel();
  };
  GenerationRequest request = small_request(dir / "clip.mp4");
  request.steps = 5;
  EXPECT_EQ(test::error_code_of([&] { run_with(session, request, sink, cancel); }),
            ErrorCode::kCancelled);
  EXPECT_EQ(sink.steps, (std::vector<int>{1}));
  EXPECT_TRUE(fs::is_empty(dir.path()));
  // A cancelled token stays cancelled: the same token never starts another run ...
  sink.on_step = nullptr;
  sink.stages.clear();
  request.steps = 1;
  EXPECT_EQ(test::error_code_of([&] { run_with(session, request, sink, cancel); }),
            ErrorCode::kCancelled);
  EXPECT_TRUE(sink.stages.empty());
  EXPECT_TRUE(fs::is_empty(dir.path()));
  // ... and the session runs again with a new one.
  CancelToken next;
  run_with(session, request, sink, next);
  EXPECT_TRUE(fs::exists(dir / "clip.mp4"));
}

// A cancel that lands between two stages (here: as the decode starts) is not lost.
TEST(Generator, ACancelBetweenStagesIsHonoured) {
  test::ScratchDir dir;
  struct CancelAtDecode final : ProgressSink {
    CancelToken* cancel = nullptr;
    void stage(Stage s) override {
      if (s == Stage::kDecode) cancel->cancel();
    }
  } sink;
  CancelToken cancel;
  sink.cancel = &cancel;
  EXPECT_EQ(test::error_code_of(
                [&] { run_with(cpu_session(), small_request(dir / "clip.mp4"), sink, cancel); }),
            ErrorCode::kCancelled);
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(Generator, ABudgetThatCannotFitIsRefusedBeforeAnyStep) {
  test::ScratchDir dir;
  offload::Preset tiny = offload::find_preset(offload::builtin_presets(), "cpu", cpu_machine());
  tiny.name = "tiny";
  tiny.ram_budget_bytes = 1ull << 20;
  Recorder sink;
  GenerationRequest request = small_request(dir / "clip.mp4");
  request.preset = "tiny";
  CancelToken cancel;
  EXPECT_EQ(test::error_code_of([&] { run_with(cpu_session({tiny}), request, sink, cancel); }),
            ErrorCode::kDoesNotFit);
  EXPECT_TRUE(sink.steps.empty());
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(Generator, MissingModelPartsAndBadSettingsAreClearErrors) {
  test::ScratchDir dir;
  Recorder sink;
  GenerationRequest request = small_request(dir / "clip.mp4");
  request.model = {dir.path()};
  EXPECT_EQ(test::error_code_of([&] { run(request, sink); }), ErrorCode::kBadModelFile);
  request = small_request(dir / "clip.mp4");
  request.frames = 6;
  EXPECT_EQ(test::error_code_of([&] { run(request, sink); }), ErrorCode::kBadArgument);
  request = small_request(dir / "clip.mp4");
  request.image = dir / "missing.png";
  EXPECT_EQ(test::error_code_of([&] { run(request, sink); }), ErrorCode::kIo);
}

// The f32 values of tensor `name` in a safetensors file.
std::vector<float> read_tensor(const fs::path& path, const std::string& name) {
  const io::TensorFile file = io::TensorFile::open(path);
  const io::TensorInfo& t = file.at(name);
  EXPECT_EQ(t.dtype, DType::kF32);
  std::vector<float> values(static_cast<std::size_t>(t.element_count()));
  file.map(t).copy_to(0, std::as_writable_bytes(std::span(values)));
  return values;
}

void write_tensor(const fs::path& path, const std::string& name, DType dtype,
                  std::vector<std::uint64_t> shape, const std::vector<float>& values) {
  io::write_safetensors(path, {{name, dtype, std::move(shape)}}, {},
                        [&](std::size_t, std::uint64_t offset, std::span<std::byte> out) {
                          const auto bytes = std::as_bytes(std::span(values));
                          std::copy_n(bytes.begin() + static_cast<std::ptrdiff_t>(offset),
                                      out.size(), out.begin());
                        });
}

// A seeded run writes the noise it used; a run from that file (another seed: the file wins)
// gives the same final latent and the same frames, bit for bit; metadata names the noise file.
TEST(Replay, ASavedNoiseReplaysTheRunExactly) {
  test::ScratchDir dir;
  Recorder sink;
  GenerationRequest seeded = small_request(dir / "a.mp4");
  seeded.save_noise = dir / "noise.safetensors";
  seeded.save_latents = dir / "a_latents.safetensors";
  seeded.save_text_states = true;
  const GenerationResult a = run(seeded, sink);
  const std::vector<float> noise = read_tensor(dir / "noise.safetensors", "noise");
  const io::TensorFile latents = io::TensorFile::open(dir / "a_latents.safetensors");
  EXPECT_EQ(latents.at("latent").shape, (std::vector<std::uint64_t>{48, 2, 4, 4}));
  EXPECT_EQ(latents.at("context").dtype, DType::kBF16);
  EXPECT_NE(latents.find("negative_context"), nullptr);

  GenerationRequest replay = small_request(dir / "b.mp4");
  replay.seed = 777;
  replay.noise = dir / "noise.safetensors";
  replay.save_latents = dir / "b_latents.safetensors";
  run(replay, sink);
  EXPECT_EQ(read_tensor(dir / "a_latents.safetensors", "latent"),
            read_tensor(dir / "b_latents.safetensors", "latent"));
  const auto fa = media::read_video_frames(dir / "a.mp4");
  const auto fb = media::read_video_frames(dir / "b.mp4");
  ASSERT_EQ(fa.size(), fb.size());
  for (std::size_t i = 0; i < fa.size(); ++i) EXPECT_EQ(fa[i].rgb, fb[i].rgb) << "frame " << i;
  // The seed's own noise is what was saved: a run of seed 777 without the file differs.
  Recorder other;
  GenerationRequest seed777 = small_request(dir / "c.mp4");
  seed777.seed = 777;
  seed777.save_noise = dir / "noise777.safetensors";
  run(seed777, other);
  EXPECT_NE(read_tensor(dir / "noise777.safetensors", "noise"), noise);

  const auto settings =
      nlohmann::json::parse(media::probe_video(dir / "b.mp4").metadata.at("comment"));
  EXPECT_EQ(settings["noise_file"]["name"], "noise.safetensors");
  EXPECT_EQ(settings["noise_file"]["fingerprint"].get<std::string>().rfind("fp1:", 0), 0u);
  EXPECT_FALSE(a.settings.request.save_noise.empty());
}

// A noise file that does not fit the request is refused before any work, and nothing is written.
TEST(Replay, ANoiseFileThatDoesNotFitIsAClearErrorAndWritesNothing) {
  const std::vector<float> values(48 * 2 * 4 * 4, 0.5f);
  struct Case {
    const char* what;
    std::function<void(const fs::path&)> make;
    const char* says;
  } cases[] = {
      {"wrong shape",
       [&](const fs::path& p) {
         write_tensor(p, "noise", DType::kF32, {48, 2, 4, 2}, std::vector<float>(48 * 2 * 4 * 2));
       },
       "[48, 2, 4, 4]"},
      {"wrong dtype",
       [&](const fs::path& p) {
         write_tensor(p, "noise", DType::kF16, {48, 2, 4, 4}, std::vector<float>(48 * 2 * 4 * 2));
       },
       "not F32"},
      {"missing tensor",
       [&](const fs::path& p) {
         write_tensor(p, "latent", DType::kF32, {48, 2, 4, 4}, values);
       },
       "no tensor 'noise'"},
      {"truncated",
       [&](const fs::path& p) {
         write_tensor(p, "noise", DType::kF32, {48, 2, 4, 4}, values);
         fs::resize_file(p, fs::file_size(p) - 100);
       },
       "--noise"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    test::ScratchDir dir;
    const fs::path noise = dir / "noise.safetensors";
    c.make(noise);
    GenerationRequest request = small_request(dir / "clip.mp4");
    request.noise = noise;
    request.save_latents = dir / "latents.safetensors";
    Recorder sink;
    try {
      run(request, sink);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadArgument);
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
    }
    EXPECT_TRUE(sink.stages.empty());
    std::vector<fs::path> left;
    for (const auto& e : fs::directory_iterator(dir.path())) left.push_back(e.path().filename());
    EXPECT_EQ(left, (std::vector<fs::path>{"noise.safetensors"}));
  }
}

}  // namespace
}  // namespace ferry::pipeline

#endif
