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
#include "gui/latest_query.h"
#include "gui/memory_chart.h"

namespace ferry::gui {
namespace {

// What the engine says about the model, paths relative to the chosen folder (it is right above),
// and the bytes each part takes on disk.
QStringList describe(const models::ModelParts& model, const QString& folder) {
  QStringList lines;
  for (const std::string& part : model.describe()) {
    QString line = QString::fromStdString(part);
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
      demo_(new QPushButton(tr("Use the demo model"), this)),
      found_(new QLabel(this)) {
  edit_->setPlaceholderText(tr("Folder with a Wan diffusion model, umT5 text encoder and VAE"));
  edit_->setAccessibleName(tr("Model folder"));
  edit_->setClearButtonEnabled(true);
  browse_->setAccessibleName(tr("Browse for the model folder"));
  demo_->setToolTip(
      tr("A tiny model with random weights: shows the whole path works on this "
         "machine in seconds. Its videos are noise-like patterns."));
  found_->setWordWrap(true);
  found_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  found_->setAccessibleName(tr("What was found in the model folder"));

  auto* layout = new QGridLayout(this);
  auto* label = new QLabel(tr("F&older:"), this);
  label->setBuddy(edit_);
  layout->addWidget(label, 0, 0);
  layout->addWidget(edit_, 0, 1);
  layout->addWidget(browse_, 0, 2);
  layout->addWidget(demo_, 0, 3);
  layout->addWidget(found_, 1, 0, 1, 4);
  layout->setColumnStretch(1, 1);

  connect(browse_, &QPushButton::clicked, this, &ModelPanel::browse);
  connect(demo_, &QPushButton::clicked, this, &ModelPanel::demoRequested);
  connect(edit_, &QLineEdit::editingFinished, this, &ModelPanel::scan);
  scan();
}

QString ModelPanel::folder() const {
  return edit_->text().trimmed();
}

bool ModelPanel::scanning() const {
  return query_->pending();
}

void ModelPanel::setFolder(const QString& folder) {
  edit_->setText(QDir::toNativeSeparators(folder));
  scanned_ = QStringLiteral("\n");  // never a folder: scans again
  scan();
}

void ModelPanel::browse() {
  const QString dir = QFileDialog::getExistingDirectory(this, tr("Model folder"), folder());
  if (!dir.isEmpty()) setFolder(dir);
}

void ModelPanel::scan() {
  const QString path = QDir::fromNativeSeparators(folder());
  if (path == scanned_) return;
  scanned_ = path;
  model_.reset();
  if (path.isEmpty()) {
    query_->post([] { return std::function<void()>([] {}); });  // drops a scan still running
    show(nullptr, {},
         tr("No model folder chosen. Pick the folder of a Wan 2.1 or 2.2 model (diffusers "
            "or ComfyUI files), or try the demo model."));
    return;
  }
  found_->setStyleSheet(QString());
  found_->setText(tr("Looking for the model in %1…").arg(QDir::toNativeSeparators(path)));
  problem_ = tr("Still looking for the model.");
  // Everything that touches the drive — whether the folder exists included — runs off the GUI
  // thread.
  query_->post([this, session = session_, path, hook = scanHook_] {
    if (hook) hook();
    pipeline::ModelHandle model;
    QStringList lines;
    QString problem;
    try {
      if (!QFileInfo::exists(path)) {
        problem = tr("The model folder %1 does not exist.").arg(QDir::toNativeSeparators(path));
      } else {
        model = session->find({io::detail::path_from_utf8(path.toStdString())});
        lines = describe(*model, path);
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
    found_->setStyleSheet(QString());
    found_->setText(lines.join(QLatin1Char('\n')));
  } else {
    found_->setStyleSheet(QStringLiteral("color: #d9534f;"));
    found_->setText(QStringLiteral("⚠ ") + problem_);
  }
  found_->setAccessibleDescription(found_->text());
  emit modelChanged();
}

QString ModelPanel::descriptionText() const {
  return found_->text();
}

}  // namespace ferry::gui
