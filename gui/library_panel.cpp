#include "gui/library_panel.h"

#include <QComboBox>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QMessageBox>
#include <QPointer>
#include <QProgressBar>
#include <QPushButton>
#include <QThread>
#include <QTreeWidget>
#include <QVBoxLayout>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "gui/latest_query.h"

namespace ferry::gui {
namespace {

namespace fs = std::filesystem;

QString text(const std::string& s) {
  return QString::fromStdString(s);
}

QString path_text(const fs::path& p) {
  return text(io::detail::display(p));
}

fs::path to_path(const QString& s) {
  return io::detail::path_from_utf8(s.toStdString());
}

QString duration_text(double seconds) {
  if (seconds < 0) return QStringLiteral("?");
  const long s = static_cast<long>(seconds + 0.5);
  if (s < 60) return QObject::tr("%1 s").arg(s);
  if (s < 3600) return QObject::tr("%1 min %2 s").arg(s / 60).arg(s % 60);
  return QObject::tr("%1 h %2 min").arg(s / 3600).arg(s % 3600 / 60);
}

}  // namespace

LibraryPanel::LibraryPanel(QStringList roots, QString downloads, library::Catalogue catalogue,
                           net::HubAccess hub, QWidget* parent)
    : QGroupBox(tr("Model library"), parent),
      roots_(std::move(roots)),
      downloads_(std::move(downloads)),
      catalogue_(std::move(catalogue)),
      hub_(std::move(hub)),
      query_(new LatestQuery(QStringLiteral("Ferry library scan"), this)),
      sets_(new QTreeWidget(this)),
      loras_(new QListWidget(this)),
      catalogue_box_(new QComboBox(this)),
      precision_box_(new QComboBox(this)),
      scan_button_(new QPushButton(tr("Scan again"), this)),
      add_folder_(new QPushButton(tr("Add a folder…"), this)),
      download_(new QPushButton(tr("Download"), this)),
      cancel_(new QPushButton(tr("Cancel"), this)),
      clean_(new QPushButton(tr("Remove partial files"), this)),
      use_(new QPushButton(tr("Use this set"), this)),
      total_bar_(new QProgressBar(this)),
      progress_text_(new QLabel(this)) {
  sets_->setHeaderLabels({tr("Model sets on this computer")});
  sets_->setRootIsDecorated(true);
  total_bar_->setRange(0, 1000);
  total_bar_->setValue(0);
  cancel_->setEnabled(false);
  use_->setEnabled(false);
  progress_text_->setWordWrap(true);
  for (const library::CatalogueEntry& e : catalogue_.entries) {
    catalogue_box_->addItem(text(e.title), text(e.name));
  }
  fillPrecisions();

  auto* layout = new QVBoxLayout(this);
  auto* scan_row = new QHBoxLayout;
  scan_row->addWidget(scan_button_);
  scan_row->addWidget(add_folder_);
  scan_row->addStretch();
  scan_row->addWidget(use_);
  layout->addLayout(scan_row);
  layout->addWidget(sets_, 3);
  layout->addWidget(new QLabel(tr("LoRAs"), this));
  layout->addWidget(loras_, 1);
  auto* get_row = new QHBoxLayout;
  get_row->addWidget(catalogue_box_, 2);
  get_row->addWidget(precision_box_, 1);
  get_row->addWidget(download_);
  get_row->addWidget(cancel_);
  get_row->addWidget(clean_);
  layout->addLayout(get_row);
  layout->addWidget(total_bar_);
  layout->addWidget(progress_text_);

  connect(scan_button_, &QPushButton::clicked, this, &LibraryPanel::scan);
  connect(add_folder_, &QPushButton::clicked, this, [this] {
    const QString folder = QFileDialog::getExistingDirectory(this, tr("A folder with models"));
    if (folder.isEmpty()) return;
    addRoot(folder);
    emit folderAdded(folder);
  });
  connect(catalogue_box_, &QComboBox::currentIndexChanged, this, &LibraryPanel::fillPrecisions);
  connect(download_, &QPushButton::clicked, this, &LibraryPanel::startDownload);
  connect(cancel_, &QPushButton::clicked, this, &LibraryPanel::cancelDownload);
  connect(clean_, &QPushButton::clicked, this, [this] {
    progress_text_->setText(tr("Removed %n partial file(s).", nullptr, cleanUp()));
  });
  connect(sets_, &QTreeWidget::currentItemChanged, this, [this](QTreeWidgetItem* item) {
    while (item != nullptr && item->parent() != nullptr) item = item->parent();
    use_->setEnabled(item != nullptr && item->data(0, Qt::UserRole).toBool());
  });
  connect(use_, &QPushButton::clicked, this, &LibraryPanel::chooseCurrent);
  connect(sets_, &QTreeWidget::itemDoubleClicked, this, &LibraryPanel::chooseCurrent);
  scan();
}

LibraryPanel::~LibraryPanel() {
  if (download_thread_ != nullptr) {
    downloader_->cancel();
    download_thread_->wait();
  }
}

void LibraryPanel::addRoot(const QString& folder) {
  if (!roots_.contains(folder)) roots_.append(folder);
  scan();
}

bool LibraryPanel::scanning() const {
  return query_->pending();
}

void LibraryPanel::scan() {
  std::vector<fs::path> roots;
  for (const QString& r : roots_) roots.push_back(to_path(r));
  scan_button_->setEnabled(false);
  query_->post([this, roots] {
    auto result = std::make_shared<library::LibraryScan>();
    QString error;
    try {
      *result = library::scan_library(roots);
    } catch (const std::exception& e) {
      error = QString::fromUtf8(e.what());
    }
    return std::function<void()>([this, result, error] {
      scan_ = std::move(*result);
      if (!error.isEmpty()) last_error_ = error;
      scan_button_->setEnabled(true);
      showScan();
      emit scanned();
    });
  });
}

// One row per set: its status line, ready ones selectable (Qt::UserRole: ready; +1: its files;
// +2: its name), its parts and LoRAs beneath.
void LibraryPanel::showScan() {
  sets_->clear();
  for (const library::FoundSet& set : scan_.sets) {
    auto* row = new QTreeWidgetItem(sets_, {text(set.status())});
    QStringList files;
    for (const library::FoundPart& part : set.parts) {
      files.append(path_text(part.path));
      new QTreeWidgetItem(row, {text(part.sketch.role) + ": " + path_text(part.path)});
    }
    for (const models::LoraReport& lora : set.loras) {
      new QTreeWidgetItem(row, {tr("LoRA: %1").arg(path_text(lora.path))});
    }
    row->setData(0, Qt::UserRole, set.ready());
    row->setData(0, Qt::UserRole + 1, files);
    row->setData(0, Qt::UserRole + 2, text(set.name));
    if (!set.ready()) row->setForeground(0, palette().brush(QPalette::Disabled, QPalette::Text));
  }
  if (scan_.sets.empty()) new QTreeWidgetItem(sets_, {tr("No model set found yet.")});
  loras_->clear();
  for (const library::FoundLora& lora : scan_.loras) {
    QString fits;
    for (const std::string& name : lora.fits) fits += (fits.isEmpty() ? "" : ", ") + text(name);
    loras_->addItem(path_text(lora.path.filename()) + " — " +
                    (fits.isEmpty() ? tr("fits none of the ready sets") : tr("fits %1").arg(fits)));
  }
  use_->setEnabled(false);
}

// The selected set, when it is ready (a set that is not cannot be chosen).
void LibraryPanel::chooseCurrent() {
  QTreeWidgetItem* item = sets_->currentItem();
  while (item != nullptr && item->parent() != nullptr) item = item->parent();
  if (item != nullptr && item->data(0, Qt::UserRole).toBool()) {
    emit setChosen(item->data(0, Qt::UserRole + 1).toStringList(),
                   item->data(0, Qt::UserRole + 2).toString());
  }
}

void LibraryPanel::fillPrecisions() {
  precision_box_->clear();
  const library::CatalogueEntry* e =
      catalogue_.find(catalogue_box_->currentData().toString().toStdString());
  if (e == nullptr) return;
  for (const library::CatalogueVariant& v : e->variants) {
    precision_box_->addItem(
        tr("%1 (about %2)").arg(text(v.precision), text(net::human_bytes(v.size_hint()))),
        text(v.precision));
  }
}

void LibraryPanel::startDownload() {
  if (download_thread_ != nullptr) return;
  const library::CatalogueEntry* entry =
      catalogue_.find(catalogue_box_->currentData().toString().toStdString());
  if (entry == nullptr) return;
  const library::CatalogueVariant* variant =
      entry->variant(precision_box_->currentData().toString().toStdString());
  if (variant == nullptr) return;
  if (entry->licence.confirm) {
    const bool accepted =
        ask_licence_ ? ask_licence_(*entry)
                     : QMessageBox::question(this, tr("Licence"),
                                             text(entry->licence.notice) + "\n\n" +
                                                 text(entry->licence.url)) == QMessageBox::Yes;
    if (!accepted) return;
  }
  last_error_.clear();
  downloader_ = std::make_shared<net::HubDownloader>(hub_, options_);
  const std::shared_ptr<net::HubDownloader> downloader = downloader_;
  const library::CatalogueVariant work = *variant;
  const fs::path folder = to_path(downloads_);
  QPointer<LibraryPanel> self(this);
  download_thread_ = QThread::create([downloader, work, folder, self] {
    QString error;
    try {
      const net::DownloadPlan plan = downloader->plan(work, folder);
      downloader->check_space(plan);
      downloader->download(plan, [self](const net::DownloadProgress& p) {
        QMetaObject::invokeMethod(
            self,
            [self, p] {
              if (self) self->onProgress(p);
            },
            Qt::QueuedConnection);
      });
    } catch (const std::exception& e) {
      error = QString::fromUtf8(e.what());
    }
    QMetaObject::invokeMethod(
        self,
        [self, error] {
          if (self) self->onDownloadEnded(error);
        },
        Qt::QueuedConnection);
  });
  download_->setEnabled(false);
  clean_->setEnabled(false);
  cancel_->setEnabled(true);
  total_bar_->setValue(0);
  progress_text_->setText(tr("Asking the hub for %1…").arg(text(entry->title)));
  download_thread_->start();
}

void LibraryPanel::cancelDownload() {
  if (downloader_) downloader_->cancel();
}

int LibraryPanel::cleanUp() {
  return net::remove_partials(to_path(downloads_));
}

void LibraryPanel::onProgress(const net::DownloadProgress& p) {
  const int permille =
      p.total == 0
          ? 1000
          : static_cast<int>(1000.0 * static_cast<double>(p.done) / static_cast<double>(p.total));
  total_bar_->setValue(permille);
  std::size_t finished = 0;
  for (const net::FileProgress& f : p.files) finished += f.finished ? 1 : 0;
  progress_text_->setText(
      tr("%1 of %2, %3/s, %4 left (%5 of %6 files)")
          .arg(text(net::human_bytes(p.done)), text(net::human_bytes(p.total)),
               text(net::human_bytes(static_cast<std::uint64_t>(p.bytes_per_second))),
               duration_text(p.eta_seconds))
          .arg(finished)
          .arg(p.files.size()));
}

void LibraryPanel::onDownloadEnded(const QString& error) {
  if (download_thread_ != nullptr) {
    download_thread_->wait();
    delete download_thread_;
    download_thread_ = nullptr;
  }
  downloader_.reset();
  download_->setEnabled(true);
  clean_->setEnabled(true);
  cancel_->setEnabled(false);
  last_error_ = error;
  if (error.isEmpty()) {
    total_bar_->setValue(1000);
    progress_text_->setText(tr("Downloaded and verified."));
    if (!roots_.contains(downloads_)) roots_.append(downloads_);
    scan();
  } else {
    progress_text_->setText(error);
  }
  emit downloadFinished(error);
}

}  // namespace ferry::gui
