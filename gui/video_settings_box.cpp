#include "gui/video_settings_box.h"

#include <QClipboard>
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGuiApplication>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QRegularExpressionValidator>
#include <QSpinBox>
#include <algorithm>
#include <cmath>
#include <utility>

#include "gui/snapping_spin_box.h"

namespace ferry::gui {

VideoSettingsBox::VideoSettingsBox(QWidget* parent) : QGroupBox(tr("Video"), parent) {
  auto* form = new QFormLayout(this);
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  size_ = new QComboBox;
  size_->setAccessibleName(tr("Size"));
  width_ = new SnappingSpinBox;
  height_ = new SnappingSpinBox;
  for (SnappingSpinBox* box : {width_, height_}) {
    box->setRange(16, 4096);
    box->setGrid(16, 0, tr("a multiple of %1").arg(16));
    box->setSuffix(tr(" px"));
  }
  width_->setAccessibleName(tr("Width"));
  height_->setAccessibleName(tr("Height"));
  auto* sizeRow = new QHBoxLayout;
  sizeRow->addWidget(size_, 1);
  sizeRow->addWidget(width_);
  sizeRow->addWidget(new QLabel(QStringLiteral("×"), this));
  sizeRow->addWidget(height_);
  auto* sizeLabel = new QLabel(tr("Si&ze:"));
  sizeLabel->setBuddy(size_);
  form->addRow(sizeLabel, sizeRow);
  sizeNote_ = new QLabel;
  sizeNote_->setWordWrap(true);
  sizeNote_->setForegroundRole(QPalette::PlaceholderText);
  sizeNote_->hide();
  form->addRow(QString(), sizeNote_);

  frames_ = new SnappingSpinBox;
  frames_->setRange(1, 1001);
  frames_->setGrid(4, 1, tr("%1k+1").arg(4));
  frames_->setAccessibleName(tr("Frames"));
  frames_->setToolTip(tr("Frames of the form 4k+1 (81, 121, …)"));
  duration_ = new QDoubleSpinBox;
  duration_->setRange(0, 120);
  duration_->setDecimals(1);
  duration_->setSingleStep(0.5);
  duration_->setSuffix(tr(" s"));
  duration_->setAccessibleName(tr("Duration"));
  fps_ = new QSpinBox;
  fps_->setRange(1, 120);
  fps_->setSuffix(tr(" fps"));
  fps_->setAccessibleName(tr("Frames per second"));
  auto* lengthRow = new QHBoxLayout;
  lengthRow->addWidget(frames_);
  auto* durationLabel = new QLabel(tr("d&uration"));
  durationLabel->setBuddy(duration_);
  lengthRow->addWidget(durationLabel);
  lengthRow->addWidget(duration_);
  lengthRow->addWidget(fps_);
  auto* framesLabel = new QLabel(tr("Fr&ames:"));
  framesLabel->setBuddy(frames_);
  form->addRow(framesLabel, lengthRow);
  snapNote_ = new QLabel;
  snapNote_->setWordWrap(true);
  snapNote_->setAccessibleName(tr("Snapped value"));
  snapNote_->hide();
  form->addRow(QString(), snapNote_);
  for (SnappingSpinBox* box : {width_, height_, frames_}) {
    connect(box, &SnappingSpinBox::snapped, this, [this](const QString& note) {
      snapNote_->setText(note);
      snapNote_->show();
    });
  }

  steps_ = new QSpinBox;
  steps_->setRange(1, 1000);
  steps_->setAccessibleName(tr("Steps"));
  cfg_ = new QDoubleSpinBox;
  cfg_->setRange(0, 50);
  cfg_->setSingleStep(0.5);
  cfg_->setDecimals(1);
  cfg_->setAccessibleName(tr("Guidance scale (CFG)"));
  cfg_->setToolTip(tr("How strongly the video follows the prompt"));
  shift_ = new QDoubleSpinBox;
  shift_->setRange(0.1, 100);
  shift_->setSingleStep(0.5);
  shift_->setDecimals(1);
  shift_->setAccessibleName(tr("Shift"));
  shift_->setToolTip(tr("The noise schedule's shift (the model's default is usually best)"));
  auto* samplingRow = new QHBoxLayout;
  samplingRow->addWidget(steps_);
  cfgLabel_ = new QLabel(tr("&CFG"));
  cfgLabel_->setBuddy(cfg_);
  samplingRow->addWidget(cfgLabel_);
  samplingRow->addWidget(cfg_);
  auto* shiftLabel = new QLabel(tr("&Shift"));
  shiftLabel->setBuddy(shift_);
  samplingRow->addWidget(shiftLabel);
  samplingRow->addWidget(shift_);
  auto* stepsLabel = new QLabel(tr("S&teps:"));
  stepsLabel->setBuddy(steps_);
  form->addRow(stepsLabel, samplingRow);

  sampler_ = new QComboBox;
  sampler_->setAccessibleName(tr("Sampler"));
  auto* samplerLabel = new QLabel(tr("Sa&mpler:"));
  samplerLabel->setBuddy(sampler_);
  // The low-noise expert's guide scale shares the sampler's row: shown for two-expert models.
  cfgLow_ = new QDoubleSpinBox;
  cfgLow_->setRange(0, 50);
  cfgLow_->setSingleStep(0.5);
  cfgLow_->setDecimals(1);
  cfgLow_->setAccessibleName(tr("Guidance scale (CFG) of the low-noise expert"));
  cfgLow_->setToolTip(
      tr("The low-noise expert denoises the last steps (the details); CFG is the high-noise "
         "expert's, for the first steps (the layout and motion)"));
  cfgLowLabel_ = new QLabel(tr("Lo&w-noise CFG"));
  cfgLowLabel_->setBuddy(cfgLow_);
  auto* samplerRow = new QHBoxLayout;
  samplerRow->addWidget(sampler_, 1);
  samplerRow->addWidget(cfgLowLabel_);
  samplerRow->addWidget(cfgLow_);
  cfgLowLabel_->hide();
  cfgLow_->hide();
  form->addRow(samplerLabel, samplerRow);

  seed_ = new QLineEdit;
  seed_->setValidator(
      new QRegularExpressionValidator(QRegularExpression(QStringLiteral("[0-9]{1,16}")), seed_));
  seed_->setAccessibleName(tr("Seed"));
  seedMode_ = new QComboBox;
  seedMode_->addItem(tr("fixed"), QStringLiteral("fixed"));
  seedMode_->addItem(tr("random each time"), QStringLiteral("random"));
  seedMode_->addItem(tr("+1 each time"), QStringLiteral("increment"));
  seedMode_->setAccessibleName(tr("Seed mode"));
  copySeed_ = new QPushButton(tr("Copy"));
  copySeed_->setToolTip(tr("Copy the seed to the clipboard"));
  copySeed_->setAccessibleName(tr("Copy the seed"));
  auto* seedRow = new QHBoxLayout;
  seedRow->addWidget(seed_, 1);
  seedRow->addWidget(seedMode_);
  seedRow->addWidget(copySeed_);
  auto* seedLabel = new QLabel(tr("See&d:"));
  seedLabel->setBuddy(seed_);
  form->addRow(seedLabel, seedRow);

  connect(size_, &QComboBox::currentIndexChanged, this, &VideoSettingsBox::onSizeChosen);
  connect(sampler_, &QComboBox::currentIndexChanged, this, &VideoSettingsBox::onSamplerChosen);
  connect(width_, &QSpinBox::valueChanged, this, [this] {
    updateNote();
    emit videoChanged();
  });
  connect(height_, &QSpinBox::valueChanged, this, [this] {
    updateNote();
    emit videoChanged();
  });
  connect(frames_, &QSpinBox::valueChanged, this, [this] {
    updateDuration();
    emit videoChanged();
  });
  connect(fps_, &QSpinBox::valueChanged, this, &VideoSettingsBox::updateDuration);
  connect(duration_, &QDoubleSpinBox::valueChanged, this, [this](double seconds) {
    if (updating_) return;
    // The frames nearest `seconds` (a duration is (frames − 1) / fps) on the model's grid.
    const double wanted = seconds * fps_->value() + 1 - framesOffset_;
    const int k = std::max(0, static_cast<int>(std::lround(wanted / framesStep_)));
    const QSignalBlocker block(duration_);
    frames_->setValue(framesOffset_ + k * framesStep_);
  });
  connect(copySeed_, &QPushButton::clicked, this, &VideoSettingsBox::copySeed);
  fillSizes(std::nullopt);
  fillSamplers(std::nullopt);
  showValues(false);
}

void VideoSettingsBox::showValues(bool shown) {
  if (shown == hasValues_) return;
  hasValues_ = shown;
  const bool was = updating_;
  updating_ = true;
  for (QAbstractSpinBox* box : std::initializer_list<QAbstractSpinBox*>{
           width_, height_, frames_, duration_, fps_, steps_, cfg_, cfgLow_, shift_}) {
    // QAbstractSpinBox shows the special text at the minimum: the fields wait there.
    box->setSpecialValueText(shown ? QString() : QStringLiteral("—"));
    if (shown) continue;
    if (auto* spin = qobject_cast<QSpinBox*>(box)) spin->setValue(spin->minimum());
    if (auto* spin = qobject_cast<QDoubleSpinBox*>(box)) spin->setValue(spin->minimum());
  }
  updating_ = was;
}

void VideoSettingsBox::setRules(const std::optional<models::RequestRules>& rules,
                                bool applyDefaults) {
  if (rules) {
    // The engine's limits: the inputs never offer what it would refuse.
    for (SnappingSpinBox* box : {width_, height_}) {
      box->setRange(rules->min_size, rules->max_size);
      box->setGrid(rules->size_multiple, 0, tr("a multiple of %1").arg(rules->size_multiple));
    }
    framesStep_ = std::max(1, rules->frames_step);
    framesOffset_ = std::max(1, rules->frames_offset);
    const QString form =
        tr("%1k+%2").arg(framesStep_).arg(framesOffset_ % framesStep_);  // "4k+1", "17k+5"
    frames_->setRange(framesOffset_, rules->max_frames);
    frames_->setGrid(framesStep_, framesOffset_ % framesStep_, form);
    frames_->setToolTip(tr("Frames of the form %1 (%2, %3, %4, …)")
                            .arg(form)
                            .arg(framesOffset_)
                            .arg(framesOffset_ + framesStep_)
                            .arg(framesOffset_ + 2 * framesStep_));
    steps_->setRange(1, rules->max_steps);
    cfg_->setRange(0, rules->max_guide_scale);
    cfgLow_->setRange(0, rules->max_guide_scale);
    shift_->setRange(0.1, rules->max_shift);
  }
  rules_ = rules;
  snapNote_->hide();
  cfgLabel_->setText(twoExperts() ? tr("&CFG high") : tr("&CFG"));
  cfg_->setAccessibleName(twoExperts() ? tr("Guidance scale (CFG) of the high-noise expert")
                                       : tr("Guidance scale (CFG)"));
  cfgLowLabel_->setVisible(twoExperts());
  cfgLow_->setVisible(twoExperts());
  fillSizes(rules);
  fillSamplers(rules);
  // A model found for fields that show nothing yet takes its defaults whatever was asked.
  if (rules && (applyDefaults || !hasValues_)) {
    showValues(true);
    updating_ = true;
    const int index = size_->findData(QSize(rules->width, rules->height));
    size_->setCurrentIndex(index >= 0 ? index : size_->count() - 1);
    width_->setValue(rules->width);
    height_->setValue(rules->height);
    fps_->setValue(rules->fps);
    frames_->setValue(rules->frames);
    steps_->setValue(rules->steps);
    cfg_->setValue(rules->guide_scale);
    if (rules->two_experts) cfgLow_->setValue(rules->low_noise_guide_scale);
    shift_->setValue(rules->shift);
    sampler_->setCurrentIndex(
        std::max(0, sampler_->findData(QString::fromStdString(rules->sampler))));
    updating_ = false;
  }
  updateSizeInputs();
  updateDuration();
  updateNote();
  emit videoChanged();
}

void VideoSettingsBox::onSamplerChosen() {
  const QString sampler = sampler_->currentData().toString();
  const QString left = std::exchange(lastSampler_, sampler);
  if (updating_ || !rules_) return;
  const auto recipe = [&](const QString& name) -> const models::RequestRules::SamplerDefaults* {
    for (const auto& d : rules_->sampler_defaults) {
      if (QString::fromStdString(d.sampler) == name) return &d;
    }
    return nullptr;
  };
  if (const auto* d = recipe(sampler)) {
    steps_->setValue(d->steps);
    cfg_->setValue(d->guide_scale);
    cfgLow_->setValue(d->guide_scale);  // a recipe's guidance is both experts'
    shift_->setValue(d->shift);
  } else if (recipe(left) != nullptr) {
    steps_->setValue(rules_->steps);
    cfg_->setValue(rules_->guide_scale);
    cfgLow_->setValue(rules_->low_noise_guide_scale);
    shift_->setValue(rules_->shift);
  }
}

void VideoSettingsBox::apply(const GenerationSettings& s) {
  updating_ = true;
  snapNote_->hide();
  if (s.width > 0 || s.frames > 0 || s.steps > 0) showValues(true);
  if (s.width > 0 && s.height > 0) {
    const int index = size_->findData(QSize(s.width, s.height));
    size_->setCurrentIndex(index >= 0 ? index : size_->count() - 1);
    width_->setValue(s.width);
    height_->setValue(s.height);
  }
  if (s.fps > 0) fps_->setValue(s.fps);
  if (s.frames > 0) frames_->setValue(s.frames);
  if (s.steps > 0) steps_->setValue(s.steps);
  if (s.guideScale > 0) cfg_->setValue(s.guideScale);
  // Kept while hidden: a restored two-expert clip's value waits for its model's rules.
  if (s.lowNoiseGuideScale > 0) cfgLow_->setValue(s.lowNoiseGuideScale);
  if (s.shift > 0) shift_->setValue(s.shift);
  int sampler = sampler_->findData(s.sampler);
  if (sampler < 0 && !s.sampler.isEmpty()) {  // the model's rules are not in yet: kept as given
    sampler_->addItem(s.sampler, s.sampler);
    sampler = sampler_->count() - 1;
  }
  if (sampler >= 0) sampler_->setCurrentIndex(sampler);
  seed_->setText(QString::number(s.seed));
  seedMode_->setCurrentIndex(std::max(0, seedMode_->findData(seedModeName(s.seedMode))));
  updating_ = false;
  updateSizeInputs();
  updateDuration();
  updateNote();
  emit videoChanged();
}

void VideoSettingsBox::fill(GenerationSettings& s) const {
  s.sampler = sampler_->currentData().toString();
  s.seed = seed();
  s.seedMode = seedMode();
  if (!hasValues_) return;  // nothing shown: zeros, which keep what a later apply() finds
  s.width = width_->value();
  s.height = height_->value();
  s.frames = frames_->value();
  s.fps = fps_->value();
  s.steps = steps_->value();
  s.guideScale = cfg_->value();
  s.lowNoiseGuideScale = twoExperts() ? cfgLow_->value() : 0;
  s.shift = shift_->value();
}

void VideoSettingsBox::setResolvedSize(QSize size) {
  if (size == resolvedSize_) return;
  resolvedSize_ = size;
  updateNote();
}

QSize VideoSettingsBox::videoSize() const {
  return {width_->value(), height_->value()};
}

int VideoSettingsBox::frames() const {
  return frames_->value();
}

quint64 VideoSettingsBox::seed() const {
  return std::min(seed_->text().toULongLong(), kMaxSeed);
}

void VideoSettingsBox::setSeed(quint64 seed) {
  seed_->setText(QString::number(std::min(seed, kMaxSeed)));
}

QString VideoSettingsBox::snapNote() const {
  return snapNote_->isVisibleTo(this) ? snapNote_->text() : QString();
}

SeedMode VideoSettingsBox::seedMode() const {
  return seedModeFromName(seedMode_->currentData().toString());
}

void VideoSettingsBox::setEditable(bool editable) {
  editable_ = editable;
  for (QWidget* w : std::initializer_list<QWidget*>{size_, frames_, duration_, fps_, steps_, cfg_,
                                                    cfgLow_, shift_, sampler_, seed_, seedMode_}) {
    w->setEnabled(editable);
  }
  updateSizeInputs();
}

void VideoSettingsBox::copySeed() {
  QGuiApplication::clipboard()->setText(seed_->text());
  emit seedCopied(seed_->text());
}

void VideoSettingsBox::fillSizes(const std::optional<models::RequestRules>& rules) {
  const QSize current(width_->value(), height_->value());
  const QSignalBlocker block(size_);
  size_->clear();
  if (rules) {
    for (const auto& [w, h] : rules->sizes)
      size_->addItem(tr("%1 × %2").arg(w).arg(h), QSize(w, h));
  }
  size_->addItem(tr("Custom"), QSize());
  const int index = size_->findData(current);
  size_->setCurrentIndex(index >= 0 ? index : size_->count() - 1);
}

void VideoSettingsBox::fillSamplers(const std::optional<models::RequestRules>& rules) {
  const QString current = sampler_->currentData().toString();
  const QSignalBlocker block(sampler_);
  sampler_->clear();
  if (!rules || rules->samplers.empty()) {
    sampler_->addItem(tr("the model's default"), QString());
  } else {
    for (const std::string& name : rules->samplers) {
      const QString n = QString::fromStdString(name);
      // The distilled sampler by what it does: for LightX2V / Lightning LoRAs.
      const QString label = name == "distill4" ? tr("4 steps (distilled)") : n;
      sampler_->addItem(
          name == rules->samplers.front() ? tr("%1 (the model's default)").arg(label) : label, n);
    }
  }
  sampler_->setCurrentIndex(std::max(0, sampler_->findData(current)));
}

void VideoSettingsBox::onSizeChosen() {
  const QSize s = size_->currentData().toSize();
  if (s.isValid()) {
    const QSignalBlocker bw(width_);
    const QSignalBlocker bh(height_);
    width_->setValue(s.width());
    height_->setValue(s.height());
  }
  updateSizeInputs();
  updateNote();
  emit videoChanged();
}

void VideoSettingsBox::updateSizeInputs() {
  const bool custom = !size_->currentData().toSize().isValid();
  width_->setEnabled(editable_ && custom);
  height_->setEnabled(editable_ && custom);
}

void VideoSettingsBox::updateDuration() {
  const bool was = updating_;
  updating_ = true;
  duration_->setValue(static_cast<double>(frames_->value() - 1) / fps_->value());
  updating_ = was;
}

void VideoSettingsBox::updateNote() {
  if (resolvedSize_.isValid() && resolvedSize_ != videoSize()) {
    sizeNote_->setText(tr("With the start image the video will be %1 × %2 (its aspect ratio).")
                           .arg(resolvedSize_.width())
                           .arg(resolvedSize_.height()));
    sizeNote_->show();
  } else {
    sizeNote_->hide();
  }
}

}  // namespace ferry::gui
