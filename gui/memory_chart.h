// A live per-step chart of one memory figure (host RAM or VRAM) over the run's time: the samples,
// the budget line of the chosen preset (written instead when it is far off the scale) and the
// peak, drawn with QPainter. Samples may arrive at any rate; the
// widget repaints at most ten times a second.
#pragma once

#include <QString>
#include <QStringList>
#include <QTimer>
#include <QVector>
#include <QWidget>

namespace ferry::gui {

class MemoryChart : public QWidget {
  Q_OBJECT

 public:
  static constexpr int kRefreshIntervalMs = 100;  // ≤ 10 Hz

  explicit MemoryChart(const QString& title, QWidget* parent = nullptr);

  // 0 means no budget line.
  void setBudget(quint64 bytes);
  quint64 budget() const { return budget_; }

  // `seconds`: since the run began; the x axis is time once every sample has one (the step
  // otherwise).
  void addSample(int step, quint64 bytes, double seconds = -1);
  // The time axis's labels under the plot, left to right ("0.0 s", "6.0 s", "12.0 s"); empty
  // without timed samples.
  QStringList timeLabels() const;
  // The budget is far above what was used (more than kBudgetOffScale times the peak): the scale
  // follows the samples, and the budget is written, not drawn, so that the line is not flat.
  static constexpr quint64 kBudgetOffScale = 4;
  bool budgetOnScale() const;
  // Shown in the plot while there are no samples ("no NVIDIA GPU: …"); empty for none.
  void setPlaceholder(const QString& text);
  QString placeholder() const { return placeholder_; }
  void clear();

  int sampleCount() const { return static_cast<int>(samples_.size()); }
  quint64 latest() const { return samples_.isEmpty() ? 0 : samples_.back().bytes; }
  quint64 peak() const { return peak_; }
  bool overBudget() const { return budget_ != 0 && peak_ > budget_; }

  // The vertical scale's top in bytes, and the y pixel of a value inside the plot area.
  quint64 scaleTop() const;
  int yFor(quint64 bytes) const;
  QRect plotArea() const;

  QSize sizeHint() const override { return {360, 160}; }
  QSize minimumSizeHint() const override { return {200, 100}; }

  // "6.25 GiB", "512 MiB".
  static QString formatBytes(quint64 bytes);

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  struct Sample {
    int step;
    quint64 bytes;
    double seconds;  // < 0: untimed
  };
  bool timed() const;

  void scheduleRefresh();
  void updateDescription();

  QString title_;
  QString placeholder_;
  quint64 budget_ = 0;
  quint64 peak_ = 0;
  QVector<Sample> samples_;
  QTimer refresh_;
};

}  // namespace ferry::gui
