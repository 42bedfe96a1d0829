#include "core/pipeline/run_log.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <initializer_list>
#include <string>
#include <system_error>
#include <vector>

#include "core/io/detail/os_file.h"

namespace ferry::pipeline {
namespace fs = std::filesystem;
namespace {

std::tm local_time(std::time_t t) {
  std::tm tm{};
#ifdef _WIN32
  localtime_s(&tm, &t);
#else
  localtime_r(&t, &tm);
#endif
  return tm;
}

std::string format_time(const char* format) {
  const std::tm tm = local_time(std::time(nullptr));
  char text[64];
  const std::size_t n = std::strftime(text, sizeof text, format, &tm);
  return std::string(text, n);
}

// Concatenation in one pass (and clear of GCC 12's -Wrestrict false alarm on "literal" + string).
std::string cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) out += p;
  return out;
}

std::string gib(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
  return text;
}

bool is_run_log(const fs::path& p) {
  const std::string name = p.filename().string();
  return name.size() > 10 && name.rfind("ferry-", 0) == 0 && p.extension() == ".log";
}

// Keeps the `keep` newest logs: the names carry the start time, so name order is age order.
void prune(const fs::path& folder, int keep) {
  std::vector<fs::path> logs;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(folder, ec)) {
    if (e.is_regular_file(ec) && is_run_log(e.path())) logs.push_back(e.path());
  }
  std::sort(logs.begin(), logs.end());
  const std::size_t excess = logs.size() > static_cast<std::size_t>(std::max(keep, 1))
                                 ? logs.size() - static_cast<std::size_t>(std::max(keep, 1))
                                 : 0;
  for (std::size_t i = 0; i < excess; ++i) fs::remove(logs[i], ec);  // best effort
}

}  // namespace

RunLog::RunLog(const fs::path& folder, ProgressSink& forward, int keep)
    : forward_(forward), start_(std::chrono::steady_clock::now()) {
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) {
    throw Error(ErrorCode::kIo, cat({"cannot create the logs folder ", io::detail::display(folder),
                                     ": ", ec.message()}));
  }
  const std::string stem = cat({"ferry-", format_time("%Y%m%d-%H%M%S")});
  path_ = folder / cat({stem, ".log"});
  for (int n = 2; fs::exists(path_, ec); ++n) {
    path_ = folder / cat({stem, "-", std::to_string(n), ".log"});
  }
  out_.open(path_, std::ios::binary | std::ios::trunc);
  if (!out_) {
    throw Error(ErrorCode::kIo, cat({"cannot write the log ", io::detail::display(path_)}));
  }
  // The new log is one of the `keep`: prune after creating it.
  prune(folder, keep);
}

void RunLog::line(std::string_view text) {
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  char stamp[32];
  std::snprintf(stamp, sizeof stamp, "[%9.3f s] ", t);
  out_ << stamp << text << '\n';
  out_.flush();
}

void RunLog::started(const GenerationRequest& r, const offload::MachineInfo& machine,
                     std::string_view backend) {
  line(cat({"Ferry " FERRY_VERSION " run started ", format_time("%Y-%m-%d %H:%M:%S %z")}));
  const std::string gpu = machine.has_gpu ? cat({"GPU with ", gib(machine.total_vram_bytes),
                                                 " VRAM (", gib(machine.free_vram_bytes), " free)"})
                                          : std::string("no usable GPU");
  line(cat({"machine: ", gpu, ", RAM ", gib(machine.total_ram_bytes), " (",
            gib(machine.available_ram_bytes), " available)"}));
  line(cat({"backend: ", backend, ", preset: ", r.preset}));
  std::string model = "model:";
  for (const fs::path& p : r.model) model += cat({" ", io::detail::display(p)});
  line(model);
  line(cat({"prompt: ", r.prompt}));
  line(cat({"negative prompt: ", r.negative_prompt.empty()
                                     ? std::string_view("(the model's default)")
                                     : std::string_view(r.negative_prompt)}));
  if (r.image) line(cat({"start image: ", io::detail::display(*r.image)}));
  if (r.end_image) line(cat({"end image: ", io::detail::display(*r.end_image)}));
  // 0 and unset values are the model's defaults, resolved by the generator.
  std::string s = cat({"asked for: ", std::to_string(r.width), "x", std::to_string(r.height), ", ",
                       std::to_string(r.frames), " frames, ", std::to_string(r.steps),
                       " steps, seed ", std::to_string(r.seed)});
  if (r.guide_scale) s += cat({", guide scale ", std::to_string(*r.guide_scale)});
  if (r.low_noise_guide_scale) {
    s += cat({", low-noise guide scale ", std::to_string(*r.low_noise_guide_scale)});
  }
  if (r.shift) s += cat({", shift ", std::to_string(*r.shift)});
  if (r.sampler) s += cat({", sampler ", *r.sampler});
  line(cat({s, " (0: the model's default)"}));
  line(cat({"output: ", io::detail::display(r.output)}));
}

void RunLog::note(const std::string& text) {
  line(text);
  forward_.note(text);
}

void RunLog::stage(Stage stage) {
  line(cat({"stage: ", stage_name(stage)}));
  forward_.stage(stage);
}

void RunLog::step(const StepProgress& p) {
  line(cat({"step ", std::to_string(p.step), "/", std::to_string(p.steps), " ",
            offload::to_json_line(p.stats)}));
  forward_.step(p);
}

void RunLog::preview(const media::RgbImage& image) {
  forward_.preview(image);
}

void RunLog::preview_frames(const std::vector<media::RgbImage>& frames) {
  forward_.preview_frames(frames);
}

void RunLog::finished(const GenerationResult& result) {
  for (const offload::StageStats& s : result.stages) {
    line(cat({"stage ", s.stage, " ", offload::to_json_line(s)}));
  }
  const ResolvedRequest& r = result.settings;
  line(cat({"finished: ", io::detail::display(result.video), " (", result.encoder, ", ",
            std::to_string(r.width), "x", std::to_string(r.height), ", ", std::to_string(r.frames),
            " frames, seed ", std::to_string(r.request.seed), "), predicted VRAM peak ",
            gib(result.peak_device_bytes)}));
}

void RunLog::failed(const Error& error) {
  line(cat({"failed (", to_string(error.code()), "): ", error.what()}));
}

void RunLog::failed(std::string_view what) {
  line(cat({"failed: ", what}));
}

void RunLog::cancelled() {
  line("cancelled");
}

}  // namespace ferry::pipeline
