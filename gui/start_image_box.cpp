#include "gui/start_image_box.h"

#include <QDir>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QImageReader>
#include <QLabel>
#include <QMimeData>
#include <QPushButton>
#include <QVBoxLayout>

#include "core/io/detail/os_file.h"
#include "core/media/image.h"
#include "gui/generation_worker.h"

namespace ferry::gui {
namespace {

constexpr int kThumbnailHeight = 72;

bool isVideo(const QString& path) {
  return path.endsWith(QLatin1String(".mp4"), Qt::CaseInsensitive);
}

}  // namespace

StartImageBox::StartImageBox(Frame frame, QWidget* parent)
    : QFrame(parent),
      frame_(frame),
      thumbnail_(new QLabel(this)),
      caption_(new QLabel(this)),
      // The start image's buttons have the mnemonics (the window has no letter left for both).
      browse_(new QPushButton(frame == Frame::kStart ? tr("Choose &image…") : tr("Choose…"), this)),
      clear_(new QPushButton(frame == Frame::kStart ? tr("C&lear") : tr("Clear"), this)) {
  const bool start = frame == Frame::kStart;
  hint_ = start ? tr("Optional. Without one, the video is made from the prompt alone.")
                : tr("Optional: the frame the video ends on (first–last-frame models).");
  setFrameShape(QFrame::StyledPanel);
  setAcceptDrops(true);
  setAccessibleName(start ? tr("Start image") : tr("End image"));
  thumbnail_->setAlignment(Qt::AlignCenter);
  thumbnail_->setWordWrap(true);
  thumbnail_->setForegroundRole(QPalette::PlaceholderText);
  caption_->setWordWrap(true);
  caption_->setForegroundRole(QPalette::PlaceholderText);
  browse_->setAccessibleName(start ? tr("Choose a start image") : tr("Choose an end image"));
  clear_->setAccessibleName(start ? tr("Clear the start image") : tr("Clear the end image"));

  auto* title = new QLabel(start ? tr("Start image") : tr("End image"), this);
  QFont bold = title->font();
  bold.setBold(true);
  title->setFont(bold);
  // Title, thumbnail, caption and buttons stacked: two boxes (start and end frame) fit side by
  // side in the settings column.
  thumbnail_->setMinimumWidth(kThumbnailHeight * 4 / 3);
  thumbnail_->setFixedHeight(kThumbnailHeight);
  thumbnail_->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(browse_);
  buttons->addWidget(clear_);
  buttons->addStretch();
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(title);
  layout->addWidget(thumbnail_);
  layout->addWidget(caption_);
  layout->addLayout(buttons);

  connect(browse_, &QPushButton::clicked, this, &StartImageBox::browse);
  connect(clear_, &QPushButton::clicked, this, &StartImageBox::clear);
  clear();
}

bool StartImageBox::setPath(const QString& path) {
  if (path.isEmpty()) {
    clear();
    return true;
  }
  error_.clear();
  QImage image;
  QImageReader reader(path);
  reader.setAutoTransform(true);
  if (reader.canRead()) {
    const QSize size = reader.size();
    if (size.isValid() &&
        (size.width() > media::kMaxImageSide || size.height() > media::kMaxImageSide)) {
      error_ = tr("%1 is %2×%3 pixels; frame images may be at most %4 on a side.")
                   .arg(QDir::toNativeSeparators(path))
                   .arg(size.width())
                   .arg(size.height())
                   .arg(media::kMaxImageSide);
    } else {
      image = reader.read();
    }
  }
  if (image.isNull() && error_.isEmpty()) {
    // Formats Qt has no plugin for (WebP on some systems): the engine's own decoder decides.
    try {
      image = toQImage(media::load_image(io::detail::path_from_utf8(path.toStdString())));
    } catch (const std::exception& e) {
      error_ = QString::fromUtf8(e.what());
    }
  }
  if (image.isNull()) {
    if (error_.isEmpty()) {
      error_ = tr("%1 is not an image Ferry can read (PNG, JPEG or WebP).")
                   .arg(QDir::toNativeSeparators(path));
    }
    emit rejected(error_);
    return false;
  }
  path_ = path;
  size_ = image.size();
  image_ = image.scaled(QSize(512, 512), Qt::KeepAspectRatio, Qt::SmoothTransformation);
  caption_->setText(QStringLiteral("%1 (%2×%3)")
                        .arg(QFileInfo(path).fileName())
                        .arg(size_.width())
                        .arg(size_.height()));
  caption_->setToolTip(QDir::toNativeSeparators(path));
  clear_->setEnabled(true);
  setAccessibleDescription(caption_->text());
  showThumbnail();
  emit imageChanged();
  return true;
}

void StartImageBox::clear() {
  const bool had = !path_.isEmpty();
  path_.clear();
  size_ = {};
  image_ = {};
  thumbnail_->clear();
  thumbnail_->setText(tr("Drop an image here"));
  caption_->setText(hint_);
  caption_->setToolTip(QString());
  clear_->setEnabled(false);
  setAccessibleDescription(frame_ == Frame::kStart ? tr("no start image") : tr("no end image"));
  if (had) emit imageChanged();
}

void StartImageBox::setHint(const QString& hint) {
  hint_ = hint;
  if (path_.isEmpty()) caption_->setText(hint_);
}

void StartImageBox::browse() {
  const QString file = QFileDialog::getOpenFileName(
      this, frame_ == Frame::kStart ? tr("Start image") : tr("End image"),
      QFileInfo(path_).absolutePath(), tr("Images (*.png *.jpg *.jpeg *.webp);;All files (*)"));
  if (!file.isEmpty()) setPath(file);
}

void StartImageBox::showThumbnail() {
  if (image_.isNull()) return;
  const qreal dpr = devicePixelRatioF();
  QPixmap pixmap = QPixmap::fromImage(
      image_.scaled(thumbnail_->size() * dpr, Qt::KeepAspectRatio, Qt::SmoothTransformation));
  pixmap.setDevicePixelRatio(dpr);
  thumbnail_->setPixmap(pixmap);
}

void StartImageBox::resizeEvent(QResizeEvent* event) {
  QFrame::resizeEvent(event);
  showThumbnail();
}

void StartImageBox::dragEnterEvent(QDragEnterEvent* event) {
  const auto urls = event->mimeData()->urls();
  // A Ferry MP4 is the window's to take (it restores settings).
  if (urls.size() == 1 && urls.front().isLocalFile() && !isVideo(urls.front().toLocalFile())) {
    event->acceptProposedAction();
  } else {
    event->ignore();
  }
}

void StartImageBox::dropEvent(QDropEvent* event) {
  const auto urls = event->mimeData()->urls();
  if (urls.size() == 1 && urls.front().isLocalFile()) {
    setPath(urls.front().toLocalFile());
    event->acceptProposedAction();
  }
}

}  // namespace ferry::gui
