// `ferry-cli generate` and `ferry-cli demo`: the main job from the command line. A progress line
// per step on stderr (rewritten in place on a terminal): step k/N, s/step, ETA, RAM, VRAM. Ctrl+C
// cancels within one layer (exit 130) and leaves no partial output.
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/machine.h"
#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/io/user_data.h"
#include "core/media/video_writer.h"
#include "core/pipeline/session.h"
#ifdef _WIN32
#include <io.h>
#define FERRY_ISATTY(fd) _isatty(fd)
#else
#include <unistd.h>
#define FERRY_ISATTY(fd) isatty(fd)
#endif

namespace ferry::cli {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_interrupt(int) {
  g_interrupted = 1;
}

// Turns Ctrl+C into a cancel of the run's token (from a thread: a signal handler may not lock).
class InterruptWatch {
 public:
  explicit InterruptWatch(pipeline::CancelToken& cancel) : cancel_(cancel) {
    g_interrupted = 0;
    previous_ = std::signal(SIGINT, on_interrupt);
    thread_ = std::thread([this] {
      while (!stop_) {
        if (g_interrupted != 0) {
          cancel_.cancel();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
  }
  ~InterruptWatch() {
    stop_ = true;
    thread_.join();
    std::signal(SIGINT, previous_);
  }

 private:
  pipeline::CancelToken& cancel_;
  std::atomic<bool> stop_{false};
  void (*previous_)(int) = nullptr;
  std::thread thread_;
};

std::string duration_text(double seconds) {
  char text[32];
  if (seconds < 60) {
    std::snprintf(text, sizeof text, "%.1f s", seconds);
  } else if (seconds < 3600) {
    std::snprintf(text, sizeof text, "%d min %02d s", static_cast<int>(seconds) / 60,
                  static_cast<int>(seconds) % 60);
  } else {
    std::snprintf(text, sizeof text, "%d h %02d min", static_cast<int>(seconds) / 3600,
                  static_cast<int>(seconds) / 60 % 60);
  }
  return text;
}

class TerminalProgress final : public pipeline::ProgressSink {
 public:
  explicit TerminalProgress(bool device) : tty_(FERRY_ISATTY(2) != 0), device_(device) {}
  ~TerminalProgress() override { end_line(); }

  void note(const std::string& text) override {
    end_line();
    std::fprintf(stderr, "%s\n", text.c_str());
  }
  void warning(const std::string& text) override {
    end_line();
    std::fprintf(stderr, "ferry-cli: warning: %s\n", text.c_str());
  }
  void stage(pipeline::Stage stage) override {
    end_line();
    std::fprintf(stderr, "%s...\n", std::string(pipeline::stage_name(stage)).c_str());
  }
  void step(const pipeline::StepProgress& p) override {
    std::string line =
        (p.stats.phase.empty() ? "" : p.stats.phase + ", ") + "step " + std::to_string(p.step) +
        "/" + std::to_string(p.steps) + " · " + duration_text(p.seconds_per_step) + "/step · ETA " +
        duration_text(p.eta_seconds) + " · RAM " + human_bytes(p.stats.process.resident_bytes);
    if (device_) line += " · VRAM " + human_bytes(p.stats.device.used_bytes);
    if (tty_) {
      std::fprintf(stderr, "\r%-100s", line.c_str());
      open_ = true;
    } else {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    std::fflush(stderr);
  }

 private:
  void end_line() {
    if (open_) std::fputc('\n', stderr);
    open_ = false;
  }
  bool tty_;
  bool device_;
  bool open_ = false;
};

}  // namespace

// The strength after the last ':' when that is a number (a Windows path's drive colon is followed
// by a backslash, never by a number), 1 otherwise.
models::LoraChoice lora_option(const std::string& text) {
  models::LoraChoice lora;
  const std::size_t colon = text.rfind(':');
  if (colon != std::string::npos && colon > 0 && colon + 1 < text.size()) {
    const std::string tail = text.substr(colon + 1);
    std::size_t used = 0;
    float strength = 0;
    try {
      strength = std::stof(tail, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == tail.size()) {
      if (!std::isfinite(strength) || std::fabs(strength) > 100) {
        throw Error(ErrorCode::kBadArgument,
                    "--lora " + text + ": the strength must be within ±100");
      }
      lora.path = io::detail::path_from_utf8(text.substr(0, colon));
      lora.strength = strength;
      return lora;
    }
  }
  lora.path = io::detail::path_from_utf8(text);
  return lora;
}

models::VideoDecoder decoder_option(const Args& args) {
  const std::string name = args.value_or("decode", "vae");
  if (name == "vae") return models::VideoDecoder::kVae;
  if (name == "taehv") return models::VideoDecoder::kTaehvDraft;
  throw Error(ErrorCode::kBadArgument,
              "--decode takes vae (the model's VAE) or taehv (a draft with the TAEHV preview "
              "decoder), not '" +
                  name + "'");
}

namespace {

// The options generate and demo share → a request.
pipeline::GenerationRequest request_from(const Args& args) {
  pipeline::GenerationRequest r;
  // A folder, or the parts one by one (--model repeated: A14B's experts, a text encoder and a VAE
  // from three folders).
  for (const std::string& model : args.values("model")) {
    r.model.push_back(io::detail::path_from_utf8(model));
  }
  r.prompt = args.value_or("prompt", "");
  r.negative_prompt = args.value_or("negative", "");
  if (const auto image = args.value("image")) r.image = io::detail::path_from_utf8(*image);
  if (const auto end = args.value("end-image")) r.end_image = io::detail::path_from_utf8(*end);
  r.width = static_cast<int>(args.integer_or("width", 0, 0, 8192));
  r.height = static_cast<int>(args.integer_or("height", 0, 0, 8192));
  r.frames = static_cast<int>(args.integer_or("frames", 0, 0, 1001));
  r.fps = static_cast<int>(args.integer_or("fps", 0, 0, 120));
  r.steps = static_cast<int>(args.integer_or("steps", 0, 0, 1000));
  if (const auto cfg = args.value("cfg")) {
    try {
      r.guide_scale = std::stof(*cfg);
    } catch (const std::exception&) {
      throw Error(ErrorCode::kBadArgument, "--cfg takes a number, not '" + *cfg + "'");
    }
  }
  if (const auto cfg = args.value("cfg-low")) {
    try {
      r.low_noise_guide_scale = std::stof(*cfg);
    } catch (const std::exception&) {
      throw Error(ErrorCode::kBadArgument, "--cfg-low takes a number, not '" + *cfg + "'");
    }
  }
  if (const auto shift = args.value("shift")) {
    try {
      r.shift = std::stod(*shift);
    } catch (const std::exception&) {
      throw Error(ErrorCode::kBadArgument, "--shift takes a number, not '" + *shift + "'");
    }
  }
  if (const auto sampler = args.value("sampler")) r.sampler = *sampler;
  for (const std::string& lora : args.values("lora")) r.loras.push_back(lora_option(lora));
  r.seed = static_cast<std::uint64_t>(args.integer_or("seed", 0, 0, (1ll << 53)));
  r.preset = args.value_or("preset", "auto");
  if (const auto out = args.value("out")) r.output = io::detail::path_from_utf8(*out);
  if (const auto stats = args.value("stats")) r.stats_jsonl = io::detail::path_from_utf8(*stats);
  if (const auto noise = args.value("noise")) r.noise = io::detail::path_from_utf8(*noise);
  if (const auto f = args.value("save-noise")) r.save_noise = io::detail::path_from_utf8(*f);
  if (const auto f = args.value("save-latents")) r.save_latents = io::detail::path_from_utf8(*f);
  r.save_text_states = args.flag("save-text-states");
  r.decoder = decoder_option(args);
  if (const auto f = args.value("latents")) r.latents = io::detail::path_from_utf8(*f);
  if (const auto f = args.value("wav")) r.soundtrack_wav = io::detail::path_from_utf8(*f);
  return r;
}

const std::set<std::string> kGenerateOptions = {
    "model",      "prompt",       "negative", "image",  "end-image", "width",   "height",
    "frames",     "fps",          "steps",    "cfg",    "cfg-low",   "shift",   "sampler",
    "seed",       "preset",       "out",      "stats",  "vram-mib",  "ram-mib", "noise",
    "save-noise", "save-latents", "lora",     "decode", "latents",   "wav"};
const std::set<std::string> kGenerateFlags = {"save-text-states"};

void print_step_table(const pipeline::GenerationResult& result, bool device) {
  std::printf("\n%5s %9s %11s %11s %11s %11s %9s\n", "step", "seconds", "RSS", "commit",
              device ? "VRAM" : "-", "read", "IO wait");
  for (const offload::StepStats& s : result.steps) {
    std::printf("%5d %9.2f %11s %11s %11s %11s %9.2f\n", s.step, s.seconds,
                human_bytes(s.process.resident_bytes).c_str(),
                human_bytes(s.process.commit_bytes).c_str(),
                device ? human_bytes(s.device.used_bytes).c_str() : "-",
                human_bytes(s.bytes_read).c_str(), s.io_wait_seconds);
  }
}

int run(const pipeline::Session& session, const models::ModelParts& model,
        const pipeline::GenerationRequest& request, bool demo) {
  const bool device = session.target(request.preset).on_gpu;
  pipeline::CancelToken cancel;
  pipeline::GenerationResult result;
  {
    InterruptWatch watch(cancel);
    TerminalProgress progress(device);
    result = session.run(model, request, progress, cancel);
  }
  if (demo) print_step_table(result, device);
  const auto& s = result.settings;
  std::printf("\nwrote %s (%dx%d, %d frames at %d fps, %s, seed %llu)\n",
              io::detail::display(result.video).c_str(), s.width, s.height, s.frames, s.fps,
              result.encoder.c_str(), static_cast<unsigned long long>(s.request.seed));
  std::printf("settings: %s\n", io::detail::display(result.sidecar).c_str());
  if (!result.soundtrack_wav.empty()) {
    std::printf("soundtrack: %s\n", io::detail::display(result.soundtrack_wav).c_str());
  }
  if (request.decoder == models::VideoDecoder::kTaehvDraft) {
    std::printf("draft: decoded with TAEHV%s\n",
                result.latents.empty()
                    ? ""
                    : ("; for the full VAE decode: the same command with --decode vae --latents " +
                       io::detail::display(result.latents))
                          .c_str());
  }
  return 0;
}

}  // namespace

int run_generate(const std::vector<std::string>& argv) {
  const Args args(argv, kGenerateOptions, kGenerateFlags);
  if (!args.positional().empty() || !args.value("model") || !args.value("prompt") ||
      !args.value("out")) {
    throw Error(ErrorCode::kBadArgument,
                "usage: ferry-cli generate --model DIR --prompt TEXT --out FILE.mp4 [options] "
                "(see ferry-cli help)");
  }
  const pipeline::Session session(session_options(args));
  const pipeline::GenerationRequest request = request_from(args);
  return run(session, *session.find(request.model), request, false);
}

int run_demo(const std::vector<std::string>& argv) {
  const Args args(argv, kGenerateOptions, kGenerateFlags);
  // --model names the demo's family: wan (the default) or h3.
  const std::string family = args.value("model").value_or("wan");
  if (!args.positional().empty() || (family != "wan" && family != "h3")) {
    throw Error(ErrorCode::kBadArgument,
                "usage: ferry-cli demo [--model wan|h3] [--prompt TEXT] [--out FILE.mp4] "
                "[generate options]");
  }
  std::printf(
      "Ferry demo: a tiny model of the %s architecture with RANDOM weights, so the\n"
      "video is noise-like patterns, not a picture of the prompt. It runs the whole path\n"
      "(text encoder, diffusion model streamed from disk, %s, MP4) to show it works here.\n"
      "Real videos need a real model folder: ferry-cli generate --model DIR ...\n\n",
      family == "h3" ? "MiniMax-H3 (video with sound)" : "Wan 2.2 TI2V",
      family == "h3" ? "video and audio VAEs" : "VAE");
  std::fflush(stdout);  // before the progress lines on stderr
  pipeline::SessionOptions options = session_options(args);
  options.generator.stream_all = true;  // the demo streams every block from disk
  const pipeline::Session session(std::move(options));
  pipeline::GenerationRequest r = request_from(args);
  r.model = {session.write_demo_model(
      io::user_data_subdir(family == "h3" ? "demo-model-h3" : "demo-model"), family)};
  if (r.prompt.empty()) r.prompt = "a red ferry crossing a calm fjord at sunrise, cinematic";
  // The demo model's own small defaults, unless asked otherwise.
  const pipeline::ModelHandle model = session.find(r.model);
  const models::RequestRules rules = model->rules();
  if (r.width == 0 && r.height == 0) {
    r.width = rules.width;
    r.height = rules.height;
  }
  if (r.frames == 0) r.frames = rules.frames;
  // A sampler asked for brings its own defaults (distill4: 4 steps), filled in by the model.
  if (r.steps == 0 && !r.sampler) r.steps = rules.steps;
  if (r.output.empty()) {
    r.output =
        io::user_data_subdir("videos") / ("ferry-demo" + std::string(media::video_extension()));
  }
  return run(session, *model, r, true);
}

}  // namespace ferry::cli
