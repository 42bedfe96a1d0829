// The engine's side of the app: a QObject that lives on its own QThread and runs each job through
// the session API (pipeline::Session::run), reporting the job's stages, steps, previews and end as
// signals. Signals reach GUI-thread receivers as queued invocations (OBS's pattern), so the GUI
// thread never waits for the engine; cancel() may be called from any thread. The session chooses
// the backend and falls back to the CPU (its note() lands in the run's log); the worker only
// translates.
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

#include "core/media/audio.h"
#include "core/pipeline/session.h"

namespace ferry::gui {

// A clip's soundtrack, shared by the worker that reads it and the player that plays it.
using SoundPtr = std::shared_ptr<const media::AudioTrack>;

// One run: the session that runs it, the model it opened, the request and where its log goes.
struct GenerationJob {
  std::shared_ptr<const pipeline::Session> session;
  pipeline::ModelHandle model;  // empty: the worker finds the model in request.model
  // Runs the model instead of `session` when it is the demo (which streams every block); for a
  // model the worker finds itself.
  std::shared_ptr<const pipeline::Session> demoSession;
  pipeline::GenerationRequest request;
  // The run's log (pipeline::RunLog) goes in this folder; empty: no log.
  std::filesystem::path logFolder;
};

// One denoising step as the charts and the status bar show it.
struct StepInfo {
  int step = 0;  // 1-based
  int steps = 0;
  // The part of the stage that ran the step (offload::StepStats::phase): "high-noise expert" or
  // "low-noise expert" for Wan 2.2 A14B; empty for one-expert models.
  QString phase;
  double stepSeconds = 0;
  double secondsPerStep = 0;  // mean so far
  double etaSeconds = 0;
  quint64 ramBytes = 0;      // process resident set at the end of the step
  quint64 ramPeakBytes = 0;  // the largest resident set seen during the step
  quint64 vramBytes = 0;     // the driver's used bytes (0 without a GPU)
  quint64 vramPeakBytes = 0;
  quint64 bytesRead = 0;
  double ioWaitSeconds = 0;
  // The TAEHV preview of the step (offload::StepStats): its seconds, or skipped to keep previews
  // under 5% of the step time. Steps without a TAEHV decoder have a colour sketch, neither.
  double previewSeconds = 0;
  bool previewSkipped = false;
};

struct GenerationOutcome {
  QString video;
  QString sidecar;
  QString encoder;
  QString settingsJson;  // the sidecar's contents: every setting, defaults filled in
  int width = 0, height = 0, frames = 0, fps = 0, steps = 0;
  quint64 seed = 0;
  quint64 peakDeviceBytes = 0;
  // Each stage's seconds as the engine measured them ("text", "image", "denoise", "decode"; the
  // decode's with the write), kept per model, preset and size for the next run's estimate.
  QVector<QPair<QString, double>> stageSeconds;
};

class GenerationWorker : public QObject {
  Q_OBJECT

 public:
  explicit GenerationWorker(QObject* parent = nullptr);
  ~GenerationWorker() override;

  // Called by the owner before it queues generate(): a new run's CancelToken. A token is never
  // reset, so a cancel() that comes before the run starts, or between two stages, is never lost.
  void prepare();
  // From any thread: the run prepare() made stops within one layer and emits cancelled(); if it
  // has not started yet, it ends with cancelled() as soon as it would start.
  void cancel();
  bool isRunning() const { return running_; }

 public slots:
  // Runs the job on this object's thread with the token of the last prepare(), and ends with
  // exactly one of finished(), failed() or cancelled().
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
  // The small animated preview: every latent frame as a small picture (with a TAEHV decoder).
  void previewFrames(const QVector<QImage>& frames);
  void finished(const ferry::gui::GenerationOutcome& outcome);
  void failed(const QString& message, int errorCode);
  void cancelled();
  // `sound`: the clip's soundtrack, null for a silent clip (or one whose sound cannot be read).
  void framesLoaded(const QString& video, const QVector<QImage>& frames, double fps,
                    const ferry::gui::SoundPtr& sound);
  void framesFailed(const QString& video, const QString& message);

 private:
  class Sink;
  std::shared_ptr<pipeline::CancelToken> takeToken();

  std::atomic<bool> running_{false};
  std::mutex mutex_;  // guards token_ against prepare() and cancel() from other threads
  std::shared_ptr<pipeline::CancelToken> token_;  // the next (or running) run's
};

// A step as the engine reports it → as the window shows it.
StepInfo stepInfo(const pipeline::StepProgress& progress);

// 8-bit RGB rows → a QImage that owns its pixels.
QImage toQImage(const media::RgbImage& image);

}  // namespace ferry::gui

Q_DECLARE_METATYPE(ferry::gui::GenerationJob)
Q_DECLARE_METATYPE(ferry::gui::StepInfo)
Q_DECLARE_METATYPE(ferry::gui::GenerationOutcome)
Q_DECLARE_METATYPE(ferry::gui::SoundPtr)
