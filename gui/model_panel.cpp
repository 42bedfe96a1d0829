#include "gui/model_panel.h"

#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QGridLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>

#include "core/io/detail/os_file.h"
#include "core/pipeline/stage_plans.h"
#include "core/tensor/dtype.h"
#include "gui/memory_chart.h"

namespace ferry::gui {

ModelPanel::ModelPanel(QWidget* parent)
    : QGroupBox(tr("Model"), parent),
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

void ModelPanel::setFolder(const QString& folder) {
  edit_->setText(QDir::toNativeSeparators(folder));
  scanned_.clear();
  scan();
}

void ModelPanel::browse() {
  const QString dir = QFileDialog::getExistingDirectory(this, tr("Model folder"), folder());
  if (!dir.isEmpty()) setFolder(dir);
}

void ModelPanel::scan() {
  const QString path = QDir::fromNativeSeparators(folder());
  if (path == scanned_ && (set_ || !problem_.isEmpty())) return;
  scanned_ = path;
  set_.reset();
  problem_.clear();
  QStringList lines;
  if (path.isEmpty()) {
    problem_ =
        tr("No model folder chosen. Pick the folder of a Wan 2.1 or 2.2 model (diffusers "
           "or ComfyUI files), or try the demo model.");
  } else if (!QFileInfo::exists(path)) {
    problem_ = tr("The model folder %1 does not exist.").arg(QDir::toNativeSeparators(path));
  } else {
    try {
      pipeline::ModelSet set =
          pipeline::find_model_set({io::detail::path_from_utf8(path.toStdString())});
      const auto parts = pipeline::describe(set);
      const std::filesystem::path files[] = {set.dit, set.text_encoder, {}, set.vae};
      for (std::size_t i = 0; i < parts.size(); ++i) {
        // Paths relative to the chosen folder: the folder is right above.
        QString line = QString::fromStdString(parts[i]);
        line.replace(QDir::toNativeSeparators(QDir(path).absolutePath()) + QDir::separator(),
                     QString());
        line.replace(QDir(path).absolutePath() + QLatin1Char('/'), QString());
        if (i < 4 && !files[i].empty()) {
          try {
            const pipeline::PartSummary s = pipeline::summarize_part(files[i]);
            QStringList dtypes;
            for (const auto& d : s.dtypes) dtypes << QString::fromStdString(d);
            line += QStringLiteral(" — %1, %2")
                        .arg(MemoryChart::formatBytes(s.bytes), dtypes.join(QStringLiteral("/")));
          } catch (const std::exception&) {
            // find_model_set read these already; a summary that fails is left out.
          }
        }
        lines << line;
      }
      set_ = std::move(set);
    } catch (const std::exception& e) {
      problem_ = QString::fromUtf8(e.what());
    }
  }
  if (set_) {
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
