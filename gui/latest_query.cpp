#include "gui/latest_query.h"

#include <limits>
#include <utility>

namespace ferry::gui {

LatestQuery::LatestQuery(const QString& threadName, QObject* parent)
    : QObject(parent), context_(new QObject) {
  context_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, context_, &QObject::deleteLater);
  thread_.setObjectName(threadName);
  thread_.start();
}

LatestQuery::~LatestQuery() {
  latest_ = std::numeric_limits<quint64>::max();  // queued queries that have not started: skipped
  thread_.quit();
  thread_.wait();
}

void LatestQuery::post(Work work) {
  const quint64 ticket = ++posted_;
  latest_ = ticket;
  QMetaObject::invokeMethod(
      context_,
      [this, ticket, work = std::move(work)] {
        if (latest_ != ticket) return;  // superseded before it started
        std::function<void()> deliver = work();
        // Queued on this object: dropped by Qt if the owner is gone by then.
        QMetaObject::invokeMethod(
            this,
            [this, ticket, deliver = std::move(deliver)] {
              if (ticket != posted_) return;  // superseded while it ran
              delivered_ = ticket;
              deliver();
            },
            Qt::QueuedConnection);
      },
      Qt::QueuedConnection);
}

}  // namespace ferry::gui
