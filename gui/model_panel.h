// The model-folder picker: a folder (typed, browsed or dropped), what the engine found in it
// (pipeline::Session::find: each part and its size on disk) or what is missing, in the engine's
// words. Finding reads the model's headers, so it runs on a LatestQuery thread: a slow or network
// drive never blocks the window, and a newer folder supersedes one still being looked at.
#pragma once

#include <QGroupBox>
#include <functional>
#include <memory>

#include "core/pipeline/session.h"

class QLabel;
class QLineEdit;
class QPushButton;

namespace ferry::gui {

class LatestQuery;

class ModelPanel : public QGroupBox {
  Q_OBJECT

 public:
  explicit ModelPanel(std::shared_ptr<const pipeline::Session> session, QWidget* parent = nullptr);

  QString folder() const;
  // Starts looking for the model parts in `folder`; modelChanged() says when the answer is in.
  void setFolder(const QString& folder);
  // The model found in folder(); empty while looking and when none was found.
  const pipeline::ModelHandle& model() const { return model_; }
  bool scanning() const;
  QString problem() const { return problem_; }  // empty when a complete set was found
  QString descriptionText() const;
  QLineEdit* folderEdit() const { return edit_; }

  // Tests: runs on the scan's thread at the start of every scan (a slow drive, the thread it ran
  // on).
  void setScanHook(std::function<void()> hook) { scanHook_ = std::move(hook); }

 signals:
  void modelChanged();
  // The user asked for the demo model (written to the per-user data folder by the window).
  void demoRequested();

 private:
  void browse();
  void scan();
  void show(const pipeline::ModelHandle& model, const QStringList& lines, const QString& problem);

  std::shared_ptr<const pipeline::Session> session_;
  LatestQuery* query_;
  QLineEdit* edit_;
  QPushButton* browse_;
  QPushButton* demo_;
  QLabel* found_;
  pipeline::ModelHandle model_;
  QString problem_;
  QString scanned_;
  std::function<void()> scanHook_;
};

}  // namespace ferry::gui
