// The preset selector and what the chosen preset will do for this model and request before
// anything runs: each stage's plan as the engine reports it (models::StagePlan: blocks resident on
// the GPU, cached in RAM and streamed from disk, or what a stage that streams no blocks does),
// and the predicted VRAM and RAM peaks — pipeline::Session::validate and plan, the same plans
// `ferry-cli plan` prints. Validating reads the start image and planning reads the model's layout,
// so both run on a LatestQuery thread; the newest request wins. When the request is refused or
// the plan does not fit, the panel says why and fits() is false.
#pragma once

#include <QGroupBox>
#include <QTimer>
#include <memory>
#include <optional>

#include "core/pipeline/session.h"

class QComboBox;
class QLabel;
class QTreeWidget;

namespace ferry::gui {

class LatestQuery;

class PresetPanel : public QGroupBox {
  Q_OBJECT

 public:
  explicit PresetPanel(QWidget* parent = nullptr);

  // The engine the panel asks; fills the preset list with the session's presets.
  void setSession(std::shared_ptr<const pipeline::Session> session);
  const std::shared_ptr<const pipeline::Session>& session() const { return session_; }
  void setModel(pipeline::ModelHandle model);
  // The request to plan (its preset is the panel's choice).
  void setRequest(const pipeline::GenerationRequest& request);

  QString presetName() const;
  void setPresetName(const QString& name);
  // Where the chosen preset runs (session.target): cpu when a GPU preset was chosen on a machine
  // without a usable GPU. Empty without a session or a preset.
  std::optional<pipeline::RunTarget> target() const;

  // Plans again now (it otherwise starts on the next event loop turn after a change); the answer
  // comes with planChanged().
  void refresh();
  // A plan asked for and not answered yet.
  bool planning() const;
  bool fits() const { return fits_; }
  QString refusal() const { return refusal_; }  // why Generate is off; empty when it fits
  const std::optional<models::GenerationPlan>& plan() const { return plan_; }
  // The request as the engine resolved it (the size a start image gives, the defaults).
  const std::optional<pipeline::ResolvedRequest>& resolved() const { return resolved_; }
  QComboBox* presetBox() const { return combo_; }
  QString summaryText() const;  // what the panel shows, as text (tests, accessibility)

 signals:
  void planChanged();
  void presetChanged(const QString& name);

 private:
  void scheduleRefresh();
  void showPlan();

  std::shared_ptr<const pipeline::Session> session_;
  pipeline::ModelHandle model_;
  pipeline::GenerationRequest request_;
  std::optional<pipeline::ResolvedRequest> resolved_;
  std::optional<models::GenerationPlan> plan_;
  bool fits_ = false;
  QString refusal_;
  QString note_;
  LatestQuery* query_;
  QComboBox* combo_;
  QLabel* description_;
  QTreeWidget* stages_;
  QLabel* totals_;
  QLabel* verdict_;
  QTimer refreshTimer_;
};

}  // namespace ferry::gui
