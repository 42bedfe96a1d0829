#include "core/pipeline/session.h"

#include <cstdio>
#include <utility>

#include "core/error.h"
#include "core/offload/machine.h"

namespace ferry::pipeline {
namespace {

std::string gib(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  return text;
}

std::optional<std::pair<int, int>> image_size(const GenerationRequest& request) {
  if (!request.image) return std::nullopt;
#if defined(FERRY_HAVE_FFMPEG)
  const media::RgbImage image = media::load_image(*request.image);
  return std::pair(image.width, image.height);
#else
  throw Error(ErrorCode::kUnsupported, "this build of Ferry reads no images (no FFmpeg)");
#endif
}

}  // namespace

Session::Session(SessionOptions options) : options_(std::move(options)) {
  std::string why;
  gpu_ = offload::find_gpu(&why);
  machine_ = options_.machine ? *options_.machine : offload::probe_machine();
  if (!gpu_) gpu_missing_ = why.empty() ? "no usable NVIDIA GPU" : why;
  presets_ = options_.presets ? *options_.presets : offload::load_presets(options_.user_presets);
}

std::string Session::machine_summary() const {
  const bool gpu = options_.machine ? machine_.has_gpu : machine_.has_gpu && gpu_missing_.empty();
  const std::string name = gpu_ && !options_.machine ? gpu_->name + " (" + gpu_->architecture +
                                                           ", " + gpu_->driver + "), "
                                                     : "";
  std::string text =
      gpu ? name + "GPU with " + gib(machine_.total_vram_bytes) + " of VRAM (" +
                gib(machine_.free_vram_bytes) + " free)"
          : "no usable GPU (" +
                (gpu_missing_.empty() ? std::string("none described") : gpu_missing_) + ")";
  return text + "; RAM " + gib(machine_.total_ram_bytes) + " (" +
         gib(machine_.available_ram_bytes) + " available)";
}

RunTarget Session::target(std::string_view preset_name) const {
  RunTarget t;
  t.device = "CPU";
  t.preset = offload::find_preset(presets_, preset_name, machine_);
  if (t.preset.device != Device::kCuda) return t;
  // A machine described by the caller is planned for as described; this one only when its GPU
  // is usable (run() still falls back if the GPU will not start).
  const bool gpu_usable =
      options_.machine ? machine_.has_gpu : machine_.has_gpu && gpu_missing_.empty();
  if (gpu_usable) {
    t.on_gpu = true;
    t.device = gpu_ ? gpu_->name + " (" + gpu_->architecture + ")" : "the GPU described";
    return t;
  }
  t.fell_back_to_cpu = true;
  t.reason = !gpu_missing_.empty() ? gpu_missing_ : "the machine described has no GPU";
  t.preset = offload::find_preset(presets_, "cpu", machine_);
  return t;
}

ModelHandle Session::find(const std::vector<std::filesystem::path>& paths) const {
  return models::open_model(paths);
}

std::filesystem::path Session::write_demo_model(const std::filesystem::path& folder,
                                                std::string_view family) const {
  if (!family.empty() || models::find_family("wan") != nullptr) {
    const std::string_view name = family.empty() ? std::string_view("wan") : family;
    const models::ModelFamily* f = models::find_family(name);
    if (f != nullptr) {
      if (const auto written = f->write_demo_model(folder)) return *written;
    }
    throw Error(ErrorCode::kUnsupported,
                "this build of Ferry has no " + std::string(name) + " demo model");
  }
  for (const models::ModelFamily* f : models::model_families()) {
    if (const auto written = f->write_demo_model(folder)) return *written;
  }
  throw Error(ErrorCode::kUnsupported, "this build of Ferry has no demo model");
}

ResolvedRequest Session::validate(const models::ModelParts& model,
                                  const GenerationRequest& request) const {
  ResolvedRequest r = model.resolve(request, image_size(request));
  check_decode_request(model, request);
  return r;
}

models::GenerationPlan Session::plan(const models::ModelParts& model,
                                     const ResolvedRequest& request) const {
  const RunTarget t = target(request.request.preset);
  return model.plan(request, t.preset, machine_, options_.generator.stream_all);
}

GenerationResult Session::run(const models::ModelParts& model, const GenerationRequest& request,
                              ProgressSink& sink, CancelToken& cancel) const {
  cancel.throw_if_cancelled();
  RunTarget t = target(request.preset);
  offload::BackendChoice chosen = offload::choose_backend(t.preset, machine_);
  if (chosen.fell_back_to_cpu && !t.fell_back_to_cpu) {  // the GPU would not start
    t.fell_back_to_cpu = true;
    t.reason = chosen.reason;
    t.preset = offload::find_preset(presets_, "cpu", machine_);
  }
  GeneratorOptions options = options_.generator;
  options.notes.push_back("running on " +
                          (chosen.fell_back_to_cpu ? std::string("CPU") : t.device) +
                          " with preset " + t.preset.name);
  if (t.fell_back_to_cpu) {
    options.notes.push_back("no usable NVIDIA GPU (" + t.reason +
                            "): running on the CPU with the cpu preset; this will be slow");
  }
  options.device_memory = chosen.device_memory;
  GenerationRequest effective = request;
  effective.preset = t.preset.name;
  return generate(*chosen.backend, machine_, t.preset, model, effective, sink, cancel, options);
}

}  // namespace ferry::pipeline
