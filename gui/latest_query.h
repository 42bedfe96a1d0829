// Engine queries that read files (finding a model set, validating and planning a request) run
// here, off the GUI thread, so a slow or network drive never freezes the window. A LatestQuery
// owns one thread and runs one query at a time; only the newest matters: a query posted after
// another supersedes it (the older one is skipped if it has not started, and its answer dropped if
// it has). Answers are delivered on the owner's thread as queued calls.
#pragma once

#include <QObject>
#include <QThread>
#include <atomic>
#include <functional>

namespace ferry::gui {

class LatestQuery : public QObject {
  Q_OBJECT

 public:
  // What runs on the query's thread: the engine's work, returning what to do with its answer on
  // the owner's thread.
  using Work = std::function<std::function<void()>()>;

  explicit LatestQuery(const QString& threadName, QObject* parent = nullptr);
  // Waits for the query running now, if any (the others are dropped).
  ~LatestQuery() override;

  // `work` runs on the query's thread unless a newer post() comes first; what it returns runs on
  // this object's thread unless a newer post() came meanwhile. `work` must not throw.
  void post(Work work);
  // A posted query whose answer has not been delivered yet.
  bool pending() const { return delivered_ != posted_; }

 private:
  QThread thread_;
  QObject* context_;  // lives on thread_: the queries run as its queued calls
  std::atomic<quint64> latest_{0};
  quint64 posted_ = 0;     // owner's thread only
  quint64 delivered_ = 0;  // owner's thread only
};

}  // namespace ferry::gui
