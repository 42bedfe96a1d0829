// The generate settings' "Advanced" section, collapsed by default: replays across tools. Load the
// initial noise from a safetensors file instead of drawing it from the seed, save the noise a run
// used, save its final latents (optionally with the text encoder's output). The save targets
// default to files next to the video; a user picks another with a file dialog, never by typing.
#pragma once

#include <QWidget>

#include "gui/generation_settings.h"

class QCheckBox;
class QLabel;
class QPushButton;
class QToolButton;

namespace ferry::gui {

class AdvancedBox : public QWidget {
  Q_OBJECT

 public:
  explicit AdvancedBox(QWidget* parent = nullptr);

  // The advanced fields of `s` / into `s`.
  void apply(const GenerationSettings& s);
  void fill(GenerationSettings& s) const;
  void setNoise(const QString& path);
  QString noise() const { return noise_; }
  bool expanded() const;
  void setExpanded(bool expanded);
  void setEditable(bool editable);

  // The parts the tests drive.
  QCheckBox* saveNoiseBox() const { return saveNoise_; }
  QCheckBox* saveLatentsBox() const { return saveLatents_; }
  QCheckBox* textStatesBox() const { return textStates_; }
  QLabel* noiseLabel() const { return noiseName_; }

 signals:
  void noiseChanged();

 private:
  void chooseNoise();
  void chooseTarget(QString& path, const QString& what);
  void updateLabels();

  QToolButton* toggle_;
  QWidget* body_;
  QLabel* noiseName_;
  QPushButton* chooseNoise_;
  QPushButton* clearNoise_;
  QCheckBox* saveNoise_;
  QPushButton* noiseTarget_;
  QCheckBox* saveLatents_;
  QPushButton* latentsTarget_;
  QCheckBox* textStates_;
  QString noise_;
  QString saveNoisePath_;  // empty: next to the video
  QString saveLatentsPath_;
  bool editable_ = true;
};

}  // namespace ferry::gui
