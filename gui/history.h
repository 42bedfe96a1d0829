// The history of generations: one JSON file and one PNG thumbnail per video in
// <per-user data folder>/history (architecture.md §7), listed newest first with the settings that
// made each video, so that any item restores every setting. The panel shows them as a list or as
// a gallery (a grid of thumbnails), filtered by a search of their prompts.
#pragma once

#include <QDateTime>
#include <QImage>
#include <QList>
#include <QString>
#include <QWidget>

#include "gui/generation_settings.h"
#include "gui/history_item.h"

class QLineEdit;
class QListWidget;
class QPlainTextEdit;
class QPushButton;
class QToolButton;

namespace ferry::gui {

class HistoryStore {
 public:
  // `folder` is created when the first item is added.
  explicit HistoryStore(QString folder);
  const QString& folder() const { return folder_; }

  // Writes the item's JSON and thumbnail (each under a temporary name, then renamed); returns it
  // with its id and paths filled in, or an empty id when it could not be written.
  // `draftOf`: the id of the draft the video is the full decode of (HistoryItem::draftOf).
  HistoryItem add(const GenerationSettings& settings, const QString& video, const QString& summary,
                  const QImage& thumbnail, const QString& draftOf = {});
  // Every readable item, newest first; unreadable files are skipped.
  QList<HistoryItem> items() const;
  bool remove(const QString& id);

 private:
  QString folder_;
};

class HistoryPanel : public QWidget {
  Q_OBJECT

 public:
  explicit HistoryPanel(HistoryStore* store, QWidget* parent = nullptr);
  void reload();
  QListWidget* list() const { return list_; }
  QPushButton* fullDecodeButton() const { return fullDecode_; }  // "Decode with the full VAE"
  int count() const;
  // The chosen item's settings as the read-only view under the list shows them.
  QString settingsText() const;
  // Row `row`'s text as the list or gallery shows it (a draft's starts with its badge).
  QString rowText(int row) const;
  // The gallery: the items as a grid of their thumbnails (a click plays one and shows its
  // settings, as in the list); false: the list.
  void setGridView(bool grid);
  bool gridView() const;
  // Shows only the items whose prompt holds `text` (any case); empty: all.
  void setSearch(const QString& text);
  int shownCount() const;  // the items the search leaves

 signals:
  // `video`: the item's video, beside which a noise file it was made from is looked for.
  void restoreRequested(const ferry::gui::GenerationSettings& settings, const QString& video);
  void openRequested(const QString& video);
  // "Decode with the full VAE" on a draft whose kept latents are beside it.
  void fullDecodeRequested(const ferry::gui::GenerationSettings& settings, const QString& video,
                           const QString& id);

 private:
  const HistoryItem* current() const;
  void updateButtons();
  void showDetails();
  void fillRows();
  void applySearch();

  HistoryStore* store_;
  QList<HistoryItem> items_;
  QListWidget* list_;
  QLineEdit* search_;
  QToolButton* listView_;
  QToolButton* gridView_;
  QPlainTextEdit* details_;  // the chosen item's settings, read-only
  QPushButton* restore_;
  QPushButton* open_;
  QPushButton* remove_;
  QPushButton* fullDecode_;  // shown for drafts
};

}  // namespace ferry::gui
