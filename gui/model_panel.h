// The model-folder picker: a folder (typed, browsed or dropped), what find_model_set found in it
// — each part's kind, size on disk and dtypes — or what is missing, in the engine's words.
#pragma once

#include <QGroupBox>
#include <optional>

#include "core/pipeline/model_set.h"

class QLabel;
class QLineEdit;
class QPushButton;

namespace ferry::gui {

class ModelPanel : public QGroupBox {
  Q_OBJECT

 public:
  explicit ModelPanel(QWidget* parent = nullptr);

  QString folder() const;
  // Looks for the model parts in `folder` now (header reads only) and shows what it found.
  void setFolder(const QString& folder);
  const std::optional<pipeline::ModelSet>& modelSet() const { return set_; }
  QString problem() const { return problem_; }  // empty when a complete set was found
  QString descriptionText() const;
  QLineEdit* folderEdit() const { return edit_; }

 signals:
  void modelChanged();
  // The user asked for the demo model (written to the per-user data folder by the window).
  void demoRequested();

 private:
  void browse();
  void scan();

  QLineEdit* edit_;
  QPushButton* browse_;
  QPushButton* demo_;
  QLabel* found_;
  std::optional<pipeline::ModelSet> set_;
  QString problem_;
  QString scanned_;
};

}  // namespace ferry::gui
