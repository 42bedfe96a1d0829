#include "gui/queue_panel.h"

#include <QColor>
#include <QGridLayout>
#include <QLabel>
#include <QListWidget>
#include <QPushButton>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>

#include "gui/job_queue.h"

namespace ferry::gui {
namespace {

QString rowTextOf(const QueuedJob& job) {
  QString prompt = job.settings.prompt.simplified();
  if (prompt.size() > 80) prompt = prompt.left(78) + QStringLiteral("…");
  QString status = statusName(job.status);
  if (!job.detail.isEmpty()) status += QStringLiteral(" · ") + job.detail;
  return QStringLiteral("%1\n%2\n%3").arg(status, job.note, prompt);
}

}  // namespace

QueuePanel::QueuePanel(JobQueue* queue, QWidget* parent)
    : QWidget(parent),
      queue_(queue),
      list_(new QListWidget(this)),
      summary_(new QLabel(this)),
      up_(new QPushButton(tr("Up"), this)),
      down_(new QPushButton(tr("Down"), this)),
      remove_(new QPushButton(tr("Remove"), this)),
      run_(new QPushButton(tr("Run the queue"), this)),
      clear_(new QPushButton(tr("Clear ended"), this)) {
  list_->setAccessibleName(tr("Queued jobs"));
  list_->setWordWrap(true);
  list_->setAlternatingRowColors(true);  // a job is three lines: where one ends shows
  list_->setDragDropMode(QAbstractItemView::InternalMove);  // a drag reorders, as Up and Down
  list_->setDefaultDropAction(Qt::MoveAction);
  list_->setToolTip(tr("The jobs run from the top, one after another; drag one to move it"));
  summary_->setWordWrap(true);
  summary_->setAccessibleName(tr("Queue summary"));
  up_->setToolTip(tr("Run this job earlier"));
  down_->setToolTip(tr("Run this job later"));
  remove_->setToolTip(tr("Take this job out of the queue (Cancel stops the running one)"));
  clear_->setToolTip(tr("Take the done, failed and cancelled jobs off the list"));
  // Three rows: the panel is a narrow side column (a sixth of a 1280 px window).
  auto* buttons = new QGridLayout;
  buttons->addWidget(up_, 0, 0);
  buttons->addWidget(down_, 0, 1);
  buttons->addWidget(remove_, 1, 0);
  buttons->addWidget(clear_, 1, 1);
  buttons->addWidget(run_, 2, 0, 1, 2);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(summary_);
  layout->addWidget(list_, 1);
  layout->addLayout(buttons);

  connect(queue_, &JobQueue::changed, this, &QueuePanel::reload);
  connect(queue_, &JobQueue::detailChanged, this, &QueuePanel::updateRow);
  connect(list_, &QListWidget::currentRowChanged, this, &QueuePanel::updateButtons);
  // The list's new order goes to the queue once the drop is over (the queue's change rebuilds
  // the rows, which the drop must not see deleted under it).
  connect(list_->model(), &QAbstractItemModel::rowsMoved, this, [this] {
    QTimer::singleShot(0, this, [this] {
      QStringList ids;
      for (int i = 0; i < list_->count(); ++i) {
        ids << list_->item(i)->data(Qt::UserRole).toString();
      }
      if (!queue_->reorder(ids)) reload();
    });
  });
  connect(up_, &QPushButton::clicked, this, [this] { queue_->move(selectedId(), -1); });
  connect(down_, &QPushButton::clicked, this, [this] { queue_->move(selectedId(), +1); });
  connect(remove_, &QPushButton::clicked, this, [this] { queue_->remove(selectedId()); });
  connect(clear_, &QPushButton::clicked, queue_, &JobQueue::clearEnded);
  connect(run_, &QPushButton::clicked, this, [this] {
    if (running_) {
      emit stopRequested();
    } else {
      emit runRequested();
    }
  });
  reload();
}

void QueuePanel::setRunning(bool running) {
  running_ = running;
  updateButtons();
}

QString QueuePanel::rowText(int row) const {
  const QListWidgetItem* item = list_->item(row);
  return item ? item->text() : QString();
}

QString QueuePanel::selectedId() const {
  const QListWidgetItem* item = list_->currentItem();
  return item ? item->data(Qt::UserRole).toString() : QString();
}

void QueuePanel::reload() {
  const QString selected = selectedId();
  list_->clear();
  for (const QueuedJob& job : queue_->jobs()) {
    auto* row = new QListWidgetItem(rowTextOf(job), list_);
    row->setData(Qt::UserRole, job.id);
    if (job.status == QueuedJob::Status::kFailed) row->setForeground(QColor(0xd9, 0x53, 0x4f));
    if (job.id == selected) list_->setCurrentItem(row);
  }
  updateButtons();
}

void QueuePanel::updateRow(int row) {
  QListWidgetItem* item = list_->item(row);
  if (item != nullptr && row < queue_->jobs().size()) item->setText(rowTextOf(queue_->jobs()[row]));
}

void QueuePanel::updateButtons() {
  const QueuedJob* job = queue_->find(selectedId());
  const int row = list_->currentRow();
  up_->setEnabled(job != nullptr && row > 0);
  down_->setEnabled(job != nullptr && row + 1 < list_->count());
  remove_->setEnabled(job != nullptr && job->status != QueuedJob::Status::kRunning);
  const int pending = queue_->pendingCount();
  const bool ended = std::any_of(queue_->jobs().begin(), queue_->jobs().end(), [](const auto& j) {
    return j.status != QueuedJob::Status::kPending && j.status != QueuedJob::Status::kRunning;
  });
  clear_->setEnabled(ended);
  run_->setText(running_ ? tr("Stop the queue") : tr("Run the queue"));
  run_->setToolTip(running_ ? tr("Cancel the running job and start no other (the pending ones "
                                 "stay)")
                            : tr("Run the pending jobs, from the top"));
  run_->setEnabled(running_ || pending > 0);
  if (queue_->jobs().isEmpty()) {
    summary_->setText(
        tr("Empty. \"Queue\" beside Generate adds the settings shown, and works "
           "while a video is being made."));
  } else if (running_) {
    summary_->setText(tr("Running: %n job(s) waiting.", "", pending));
  } else {
    summary_->setText(pending > 0 ? tr("Stopped: %n job(s) waiting.", "", pending)
                                  : tr("Nothing waiting."));
  }
}

}  // namespace ferry::gui
