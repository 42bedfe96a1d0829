// Per-step memory and time telemetry: what the user watches live and what the JSONL stats file
// of architecture.md §7 records, one line per step. A sampler thread reads process memory at
// ≤ 10 Hz inside a step so short peaks between step boundaries are seen too.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>

#include "core/memory/process_memory.h"

namespace ferry::offload {

struct DeviceMemorySample {
  std::uint64_t used_bytes = 0;   // what the driver reports in use (cudaMemGetInfo)
  std::uint64_t arena_bytes = 0;  // what Ferry's own accounting holds (arenas, slots, residents)
};

struct StepStats {
  int step = 0;                   // 1-based
  // Which part of the stage ran the step, when a stage has parts: Wan 2.2 A14B's "high-noise
  // expert" and "low-noise expert". Empty otherwise.
  std::string phase;
  double seconds = 0;             // wall time of the step
  double compute_seconds = 0;     // of which computing
  double io_wait_seconds = 0;     // of which waiting for weights
  std::uint64_t bytes_read = 0;   // read from model files during the step
  memory::ProcessMemory process;  // at the end of the step
  std::uint64_t peak_resident_in_step = 0;
  std::uint64_t peak_commit_in_step = 0;
  std::uint64_t system_available_bytes = 0;
  DeviceMemorySample device;  // at the end of the step
  std::uint64_t device_peak_in_step = 0;
  // The live preview after the step (Telemetry::note_preview): made (its seconds), skipped to
  // keep previews under their share of the step time, or neither (no preview this run).
  bool preview_noted = false;
  double preview_seconds = 0;
  bool preview_skipped = false;
};

// A whole stage (text encoding, denoising, decoding): its time and the peaks seen while it ran.
struct StageStats {
  std::string stage;
  double seconds = 0;
  memory::ProcessMemory process;  // at the end of the stage
  std::uint64_t peak_resident_in_stage = 0;
  std::uint64_t peak_commit_in_stage = 0;
  std::uint64_t device_peak_in_stage = 0;
};

// One JSON object per line: {"step":3,"seconds":...,"rss_bytes":...}.
std::string to_json_line(const StepStats& stats);
// {"stage":"denoise","seconds":...,"rss_peak_in_stage":...}.
std::string to_json_line(const StageStats& stats);

class Telemetry {
 public:
  using DeviceSampler = std::function<DeviceMemorySample()>;
  using Callback = std::function<void(const StepStats&)>;
  static constexpr std::chrono::milliseconds kSampleInterval{100};  // ≤ 10 Hz

  // `device` may be empty (CPU runs); `jsonl` may be null.
  Telemetry(DeviceSampler device, Callback callback, std::ostream* jsonl);
  ~Telemetry();
  Telemetry(const Telemetry&) = delete;
  Telemetry& operator=(const Telemetry&) = delete;

  void begin_step();
  // The phase the following steps belong to (StepStats::phase), until the next call.
  void set_phase(std::string phase);
  // Ends the step with the streamer's figures for it; returns and delivers its stats.
  StepStats end_step(double compute_seconds, double io_wait_seconds, std::uint64_t bytes_read);
  // The open step's preview took `seconds` (0 when `skipped`): reported by its end_step (JSON
  // "preview_ms", "preview_skipped").
  void note_preview(double seconds, bool skipped);

  // Stages enclose steps: memory is sampled while either is open, and a stage's peaks include
  // its steps'. end_stage() writes the stage's line to the JSONL stream (not to the callback).
  void begin_stage(std::string name);
  StageStats end_stage();

 private:
  void sample_locked();
  void run();

  DeviceSampler device_;
  Callback callback_;
  std::ostream* jsonl_;
  int step_ = 0;
  std::string phase_;
  bool preview_noted_ = false;
  double preview_seconds_ = 0;
  bool preview_skipped_ = false;
  std::chrono::steady_clock::time_point step_start_;
  std::uint64_t peak_resident_ = 0;
  std::uint64_t peak_commit_ = 0;
  std::uint64_t device_peak_ = 0;
  bool in_step_ = false;
  bool in_stage_ = false;
  std::string stage_;
  std::chrono::steady_clock::time_point stage_start_;
  std::uint64_t stage_peak_resident_ = 0;
  std::uint64_t stage_peak_commit_ = 0;
  std::uint64_t stage_device_peak_ = 0;
  bool stop_ = false;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread sampler_;
};

}  // namespace ferry::offload
