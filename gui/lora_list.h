// The LoRA list, right under the model panel: one row per LoRA file (enable, strength on a slider
// and a spin box kept in step, what the model makes of it, remove), "Add LoRA…" and drops of
// .safetensors files. Each LoRA is checked against the model found (ModelParts::check_lora: "312
// of 312 layers", or why it does not fit) on a LatestQuery thread, again whenever the model
// changes. A step-distillation LoRA brings a one-click switch to its sampler.
#pragma once

#include <QGroupBox>
#include <QList>
#include <QStringList>
#include <filesystem>
#include <functional>
#include <optional>
#include <vector>

#include "core/models/family.h"
#include "gui/generation_settings.h"

class QCheckBox;
class QDoubleSpinBox;
class QLabel;
class QPushButton;
class QSlider;
class QToolButton;
class QVBoxLayout;

namespace ferry::gui {

class LatestQuery;

class LoraList : public QGroupBox {
  Q_OBJECT

 public:
  // The model's LoRA check (ModelParts::check_lora); it runs off the GUI thread and may throw.
  using Checker = std::function<models::LoraReport(const std::filesystem::path&)>;
  // The slider's range; the spin box takes up to ±kMaxLoraStrength.
  static constexpr double kSliderStrength = 2.0;
  static constexpr double kStrengthStep = 0.05;

  explicit LoraList(QWidget* parent = nullptr);

  // Checks every LoRA again with `checker` (empty: no model, nothing is checked).
  void setChecker(Checker checker);
  // The rows, in order: shown as given (paths not looked at here: the check says what is wrong).
  void setLoras(const QList<LoraSetting>& loras);
  QList<LoraSetting> loras() const;
  // Appends the files not in the list yet; refuses past kMaxClipLoras (rejected()).
  void addLoras(const QStringList& paths);
  void removeLora(int row);
  int count() const { return static_cast<int>(rows_.size()); }

  // A check asked for and not answered yet.
  bool checking() const;
  // Why an enabled LoRA cannot run with this model (the first one); empty when none.
  QString problem() const;
  // The steps of the enabled step-distillation LoRA, if one is checked; else 0.
  int distilledSteps() const;
  QString statusText(int row) const;  // "312 of 312 layers", "checking…" or the refusal

  // The parts the tests drive.
  QCheckBox* enableBox(int row) const { return rows_.at(row).enable; }
  QSlider* slider(int row) const { return rows_.at(row).slider; }
  QDoubleSpinBox* spinBox(int row) const { return rows_.at(row).spin; }
  QToolButton* removeButton(int row) const { return rows_.at(row).remove; }
  QPushButton* addButton() const { return add_; }
  QPushButton* distilledButton() const { return distilled_; }
  QLabel* distilledHint() const { return distilledHint_; }

 signals:
  // A LoRA added, removed, enabled or disabled, or its strength moved: the request changed.
  void lorasChanged();
  // The checks asked for are answered (problem() and distilledSteps() are up to date).
  void checked();
  // The user asked for the step-distilled sampler with `steps` steps.
  void distilledRequested(int steps);
  void rejected(const QString& message);

 protected:
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;

 private:
  struct Row {
    LoraSetting setting;
    QWidget* widget = nullptr;
    QCheckBox* enable = nullptr;
    QSlider* slider = nullptr;
    QDoubleSpinBox* spin = nullptr;
    QLabel* status = nullptr;
    QToolButton* remove = nullptr;
    // The model's answer: a report, or why it refused; neither while unchecked.
    std::optional<models::LoraReport> report;
    QString error;
  };

  void browse();
  void appendRow(const LoraSetting& setting);
  int indexOf(const QWidget* rowWidget) const;
  void setStrength(QWidget* rowWidget, double strength);
  void check();
  void showStatus(Row& row);
  void updateHint();

  Checker checker_;
  std::vector<Row> rows_;
  LatestQuery* query_;
  QVBoxLayout* rowsLayout_;
  // Created in reading order, which is the tab order; rows go before distilled_ (appendRow).
  QLabel* empty_;
  QLabel* distilledHint_;
  QPushButton* distilled_;
  QPushButton* add_;
  QString lastFolder_;
};

// A .safetensors file dropped (the list and the window take them as LoRAs).
bool isLoraFile(const QString& path);

}  // namespace ferry::gui
