#include "gui/job_estimate.h"

#include <QObject>
#include <algorithm>

#include "core/pipeline/generator.h"

namespace ferry::gui {

JobEstimate::JobEstimate(const QStringList& stages, const QVector<bool>& streams, int steps,
                         StageTimes measured)
    : measured_(std::move(measured)), steps_(steps) {
  for (qsizetype i = 0; i < stages.size(); ++i) {
    Row row;
    row.name = stages[i];
    const bool blocks = i < streams.size() && streams[i];
    // The last stage decodes (a decode of saved latents is the only one); the first encodes
    // the prompt.
    if (i == stages.size() - 1) {
      row.kind = Kind::kDecode;
    } else if (i == 0) {
      row.kind = Kind::kText;
    } else {
      row.kind = blocks ? Kind::kDenoise : Kind::kImage;
    }
    rows_.push_back(row);
  }
}

void JobEstimate::start(double now) {
  started_ = now;
  rowStarted_ = now;
}

int JobEstimate::rowFor(Kind kind, const QString& phase) const {
  // The next row of that kind from the current one on (an expert by its name), so that two
  // stages of one kind fill their own rows in turn.
  const auto matches = [&](int i) {
    return rows_[i].kind == kind &&
           (phase.isEmpty() || rows_[i].name.compare(phase, Qt::CaseInsensitive) == 0);
  };
  for (int i = std::max(current_, 0); i < rows_.size(); ++i) {
    if (matches(i)) return i;
  }
  for (int i = 0; i < rows_.size(); ++i) {
    if (matches(i)) return i;
  }
  for (int i = 0; i < rows_.size(); ++i) {
    if (rows_[i].kind == kind) return i;
  }
  return -1;
}

void JobEstimate::moveTo(int row, double now) {
  if (row < 0 || row == current_) return;
  if (current_ >= 0) {
    rows_[current_].seconds += now - rowStarted_;
    // Every row before the new one is over (a stage the run skipped included).
    for (int i = 0; i < row; ++i) rows_[i].done = true;
  }
  current_ = row;
  rowStarted_ = now;
}

void JobEstimate::enterStage(int stage, double now) {
  switch (static_cast<pipeline::Stage>(stage)) {
    case pipeline::Stage::kText:
      moveTo(rowFor(Kind::kText, {}), now);
      break;
    case pipeline::Stage::kImage:
      moveTo(rowFor(Kind::kImage, {}), now);
      break;
    case pipeline::Stage::kDenoise:
      moveTo(rowFor(Kind::kDenoise, {}), now);
      break;
    case pipeline::Stage::kDecode:
    case pipeline::Stage::kWrite:  // the decode's last part: its frames go to the file
      moveTo(rowFor(Kind::kDecode, {}), now);
      break;
  }
}

void JobEstimate::step(const StepInfo& info, double now) {
  moveTo(rowFor(Kind::kDenoise, info.phase), now);
  stepsDone_ = info.step;
  if (info.steps > 0) steps_ = info.steps;
  runSecondsPerStep_ = info.secondsPerStep;
}

void JobEstimate::finish(double now) {
  if (current_ >= 0) rows_[current_].seconds += now - rowStarted_;
  for (Row& r : rows_) r.done = true;
  finished_ = true;
  finishedAt_ = now;
  rowStarted_ = now;
}

double JobEstimate::secondsPerStep() const {
  if (stepsDone_ > 0 && runSecondsPerStep_ > 0) return runSecondsPerStep_;
  return measured_.value(QStringLiteral("denoise"), -1);
}

double JobEstimate::expected(int row) const {
  const Row& r = rows_[row];
  const double perStep = secondsPerStep();
  switch (r.kind) {
    case Kind::kText:
      return measured_.value(QStringLiteral("text"), -1);
    case Kind::kImage:
      return measured_.value(QStringLiteral("image"), -1);
    case Kind::kDenoise: {
      if (perStep < 0) return -1;
      // Experts share the steps; a row's share is what the whole denoise takes over the experts.
      const auto experts = std::count_if(rows_.begin(), rows_.end(),
                                         [](const Row& x) { return x.kind == Kind::kDenoise; });
      return perStep * steps_ / static_cast<double>(std::max<qsizetype>(experts, 1));
    }
    case Kind::kDecode:
      if (measured_.contains(QStringLiteral("decode"))) return measured_[QStringLiteral("decode")];
      return perStep < 0 ? -1 : perStep * kDecodeGuessInSteps;
  }
  return -1;
}

double JobEstimate::remaining(double now) const {
  if (finished_) return 0;
  double left = 0;
  const double perStep = secondsPerStep();
  bool denoiseCounted = false;
  for (int i = std::max(current_, 0); i < rows_.size(); ++i) {
    const Row& r = rows_[i];
    if (r.kind == Kind::kDenoise) {
      // The steps left, whichever expert runs them.
      if (denoiseCounted) continue;
      denoiseCounted = true;
      if (perStep < 0) return -1;
      left += perStep * std::max(steps_ - stepsDone_, 0);
      continue;
    }
    const double whole = expected(i);
    if (whole < 0) {
      // An unmeasured text or image stage is short beside the denoise; the decode is not.
      if (r.kind == Kind::kDecode) return -1;
      continue;
    }
    left += std::max(whole - (i == current_ ? spent(i, now) : 0), 0.0);
  }
  return left;
}

double JobEstimate::elapsed(double now) const {
  return (finished_ ? finishedAt_ : now) - started_;
}

double JobEstimate::spent(int row, double now) const {
  const bool running = row == current_ && !finished_;
  return rows_[row].seconds + (running ? now - rowStarted_ : 0);
}

StageTimes measuredTimes(const QVector<QPair<QString, double>>& stageSeconds, int steps) {
  StageTimes times;
  for (const auto& [key, seconds] : stageSeconds) {
    if (key == QLatin1String("denoise")) {
      if (steps > 0) times[key] = seconds / steps;
    } else {
      times[key] += seconds;
    }
  }
  return times;
}

QString durationText(double seconds) {
  if (seconds < 60) return QObject::tr("%1 s").arg(seconds, 0, 'f', 1);
  const int s = static_cast<int>(seconds);
  if (seconds < 3600) {
    return QObject::tr("%1 min %2 s").arg(s / 60).arg(s % 60, 2, 10, QLatin1Char('0'));
  }
  return QObject::tr("%1 h %2 min").arg(s / 3600).arg(s / 60 % 60, 2, 10, QLatin1Char('0'));
}

}  // namespace ferry::gui
