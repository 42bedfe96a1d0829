// The app's job queue: the settings of the videos to make next, run one after another, each with
// its status (pending, running with its progress, done, failed with its message, cancelled).
// The jobs not yet made are kept in <per-user data folder>/queue.json after every change (written
// under a temporary name, then renamed), so the queue survives a restart or a crash; a file that
// cannot be read is set aside and said, never a crash. No widgets: QueuePanel shows it, the
// main window runs it.
#pragma once

#include <QList>
#include <QObject>
#include <QString>
#include <QStringList>

#include "gui/generation_settings.h"

namespace ferry::gui {

struct QueuedJob {
  enum class Status { kPending, kRunning, kDone, kFailed, kCancelled };
  QString id;                   // unique in the queue ("job-3")
  GenerationSettings settings;  // what runs; its seed fixed when the job was queued
  QString note;                 // "seed 43 · 2 of 3 (seeds 42, 43, …)"
  Status status = Status::kPending;
  QString detail;  // running: the progress; done: the time and the video; failed: the message
};

// "pending", "running", "done", "failed", "cancelled".
QString statusName(QueuedJob::Status status);

// Queue files larger than this are set aside unread (one job is about 2 KB).
inline constexpr qint64 kMaxQueueFileBytes = 16 << 20;

class JobQueue : public QObject {
  Q_OBJECT

 public:
  // `file`: where the jobs not yet made are kept; empty: nowhere (nothing saved or loaded).
  explicit JobQueue(QString file, QObject* parent = nullptr);
  const QString& file() const { return file_; }

  // Reads the jobs a previous session left (all pending). A file that is not a queue is renamed
  // "<file>.unreadable" (or "-2", …) and the returned message says so; empty when all is well.
  QString load();
  // Why the last save failed (the disk full, the folder read-only); empty after a good one.
  const QString& saveProblem() const { return saveProblem_; }

  const QList<QueuedJob>& jobs() const { return jobs_; }
  const QueuedJob* find(const QString& id) const;
  int indexOf(const QString& id) const;
  // The first pending job; null when none waits.
  const QueuedJob* nextPending() const;
  int pendingCount() const;

  // Appends a pending job; returns its id.
  QString add(const GenerationSettings& settings, const QString& note);
  // Moves a job one place up (delta -1) or down (+1); false at an end or for an unknown id.
  bool move(const QString& id, int delta);
  // Puts the jobs in the order of `ids` (a drag in the panel); false, changing nothing, when
  // `ids` is not the queue's ids in some order.
  bool reorder(const QStringList& ids);
  // Removes a job that is not running; false otherwise.
  bool remove(const QString& id);
  // Removes the done, failed and cancelled jobs.
  void clearEnded();
  void setStatus(const QString& id, QueuedJob::Status status, const QString& detail = {});
  // The running job's progress: shown, not saved.
  void setDetail(const QString& id, const QString& detail);

 signals:
  void changed();               // a job added, moved, removed or its status changed
  void detailChanged(int row);  // only the progress text of the job at `row`

 private:
  void save();

  QString file_;
  QList<QueuedJob> jobs_;
  int nextId_ = 1;
  QString saveProblem_;
};

}  // namespace ferry::gui
