// The video's settings: size (the model's sizes plus custom), frames or duration, fps, steps,
// guidance (CFG; for two-expert models the high-noise expert's, with a second "Low-noise CFG"
// field for the low-noise expert, hidden otherwise), shift, sampler and the seed (fixed, random or
// +1 each time; copyable). What the inputs allow, the sizes offered, the samplers and the defaults
// all come from the model's models::RequestRules: the engine decides, the box asks.
#pragma once

#include <QGroupBox>
#include <QSize>
#include <optional>

#include "core/models/request.h"
#include "gui/generation_settings.h"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;

namespace ferry::gui {

class SnappingSpinBox;

class VideoSettingsBox : public QGroupBox {
  Q_OBJECT

 public:
  static constexpr quint64 kMaxSeed = quint64{1} << 53;

  explicit VideoSettingsBox(QWidget* parent = nullptr);

  // Offers the sizes, frames and samplers `rules` allow (none: no model); with `applyDefaults`,
  // also shows the model's defaults (size, frames, fps, steps, guidance, shift, sampler).
  void setRules(const std::optional<models::RequestRules>& rules, bool applyDefaults);
  // The video fields of `s` (a zero keeps what is shown) / into `s`.
  void apply(const GenerationSettings& s);
  void fill(GenerationSettings& s) const;
  // The size the engine will make (the request resolved: with a start image, the image's aspect
  // ratio at the chosen area), or an invalid size when unknown; a note says when it differs.
  void setResolvedSize(QSize size);
  QSize videoSize() const;  // the chosen size
  int frames() const;
  quint64 seed() const;
  void setSeed(quint64 seed);
  SeedMode seedMode() const;
  void setEditable(bool editable);
  // What the last typed width, height or frame count was snapped to; empty when nothing was.
  QString snapNote() const;

 public slots:
  void copySeed();

 signals:
  void videoChanged();  // size or frames
  void seedCopied(const QString& seed);

 private:
  void fillSizes(const std::optional<models::RequestRules>& rules);
  void fillSamplers(const std::optional<models::RequestRules>& rules);
  // A sampler picked by the user: its own steps, guidance and shift when it has a recipe
  // (distill4), the model's again when leaving one.
  void onSamplerChosen();
  void onSizeChosen();
  void updateSizeInputs();
  void updateDuration();
  void updateNote();
  // Without a model's defaults or restored settings the fields show "—", not made-up values
  // (32×32 px, 1 frame, CFG 0); with `shown` they show their values again.
  void showValues(bool shown);
  bool twoExperts() const { return rules_ && rules_->two_experts; }

  QComboBox* size_;
  SnappingSpinBox* width_;
  SnappingSpinBox* height_;
  QLabel* sizeNote_;
  SnappingSpinBox* frames_;
  QLabel* snapNote_;  // what a typed value was snapped to, until the next change
  QDoubleSpinBox* duration_;
  QSpinBox* fps_;
  QSpinBox* steps_;
  QDoubleSpinBox* cfg_;
  QLabel* cfgLabel_;
  QDoubleSpinBox* cfgLow_;  // the low-noise expert's (two-expert models only)
  QLabel* cfgLowLabel_;
  QDoubleSpinBox* shift_;
  QComboBox* sampler_;
  std::optional<models::RequestRules> rules_;
  QString lastSampler_;  // the sampler shown before the current one
  QLineEdit* seed_;
  QComboBox* seedMode_;
  QPushButton* copySeed_;
  QSize resolvedSize_;
  int framesStep_ = 4;  // frames = framesOffset_ + framesStep_·k (RequestRules)
  int framesOffset_ = 1;
  bool editable_ = true;
  bool updating_ = false;
  bool hasValues_ = true;  // showValues(false) in the constructor
};

}  // namespace ferry::gui
