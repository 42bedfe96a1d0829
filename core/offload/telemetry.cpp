#include "core/offload/telemetry.h"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace ferry::offload {

std::string to_json_line(const StepStats& s) {
  char line[768];
  std::snprintf(
      line, sizeof line,
      "{\"step\":%d,\"seconds\":%.6f,\"compute_seconds\":%.6f,\"io_wait_seconds\":%.6f,"
      "\"bytes_read\":%llu,\"rss_bytes\":%llu,\"rss_peak_in_step\":%llu,\"rss_peak_bytes\":%llu,"
      "\"commit_bytes\":%llu,\"commit_peak_in_step\":%llu,\"system_available_bytes\":%llu,"
      "\"vram_used_bytes\":%llu,\"vram_arena_bytes\":%llu,\"vram_peak_in_step\":%llu}",
      s.step, s.seconds, s.compute_seconds, s.io_wait_seconds,
      static_cast<unsigned long long>(s.bytes_read),
      static_cast<unsigned long long>(s.process.resident_bytes),
      static_cast<unsigned long long>(s.peak_resident_in_step),
      static_cast<unsigned long long>(s.process.peak_resident_bytes),
      static_cast<unsigned long long>(s.process.commit_bytes),
      static_cast<unsigned long long>(s.peak_commit_in_step),
      static_cast<unsigned long long>(s.system_available_bytes),
      static_cast<unsigned long long>(s.device.used_bytes),
      static_cast<unsigned long long>(s.device.arena_bytes),
      static_cast<unsigned long long>(s.device_peak_in_step));
  std::string json = line;
  if (!s.phase.empty()) {
    // A family's fixed phase name (letters, digits, spaces, hyphens): nothing to escape.
    json.insert(json.size() - 1, ",\"phase\":\"" + s.phase + "\"");
  }
  if (s.preview_noted) {
    char preview[96];
    std::snprintf(preview, sizeof preview, ",\"preview_ms\":%.3f,\"preview_skipped\":%s",
                  s.preview_seconds * 1e3, s.preview_skipped ? "true" : "false");
    json.insert(json.size() - 1, preview);
  }
  return json;
}

std::string to_json_line(const StageStats& s) {
  char line[512];
  std::snprintf(line, sizeof line,
                "\",\"seconds\":%.6f,\"rss_bytes\":%llu,\"rss_peak_in_stage\":%llu,"
                "\"rss_peak_bytes\":%llu,\"commit_bytes\":%llu,\"commit_peak_in_stage\":%llu,"
                "\"vram_peak_in_stage\":%llu}",
                s.seconds, static_cast<unsigned long long>(s.process.resident_bytes),
                static_cast<unsigned long long>(s.peak_resident_in_stage),
                static_cast<unsigned long long>(s.process.peak_resident_bytes),
                static_cast<unsigned long long>(s.process.commit_bytes),
                static_cast<unsigned long long>(s.peak_commit_in_stage),
                static_cast<unsigned long long>(s.device_peak_in_stage));
  return "{\"stage\":\"" + s.stage + line;  // stage names are Ferry's own: no escaping needed
}

Telemetry::Telemetry(DeviceSampler device, Callback callback, std::ostream* jsonl)
    : device_(std::move(device)), callback_(std::move(callback)), jsonl_(jsonl) {
  sampler_ = std::thread([this] { run(); });
}

Telemetry::~Telemetry() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  sampler_.join();
}

void Telemetry::sample_locked() {
  const memory::ProcessMemory m = memory::sample_process_memory();
  const std::uint64_t device = device_ ? device_().used_bytes : 0;
  peak_resident_ = std::max(peak_resident_, m.resident_bytes);
  peak_commit_ = std::max(peak_commit_, m.commit_bytes);
  device_peak_ = std::max(device_peak_, device);
  stage_peak_resident_ = std::max(stage_peak_resident_, m.resident_bytes);
  stage_peak_commit_ = std::max(stage_peak_commit_, m.commit_bytes);
  stage_device_peak_ = std::max(stage_device_peak_, device);
}

void Telemetry::run() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, kSampleInterval);
    if ((in_step_ || in_stage_) && !stop_) sample_locked();
  }
}

void Telemetry::begin_step() {
  std::lock_guard lock(mutex_);
  ++step_;
  in_step_ = true;
  peak_resident_ = peak_commit_ = device_peak_ = 0;
  step_start_ = std::chrono::steady_clock::now();
  sample_locked();
}

void Telemetry::set_phase(std::string phase) {
  std::lock_guard lock(mutex_);
  phase_ = std::move(phase);
}

StepStats Telemetry::end_step(double compute_seconds, double io_wait_seconds,
                              std::uint64_t bytes_read) {
  StepStats s;
  {
    std::lock_guard lock(mutex_);
    sample_locked();
    in_step_ = false;
    s.step = step_;
    s.phase = phase_;
    s.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start_).count();
    s.process = memory::sample_process_memory();
    s.peak_resident_in_step = std::max(peak_resident_, s.process.resident_bytes);
    s.peak_commit_in_step = std::max(peak_commit_, s.process.commit_bytes);
    s.system_available_bytes = memory::sample_system_memory().available_bytes;
    if (device_) s.device = device_();
    s.device_peak_in_step = std::max(device_peak_, s.device.used_bytes);
  }
  s.compute_seconds = compute_seconds;
  s.io_wait_seconds = io_wait_seconds;
  s.bytes_read = bytes_read;
  s.preview_noted = std::exchange(preview_noted_, false);
  s.preview_seconds = std::exchange(preview_seconds_, 0.0);
  s.preview_skipped = std::exchange(preview_skipped_, false);
  if (jsonl_ != nullptr) {
    *jsonl_ << to_json_line(s) << '\n';
    jsonl_->flush();
  }
  if (callback_) callback_(s);
  return s;
}

void Telemetry::note_preview(double seconds, bool skipped) {
  preview_noted_ = true;
  preview_seconds_ = seconds;
  preview_skipped_ = skipped;
}

void Telemetry::begin_stage(std::string name) {
  std::lock_guard lock(mutex_);
  in_stage_ = true;
  stage_ = std::move(name);
  stage_peak_resident_ = stage_peak_commit_ = stage_device_peak_ = 0;
  stage_start_ = std::chrono::steady_clock::now();
  sample_locked();
}

StageStats Telemetry::end_stage() {
  StageStats s;
  {
    std::lock_guard lock(mutex_);
    sample_locked();
    in_stage_ = false;
    s.stage = stage_;
    s.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - stage_start_).count();
    s.process = memory::sample_process_memory();
    s.peak_resident_in_stage = std::max(stage_peak_resident_, s.process.resident_bytes);
    s.peak_commit_in_stage = std::max(stage_peak_commit_, s.process.commit_bytes);
    s.device_peak_in_stage = stage_device_peak_;
  }
  if (jsonl_ != nullptr) {
    *jsonl_ << to_json_line(s) << '\n';
    jsonl_->flush();
  }
  return s;
}

}  // namespace ferry::offload
