// The job's stages side by side under the player while a video is made: for each of the plan's
// stages its name, its own bar and its time (spent, or expected in grey), and one line with the
// elapsed time and the whole job's time left; at the end "Done in …". Driven by JobEstimate; the
// times tick once a second between the engine's events.
#pragma once

#include <QElapsedTimer>
#include <QTimer>
#include <QVector>
#include <QWidget>

#include "gui/job_estimate.h"

class QGridLayout;
class QLabel;
class QProgressBar;

namespace ferry::gui {

class StageProgress : public QWidget {
  Q_OBJECT

 public:
  explicit StageProgress(QWidget* parent = nullptr);

  void start(JobEstimate estimate);
  void enterStage(int stage);
  void step(const StepInfo& info);
  void finish();  // the video is written: "Done in …"
  void stop();    // failed or cancelled: the times stay, the clock stops

  const JobEstimate& estimate() const { return estimate_; }
  double now() const;
  double remaining() const { return estimate_.remaining(now()); }
  double elapsed() const { return estimate_.elapsed(now()); }
  // "Elapsed 12.0 s · about 30.0 s left", "Done in 42.0 s".
  QString summary() const;
  // A row's "12.0 s" (spent) or "≈ 30.0 s" (expected), as shown.
  QString rowText(int row) const;

 private:
  void rebuild();
  void refresh();

  JobEstimate estimate_;
  QElapsedTimer clock_;
  QTimer tick_;
  bool running_ = false;
  QGridLayout* grid_ = nullptr;
  QLabel* summary_ = nullptr;
  struct RowWidgets {
    QLabel* name = nullptr;
    QProgressBar* bar = nullptr;
    QLabel* time = nullptr;
  };
  QVector<RowWidgets> rows_;
};

}  // namespace ferry::gui
