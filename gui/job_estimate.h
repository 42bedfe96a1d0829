// The whole job's time as the window shows it while a video is made: which of the plan's stages
// runs (text encoder, image encode, each denoising expert, VAE decode), how long each has taken,
// and the time left for all of them — not only the denoising steps, whose own ETA ends where the
// decode (minutes with real models) begins. The estimate comes from the plan's stage list, the
// run's measured seconds per step and the stage times measured on an earlier run of the same
// model, preset and size (StageTimes, kept in the settings). No widgets: StageProgress shows it.
#pragma once

#include <QHash>
#include <QString>
#include <QStringList>
#include <QVector>

#include "gui/generation_worker.h"

namespace ferry::gui {

// Seconds per stage key ("text", "image", "decode"; "denoise" is per step) measured on an earlier
// run; a missing key was never measured.
using StageTimes = QHash<QString, double>;

class JobEstimate {
 public:
  // The first-run guess of the decode (with the write) until one is measured: as long as this
  // many denoising steps. Demo and real models both decode in more than one step's time; the
  // measurement of the first run replaces the guess.
  static constexpr double kDecodeGuessInSteps = 4;

  enum class Kind { kText, kImage, kDenoise, kDecode };
  struct Row {
    QString name;  // the plan's stage name: "text encoder", "high-noise expert", "VAE decode"
    Kind kind = Kind::kText;
    double seconds = 0;  // spent in it so far
    bool done = false;
  };

  JobEstimate() = default;
  // `stages`: the plan's stage names in order, `streams`: whether each streams blocks (the text
  // encoder first, the VAE decode last, the denoisers the block stages between, image encodes the
  // others); `steps`: the denoising steps; `measured`: from an earlier run, may be empty.
  JobEstimate(const QStringList& stages, const QVector<bool>& streams, int steps,
              StageTimes measured);

  // The engine's events, `now` in seconds from any fixed origin.
  void start(double now);
  void enterStage(int stage, double now);  // pipeline::Stage's value
  void step(const StepInfo& info, double now);
  void finish(double now);

  const QVector<Row>& rows() const { return rows_; }
  int current() const { return current_; }  // -1 before the first stage
  bool finished() const { return finished_; }
  int stepsDone() const { return stepsDone_; }
  int steps() const { return steps_; }
  // What `row` is expected to take in all; < 0 while nothing tells.
  double expected(int row) const;
  // The time left for the whole job; < 0 while nothing tells (the first run, before its first
  // step).
  double remaining(double now) const;
  double elapsed(double now) const;
  // The seconds `row` has run so far.
  double spent(int row, double now) const;
  // Seconds per denoising step: the run's mean once a step is done, else the measured one.
  double secondsPerStep() const;

 private:
  int rowFor(Kind kind, const QString& phase) const;
  void moveTo(int row, double now);

  QVector<Row> rows_;
  StageTimes measured_;
  int steps_ = 0;
  int stepsDone_ = 0;
  double runSecondsPerStep_ = 0;
  int current_ = -1;
  double started_ = 0;
  double rowStarted_ = 0;
  double finishedAt_ = 0;
  bool finished_ = false;
};

// The stage times of a finished run, as StageTimes keeps them (denoise per step).
StageTimes measuredTimes(const QVector<QPair<QString, double>>& stageSeconds, int steps);

// "12.3 s", "2 min 05 s", "1 h 02 min".
QString durationText(double seconds);

}  // namespace ferry::gui
