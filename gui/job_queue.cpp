#include "gui/job_queue.h"

#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSaveFile>
#include <algorithm>
#include <utility>

namespace ferry::gui {
namespace {

constexpr int kQueueFileVersion = 1;

// The jobs of a queue file; false when it is not one (the caller sets it aside).
bool readJobs(const QByteArray& bytes, QList<QueuedJob>& out, QString& why) {
  QJsonParseError error;
  const QJsonDocument doc = QJsonDocument::fromJson(bytes, &error);
  if (error.error != QJsonParseError::NoError) {
    why = QObject::tr("not JSON (%1 at byte %2)").arg(error.errorString()).arg(error.offset);
    return false;
  }
  const QJsonObject root = doc.object();
  if (!doc.isObject() || root.value(QStringLiteral("version")).toInt() != kQueueFileVersion ||
      !root.value(QStringLiteral("jobs")).isArray()) {
    why = QObject::tr("not a version %1 queue").arg(kQueueFileVersion);
    return false;
  }
  for (const QJsonValue& value : root.value(QStringLiteral("jobs")).toArray()) {
    const QJsonObject job = value.toObject();
    if (!value.isObject() || !job.value(QStringLiteral("settings")).isObject()) {
      why = QObject::tr("a job without settings");
      return false;
    }
    QueuedJob j;
    j.settings = GenerationSettings::fromJson(job.value(QStringLiteral("settings")).toObject());
    j.settings.seedMode = SeedMode::kFixed;  // a queued job's seed was decided when it was queued
    j.note = job.value(QStringLiteral("note")).toString();
    out.push_back(std::move(j));
  }
  return true;
}

}  // namespace

QString statusName(QueuedJob::Status status) {
  switch (status) {
    case QueuedJob::Status::kPending:
      return QObject::tr("pending");
    case QueuedJob::Status::kRunning:
      return QObject::tr("running");
    case QueuedJob::Status::kDone:
      return QObject::tr("done");
    case QueuedJob::Status::kFailed:
      return QObject::tr("failed");
    case QueuedJob::Status::kCancelled:
      return QObject::tr("cancelled");
  }
  return {};
}

JobQueue::JobQueue(QString file, QObject* parent) : QObject(parent), file_(std::move(file)) {}

QString JobQueue::load() {
  if (file_.isEmpty() || !QFileInfo::exists(file_)) return {};
  QFile file(file_);
  QString why;
  QList<QueuedJob> loaded;
  if (!file.open(QIODevice::ReadOnly)) {
    return tr("The saved queue %1 could not be read: %2").arg(file_, file.errorString());
  }
  if (file.size() > kMaxQueueFileBytes) {
    why = tr("larger than %1 MiB").arg(kMaxQueueFileBytes >> 20);
  } else {
    readJobs(file.readAll(), loaded, why);
  }
  file.close();
  if (!why.isEmpty()) {
    // Kept for the user (and a bug report), out of the way of the queue written from now on.
    QString aside = file_ + QStringLiteral(".unreadable");
    for (int n = 2; QFileInfo::exists(aside); ++n) {
      aside = file_ + QStringLiteral(".unreadable-%1").arg(n);
    }
    const bool moved = QFile::rename(file_, aside);
    return moved ? tr("The saved queue could not be read (%1); it was set aside as %2 and the "
                      "queue starts empty.")
                       .arg(why, aside)
                 : tr("The saved queue %1 could not be read (%2) and the queue starts empty.")
                       .arg(file_, why);
  }
  for (QueuedJob& job : loaded) {
    job.id = QStringLiteral("job-%1").arg(nextId_++);
    jobs_.push_back(std::move(job));
  }
  emit changed();
  return {};
}

const QueuedJob* JobQueue::find(const QString& id) const {
  const int i = indexOf(id);
  return i < 0 ? nullptr : &jobs_[i];
}

int JobQueue::indexOf(const QString& id) const {
  for (qsizetype i = 0; i < jobs_.size(); ++i) {
    if (jobs_[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

const QueuedJob* JobQueue::nextPending() const {
  for (const QueuedJob& job : jobs_) {
    if (job.status == QueuedJob::Status::kPending) return &job;
  }
  return nullptr;
}

int JobQueue::pendingCount() const {
  return static_cast<int>(std::count_if(jobs_.begin(), jobs_.end(), [](const QueuedJob& j) {
    return j.status == QueuedJob::Status::kPending;
  }));
}

QString JobQueue::add(const GenerationSettings& settings, const QString& note) {
  QueuedJob job;
  job.id = QStringLiteral("job-%1").arg(nextId_++);
  job.settings = settings;
  job.note = note;
  jobs_.push_back(job);
  save();
  emit changed();
  return job.id;
}

bool JobQueue::move(const QString& id, int delta) {
  const int from = indexOf(id);
  const int to = from + delta;
  if (from < 0 || to < 0 || to >= jobs_.size()) return false;
  jobs_.move(from, to);
  save();
  emit changed();
  return true;
}

bool JobQueue::reorder(const QStringList& ids) {
  if (ids.size() != jobs_.size()) return false;
  QList<QueuedJob> ordered;
  for (const QString& id : ids) {
    const int i = indexOf(id);
    if (i < 0 || ids.count(id) != 1) return false;
    ordered.push_back(jobs_[i]);
  }
  jobs_ = std::move(ordered);
  save();
  emit changed();
  return true;
}

bool JobQueue::remove(const QString& id) {
  const int i = indexOf(id);
  if (i < 0 || jobs_[i].status == QueuedJob::Status::kRunning) return false;
  jobs_.removeAt(i);
  save();
  emit changed();
  return true;
}

void JobQueue::clearEnded() {
  const auto ended = [](const QueuedJob& j) {
    return j.status != QueuedJob::Status::kPending && j.status != QueuedJob::Status::kRunning;
  };
  if (std::none_of(jobs_.begin(), jobs_.end(), ended)) return;
  jobs_.removeIf(ended);
  emit changed();  // only jobs not in the file went
}

void JobQueue::setStatus(const QString& id, QueuedJob::Status status, const QString& detail) {
  const int i = indexOf(id);
  if (i < 0) return;
  jobs_[i].status = status;
  jobs_[i].detail = detail;
  save();
  emit changed();
}

void JobQueue::setDetail(const QString& id, const QString& detail) {
  const int i = indexOf(id);
  if (i < 0 || jobs_[i].detail == detail) return;
  jobs_[i].detail = detail;
  emit detailChanged(i);
}

// The jobs not yet made, in order: the pending ones and the running one (a crash or a quit
// mid-run leaves it to make again).
void JobQueue::save() {
  if (file_.isEmpty()) return;
  QJsonArray jobs;
  for (const QueuedJob& job : jobs_) {
    if (job.status != QueuedJob::Status::kPending && job.status != QueuedJob::Status::kRunning) {
      continue;
    }
    QJsonObject j;
    j[QStringLiteral("note")] = job.note;
    j[QStringLiteral("settings")] = job.settings.toJson();
    jobs.append(j);
  }
  QJsonObject root;
  root[QStringLiteral("version")] = kQueueFileVersion;
  root[QStringLiteral("jobs")] = jobs;
  QSaveFile file(file_);  // a temporary file renamed over the old one: never half-written
  if (!file.open(QIODevice::WriteOnly) || file.write(QJsonDocument(root).toJson()) < 0 ||
      !file.commit()) {
    saveProblem_ = tr("The queue could not be saved in %1: %2").arg(file_, file.errorString());
    return;
  }
  saveProblem_.clear();
}

}  // namespace ferry::gui
