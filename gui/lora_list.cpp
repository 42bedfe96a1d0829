#include "gui/lora_list.h"

#include <QCheckBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHash>
#include <QLabel>
#include <QMimeData>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSlider>
#include <QToolButton>
#include <QUrl>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "core/io/detail/os_file.h"
#include "gui/latest_query.h"
#include "gui/memory_chart.h"

namespace ferry::gui {
namespace {

constexpr int kNameWidth = 170;    // px a file name takes before it is elided in the middle
constexpr int kStatusWidth = 170;  // px of the match count or the refusal (the tooltip has all)
constexpr int kSliderTicks =
    static_cast<int>(LoraList::kSliderStrength / LoraList::kStrengthStep + 0.5);

int sliderValue(double strength) {
  return static_cast<int>(
      std::lround(std::clamp(strength, -LoraList::kSliderStrength, LoraList::kSliderStrength) /
                  LoraList::kStrengthStep));
}

// The model's answer for one file, made on the query's thread.
struct CheckAnswer {
  std::optional<models::LoraReport> report;
  QString error;
};

QStringList lorasIn(const QMimeData* mime) {
  QStringList paths;
  for (const QUrl& url : mime->urls()) {
    if (!url.isLocalFile() || !isLoraFile(url.toLocalFile())) return {};
    paths << url.toLocalFile();
  }
  return paths;
}

}  // namespace

bool isLoraFile(const QString& path) {
  return path.endsWith(QLatin1String(".safetensors"), Qt::CaseInsensitive);
}

LoraList::LoraList(QWidget* parent)
    : QGroupBox(tr("LoRAs"), parent),
      query_(new LatestQuery(QStringLiteral("Ferry LoRA check"), this)),
      rowsLayout_(new QVBoxLayout),
      empty_(new QLabel(tr("None. Add LoRA files (.safetensors) or drop them here."), this)),
      distilledHint_(new QLabel(this)),
      distilled_(new QPushButton(tr("Use 4 steps (distilled)"), this)),
      add_(new QPushButton(tr("Add LoRA…"), this)) {
  setAcceptDrops(true);
  setAccessibleName(tr("LoRAs"));
  empty_->setWordWrap(true);
  empty_->setEnabled(false);  // greyed: a hint, not a value
  add_->setAccessibleName(tr("Add LoRA files"));
  add_->setToolTip(tr("Add LoRA files (.safetensors); you can also drop them on the list"));
  distilledHint_->setWordWrap(true);
  distilledHint_->setAccessibleName(tr("Step-distillation LoRA"));
  distilled_->setAccessibleName(tr("Use the step-distilled sampler"));
  distilled_->setToolTip(
      tr("Sampler distill4, the LoRA's steps, guidance 1 (no CFG: one pass per step), and the "
         "model's distilled shift (Wan 5, MiniMax-H3 6)"));

  rowsLayout_->setContentsMargins(0, 0, 0, 0);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(rowsLayout_);
  layout->addWidget(empty_);
  auto* distilledRow = new QHBoxLayout;
  distilledRow->addWidget(distilledHint_, 1);
  distilledRow->addWidget(distilled_);
  layout->addLayout(distilledRow);
  auto* addRow = new QHBoxLayout;
  addRow->addWidget(add_);
  addRow->addStretch();
  layout->addLayout(addRow);

  connect(add_, &QPushButton::clicked, this, &LoraList::browse);
  connect(distilled_, &QPushButton::clicked, this, [this] {
    if (const int steps = distilledSteps(); steps > 0) emit distilledRequested(steps);
  });
  updateHint();
}

void LoraList::setChecker(Checker checker) {
  checker_ = std::move(checker);
  for (Row& row : rows_) {
    row.report.reset();
    row.error.clear();
  }
  check();
}

void LoraList::setLoras(const QList<LoraSetting>& loras) {
  for (Row& row : rows_) delete row.widget;
  rows_.clear();
  for (const LoraSetting& l : loras) appendRow(l);
  check();
  emit lorasChanged();
}

QList<LoraSetting> LoraList::loras() const {
  QList<LoraSetting> out;
  for (const Row& row : rows_) out << row.setting;
  return out;
}

void LoraList::addLoras(const QStringList& paths) {
  bool added = false;
  for (const QString& given : paths) {
    const QString path = QDir::fromNativeSeparators(given);
    const bool listed = std::any_of(rows_.begin(), rows_.end(),
                                    [&](const Row& r) { return r.setting.path == path; });
    if (listed) continue;
    if (count() >= kMaxClipLoras) {
      emit rejected(tr("At most %1 LoRAs run at once: %2 was not added.")
                        .arg(kMaxClipLoras)
                        .arg(QDir::toNativeSeparators(path)));
      break;
    }
    LoraSetting l;
    l.path = path;
    l.name = QFileInfo(path).fileName();
    appendRow(l);
    lastFolder_ = QFileInfo(path).absolutePath();
    added = true;
  }
  if (!added) return;
  check();
  emit lorasChanged();
}

void LoraList::removeLora(int index) {
  if (index < 0 || index >= count()) return;
  rows_[index].widget->hide();
  rows_[index].widget->deleteLater();  // its own button may be what asked
  rows_.erase(rows_.begin() + index);
  empty_->setVisible(rows_.empty());
  updateHint();
  emit lorasChanged();
}

void LoraList::browse() {
  const QStringList paths = QFileDialog::getOpenFileNames(this, tr("Add LoRAs"), lastFolder_,
                                                          tr("LoRA files (*.safetensors)"));
  addLoras(paths);
}

void LoraList::appendRow(const LoraSetting& setting) {
  Row row;
  row.setting = setting;
  if (row.setting.name.isEmpty()) row.setting.name = QFileInfo(setting.path).fileName();
  const QString name = row.setting.name;
  row.widget = new QWidget(this);
  row.enable = new QCheckBox(row.widget);
  row.enable->setText(row.enable->fontMetrics().elidedText(name, Qt::ElideMiddle, kNameWidth));
  row.enable->setChecked(setting.enabled);
  row.enable->setToolTip(QDir::toNativeSeparators(setting.path.isEmpty() ? name : setting.path));
  row.enable->setAccessibleName(tr("Use the LoRA %1").arg(name));
  row.status = new QLabel(row.widget);
  row.status->setTextInteractionFlags(Qt::TextSelectableByMouse);
  row.status->setAlignment(Qt::AlignRight | Qt::AlignVCenter);
  row.status->setAccessibleName(tr("What the model makes of %1").arg(name));
  row.remove = new QToolButton(row.widget);
  row.remove->setText(QStringLiteral("✕"));
  row.remove->setToolTip(tr("Remove %1 from the list").arg(name));
  row.remove->setAccessibleName(tr("Remove the LoRA %1").arg(name));
  row.remove->setFocusPolicy(Qt::StrongFocus);
  row.slider = new QSlider(Qt::Horizontal, row.widget);
  row.slider->setRange(-kSliderTicks, kSliderTicks);
  row.slider->setPageStep(static_cast<int>(0.25 / kStrengthStep));
  row.slider->setFocusPolicy(Qt::StrongFocus);
  row.slider->setAccessibleName(tr("Strength of %1").arg(name));
  row.spin = new QDoubleSpinBox(row.widget);
  row.spin->setRange(-kMaxLoraStrength, kMaxLoraStrength);
  row.spin->setSingleStep(kStrengthStep);
  row.spin->setDecimals(2);
  row.spin->setAccessibleName(tr("Strength of %1").arg(name));
  row.spin->setToolTip(tr("Strength: 1 as trained, 0 off, negative inverts"));
  row.spin->setValue(setting.strength);
  row.slider->setValue(sliderValue(setting.strength));

  auto* layout = new QVBoxLayout(row.widget);
  layout->setContentsMargins(0, 0, 0, 4);
  layout->setSpacing(2);
  auto* top = new QHBoxLayout;
  top->addWidget(row.enable);
  top->addWidget(row.status, 1);
  top->addWidget(row.remove);
  auto* bottom = new QHBoxLayout;
  bottom->addSpacing(20);  // under the name, past the check box
  bottom->addWidget(row.slider, 1);
  bottom->addWidget(row.spin);
  layout->addLayout(top);
  layout->addLayout(bottom);
  rowsLayout_->addWidget(row.widget);

  // Tab order is reading order: after the rows above, or for the first row after what precedes
  // the list in the window (a row made later would otherwise come after "Add LoRA…").
  QWidget* previous = rows_.empty() ? nullptr : rows_.back().remove;
  for (QWidget* w = distilled_->previousInFocusChain(); !previous && w != distilled_;
       w = w->previousInFocusChain()) {
    if ((w->focusPolicy() & Qt::TabFocus) && w != add_) previous = w;  // setTabOrder needs focus
  }
  for (QWidget* next : {static_cast<QWidget*>(row.enable), static_cast<QWidget*>(row.slider),
                        static_cast<QWidget*>(row.spin), static_cast<QWidget*>(row.remove)}) {
    setTabOrder(previous, next);
    previous = next;
  }

  QWidget* key = row.widget;
  connect(row.enable, &QCheckBox::toggled, this, [this, key](bool on) {
    const int i = indexOf(key);
    if (i < 0) return;
    rows_[i].setting.enabled = on;
    updateHint();
    emit lorasChanged();
  });
  connect(row.slider, &QSlider::valueChanged, this,
          [this, key](int value) { setStrength(key, value * kStrengthStep); });
  connect(row.spin, &QDoubleSpinBox::valueChanged, this,
          [this, key](double value) { setStrength(key, value); });
  connect(row.remove, &QToolButton::clicked, this, [this, key] { removeLora(indexOf(key)); });
  rows_.push_back(std::move(row));
  showStatus(rows_.back());
  empty_->hide();
}

int LoraList::indexOf(const QWidget* rowWidget) const {
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    if (rows_[i].widget == rowWidget) return static_cast<int>(i);
  }
  return -1;
}

// One strength, shown by both inputs: the slider covers ±kSliderStrength, the spin box the rest.
void LoraList::setStrength(QWidget* rowWidget, double strength) {
  const int i = indexOf(rowWidget);
  if (i < 0) return;
  Row& row = rows_[i];
  // The slider's steps are 0.05: a spin box value between them keeps its own.
  if (row.slider->value() != sliderValue(strength)) {
    const QSignalBlocker block(row.slider);
    row.slider->setValue(sliderValue(strength));
  }
  if (std::abs(row.spin->value() - strength) > 1e-9) {
    const QSignalBlocker block(row.spin);
    row.spin->setValue(strength);
  }
  if (row.setting.strength == row.spin->value()) return;
  row.setting.strength = row.spin->value();
  emit lorasChanged();
}

bool LoraList::checking() const {
  return query_->pending();
}

// Checks each LoRA the model has not answered for. One query checks all of them: a newer one
// (a LoRA added, the model changed) supersedes it and asks for everything still unanswered.
void LoraList::check() {
  QStringList paths;
  for (Row& row : rows_) {
    if (checker_ && !row.report && row.error.isEmpty()) paths << row.setting.path;
    showStatus(row);
  }
  updateHint();
  if (paths.isEmpty()) {
    if (query_->pending()) query_->post([] { return std::function<void()>([] {}); });
    emit checked();
    return;
  }
  query_->post([this, checker = checker_, paths] {
    QHash<QString, CheckAnswer> answers;
    for (const QString& path : paths) {
      CheckAnswer& a = answers[path];
      try {
        if (path.isEmpty()) {
          a.error = tr("The file was not found on this machine.");
        } else if (!QFileInfo(path).isFile()) {
          a.error = tr("%1 is not there.").arg(QDir::toNativeSeparators(path));
        } else {
          a.report = checker(io::detail::path_from_utf8(path.toStdString()));
        }
      } catch (const std::exception& e) {
        a.error = QString::fromUtf8(e.what());
      }
    }
    return std::function<void()>([this, answers = std::move(answers)] {
      for (Row& row : rows_) {
        const auto it = answers.find(row.setting.path);
        if (it == answers.end() || row.report || !row.error.isEmpty()) continue;
        row.report = it->report;
        row.error = it->error;
        showStatus(row);
      }
      updateHint();
      emit checked();
    });
  });
}

void LoraList::showStatus(Row& row) {
  QString text;
  QString details;
  QString color;
  if (!row.error.isEmpty()) {
    text = QStringLiteral("⚠ ") + row.error;
    details = row.error;
    color = QStringLiteral("color: #d9534f;");
  } else if (row.report) {
    const models::LoraReport& r = *row.report;
    text = tr("%1 of %2 layers").arg(r.matched).arg(r.modules);
    details = tr("%1 of the %2 layers this LoRA adapts are in the model (%3 to stream with "
                 "them).")
                  .arg(r.matched)
                  .arg(r.modules)
                  .arg(MemoryChart::formatBytes(r.adapter_bytes));
    if (!r.unmatched.empty()) {
      QStringList names;
      for (const std::string& n : r.unmatched) names << QString::fromStdString(n);
      details += QLatin1Char(' ') +
                 tr("Not in this model, e.g. %1.").arg(names.join(QStringLiteral(", ")));
      color = QStringLiteral("color: #b8860b;");  // allowed, but the user should know
    }
  } else if (!checker_) {
    text = tr("checked once a model is found");
  } else {
    text = tr("checking…");
  }
  row.status->setStyleSheet(color);
  row.status->setText(row.status->fontMetrics().elidedText(text, Qt::ElideRight, kStatusWidth));
  row.status->setToolTip(details);
  row.status->setAccessibleDescription(details.isEmpty() ? text : details);
}

QString LoraList::statusText(int index) const {
  const Row& row = rows_.at(index);
  if (!row.error.isEmpty()) return row.error;
  if (row.report) return tr("%1 of %2 layers").arg(row.report->matched).arg(row.report->modules);
  return checker_ ? tr("checking…") : tr("checked once a model is found");
}

QString LoraList::problem() const {
  for (const Row& row : rows_) {
    if (row.setting.enabled && !row.error.isEmpty()) {
      return tr("The LoRA %1 cannot be used: %2 Disable or remove it.")
          .arg(row.setting.name, row.error);
    }
  }
  return {};
}

int LoraList::distilledSteps() const {
  for (const Row& row : rows_) {
    if (row.setting.enabled && row.report && row.report->distilled_steps > 0) {
      return row.report->distilled_steps;
    }
  }
  return 0;
}

void LoraList::updateHint() {
  empty_->setVisible(rows_.empty());
  const Row* distill = nullptr;
  for (const Row& row : rows_) {
    if (row.setting.enabled && row.report && row.report->distilled_steps > 0) {
      distill = &row;
      break;
    }
  }
  distilledHint_->setVisible(distill != nullptr);
  distilled_->setVisible(distill != nullptr);
  if (!distill) return;
  distilledHint_->setText(tr("%1 is a step-distillation LoRA: it is made for %2 steps "
                             "without CFG.")
                              .arg(distill->setting.name)
                              .arg(distill->report->distilled_steps));
  distilled_->setText(tr("Use %1 steps (distilled)").arg(distill->report->distilled_steps));
}

void LoraList::dragEnterEvent(QDragEnterEvent* event) {
  if (isEnabled() && !lorasIn(event->mimeData()).isEmpty()) event->acceptProposedAction();
}

void LoraList::dropEvent(QDropEvent* event) {
  const QStringList paths = lorasIn(event->mimeData());
  if (paths.isEmpty()) return;
  addLoras(paths);
  event->acceptProposedAction();
}

}  // namespace ferry::gui
