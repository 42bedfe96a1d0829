// An optional frame image, the start image or (first–last-frame models) the end image: dropped on
// the box or browsed for, shown as a thumbnail, cleared with a button. A file that is not an image
// is refused with a message (the engine's loader decides). Whether the model takes it is the
// engine's to say (the request is refused with its reason); the box only shows a hint.
#pragma once

#include <QFrame>
#include <QImage>

class QLabel;
class QPushButton;

namespace ferry::gui {

class StartImageBox : public QFrame {
  Q_OBJECT

 public:
  enum class Frame { kStart, kEnd };
  explicit StartImageBox(Frame frame = Frame::kStart, QWidget* parent = nullptr);

  Frame frame() const { return frame_; }
  // What the empty box says (the model's answer to whether it takes this frame).
  void setHint(const QString& hint);

  QString path() const { return path_; }
  QSize imageSize() const { return size_; }
  // Loads and shows `path`; false (and the box unchanged) with error() set when it is not an
  // image. An empty path clears.
  bool setPath(const QString& path);
  void clear();
  QString error() const { return error_; }

 signals:
  void imageChanged();
  void rejected(const QString& message);

 protected:
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  void browse();
  void showThumbnail();

  Frame frame_;
  QString hint_;
  QString path_;
  QSize size_;
  QImage image_;
  QString error_;
  QLabel* thumbnail_;
  QLabel* caption_;
  QPushButton* browse_;
  QPushButton* clear_;
};

}  // namespace ferry::gui
