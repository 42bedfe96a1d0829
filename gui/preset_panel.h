// The preset selector and what the chosen preset will do for this model and size before anything
// runs: blocks resident on the GPU, cached in RAM and streamed from disk per stage, and the
// predicted VRAM and RAM peaks (pipeline::plan_generation, the same plans `ferry-cli plan`
// prints). When the plan does not fit, the panel says why and fits() is false.
#pragma once

#include <QGroupBox>
#include <QTimer>
#include <optional>
#include <vector>

#include "core/offload/preset.h"
#include "core/pipeline/model_set.h"
#include "core/pipeline/stage_plans.h"

class QComboBox;
class QLabel;
class QTreeWidget;

namespace ferry::gui {

class PresetPanel : public QGroupBox {
  Q_OBJECT

 public:
  explicit PresetPanel(QWidget* parent = nullptr);

  void setPresets(std::vector<offload::Preset> presets, const offload::MachineInfo& machine);
  const std::vector<offload::Preset>& presets() const { return presets_; }
  const offload::MachineInfo& machine() const { return machine_; }
  void setModel(const std::optional<pipeline::ModelSet>& set);
  void setVideo(int width, int height, int frames);

  QString presetName() const;
  void setPresetName(const QString& name);
  // The preset the engine will run with: the chosen one, or cpu when a GPU preset was chosen on
  // a machine without an NVIDIA GPU.
  std::optional<offload::Preset> effectivePreset() const;

  // Recomputes now (it otherwise happens on the next event loop turn after a change).
  void refresh();
  bool fits() const { return fits_; }
  QString refusal() const { return refusal_; }  // why Generate is off; empty when it fits
  const std::optional<pipeline::GenerationPlan>& plan() const { return plan_; }
  QComboBox* presetBox() const { return combo_; }
  QString summaryText() const;  // what the panel shows, as text (tests, accessibility)

 signals:
  void planChanged();
  void presetChanged(const QString& name);

 private:
  void scheduleRefresh();
  void showPlan();

  std::vector<offload::Preset> presets_;
  offload::MachineInfo machine_;
  std::optional<pipeline::ModelSet> set_;
  int width_ = 0, height_ = 0, frames_ = 0;
  std::optional<pipeline::GenerationPlan> plan_;
  bool fits_ = false;
  QString refusal_;
  QString note_;
  QComboBox* combo_;
  QLabel* description_;
  QTreeWidget* stages_;
  QLabel* totals_;
  QLabel* verdict_;
  QTimer refreshTimer_;
};

}  // namespace ferry::gui
