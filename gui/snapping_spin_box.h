// A whole-number field that takes what is typed and snaps it to the nearest value the engine
// allows instead of refusing it: a width of 1000 becomes 992 (a multiple of 32), 80 frames become
// 81 (4k+1), 99999 becomes the most allowed. What changed is said in snapped(), for a note the
// user sees; nothing is silently cut (QSpinBox alone refuses the keystroke that would pass its
// maximum, so 99999 became 999).
#pragma once

#include <QSpinBox>

namespace ferry::gui {

class SnappingSpinBox : public QSpinBox {
  Q_OBJECT

 public:
  explicit SnappingSpinBox(QWidget* parent = nullptr);

  // Allowed values are offset + k·step within the range (frames: step 4, offset 1; sizes: step
  // 32, offset 0). `rule` names them for the note ("a multiple of 32", "4k+1").
  void setGrid(int step, int offset, const QString& rule);
  // The allowed value nearest `value`.
  int snap(qint64 value) const;

 signals:
  // "1000 px → 992 px (a multiple of 32)": a typed value was changed to an allowed one.
  void snapped(const QString& note);

 protected:
  QValidator::State validate(QString& input, int& pos) const override;
  void fixup(QString& input) const override;

 private:
  bool allowed(qint64 value) const;
  qint64 typed(const QString& input, bool* ok) const;

  int step_ = 1;
  int offset_ = 0;
  QString rule_;
};

}  // namespace ferry::gui
