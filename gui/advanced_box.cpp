#include "gui/advanced_box.h"

#include <QCheckBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QGridLayout>
#include <QLabel>
#include <QPushButton>
#include <QToolButton>
#include <QVBoxLayout>

namespace ferry::gui {

AdvancedBox::AdvancedBox(QWidget* parent)
    : QWidget(parent),
      toggle_(new QToolButton(this)),
      body_(new QWidget(this)),
      noiseName_(new QLabel(body_)),
      chooseNoise_(new QPushButton(tr("Load…"), body_)),
      clearNoise_(new QPushButton(tr("Clear"), body_)),
      saveNoise_(new QCheckBox(tr("Save the noise this run used"), body_)),
      noiseTarget_(new QPushButton(body_)),
      saveLatents_(new QCheckBox(tr("Save the final latents"), body_)),
      latentsTarget_(new QPushButton(body_)),
      textStates_(new QCheckBox(tr("with the text encoder's output"), body_)) {
  toggle_->setText(tr("Advanced: replay noise and latents"));
  toggle_->setCheckable(true);
  toggle_->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  toggle_->setArrowType(Qt::RightArrow);
  toggle_->setAutoRaise(true);
  toggle_->setAccessibleName(tr("Advanced settings"));
  toggle_->setToolTip(
      tr("Each tool draws its noise its own way, so a seed never gives the same video in two "
         "tools: the noise tensor itself does. Load it, save it, save the final latents."));

  noiseName_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  noiseName_->setAccessibleName(tr("Noise file"));
  chooseNoise_->setAccessibleName(tr("Load the initial noise from a file"));
  chooseNoise_->setToolTip(
      tr("A safetensors file whose tensors replace the seed's noise (Wan: one "
         "F32 tensor \"noise\" [C, T, h, w])"));
  clearNoise_->setAccessibleName(tr("Use the seed's noise"));
  noiseTarget_->setAccessibleName(tr("Where the noise is saved"));
  latentsTarget_->setAccessibleName(tr("Where the latents are saved"));
  for (QPushButton* b : {noiseTarget_, latentsTarget_}) b->setFlat(true);

  auto* grid = new QGridLayout(body_);
  grid->setContentsMargins(12, 0, 0, 0);
  grid->addWidget(new QLabel(tr("Noise:"), body_), 0, 0);
  grid->addWidget(noiseName_, 0, 1);
  grid->addWidget(chooseNoise_, 0, 2);
  grid->addWidget(clearNoise_, 0, 3);
  grid->addWidget(saveNoise_, 1, 0, 1, 2);
  grid->addWidget(noiseTarget_, 1, 2, 1, 2);
  grid->addWidget(saveLatents_, 2, 0, 1, 2);
  grid->addWidget(latentsTarget_, 2, 2, 1, 2);
  grid->addWidget(textStates_, 3, 0, 1, 4);
  grid->setColumnStretch(1, 1);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(toggle_);
  layout->addWidget(body_);
  body_->hide();

  connect(toggle_, &QToolButton::toggled, this, &AdvancedBox::setExpanded);
  connect(chooseNoise_, &QPushButton::clicked, this, &AdvancedBox::chooseNoise);
  connect(clearNoise_, &QPushButton::clicked, this, [this] { setNoise(QString()); });
  connect(noiseTarget_, &QPushButton::clicked, this,
          [this] { chooseTarget(saveNoisePath_, QStringLiteral("noise")); });
  connect(latentsTarget_, &QPushButton::clicked, this,
          [this] { chooseTarget(saveLatentsPath_, QStringLiteral("latents")); });
  for (QCheckBox* box : {saveNoise_, saveLatents_}) {
    connect(box, &QCheckBox::toggled, this, &AdvancedBox::updateLabels);
  }
  updateLabels();
}

void AdvancedBox::apply(const GenerationSettings& s) {
  saveNoise_->setChecked(s.saveNoise);
  saveLatents_->setChecked(s.saveLatents);
  textStates_->setChecked(s.saveTextStates);
  saveNoisePath_ = s.saveNoisePath;
  saveLatentsPath_ = s.saveLatentsPath;
  setNoise(s.noise);
  // What is in use shows: a restored replay is never hidden behind the fold.
  if (!s.noise.isEmpty() || s.saveNoise || s.saveLatents) setExpanded(true);
}

void AdvancedBox::fill(GenerationSettings& s) const {
  s.noise = noise_;
  s.saveNoise = saveNoise_->isChecked();
  s.saveLatents = saveLatents_->isChecked();
  s.saveTextStates = textStates_->isChecked();
  s.saveNoisePath = saveNoisePath_;
  s.saveLatentsPath = saveLatentsPath_;
}

void AdvancedBox::setNoise(const QString& path) {
  const QString clean = QDir::fromNativeSeparators(path);
  const bool changed = clean != noise_;
  noise_ = clean;
  updateLabels();
  if (changed) emit noiseChanged();
}

bool AdvancedBox::expanded() const {
  return toggle_->isChecked();
}

void AdvancedBox::setExpanded(bool expanded) {
  const QSignalBlocker block(toggle_);
  toggle_->setChecked(expanded);
  toggle_->setArrowType(expanded ? Qt::DownArrow : Qt::RightArrow);
  body_->setVisible(expanded);
}

void AdvancedBox::setEditable(bool editable) {
  editable_ = editable;
  for (QWidget* w : std::initializer_list<QWidget*>{chooseNoise_, saveNoise_, saveLatents_}) {
    w->setEnabled(editable);
  }
  updateLabels();
}

void AdvancedBox::chooseNoise() {
  const QString start = noise_.isEmpty() ? QString() : QFileInfo(noise_).absolutePath();
  const QString path = QFileDialog::getOpenFileName(this, tr("Initial noise (safetensors)"), start,
                                                    tr("Safetensors (*.safetensors)"));
  if (!path.isEmpty()) setNoise(path);
}

void AdvancedBox::chooseTarget(QString& path, const QString& what) {
  const QString suggested =
      path.isEmpty() ? QStringLiteral("ferry.%1.safetensors").arg(what) : path;
  const QString chosen = QFileDialog::getSaveFileName(
      this, what == QLatin1String("noise") ? tr("Save the noise to") : tr("Save the latents to"),
      suggested, tr("Safetensors (*.safetensors)"));
  if (chosen.isEmpty()) return;
  path = QDir::fromNativeSeparators(chosen);
  if (!path.endsWith(QLatin1String(".safetensors"))) path += QStringLiteral(".safetensors");
  updateLabels();
}

void AdvancedBox::updateLabels() {
  noiseName_->setText(noise_.isEmpty() ? tr("the seed's") : QFileInfo(noise_).fileName());
  noiseName_->setToolTip(QDir::toNativeSeparators(noise_));
  clearNoise_->setEnabled(editable_ && !noise_.isEmpty());
  auto target = [](const QString& path, const QString&) {
    return path.isEmpty() ? tr("next to the video") : QFileInfo(path).fileName();
  };
  noiseTarget_->setText(target(saveNoisePath_, QStringLiteral("noise")));
  latentsTarget_->setText(target(saveLatentsPath_, QStringLiteral("latents")));
  noiseTarget_->setToolTip(saveNoisePath_.isEmpty()
                               ? tr("<video name>.noise.safetensors next to the video; click to "
                                    "choose another file")
                               : QDir::toNativeSeparators(saveNoisePath_));
  latentsTarget_->setToolTip(saveLatentsPath_.isEmpty()
                                 ? tr("<video name>.latents.safetensors next to the video; click "
                                      "to choose another file")
                                 : QDir::toNativeSeparators(saveLatentsPath_));
  noiseTarget_->setEnabled(editable_ && saveNoise_->isChecked());
  latentsTarget_->setEnabled(editable_ && saveLatents_->isChecked());
  textStates_->setEnabled(editable_ && saveLatents_->isChecked());
}

}  // namespace ferry::gui
