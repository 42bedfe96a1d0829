// The model picker: a folder (typed, browsed or dropped) or a set of files wherever they are (a
// set chosen in the model library: a ComfyUI user's diffusion model, text encoder and VAE in three
// folders), what the engine found in it (pipeline::Session::find: each part and its size on disk)
// or what is missing, in the engine's words. Finding reads the model's headers, so it runs on a
// LatestQuery thread: a slow or network drive never blocks the window, and a newer model
// supersedes one still being looked at.
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

  // The model as the engine takes it (GenerationRequest::model): the folder typed, or the set's
  // files; '/' separators; empty when none is chosen.
  QStringList paths() const;
  // The folder typed (native separators); empty while a set's files are the model.
  QString folder() const;
  // Starts looking for the model parts in `folder`; modelChanged() says when the answer is in.
  void setFolder(const QString& folder);
  // The same for a model given as paths: one folder, or a set's files, shown as `name` (empty:
  // modelShortName). Typing in the field goes back to a folder.
  void setPaths(const QStringList& paths, const QString& name = {});
  bool showsFiles() const { return !files_.isEmpty(); }
  // The model found in folder(); empty while looking and when none was found.
  const pipeline::ModelHandle& model() const { return model_; }
  bool scanning() const;
  QString problem() const { return problem_; }  // empty when a complete set was found
  QString descriptionText() const;
  QLineEdit* folderEdit() const { return edit_; }
  QPushButton* libraryButton() const { return library_; }

  // Tests: runs on the scan's thread at the start of every scan (a slow drive, the thread it ran
  // on).
  void setScanHook(std::function<void()> hook) { scanHook_ = std::move(hook); }

 signals:
  void modelChanged();
  // The user asked for the demo model (written to the per-user data folder by the window).
  void demoRequested();
  // The user asked for the model library (the sets already on disk, the catalogue).
  void libraryRequested();

 private:
  void browse();
  void scan();
  void show(const pipeline::ModelHandle& model, const QStringList& lines, const QString& problem);
  // What was found (or why nothing was, in red) under the field.
  void showText(const QString& text, bool problem);

  std::shared_ptr<const pipeline::Session> session_;
  LatestQuery* query_;
  QLineEdit* edit_;
  QPushButton* browse_;
  QPushButton* library_;
  QPushButton* demo_;
  QLabel* label_;
  QLabel* found_;
  pipeline::ModelHandle model_;
  QString problem_;
  QStringList files_;  // the set's files while they are the model (the field shows its name)
  QString scanned_;
  std::function<void()> scanHook_;
};

}  // namespace ferry::gui
