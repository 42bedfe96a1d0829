#include "gui/model_panel.h"

#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QGridLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <map>

#include "core/io/detail/os_file.h"
#include "gui/generation_settings.h"
#include "gui/latest_query.h"
#include "gui/memory_chart.h"

namespace ferry::gui {
namespace {

// The folder a model is described by: a folder model's own, or where a set's files meet (a
// ComfyUI install's models/ folder).
QString modelFolderOf(const QStringList& paths) {
  return paths.size() == 1 ? paths.front() : commonFolderOf(paths);
}

// What the engine says about the model, paths relative to the chosen folder (or where the set's
// files meet: it is shown right above), and the bytes each part takes on disk.
QStringList describe(const models::ModelParts& model, const QString& folder) {
  QStringList lines;
  for (const std::string& part : model.describe()) {
    QString line = QString::fromStdString(part);
    if (folder.isEmpty()) {
      lines << line;
      continue;
    }
    line.replace(QDir::toNativeSeparators(QDir(folder).absolutePath()) + QDir::separator(),
                 QString());
    line.replace(QDir(folder).absolutePath() + QLatin1Char('/'), QString());
    lines << line;
  }
  std::map<std::string, std::uint64_t> bytes;
  std::vector<std::string> roles;  // in the order the family lists them
  for (const models::PartFile& f : model.files()) {
    if (bytes.find(f.role) == bytes.end()) roles.push_back(f.role);
    bytes[f.role] += f.bytes;
  }
  QStringList sizes;
  for (const std::string& role : roles) {
    sizes << QStringLiteral("%1 %2").arg(QString::fromStdString(role),
                                         MemoryChart::formatBytes(bytes[role]));
  }
  if (!sizes.isEmpty()) lines << QObject::tr("On disk: %1").arg(sizes.join(QStringLiteral(", ")));
  return lines;
}

}  // namespace

ModelPanel::ModelPanel(std::shared_ptr<const pipeline::Session> session, QWidget* parent)
    : QGroupBox(tr("Model"), parent),
      session_(std::move(session)),
      query_(new LatestQuery(QStringLiteral("Ferry model scan"), this)),
      edit_(new QLineEdit(this)),
      browse_(new QPushButton(tr("&Browse…"), this)),
      library_(new QPushButton(tr("Library…"), this)),
      demo_(new QPushButton(tr("Use the demo model"), this)),
      label_(new QLabel(tr("F&older:"), this)),
      found_(new QLabel(this)) {
  edit_->setPlaceholderText(tr("Folder with a Wan diffusion model, umT5 text encoder and VAE"));
  edit_->setAccessibleName(tr("Model folder"));
  edit_->setClearButtonEnabled(true);
  browse_->setAccessibleName(tr("Browse for the model folder"));
  library_->setToolTip(
      tr("The model sets already on this computer (Ferry's models folder, ComfyUI, the Hugging "
         "Face cache, folders you add), and the catalogue of sets to download."));
  demo_->setToolTip(
      tr("A tiny model with random weights: shows the whole path works on this "
         "machine in seconds. Its videos are noise-like patterns."));
  found_->setWordWrap(true);
  found_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  found_->setAccessibleName(tr("What was found in the model folder"));

  auto* layout = new QGridLayout(this);
  label_->setBuddy(edit_);
  layout->addWidget(label_, 0, 0);
  layout->addWidget(edit_, 0, 1);
  layout->addWidget(browse_, 0, 2);
  layout->addWidget(library_, 0, 3);
  // The demo beside what was found, not on a row of its own: at 1280×650 the settings column
  // has no height to spare (gui.layout).
  layout->addWidget(found_, 1, 0, 1, 3);
  layout->addWidget(demo_, 1, 3, Qt::AlignTop);
  layout->setColumnStretch(1, 1);

  connect(browse_, &QPushButton::clicked, this, &ModelPanel::browse);
  connect(library_, &QPushButton::clicked, this, &ModelPanel::libraryRequested);
  connect(demo_, &QPushButton::clicked, this, &ModelPanel::demoRequested);
  connect(edit_, &QLineEdit::textEdited, this, [this] {
    if (files_.isEmpty()) return;
    files_.clear();  // what is typed is a folder
    label_->setText(tr("F&older:"));
    edit_->setToolTip(QString());
  });
  connect(edit_, &QLineEdit::editingFinished, this, &ModelPanel::scan);
  scan();
}

QString ModelPanel::folder() const {
  return files_.isEmpty() ? edit_->text().trimmed() : QString();
}

QStringList ModelPanel::paths() const {
  if (!files_.isEmpty()) return files_;
  const QString typed = QDir::fromNativeSeparators(folder());
  return typed.isEmpty() ? QStringList{} : QStringList{typed};
}

bool ModelPanel::scanning() const {
  return query_->pending();
}

void ModelPanel::setFolder(const QString& folder) {
  setPaths(folder.isEmpty() ? QStringList{} : QStringList{folder});
}

void ModelPanel::setPaths(const QStringList& paths, const QString& name) {
  QStringList model;
  for (const QString& path : paths) {
    if (!path.isEmpty()) model << QDir::fromNativeSeparators(path);
  }
  if (model.size() > 1) {
    files_ = model;
    label_->setText(tr("Set:"));
    edit_->setText(name.isEmpty() ? modelShortName(model) : name);
    QStringList shown;
    for (const QString& file : model) shown << QDir::toNativeSeparators(file);
    edit_->setToolTip(shown.join(QLatin1Char('\n')));
  } else {
    files_.clear();
    label_->setText(tr("F&older:"));
    edit_->setText(QDir::toNativeSeparators(model.value(0)));
    edit_->setToolTip(QString());
  }
  scanned_ = QStringLiteral("\n");  // never a model: scans again
  scan();
}

void ModelPanel::browse() {
  const QString dir = QFileDialog::getExistingDirectory(this, tr("Model folder"), folder());
  if (!dir.isEmpty()) setFolder(dir);
}

void ModelPanel::scan() {
  const QStringList paths = this->paths();
  const QString key = paths.join(QLatin1Char('\n'));
  if (key == scanned_) return;
  scanned_ = key;
  model_.reset();
  problem_ = tr("Still looking for the model.");
  if (paths.isEmpty()) {
    // Nothing to read, but answered through the query like every lookup: the answer supersedes a
    // scan still running and comes once scanning() is false. Given at once beside a pending query
    // (the one that dropped that scan), it left the window waiting for an answer that never came:
    // its plan line said "Looking for the model…" after the panel had settled.
    const QString none =
        tr("No model folder chosen. Pick the folder of a Wan 2.1 or 2.2 model (diffusers "
           "or ComfyUI files), or try the demo model.");
    showText(QStringLiteral("⚠ ") + none, true);  // in view now, a slow scan still running
    query_->post(
        [this, none] { return std::function<void()>([this, none] { show(nullptr, {}, none); }); });
    emit modelChanged();
    return;
  }
  showText(tr("Looking for the model in %1…")
               .arg(files_.isEmpty() ? QDir::toNativeSeparators(paths.front()) : edit_->text()),
           false);
  // Everything that touches the drive — whether the folder exists included — runs off the GUI
  // thread.
  query_->post([this, session = session_, paths, hook = scanHook_] {
    if (hook) hook();
    pipeline::ModelHandle model;
    QStringList lines;
    QString problem;
    try {
      std::vector<std::filesystem::path> model_paths;
      for (const QString& path : paths) {
        if (!QFileInfo::exists(path)) {
          problem =
              paths.size() == 1
                  ? tr("The model folder %1 does not exist.").arg(QDir::toNativeSeparators(path))
                  : tr("The model file %1 is no longer there.").arg(QDir::toNativeSeparators(path));
          break;
        }
        model_paths.push_back(io::detail::path_from_utf8(path.toStdString()));
      }
      if (problem.isEmpty()) {
        model = session->find(model_paths);
        lines = describe(*model, modelFolderOf(paths));
      }
    } catch (const std::exception& e) {
      problem = QString::fromUtf8(e.what());
    }
    return std::function<void()>([this, model, lines, problem] { show(model, lines, problem); });
  });
  // Posted first, so that receivers see scanning(): this is not the answer yet (a window that
  // keeps restored settings for the model found must not spend that on this signal).
  emit modelChanged();
}

void ModelPanel::show(const pipeline::ModelHandle& model, const QStringList& lines,
                      const QString& problem) {
  model_ = model;
  problem_ = model ? QString() : problem;
  if (model_) {
    showText(lines.join(QLatin1Char('\n')), false);
  } else {
    showText(QStringLiteral("⚠ ") + problem_, true);
  }
  emit modelChanged();
}

void ModelPanel::showText(const QString& text, bool problem) {
  found_->setStyleSheet(problem ? QStringLiteral("color: #d9534f;") : QString());
  found_->setText(text);
  found_->setAccessibleDescription(text);
}

QString ModelPanel::descriptionText() const {
  return found_->text();
}

}  // namespace ferry::gui
