#include "gui/history.h"

#include <QButtonGroup>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLineEdit>
#include <QListWidget>
#include <QMessageBox>
#include <QPainter>
#include <QPixmap>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSaveFile>
#include <QToolButton>
#include <QVBoxLayout>

namespace ferry::gui {
namespace {

constexpr int kThumbnailWidth = 160;

// A history item's settings as a user reads them, one per line; what was left to the model says
// so.
QString describe(const GenerationSettings& s) {
  const auto orDefault = [](const QString& value) {
    return value.isEmpty() ? QObject::tr("the model's default") : value;
  };
  QStringList lines;
  lines << QObject::tr("Prompt: %1").arg(s.prompt);
  lines << QObject::tr("Negative prompt: %1").arg(orDefault(s.negativePrompt));
  if (!s.image.isEmpty())
    lines << QObject::tr("Start image: %1").arg(QFileInfo(s.image).fileName());
  if (!s.endImage.isEmpty())
    lines << QObject::tr("End image: %1").arg(QFileInfo(s.endImage).fileName());
  if (!s.model.isEmpty()) {
    QStringList shown;
    for (const QString& path : s.model) shown << QDir::toNativeSeparators(path);
    lines << QObject::tr("Model: %1").arg(shown.join(QStringLiteral("; ")));
  }
  lines << QObject::tr("Size: %1 × %2 px, %3 frames at %4 fps")
               .arg(s.width)
               .arg(s.height)
               .arg(s.frames)
               .arg(s.fps);
  QString cfg = QString::number(s.guideScale, 'g', 3);
  if (s.lowNoiseGuideScale > 0)
    cfg += QObject::tr(" (low-noise %1)").arg(s.lowNoiseGuideScale, 0, 'g', 3);
  lines << QObject::tr("Steps %1 · CFG %2 · shift %3 · sampler %4")
               .arg(s.steps)
               .arg(cfg)
               .arg(s.shift, 0, 'g', 3)
               .arg(orDefault(s.sampler));
  lines << QObject::tr("Seed: %1 · preset %2").arg(s.seed).arg(s.preset);
  for (const LoraSetting& l : s.loras) {
    lines << QObject::tr("LoRA: %1 × %2%3")
                 .arg(l.name.isEmpty() ? QFileInfo(l.path).fileName() : l.name)
                 .arg(l.strength, 0, 'g', 3)
                 .arg(l.enabled ? QString() : QObject::tr(" (off)"));
  }
  if (!s.noise.isEmpty()) lines << QObject::tr("Noise file: %1").arg(QFileInfo(s.noise).fileName());
  if (s.draft) {
    lines << QObject::tr("Draft: decoded with TAEHV (softer than the VAE); latents kept in %1")
                 .arg(s.keptLatents);
  }
  if (!s.latentsFile.name.isEmpty()) {
    lines
        << QObject::tr("Decoded from the saved latents %1 (no denoising)").arg(s.latentsFile.name);
  }
  return lines.join(QLatin1Char('\n'));
}

// A thumbnail with a "DRAFT" badge in its corner.
QPixmap draftBadged(QPixmap thumbnail) {
  QPainter p(&thumbnail);
  QFont font = p.font();
  font.setBold(true);
  font.setPixelSize(std::max(10, thumbnail.height() / 6));
  p.setFont(font);
  const QString text = QObject::tr("DRAFT");
  const QRect box = QFontMetrics(font).boundingRect(text).adjusted(-4, -2, 4, 2);
  const QRect badge(QPoint(2, 2), box.size());
  p.fillRect(badge, QColor(0xb8, 0x86, 0x0b));
  p.setPen(Qt::white);
  p.drawText(badge, Qt::AlignCenter, text);
  return thumbnail;
}

}  // namespace

HistoryStore::HistoryStore(QString folder) : folder_(std::move(folder)) {}

HistoryItem HistoryStore::add(const GenerationSettings& settings, const QString& video,
                              const QString& summary, const QImage& thumbnail,
                              const QString& draftOf) {
  HistoryItem item;
  if (!QDir().mkpath(folder_)) return item;
  item.created = QDateTime::currentDateTime();
  QString id = item.created.toString(QStringLiteral("yyyyMMdd-HHmmss-zzz"));
  for (int n = 2; QFileInfo::exists(QDir(folder_).filePath(id + QStringLiteral(".json"))); ++n) {
    id = item.created.toString(QStringLiteral("yyyyMMdd-HHmmss-zzz")) + QLatin1Char('-') +
         QString::number(n);
  }
  item.video = video;
  item.settings = settings;
  item.summary = summary;
  item.draftOf = draftOf;
  const QDir dir(folder_);
  if (!thumbnail.isNull()) {
    QSaveFile png(dir.filePath(id + QStringLiteral(".png")));
    const QImage small = thumbnail.width() > kThumbnailWidth
                             ? thumbnail.scaledToWidth(kThumbnailWidth, Qt::SmoothTransformation)
                             : thumbnail;
    if (png.open(QIODevice::WriteOnly) && small.save(&png, "PNG") && png.commit()) {
      item.thumbnail = png.fileName();
    }
  }
  QJsonObject j;
  j[QStringLiteral("created")] = item.created.toString(Qt::ISODateWithMs);
  j[QStringLiteral("video")] = video;
  j[QStringLiteral("summary")] = summary;
  j[QStringLiteral("settings")] = settings.toJson();
  if (!draftOf.isEmpty()) j[QStringLiteral("draft_of")] = draftOf;
  QSaveFile file(dir.filePath(id + QStringLiteral(".json")));
  if (!file.open(QIODevice::WriteOnly) || file.write(QJsonDocument(j).toJson()) < 0 ||
      !file.commit()) {
    if (!item.thumbnail.isEmpty()) QFile::remove(item.thumbnail);
    return {};
  }
  item.id = id;
  return item;
}

QList<HistoryItem> HistoryStore::items() const {
  QList<HistoryItem> out;
  const QDir dir(folder_);
  const auto files =
      dir.entryInfoList({QStringLiteral("*.json")}, QDir::Files, QDir::Name | QDir::Reversed);
  for (const QFileInfo& info : files) {
    QFile file(info.absoluteFilePath());
    if (!file.open(QIODevice::ReadOnly) || file.size() > kMaxHistoryFileBytes) continue;
    std::optional<HistoryItem> item = historyItemFromJson(file.readAll(), info.completeBaseName());
    if (!item) continue;
    const QString png = dir.filePath(item->id + QStringLiteral(".png"));
    if (QFileInfo::exists(png)) item->thumbnail = png;
    out.push_back(std::move(*item));
  }
  return out;
}

bool HistoryStore::remove(const QString& id) {
  const QDir dir(folder_);
  QFile::remove(dir.filePath(id + QStringLiteral(".png")));
  return QFile::remove(dir.filePath(id + QStringLiteral(".json")));
}

HistoryPanel::HistoryPanel(HistoryStore* store, QWidget* parent)
    : QWidget(parent),
      store_(store),
      list_(new QListWidget(this)),
      search_(new QLineEdit(this)),
      listView_(new QToolButton(this)),
      gridView_(new QToolButton(this)),
      details_(new QPlainTextEdit(this)),
      restore_(new QPushButton(tr("Use these settings"), this)),
      open_(new QPushButton(tr("Play here"), this)),
      remove_(new QPushButton(tr("Remo&ve"), this)),
      fullDecode_(new QPushButton(tr("Decode with the full VAE"), this)) {
  list_->setIconSize(QSize(kThumbnailWidth / 2, kThumbnailWidth * 9 / 32));
  list_->setWordWrap(true);
  list_->setUniformItemSizes(false);
  list_->setAccessibleName(tr("History of generations"));
  list_->setToolTip(
      tr("Click an item to play it; double-click it (or press Enter) to use its settings"));
  restore_->setToolTip(
      tr("Put every setting of this video back in the window (Run ▸ Undo restore brings back "
         "what was there)"));
  // A click shows what made the video here, read-only; nothing in the window changes until
  // "Use these settings".
  details_->setReadOnly(true);
  details_->setAccessibleName(tr("Settings of the chosen video"));
  details_->setMaximumHeight(details_->fontMetrics().lineSpacing() * 8 + 12);
  open_->setToolTip(tr("Play this video in the window's player"));
  // Two rows: the panel is a narrow side column (a sixth of a 1280 px window).
  auto* buttons = new QGridLayout;
  buttons->addWidget(restore_, 0, 0, 1, 2);
  buttons->addWidget(open_, 1, 0);
  buttons->addWidget(remove_, 1, 1);
  buttons->addWidget(fullDecode_, 2, 0, 1, 2);
  buttons->setColumnStretch(2, 1);

  // Above the list: the search of the prompts and the list / gallery toggle.
  search_->setPlaceholderText(tr("Search prompts"));
  search_->setAccessibleName(tr("Search the history by prompt"));
  search_->setClearButtonEnabled(true);
  listView_->setText(tr("List"));
  listView_->setToolTip(tr("The history as a list, with each video's size, seed and model"));
  gridView_->setText(tr("Grid"));
  gridView_->setToolTip(tr("The history as a gallery of thumbnails"));
  auto* views = new QButtonGroup(this);
  for (QToolButton* b : {listView_, gridView_}) {
    b->setCheckable(true);
    b->setAutoRaise(true);
    views->addButton(b);
  }
  listView_->setChecked(true);
  auto* top = new QHBoxLayout;
  top->addWidget(search_, 1);
  top->addWidget(listView_);
  top->addWidget(gridView_);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(list_, 1);
  layout->addWidget(details_);
  layout->addLayout(buttons);

  auto restore = [this] {
    if (const HistoryItem* item = current()) emit restoreRequested(item->settings, item->video);
  };
  connect(list_, &QListWidget::itemActivated, this, restore);
  // A click plays the item's video in the window's player; its settings stay where they are.
  connect(list_, &QListWidget::itemClicked, this, [this] {
    if (const HistoryItem* item = current(); item && QFileInfo::exists(item->video)) {
      emit openRequested(item->video);
    }
  });
  connect(restore_, &QPushButton::clicked, this, restore);
  connect(open_, &QPushButton::clicked, this, [this] {
    if (const HistoryItem* item = current()) emit openRequested(item->video);
  });
  connect(fullDecode_, &QPushButton::clicked, this, [this] {
    if (const HistoryItem* item = current()) {
      emit fullDecodeRequested(item->settings, item->video, item->id);
    }
  });
  connect(remove_, &QPushButton::clicked, this, [this] {
    const HistoryItem* item = current();
    if (item == nullptr) return;
    if (QMessageBox::question(this, tr("Remove from history"),
                              tr("Remove this item from the history? The video file stays "
                                 "where it is.")) != QMessageBox::Yes) {
      return;
    }
    store_->remove(item->id);
    reload();
  });
  connect(list_, &QListWidget::currentRowChanged, this, &HistoryPanel::updateButtons);
  connect(list_, &QListWidget::currentRowChanged, this, &HistoryPanel::showDetails);
  connect(search_, &QLineEdit::textChanged, this, &HistoryPanel::applySearch);
  connect(gridView_, &QToolButton::toggled, this, &HistoryPanel::setGridView);
  reload();
}

void HistoryPanel::setGridView(bool grid) {
  if (gridView_->isChecked() != grid) gridView_->setChecked(grid);
  listView_->setChecked(!grid);
  if (grid == gridView()) return;
  const int row = list_->currentRow();
  if (grid) {
    // Thumbnails in rows as the column's width allows (two in its narrowest, 200 px, less the
    // scroll bar the view keeps room for), the prompt's start under each.
    const QSize icon(kThumbnailWidth * 9 / 20, kThumbnailWidth / 4);
    list_->setViewMode(QListView::IconMode);
    list_->setIconSize(icon);
    list_->setSpacing(0);
    list_->setGridSize(icon + QSize(4, 2 * list_->fontMetrics().lineSpacing() + 8));
    list_->setMovement(QListView::Static);
    list_->setResizeMode(QListView::Adjust);
    list_->setWrapping(true);
  } else {
    list_->setViewMode(QListView::ListMode);
    list_->setIconSize(QSize(kThumbnailWidth / 2, kThumbnailWidth * 9 / 32));
    list_->setGridSize(QSize());
    list_->setWrapping(false);
  }
  list_->setWordWrap(true);
  fillRows();
  list_->setCurrentRow(row);
  applySearch();
}

bool HistoryPanel::gridView() const {
  return list_->viewMode() == QListView::IconMode;
}

void HistoryPanel::setSearch(const QString& text) {
  search_->setText(text);
}

int HistoryPanel::shownCount() const {
  int shown = 0;
  for (int i = 0; i < list_->count(); ++i) shown += list_->item(i)->isHidden() ? 0 : 1;
  return shown;
}

void HistoryPanel::applySearch() {
  const QString text = search_->text().trimmed();
  for (int i = 0; i < list_->count() && i < items_.size(); ++i) {
    list_->item(i)->setHidden(!items_[i].settings.prompt.contains(text, Qt::CaseInsensitive));
  }
  // The chosen item stays when it is shown; else the first one shown is chosen.
  if (list_->currentItem() == nullptr || list_->currentItem()->isHidden()) {
    int first = -1;
    for (int i = 0; i < list_->count() && first < 0; ++i) {
      if (!list_->item(i)->isHidden()) first = i;
    }
    list_->setCurrentRow(first);
  }
  updateButtons();
  showDetails();
}

void HistoryPanel::reload() {
  items_ = store_->items();
  fillRows();
  if (!items_.isEmpty()) list_->setCurrentRow(0);
  applySearch();
}

void HistoryPanel::fillRows() {
  list_->clear();
  const bool grid = gridView();
  for (const HistoryItem& item : items_) {
    QString prompt = item.settings.prompt.simplified();
    if (prompt.size() > 90) prompt = prompt.left(88) + QStringLiteral("…");
    // A draft's badge leads its row (and marks its thumbnail): it is not the finished video.
    if (item.settings.draft) prompt = tr("[draft] ") + prompt;
    // What made it: the model (its folder's or first file's name), the preset, the sampler, the
    // start image.
    QStringList made;
    const HistoryItem& i = item;
    if (!i.settings.model.isEmpty()) made << modelShortName(i.settings.model);
    if (!i.settings.preset.isEmpty()) made << tr("preset %1").arg(i.settings.preset);
    if (!i.settings.sampler.isEmpty()) made << i.settings.sampler;
    if (!i.settings.image.isEmpty())
      made << tr("from %1").arg(QFileInfo(i.settings.image).fileName());
    const QString full =
        QStringLiteral("%1\n%2 · %3\n%4")
            .arg(prompt, item.summary, QLocale().toString(item.created, QLocale::ShortFormat),
                 made.join(QStringLiteral(" · ")));
    // A gallery cell has room for the prompt's start; the rest is in its tooltip.
    auto* row = new QListWidgetItem(
        grid ? list_->fontMetrics().elidedText(prompt, Qt::ElideRight, kThumbnailWidth * 9 / 20)
             : full,
        list_);
    if (!item.thumbnail.isEmpty()) {
      row->setIcon(QIcon(item.settings.draft ? draftBadged(QPixmap(item.thumbnail))
                                             : QPixmap(item.thumbnail)));
    }
    row->setToolTip(grid ? full + QLatin1Char('\n') + QDir::toNativeSeparators(item.video)
                         : QDir::toNativeSeparators(item.video));
  }
}

int HistoryPanel::count() const {
  return static_cast<int>(items_.size());
}

const HistoryItem* HistoryPanel::current() const {
  const int row = list_->currentRow();
  return row >= 0 && row < items_.size() ? &items_[row] : nullptr;
}

QString HistoryPanel::settingsText() const {
  return details_->toPlainText();
}

QString HistoryPanel::rowText(int row) const {
  const QListWidgetItem* item = list_->item(row);
  return item ? item->text() : QString();
}

void HistoryPanel::showDetails() {
  const HistoryItem* item = current();
  details_->setPlainText(item ? describe(item->settings) : QString());
  details_->setVisible(item != nullptr);  // an empty history lends the list its room
}

void HistoryPanel::updateButtons() {
  const HistoryItem* item = current();
  restore_->setEnabled(item != nullptr);
  remove_->setEnabled(item != nullptr);
  open_->setEnabled(item != nullptr && QFileInfo::exists(item->video));
  const QString latents = item ? keptLatentsPath(*item) : QString();
  fullDecode_->setVisible(item != nullptr && item->settings.draft);
  const bool kept = !latents.isEmpty() && QFileInfo::exists(latents);
  fullDecode_->setEnabled(kept);
  fullDecode_->setToolTip(
      kept || item == nullptr
          ? tr("Make the full video of this draft: its kept latents decoded by the model's VAE, "
               "without denoising again (a new item in the history)")
          : tr("The draft's latents (%1) are not beside its video: the full video needs a new "
               "run")
                .arg(item->settings.keptLatents));
}

}  // namespace ferry::gui
