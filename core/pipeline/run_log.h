// A log of one generation run, one file per run in the per-user logs folder (architecture.md §7):
// what ran (Ferry's version, the machine, the backend, the request as given), each stage and
// each step as it happened (the telemetry's JSON lines), and how the run ended (the video, each
// stage's time and peaks — or the error, or the cancel). The app's users never see a terminal:
// this file is what a failed or slow run is reported with. Every line is flushed as it is
// written, so a run that dies leaves its log up to that point. Only the newest `keep` logs stay.
//
// RunLog is a ProgressSink that logs each event and then hands it to the sink it wraps, so it
// sits between the generator and the caller's own sink.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "core/error.h"
#include "core/offload/preset.h"
#include "core/pipeline/generator.h"

namespace ferry::pipeline {

class RunLog final : public ProgressSink {
 public:
  static constexpr int kDefaultKeep = 30;

  // Creates `folder` if needed, opens ferry-YYYYMMDD-HHMMSS.log there (-2, -3, ... when that
  // name is taken) and deletes the oldest ferry-*.log files beyond `keep`. Error(kIo) when the
  // folder or the file cannot be written: callers run without a log then, never fail the run.
  RunLog(const std::filesystem::path& folder, ProgressSink& forward, int keep = kDefaultKeep);

  const std::filesystem::path& path() const { return path_; }

  // The run's header: the request as given, the machine it plans for, the backend that runs it.
  void started(const GenerationRequest& request, const offload::MachineInfo& machine,
               std::string_view backend);
  // Any other line worth keeping (a fallback to the CPU, a setting the caller changed).
  void note(const std::string& text) override;
  void finished(const GenerationResult& result);
  void failed(const Error& error);
  void failed(std::string_view what);  // a failure that is not a ferry::Error
  void cancelled();

  void stage(Stage stage) override;
  void step(const StepProgress& progress) override;
  void preview(const media::RgbImage& image) override;
  bool wants_preview_frames() const override { return forward_.wants_preview_frames(); }
  void preview_frames(const std::vector<media::RgbImage>& frames) override;

 private:
  void line(std::string_view text);

  std::filesystem::path path_;
  std::ofstream out_;
  ProgressSink& forward_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace ferry::pipeline
