#include "gui/memory_chart.h"

#include <QPainter>
#include <QPainterPath>
#include <QPen>
#include <algorithm>
#include <cmath>

#include "gui/job_estimate.h"

namespace ferry::gui {
namespace {

constexpr quint64 kMiB = quint64{1} << 20;
constexpr quint64 kGiB = quint64{1} << 30;

// A round top for the axis: `value` rounded up to a power-of-two step of 64 MiB or more, with
// at most eight steps on the axis.
quint64 round_up_scale(quint64 value) {
  if (value == 0) return kGiB;
  quint64 step = 64 * kMiB;
  while (value > step * 8) step *= 2;
  return (value + step - 1) / step * step;
}

}  // namespace

MemoryChart::MemoryChart(const QString& title, QWidget* parent) : QWidget(parent), title_(title) {
  setAccessibleName(title);
  setFocusPolicy(Qt::TabFocus);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
  refresh_.setSingleShot(true);
  refresh_.setInterval(kRefreshIntervalMs);
  connect(&refresh_, &QTimer::timeout, this, qOverload<>(&QWidget::update));
  updateDescription();
}

void MemoryChart::setBudget(quint64 bytes) {
  budget_ = bytes;
  updateDescription();
  scheduleRefresh();
}

void MemoryChart::addSample(int step, quint64 bytes, double seconds) {
  samples_.push_back({step, bytes, seconds});
  peak_ = std::max(peak_, bytes);
  updateDescription();
  scheduleRefresh();
}

void MemoryChart::clear() {
  samples_.clear();
  peak_ = 0;
  updateDescription();
  scheduleRefresh();
}

void MemoryChart::scheduleRefresh() {
  // One pending repaint at a time: a burst of samples costs one paint per interval.
  if (!refresh_.isActive()) refresh_.start();
}

void MemoryChart::updateDescription() {
  QString text = title_ + ": ";
  if (samples_.isEmpty()) {
    text += placeholder_.isEmpty() ? tr("no samples yet") : placeholder_;
  } else {
    text += tr("%1 at step %2, peak %3")
                .arg(formatBytes(latest()))
                .arg(samples_.back().step)
                .arg(formatBytes(peak_));
    if (timed()) text += tr(" over %1").arg(durationText(samples_.back().seconds));
  }
  if (budget_ != 0) {
    text += tr(", budget %1").arg(formatBytes(budget_));
    if (overBudget()) text += tr(" (over budget)");
  }
  setAccessibleDescription(text);
  setToolTip(text);
}

bool MemoryChart::budgetOnScale() const {
  return budget_ != 0 && (peak_ == 0 || budget_ <= peak_ * kBudgetOffScale);
}

quint64 MemoryChart::scaleTop() const {
  const quint64 top = budgetOnScale() ? std::max(budget_, peak_) : peak_;
  return round_up_scale(top + top / 10);
}

QRect MemoryChart::plotArea() const {
  const int text_height = fontMetrics().height();
  // Below the plot: the time axis's labels.
  return rect().adjusted(8, text_height + 8, -8, -8 - text_height);
}

bool MemoryChart::timed() const {
  return !samples_.isEmpty() && samples_.front().seconds >= 0 &&
         samples_.back().seconds > samples_.front().seconds;
}

QStringList MemoryChart::timeLabels() const {
  if (!timed()) return {};
  const double first = samples_.front().seconds;
  const double last = samples_.back().seconds;
  return {durationText(first), durationText((first + last) / 2), durationText(last)};
}

int MemoryChart::yFor(quint64 bytes) const {
  const QRect area = plotArea();
  const double fraction = static_cast<double>(bytes) / static_cast<double>(scaleTop());
  return area.bottom() - static_cast<int>(std::lround(fraction * (area.height() - 1)));
}

void MemoryChart::setPlaceholder(const QString& text) {
  placeholder_ = text;
  updateDescription();
  update();
}

QString MemoryChart::formatBytes(quint64 bytes) {
  if (bytes >= kGiB)
    return QStringLiteral("%1 GiB").arg(static_cast<double>(bytes) / kGiB, 0, 'f', 2);
  return QStringLiteral("%1 MiB").arg(static_cast<double>(bytes) / kMiB, 0, 'f', 0);
}

void MemoryChart::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing, false);
  const QPalette& pal = palette();
  p.fillRect(rect(), pal.color(QPalette::Base));
  const QRect area = plotArea();

  // Title and the latest value.
  p.setPen(pal.color(QPalette::Text));
  const QString heading =
      samples_.isEmpty()
          ? title_
          : tr("%1  %2  (peak %3)").arg(title_, formatBytes(latest()), formatBytes(peak_));
  p.drawText(QRect(8, 4, width() - 16, fontMetrics().height()), Qt::AlignLeft, heading);

  // Grid: four horizontal lines.
  QColor grid = pal.color(QPalette::Mid);
  grid.setAlpha(90);
  p.setPen(QPen(grid, 1));
  for (int i = 1; i <= 4; ++i) {
    const int y = area.bottom() - (area.height() - 1) * i / 4;
    p.drawLine(area.left(), y, area.right(), y);
  }
  p.drawRect(area.adjusted(0, 0, -1, -1));

  // Samples: x spreads the run's time so far (the steps, untimed) over the width.
  if (!samples_.isEmpty()) {
    const bool byTime = timed();
    const auto at = [byTime](const Sample& s) { return byTime ? s.seconds : double(s.step); };
    const double first = at(samples_.front());
    const double last = std::max(at(samples_.back()), first + 1e-9);
    auto x_for = [&](const Sample& s) {
      return area.left() +
             static_cast<int>(std::lround((area.width() - 1) * (at(s) - first) / (last - first)));
    };
    QPainterPath path;
    path.moveTo(x_for(samples_.front()), yFor(samples_.front().bytes));
    for (const Sample& s : samples_) path.lineTo(x_for(s), yFor(s.bytes));
    p.setPen(QPen(pal.color(QPalette::Highlight), 2));
    p.drawPath(path);

    // Peak: a dotted line in the text colour.
    p.setPen(QPen(pal.color(QPalette::Text), 1, Qt::DotLine));
    p.drawLine(area.left(), yFor(peak_), area.right(), yFor(peak_));
  }

  if (samples_.isEmpty() && !placeholder_.isEmpty()) {
    p.setPen(pal.color(QPalette::PlaceholderText));
    p.drawText(area.adjusted(8, 8, -8, -8), Qt::AlignCenter | Qt::TextWordWrap, placeholder_);
  }

  // The time axis: the first, middle and last sample's time under the plot.
  const QStringList times = timeLabels();
  if (!times.isEmpty()) {
    p.setPen(pal.color(QPalette::PlaceholderText));
    const QRect axis(area.left(), area.bottom() + 2, area.width(), fontMetrics().height());
    p.drawText(axis, Qt::AlignLeft, times[0]);
    p.drawText(axis, Qt::AlignHCenter, times[1]);
    p.drawText(axis, Qt::AlignRight, times[2]);
  }

  // A budget far above the samples: written at the top right, not drawn as a far line.
  if (budget_ != 0 && !budgetOnScale()) {
    p.setPen(pal.color(QPalette::PlaceholderText));
    p.drawText(QRect(area.left() + 4, area.top() + 2, area.width() - 8, fontMetrics().height()),
               Qt::AlignRight, tr("budget %1, above the scale").arg(formatBytes(budget_)));
  }

  // Budget: a dashed line, red when the peak went over it.
  if (budgetOnScale()) {
    const QColor budget_color = overBudget() ? QColor(220, 40, 40) : QColor(230, 140, 0);
    p.setPen(QPen(budget_color, 2, Qt::DashLine));
    const int y = yFor(budget_);
    p.drawLine(area.left(), y, area.right(), y);
    p.drawText(QRect(area.left() + 4, y - fontMetrics().height() - 2, area.width() - 8,
                     fontMetrics().height()),
               Qt::AlignRight, tr("budget %1").arg(formatBytes(budget_)));
  }
}

}  // namespace ferry::gui
