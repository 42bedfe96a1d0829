#include "gui/preset_panel.h"

#include <QComboBox>
#include <QFormLayout>
#include <QHeaderView>
#include <QLabel>
#include <QTreeWidget>
#include <QVBoxLayout>

#include "core/error.h"
#include "core/offload/planner.h"
#include "gui/memory_chart.h"

namespace ferry::gui {

PresetPanel::PresetPanel(QWidget* parent)
    : QGroupBox(tr("Memory preset"), parent),
      combo_(new QComboBox(this)),
      description_(new QLabel(this)),
      stages_(new QTreeWidget(this)),
      totals_(new QLabel(this)),
      verdict_(new QLabel(this)) {
  combo_->setAccessibleName(tr("Memory preset"));
  combo_->setToolTip(
      tr("How much of the model stays on the GPU and how much is streamed from "
         "disk. Pick the one for your machine; auto measures it."));
  description_->setWordWrap(true);
  description_->setForegroundRole(QPalette::PlaceholderText);
  stages_->setColumnCount(5);
  stages_->setHeaderLabels(
      {tr("Stage"), tr("On GPU"), tr("Streamed"), tr("VRAM peak"), tr("RAM peak")});
  stages_->setRootIsDecorated(false);
  stages_->setSelectionMode(QAbstractItemView::NoSelection);
  stages_->setFocusPolicy(Qt::NoFocus);
  stages_->setAccessibleName(tr("Predicted memory per stage"));
  stages_->header()->setStretchLastSection(false);
  stages_->header()->setSectionResizeMode(0, QHeaderView::Stretch);
  for (int c = 1; c < 5; ++c)
    stages_->header()->setSectionResizeMode(c, QHeaderView::ResizeToContents);
  stages_->setMaximumHeight(stages_->fontMetrics().height() * 5 + 8);
  totals_->setWordWrap(true);
  totals_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  verdict_->setWordWrap(true);
  verdict_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto* layout = new QVBoxLayout(this);
  auto* row = new QFormLayout;
  auto* label = new QLabel(tr("Pr&eset:"), this);
  label->setBuddy(combo_);
  row->addRow(label, combo_);
  layout->addLayout(row);
  layout->addWidget(description_);
  layout->addWidget(stages_);
  layout->addWidget(totals_);
  layout->addWidget(verdict_);

  refreshTimer_.setSingleShot(true);
  refreshTimer_.setInterval(0);
  connect(&refreshTimer_, &QTimer::timeout, this, &PresetPanel::refresh);
  connect(combo_, &QComboBox::currentIndexChanged, this, [this] {
    scheduleRefresh();
    emit presetChanged(presetName());
  });
}

void PresetPanel::setPresets(std::vector<offload::Preset> presets,
                             const offload::MachineInfo& machine) {
  const QString current = presetName();
  presets_ = std::move(presets);
  machine_ = machine;
  const QSignalBlocker block(combo_);
  combo_->clear();
  combo_->addItem(tr("auto (measure this machine)"), QStringLiteral("auto"));
  for (const auto& p : presets_) {
    const QString name = QString::fromStdString(p.name);
    combo_->addItem(name, name);
    combo_->setItemData(combo_->count() - 1, QString::fromStdString(p.description),
                        Qt::ToolTipRole);
  }
  setPresetName(current.isEmpty() ? QStringLiteral("auto") : current);
  scheduleRefresh();
}

void PresetPanel::setModel(const std::optional<pipeline::ModelSet>& set) {
  set_ = set;
  scheduleRefresh();
}

void PresetPanel::setVideo(int width, int height, int frames) {
  if (width == width_ && height == height_ && frames == frames_) return;
  width_ = width;
  height_ = height;
  frames_ = frames;
  scheduleRefresh();
}

QString PresetPanel::presetName() const {
  return combo_->currentIndex() < 0 ? QString() : combo_->currentData().toString();
}

void PresetPanel::setPresetName(const QString& name) {
  const int index = combo_->findData(name);
  if (index >= 0 && index != combo_->currentIndex()) combo_->setCurrentIndex(index);
}

std::optional<offload::Preset> PresetPanel::effectivePreset() const {
  const QString name = presetName();
  if (name.isEmpty()) return std::nullopt;
  try {
    offload::Preset preset = offload::find_preset(presets_, name.toStdString(), machine_);
    if (preset.device == Device::kCuda && !machine_.has_gpu) {
      preset = offload::find_preset(presets_, "cpu", machine_);
    }
    return preset;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void PresetPanel::scheduleRefresh() {
  refreshTimer_.start();
}

void PresetPanel::refresh() {
  refreshTimer_.stop();
  plan_.reset();
  fits_ = false;
  refusal_.clear();
  note_.clear();
  const std::optional<offload::Preset> preset = effectivePreset();
  if (!preset) {
    refusal_ = tr("Pick a memory preset.");
  } else {
    description_->setText(QString::fromStdString(preset->description));
    if (!machine_.has_gpu && presetName() != QLatin1String("cpu")) {
      note_ = tr("No NVIDIA GPU: this runs with the cpu preset, and will be slow.");
    }
    if (!set_) {
      refusal_ = tr("Pick a model folder first.");
    } else if (width_ <= 0 || height_ <= 0 || width_ % 32 != 0 || height_ % 32 != 0) {
      refusal_ = tr("Width and height must be multiples of 32.");
    } else if (frames_ < 1 || (frames_ - 1) % 4 != 0) {
      refusal_ = tr("The number of frames must be of the form 4k+1 (81, 121, …).");
    } else {
      try {
        plan_ = pipeline::plan_generation(*set_, *preset, machine_, width_, height_, frames_);
        fits_ = true;
      } catch (const Error& e) {
        refusal_ = e.code() == ErrorCode::kDoesNotFit
                       ? tr("Won't fit with this preset: %1").arg(QString::fromUtf8(e.what()))
                       : QString::fromUtf8(e.what());
      } catch (const std::exception& e) {
        refusal_ = QString::fromUtf8(e.what());
      }
    }
  }
  showPlan();
  emit planChanged();
}

void PresetPanel::showPlan() {
  stages_->clear();
  if (plan_) {
    for (const pipeline::StagePlan* s : plan_->stages()) {
      auto* item = new QTreeWidgetItem(stages_);
      item->setText(0, QString::fromStdString(s->stage));
      item->setToolTip(0, QString::fromStdString(s->layout));
      if (s->groups == 0) {  // the VAE decode: tiles, not blocks
        item->setText(1, QString::fromStdString(s->detail));
        item->setText(2, QStringLiteral("—"));
      } else {
        item->setText(1, tr("%1 of %2").arg(s->resident_groups).arg(s->groups));
        item->setText(2, s->pinned_groups != 0
                             ? tr("%1 disk, %2 RAM").arg(s->disk_groups).arg(s->pinned_groups)
                             : tr("%1 from disk").arg(s->disk_groups));
      }
      item->setText(3, MemoryChart::formatBytes(s->predicted_vram_peak));
      item->setText(4, MemoryChart::formatBytes(s->predicted_ram_peak));
      for (int c = 1; c < 5; ++c) item->setTextAlignment(c, Qt::AlignRight | Qt::AlignVCenter);
    }
    totals_->setText(tr("Predicted peaks: VRAM %1, RAM %2")
                         .arg(MemoryChart::formatBytes(plan_->predicted_vram_peak),
                              MemoryChart::formatBytes(plan_->predicted_ram_peak)));
    totals_->show();
  } else {
    totals_->hide();
  }
  QString verdict;
  if (fits_) {
    verdict = tr("✓ Fits this machine.");
    if (!note_.isEmpty()) verdict += QLatin1Char(' ') + note_;
    verdict_->setStyleSheet(QString());
  } else {
    verdict = QStringLiteral("⚠ ") + refusal_;
    if (!note_.isEmpty()) verdict += QLatin1Char(' ') + note_;
    verdict_->setStyleSheet(QStringLiteral("color: #d9534f;"));
  }
  verdict_->setText(verdict);
  setAccessibleDescription(summaryText());
}

QString PresetPanel::summaryText() const {
  QStringList lines;
  if (plan_) {
    for (const pipeline::StagePlan* s : plan_->stages()) {
      if (s->groups == 0) {
        lines << tr("%1: %2; VRAM %3, RAM %4")
                     .arg(QString::fromStdString(s->stage), QString::fromStdString(s->detail),
                          MemoryChart::formatBytes(s->predicted_vram_peak),
                          MemoryChart::formatBytes(s->predicted_ram_peak));
        continue;
      }
      lines << tr("%1: %2 of %3 blocks on the GPU, %4 in RAM, %5 from disk; VRAM %6, RAM %7")
                   .arg(QString::fromStdString(s->stage))
                   .arg(s->resident_groups)
                   .arg(s->groups)
                   .arg(s->pinned_groups)
                   .arg(s->disk_groups)
                   .arg(MemoryChart::formatBytes(s->predicted_vram_peak),
                        MemoryChart::formatBytes(s->predicted_ram_peak));
    }
  }
  lines << verdict_->text();
  return lines.join(QLatin1Char('\n'));
}

}  // namespace ferry::gui
