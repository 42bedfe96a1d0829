// The model library panel (issue 22): the model sets already on disk — Ferry's models folder, the
// Hugging Face cache, the folders the user adds (a ComfyUI install is recognised) — each "ready"
// or what it is missing, the LoRAs with the sets they fit; and the catalogue, to download what is
// missing with per-file and total progress, speed and ETA, cancel, resume and clean-up. Scans run
// on a LatestQuery thread (header reads only), downloads on their own thread (net/HubDownloader);
// both report back as queued calls. A ready set is chosen with "Use this set" (or a double click):
// setChosen() gives its part files, which the window hands to the engine as the model.
#pragma once

#include <QGroupBox>
#include <QStringList>
#include <functional>
#include <memory>

#include "core/library/catalogue.h"
#include "core/library/scan.h"
#include "net/hub_access.h"
#include "net/hub_downloader.h"

class QComboBox;
class QLabel;
class QListWidget;
class QProgressBar;
class QPushButton;
class QThread;
class QTreeWidget;

namespace ferry::gui {

class LatestQuery;

class LibraryPanel : public QGroupBox {
  Q_OBJECT

 public:
  // `roots`: the folders scanned (Ferry's models folder and the hub cache, by the window);
  // `downloads`: where downloads go; `catalogue`: what can be downloaded.
  LibraryPanel(QStringList roots, QString downloads, library::Catalogue catalogue,
               net::HubAccess hub, QWidget* parent = nullptr);
  ~LibraryPanel() override;

  void addRoot(const QString& folder);  // and scans again
  const QStringList& roots() const { return roots_; }
  void scan();
  bool scanning() const;
  bool downloading() const { return download_thread_ != nullptr; }
  const library::LibraryScan& lastScan() const { return scan_; }

  // The set rows (one per set: its status line) and the selected one.
  QTreeWidget* sets() const { return sets_; }
  QComboBox* catalogueBox() const { return catalogue_box_; }
  QComboBox* precisionBox() const { return precision_box_; }
  QPushButton* downloadButton() const { return download_; }
  QPushButton* cancelButton() const { return cancel_; }
  QPushButton* useButton() const { return use_; }
  QProgressBar* totalProgress() const { return total_bar_; }
  QLabel* progressText() const { return progress_text_; }
  QString lastError() const { return last_error_; }

  // Tests: the answer to a licence notice that must be accepted (default: a dialog).
  void setLicenceQuestion(std::function<bool(const library::CatalogueEntry&)> ask) {
    ask_licence_ = std::move(ask);
  }
  // Tests: the downloader's options (retry delays, hooks).
  void setDownloadOptions(net::DownloadOptions options) { options_ = std::move(options); }

  void startDownload();
  void cancelDownload();
  int cleanUp();  // removes the partial files of interrupted downloads; how many

 signals:
  void scanned();
  // A download ended: `error` empty when every file is there and verified.
  void downloadFinished(const QString& error);
  // The user chose a ready set: its part files and its name ("Wan 2.2 TI2V-5B (fp16)").
  void setChosen(const QStringList& files, const QString& name);
  // The user added a folder to scan ("Add a folder…").
  void folderAdded(const QString& folder);

 private:
  void showScan();
  void chooseCurrent();
  void fillPrecisions();
  void onProgress(const net::DownloadProgress& progress);
  void onDownloadEnded(const QString& error);

  QStringList roots_;
  QString downloads_;
  library::Catalogue catalogue_;
  net::HubAccess hub_;
  library::LibraryScan scan_;
  LatestQuery* query_;
  QTreeWidget* sets_;
  QListWidget* loras_;
  QComboBox* catalogue_box_;
  QComboBox* precision_box_;
  QPushButton* scan_button_;
  QPushButton* add_folder_;
  QPushButton* download_;
  QPushButton* cancel_;
  QPushButton* clean_;
  QPushButton* use_;
  QProgressBar* total_bar_;
  QLabel* progress_text_;
  QString last_error_;
  std::function<bool(const library::CatalogueEntry&)> ask_licence_;
  net::DownloadOptions options_;
  std::shared_ptr<net::HubDownloader> downloader_;
  QThread* download_thread_ = nullptr;
};

}  // namespace ferry::gui
