#include "gui/stage_progress.h"

#include <QGridLayout>
#include <QLabel>
#include <QProgressBar>
#include <QVBoxLayout>
#include <algorithm>

namespace ferry::gui {

StageProgress::StageProgress(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(2);
  grid_ = new QGridLayout;
  grid_->setHorizontalSpacing(8);
  grid_->setVerticalSpacing(1);
  layout->addLayout(grid_);
  summary_ = new QLabel;
  summary_->setAccessibleName(tr("Job time"));
  layout->addWidget(summary_);
  setAccessibleName(tr("Stages"));
  tick_.setInterval(1000);
  connect(&tick_, &QTimer::timeout, this, &StageProgress::refresh);
  hide();  // nothing to show before the first run
}

double StageProgress::now() const {
  return clock_.isValid() ? static_cast<double>(clock_.nsecsElapsed()) * 1e-9 : 0;
}

void StageProgress::start(JobEstimate estimate) {
  estimate_ = std::move(estimate);
  clock_.start();
  estimate_.start(now());
  running_ = true;
  rebuild();
  show();
  tick_.start();
  refresh();
}

void StageProgress::enterStage(int stage) {
  if (!running_) return;
  estimate_.enterStage(stage, now());
  refresh();
}

void StageProgress::step(const StepInfo& info) {
  if (!running_) return;
  estimate_.step(info, now());
  refresh();
}

void StageProgress::finish() {
  if (!running_) return;
  estimate_.finish(now());
  running_ = false;
  tick_.stop();
  refresh();
}

void StageProgress::stop() {
  running_ = false;
  tick_.stop();
  refresh();
}

void StageProgress::rebuild() {
  for (const RowWidgets& r : rows_) {
    delete r.name;
    delete r.bar;
    delete r.time;
  }
  rows_.clear();
  for (int i = 0; i < estimate_.rows().size(); ++i) {
    const QString& name = estimate_.rows()[i].name;
    RowWidgets r;
    r.name = new QLabel(name.left(1).toUpper() + name.mid(1));
    r.bar = new QProgressBar;
    r.bar->setTextVisible(false);
    r.bar->setMaximumHeight(8);
    r.bar->setRange(0, 1000);
    r.bar->setAccessibleName(r.name->text());
    r.time = new QLabel;
    grid_->addWidget(r.name, 0, i);
    grid_->addWidget(r.bar, 1, i);
    grid_->addWidget(r.time, 2, i);
    grid_->setColumnStretch(i, 1);
    rows_.push_back(r);
  }
}

QString StageProgress::rowText(int row) const {
  const JobEstimate::Row& r = estimate_.rows()[row];
  const bool current = row == estimate_.current() && !estimate_.finished();
  if (r.done || current) return durationText(estimate_.spent(row, now()));
  const double expected = estimate_.expected(row);
  return expected < 0 ? QStringLiteral("–") : QStringLiteral("≈ ") + durationText(expected);
}

QString StageProgress::summary() const {
  const double t = now();
  if (estimate_.finished()) return tr("Done in %1").arg(durationText(estimate_.elapsed(t)));
  const double left = estimate_.remaining(t);
  const QString elapsed = tr("Elapsed %1").arg(durationText(estimate_.elapsed(t)));
  if (!running_) return elapsed;
  if (left < 0) return tr("%1 · time left known after the first step").arg(elapsed);
  return tr("%1 · about %2 left").arg(elapsed, durationText(left));
}

void StageProgress::refresh() {
  const double t = now();
  for (int i = 0; i < rows_.size(); ++i) {
    const JobEstimate::Row& r = estimate_.rows()[i];
    RowWidgets& w = rows_[i];
    w.time->setText(rowText(i));
    w.name->setEnabled(r.done || i == estimate_.current());
    int value = 0;
    if (r.done) {
      value = 1000;
    } else if (i == estimate_.current()) {
      if (r.kind == JobEstimate::Kind::kDenoise && estimate_.steps() > 0) {
        value = 1000 * estimate_.stepsDone() / estimate_.steps();
      } else if (const double whole = estimate_.expected(i); whole > 0) {
        // The share of the expected time spent, short of full until the stage says it is over.
        value = std::min(990, static_cast<int>(1000 * estimate_.spent(i, t) / whole));
      }
    }
    w.bar->setValue(std::max(value, 0));
  }
  summary_->setText(summary());
}

}  // namespace ferry::gui
