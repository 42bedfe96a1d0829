// The engine's side of the app: a QObject that lives on its own QThread, owns the Backend and the
// pipeline::Generator of the running job, and reports the job's stages, steps, previews and end as
// signals. Signals reach GUI-thread receivers as queued invocations (OBS's pattern), so the GUI
// thread never waits for the engine; cancel() may be called from any thread.
#pragma once

#include <QImage>
#include <QMetaType>
#include <QObject>
#include <QString>
#include <QVector>
#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <vector>

#include "core/offload/preset.h"
#include "core/pipeline/generator.h"

namespace ferry {
class Backend;
}

namespace ferry::gui {

// What one run needs besides the request: the machine it plans for and the presets it may use.
struct GenerationJob {
  pipeline::GenerationRequest request;
  offload::MachineInfo machine;
  std::vector<offload::Preset> presets;
  bool streamAll = false;  // the demo: every block from disk, whatever the machine holds
  // The run's log (pipeline::RunLog) goes in this folder; empty: no log.
  std::filesystem::path logFolder;
};

// One denoising step as the charts and the status bar show it.
struct StepInfo {
  int step = 0;  // 1-based
  int steps = 0;
  double stepSeconds = 0;
  double secondsPerStep = 0;  // mean so far
  double etaSeconds = 0;
  quint64 ramBytes = 0;      // process resident set at the end of the step
  quint64 ramPeakBytes = 0;  // the largest resident set seen during the step
  quint64 vramBytes = 0;     // the driver's used bytes (0 without a GPU)
  quint64 vramPeakBytes = 0;
  quint64 bytesRead = 0;
  double ioWaitSeconds = 0;
};

struct GenerationOutcome {
  QString video;
  QString sidecar;
  QString encoder;
  QString settingsJson;  // the sidecar's contents: every setting, defaults filled in
  int width = 0, height = 0, frames = 0, fps = 0, steps = 0;
  quint64 seed = 0;
  quint64 peakDeviceBytes = 0;
};

class GenerationWorker : public QObject {
  Q_OBJECT

 public:
  explicit GenerationWorker(QObject* parent = nullptr);
  ~GenerationWorker() override;

  // From any thread: the running job stops within one layer and emits cancelled(); a job queued
  // but not started is dropped the same way. A later prepare() clears the request.
  void cancel();
  // Called by the owner before it queues generate(): forgets an earlier cancel().
  void prepare();
  bool isRunning() const { return running_; }

 public slots:
  // Runs the job on this object's thread and ends with exactly one of finished(), failed() or
  // cancelled().
  void generate(const ferry::gui::GenerationJob& job);
  // Decodes the frames of a video for the player, scaled down to at most `maxWidth` pixels wide;
  // emits framesLoaded() or framesFailed().
  void loadFrames(const QString& video, int maxWidth);

 signals:
  // `logPath`: the run's log, empty when none could be written.
  void started(const QString& logPath);
  void stageChanged(int stage, const QString& name);
  void step(const ferry::gui::StepInfo& info);
  void preview(const QImage& image);
  void finished(const ferry::gui::GenerationOutcome& outcome);
  void failed(const QString& message, int errorCode);
  void cancelled();
  void framesLoaded(const QString& video, const QVector<QImage>& frames, double fps);
  void framesFailed(const QString& video, const QString& message);

 private:
  class Sink;
  void repeatCancel();   // cancels the generator again when a cancel was asked for
  void releaseEngine();  // frees the backend and the generator between jobs
  std::atomic<bool> cancelRequested_{false};
  std::atomic<bool> running_{false};
  std::mutex mutex_;  // guards generator_ against cancel() from other threads
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<pipeline::Generator> generator_;
};

// 8-bit RGB rows → a QImage that owns its pixels.
QImage toQImage(const media::RgbImage& image);

}  // namespace ferry::gui

Q_DECLARE_METATYPE(ferry::gui::GenerationJob)
Q_DECLARE_METATYPE(ferry::gui::StepInfo)
Q_DECLARE_METATYPE(ferry::gui::GenerationOutcome)
