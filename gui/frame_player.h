// Plays the decoded frames of the finished video: play, pause, scrub with the slider or the
// arrow keys. Also shows the latent preview while a job runs.
#pragma once

#include <QImage>
#include <QTimer>
#include <QVector>
#include <QWidget>

class QLabel;
class QSlider;
class QToolButton;

namespace ferry::gui {

// The picture itself, scaled to fit with its aspect ratio kept (high-DPI aware).
class FrameView : public QWidget {
  Q_OBJECT

 public:
  explicit FrameView(QWidget* parent = nullptr);
  void setImage(const QImage& image);
  void setPlaceholder(const QString& text);
  const QImage& image() const { return image_; }
  QSize sizeHint() const override { return {480, 270}; }

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  QImage image_;
  QString placeholder_;
};

class FramePlayer : public QWidget {
  Q_OBJECT

 public:
  explicit FramePlayer(QWidget* parent = nullptr);

  void setFrames(const QVector<QImage>& frames, double fps);
  // A single picture (the latent preview) with a caption; stops playback.
  void showPreview(const QImage& image, const QString& caption);
  void clear(const QString& placeholder);

  int frameCount() const { return static_cast<int>(frames_.size()); }
  int currentFrame() const { return current_; }
  bool isPlaying() const { return timer_.isActive(); }
  const QImage& shownImage() const;

 public slots:
  void play();
  void pause();
  void togglePlay();
  void seek(int frame);

 protected:
  // Space plays or pauses, the arrow keys step a frame, Home and End jump (with the focus on the
  // picture).
  void keyPressEvent(QKeyEvent* event) override;

 private:
  void showFrame();
  void updateControls();

  QVector<QImage> frames_;
  double fps_ = 16;
  int current_ = 0;
  QTimer timer_;
  FrameView* view_;
  QToolButton* play_;
  QSlider* slider_;
  QLabel* position_;
};

}  // namespace ferry::gui
