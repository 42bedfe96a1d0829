#include "gui/snapping_spin_box.h"

#include <algorithm>
#include <cmath>

namespace ferry::gui {

SnappingSpinBox::SnappingSpinBox(QWidget* parent) : QSpinBox(parent) {
  // No value while typing: "1000" is not taken as 1, 10 and 100 on the way.
  setKeyboardTracking(false);
}

void SnappingSpinBox::setGrid(int step, int offset, const QString& rule) {
  step_ = std::max(step, 1);
  offset_ = offset;
  rule_ = rule;
  setSingleStep(step_);
}

int SnappingSpinBox::snap(qint64 value) const {
  // The allowed values inside the range: the lowest at or above minimum(), the highest at or
  // below maximum().
  const auto gridAt = [&](double k) { return offset_ + static_cast<qint64>(k) * step_; };
  const qint64 lowest = gridAt(std::ceil(static_cast<double>(minimum() - offset_) / step_));
  const qint64 highest = gridAt(std::floor(static_cast<double>(maximum() - offset_) / step_));
  const qint64 nearest = gridAt(std::round(static_cast<double>(value - offset_) / step_));
  return static_cast<int>(std::clamp(nearest, lowest, std::max(lowest, highest)));
}

bool SnappingSpinBox::allowed(qint64 value) const {
  return value >= minimum() && value <= maximum() && (value - offset_) % step_ == 0;
}

qint64 SnappingSpinBox::typed(const QString& input, bool* ok) const {
  QString digits = input;
  if (!suffix().isEmpty() && digits.endsWith(suffix())) digits.chop(suffix().size());
  if (!prefix().isEmpty() && digits.startsWith(prefix())) digits.remove(0, prefix().size());
  return digits.trimmed().toLongLong(ok);
}

QValidator::State SnappingSpinBox::validate(QString& input, int&) const {
  QString digits = input;
  if (!suffix().isEmpty() && digits.endsWith(suffix())) digits.chop(suffix().size());
  if (!prefix().isEmpty() && digits.startsWith(prefix())) digits.remove(0, prefix().size());
  digits = digits.trimmed();
  if (digits.isEmpty()) return QValidator::Intermediate;
  // Any number may be typed (up to nine digits); fixup() snaps it when the field is left.
  for (const QChar c : digits) {
    if (!c.isDigit()) return QValidator::Invalid;
  }
  if (digits.size() > 9) return QValidator::Invalid;
  bool ok = false;
  const qint64 value = digits.toLongLong(&ok);
  return ok && allowed(value) ? QValidator::Acceptable : QValidator::Intermediate;
}

void SnappingSpinBox::fixup(QString& input) const {
  bool ok = false;
  const qint64 value = typed(input, &ok);
  if (!ok) return;  // nothing typed: the field keeps its value
  const int snappedValue = snap(value);
  input = textFromValue(snappedValue) + suffix();
  if (!prefix().isEmpty()) input.prepend(prefix());
  QString why;
  if (value > maximum()) {
    why = tr("the most this model takes");
  } else if (value < minimum()) {
    why = tr("the least this model takes");
  } else {
    why = rule_;
  }
  const QString note = tr("%1%3 → %2%3 (%4)").arg(value).arg(snappedValue).arg(suffix(), why);
  // fixup() is const in QAbstractSpinBox; the note is news for the box that shows it.
  emit const_cast<SnappingSpinBox*>(this)->snapped(note);
}

}  // namespace ferry::gui
