// The video's settings: size (the model's sizes plus custom), frames or duration, fps, steps,
// guidance (CFG), shift, sampler and the seed (fixed, random or +1 each time; copyable). Filled
// with the model's defaults when a model is chosen.
#pragma once

#include <QGroupBox>
#include <QSize>
#include <optional>

#include "core/pipeline/model_set.h"
#include "gui/generation_settings.h"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;

namespace ferry::gui {

// The built-in demo model (random weights, tiny): small sizes, few steps, every block streamed.
bool isDemoModel(const pipeline::ModelSet& set);

class VideoSettingsBox : public QGroupBox {
  Q_OBJECT

 public:
  static constexpr quint64 kMaxSeed = quint64{1} << 53;

  explicit VideoSettingsBox(QWidget* parent = nullptr);

  // Offers the model's sizes; with `applyDefaults`, also shows its defaults (size, frames, fps,
  // steps, guidance, shift, sampler) as pipeline::resolve fills them in.
  void setModel(const std::optional<pipeline::ModelSet>& set, bool applyDefaults);
  // The video fields of `s` (a zero keeps what is shown) / into `s`.
  void apply(const GenerationSettings& s);
  void fill(GenerationSettings& s) const;
  // The start image's size, or an invalid size without one: with an image the video takes the
  // image's aspect ratio at the chosen area (wan.md §B.8).
  void setImageSize(QSize size);
  QSize videoSize() const;  // what will be made: the chosen size, or the image's shape of it
  int frames() const;
  quint64 seed() const;
  void setSeed(quint64 seed);
  SeedMode seedMode() const;
  void setEditable(bool editable);

 public slots:
  void copySeed();

 signals:
  void videoChanged();  // size or frames
  void seedCopied(const QString& seed);

 private:
  void fillSizes(const std::optional<pipeline::ModelSet>& set);
  void onSizeChosen();
  void updateSizeInputs();
  void updateDuration();
  void updateNote();

  QComboBox* size_;
  QSpinBox* width_;
  QSpinBox* height_;
  QLabel* sizeNote_;
  QSpinBox* frames_;
  QDoubleSpinBox* duration_;
  QSpinBox* fps_;
  QSpinBox* steps_;
  QDoubleSpinBox* cfg_;
  QDoubleSpinBox* shift_;
  QComboBox* sampler_;
  QLineEdit* seed_;
  QComboBox* seedMode_;
  QPushButton* copySeed_;
  QSize imageSize_;
  bool editable_ = true;
  bool updating_ = false;
};

}  // namespace ferry::gui
