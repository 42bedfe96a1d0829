#include "gui/preset_panel.h"

#include <QBrush>
#include <QComboBox>
#include <QFormLayout>
#include <QHeaderView>
#include <QLabel>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <algorithm>

#include "core/error.h"
#include "gui/latest_query.h"
#include "gui/memory_chart.h"

namespace ferry::gui {
namespace {

// The answer of one validate + plan, made on the query's thread.
struct PlanAnswer {
  std::optional<pipeline::ResolvedRequest> resolved;
  std::optional<models::GenerationPlan> plan;
  QString refusal;
};

PlanAnswer validateAndPlan(const pipeline::Session& session, const models::ModelParts& model,
                           const pipeline::GenerationRequest& request) {
  PlanAnswer a;
  try {
    a.resolved = session.validate(model, request);
    a.plan = session.plan(model, *a.resolved);
  } catch (const Error& e) {
    a.refusal = e.code() == ErrorCode::kDoesNotFit
                    ? QObject::tr("Won't fit with this preset: %1").arg(QString::fromUtf8(e.what()))
                    : QString::fromUtf8(e.what());
  } catch (const std::exception& e) {
    a.refusal = QString::fromUtf8(e.what());
  }
  return a;
}

// "3 of 30" on the GPU and "27 from disk" / "20 disk, 7 RAM" streamed; a stage that streams no
// blocks says what it does instead.
QString onGpuText(const models::StagePlan& s) {
  if (!s.streams_blocks()) return QString::fromStdString(s.detail);
  return QObject::tr("%1 of %2").arg(s.resident_groups).arg(s.groups);
}

QString streamedText(const models::StagePlan& s) {
  if (!s.streams_blocks()) return QStringLiteral("—");
  return s.pinned_groups != 0
             ? QObject::tr("%1 disk, %2 RAM").arg(s.disk_groups).arg(s.pinned_groups)
             : QObject::tr("%1 from disk").arg(s.disk_groups);
}

// A stage the family lists but whose code does not exist yet (StagePlan::implemented): its row
// says so, greyed, instead of showing peaks of 0 B that nothing measured.
void showNotBuilt(QTreeWidgetItem& item) {
  item.setText(1, QObject::tr("not built yet"));
  for (int c = 2; c < 5; ++c) item.setText(c, QStringLiteral("—"));
  item.setToolTip(1, QObject::tr("Ferry recognises this part but cannot run this stage yet"));
  for (int c = 0; c < 5; ++c) item.setForeground(c, QBrush(Qt::gray));
}

}  // namespace

PresetPanel::PresetPanel(QWidget* parent)
    : QGroupBox(tr("Memory preset"), parent),
      query_(new LatestQuery(QStringLiteral("Ferry planner"), this)),
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
  stages_->setMaximumHeight(stages_->fontMetrics().height() * 6 + 8);
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

void PresetPanel::setSession(std::shared_ptr<const pipeline::Session> session) {
  const QString current = presetName();
  session_ = std::move(session);
  const QSignalBlocker block(combo_);
  combo_->clear();
  combo_->addItem(tr("auto (measure this machine)"), QStringLiteral("auto"));
  for (const auto& p : session_->presets()) {
    const QString name = QString::fromStdString(p.name);
    combo_->addItem(name, name);
    combo_->setItemData(combo_->count() - 1, QString::fromStdString(p.description),
                        Qt::ToolTipRole);
  }
  setPresetName(current.isEmpty() ? QStringLiteral("auto") : current);
  scheduleRefresh();
}

void PresetPanel::setModel(pipeline::ModelHandle model) {
  model_ = std::move(model);
  scheduleRefresh();
}

void PresetPanel::setRequest(const pipeline::GenerationRequest& request) {
  request_ = request;
  scheduleRefresh();
}

QString PresetPanel::presetName() const {
  return combo_->currentIndex() < 0 ? QString() : combo_->currentData().toString();
}

void PresetPanel::setPresetName(const QString& name) {
  const int index = combo_->findData(name);
  if (index >= 0 && index != combo_->currentIndex()) combo_->setCurrentIndex(index);
}

std::optional<pipeline::RunTarget> PresetPanel::target() const {
  const QString name = presetName();
  if (!session_ || name.isEmpty()) return std::nullopt;
  try {
    return session_->target(name.toStdString());
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

bool PresetPanel::planning() const {
  return refreshTimer_.isActive() || query_->pending();
}

void PresetPanel::scheduleRefresh() {
  refreshTimer_.start();
}

void PresetPanel::refresh() {
  refreshTimer_.stop();
  plan_.reset();
  resolved_.reset();
  fits_ = false;
  refusal_.clear();
  note_.clear();
  const std::optional<pipeline::RunTarget> t = target();
  if (!t) {
    refusal_ = tr("Pick a memory preset.");
  } else {
    description_->setText(QString::fromStdString(t->preset.description));
    if (t->fell_back_to_cpu) {
      note_ = tr("No usable NVIDIA GPU (%1): this runs with the cpu preset, and will be slow.")
                  .arg(QString::fromStdString(t->reason));
    }
    if (!model_) refusal_ = tr("Pick a model folder first.");
  }
  if (!refusal_.isEmpty()) {
    query_->post([] { return std::function<void()>([] {}); });  // drops a plan still running
    showPlan();
    emit planChanged();
    return;
  }
  pipeline::GenerationRequest request = request_;
  request.preset = presetName().toStdString();
  refusal_ = tr("Planning…");
  showPlan();
  query_->post([this, session = session_, model = model_, request] {
    PlanAnswer answer = validateAndPlan(*session, *model, request);
    return std::function<void()>([this, answer = std::move(answer)] {
      resolved_ = answer.resolved;
      plan_ = answer.plan;
      fits_ = answer.plan.has_value();
      refusal_ = answer.refusal;
      showPlan();
      emit planChanged();
    });
  });
}

void PresetPanel::showPlan() {
  stages_->clear();
  // The cpu preset keeps its resident blocks in host RAM: "On GPU" would be wrong there.
  const auto where = target();
  const bool onGpu = !where || where->on_gpu;
  stages_->headerItem()->setText(1, onGpu ? tr("On GPU") : tr("Kept in RAM"));
  if (plan_) {
    for (const models::StagePlan& s : plan_->stages) {
      auto* item = new QTreeWidgetItem(stages_);
      item->setText(0, QString::fromStdString(s.stage));
      item->setToolTip(0, QString::fromStdString(s.layout));
      item->setText(1, onGpuText(s));
      item->setText(2, streamedText(s));
      if (!s.detail.empty()) item->setToolTip(1, QString::fromStdString(s.detail));
      item->setText(3, MemoryChart::formatBytes(s.predicted_vram_peak));
      item->setText(4, MemoryChart::formatBytes(s.predicted_ram_peak));
      for (int c = 1; c < 5; ++c) item->setTextAlignment(c, Qt::AlignRight | Qt::AlignVCenter);
      if (!s.implemented) showNotBuilt(*item);
    }
    const bool partial = std::any_of(plan_->stages.begin(), plan_->stages.end(),
                                     [](const models::StagePlan& s) { return !s.implemented; });
    totals_->setText((partial ? tr("Predicted peaks of the stages built so far: VRAM %1, RAM %2")
                              : tr("Predicted peaks: VRAM %1, RAM %2"))
                         .arg(MemoryChart::formatBytes(plan_->predicted_vram_peak),
                              MemoryChart::formatBytes(plan_->predicted_ram_peak)));
    totals_->show();
  } else {
    totals_->hide();
  }
  QString verdict;
  if (fits_) {
    verdict = tr("✓ Fits this machine.");
    verdict_->setStyleSheet(QString());
  } else {
    verdict = QStringLiteral("⚠ ") + refusal_;
    verdict_->setStyleSheet(QStringLiteral("color: #d9534f;"));
  }
  if (!model_) verdict.clear();  // the model panel says there is none; nothing to plan yet
  if (!note_.isEmpty()) verdict += (verdict.isEmpty() ? QString() : QStringLiteral(" ")) + note_;
  if (fits_ && resolved_) {
    for (const std::string& warning : resolved_->warnings) {
      verdict += QStringLiteral("\n⚠ ") + QString::fromStdString(warning);
    }
  }
  verdict_->setText(verdict);
  setAccessibleDescription(summaryText());
}

QString PresetPanel::summaryText() const {
  QStringList lines;
  const auto where = target();
  const bool onGpu = !where || where->on_gpu;
  if (plan_) {
    for (const models::StagePlan& s : plan_->stages) {
      if (!s.streams_blocks()) {
        lines << tr("%1: %2; VRAM %3, RAM %4")
                     .arg(QString::fromStdString(s.stage), QString::fromStdString(s.detail),
                          MemoryChart::formatBytes(s.predicted_vram_peak),
                          MemoryChart::formatBytes(s.predicted_ram_peak));
        continue;
      }
      lines << (onGpu ? tr("%1: %2 of %3 blocks on the GPU, %4 in RAM, %5 from disk; VRAM %6, "
                           "RAM %7")
                      : tr("%1: %2 of %3 blocks kept in RAM, %4 cached in RAM, %5 from disk; "
                           "VRAM %6, RAM %7"))
                   .arg(QString::fromStdString(s.stage))
                   .arg(s.resident_groups)
                   .arg(s.groups)
                   .arg(s.pinned_groups)
                   .arg(s.disk_groups)
                   .arg(MemoryChart::formatBytes(s.predicted_vram_peak),
                        MemoryChart::formatBytes(s.predicted_ram_peak));
    }
  }
  lines << verdict_->text();
  return lines.join(QLatin1Char('\n'));
}

}  // namespace ferry::gui
