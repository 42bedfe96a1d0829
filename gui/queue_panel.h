// The queue as the window's side panel shows it: one row per job (its status, its seed, its
// prompt), and the buttons that reorder, remove, run and stop it. The window runs the jobs
// (main_window.h); this panel only shows them and asks.
#pragma once

#include <QWidget>

class QLabel;
class QListWidget;
class QPushButton;

namespace ferry::gui {

class JobQueue;

class QueuePanel : public QWidget {
  Q_OBJECT

 public:
  explicit QueuePanel(JobQueue* queue, QWidget* parent = nullptr);
  QListWidget* list() const { return list_; }
  // Whether the window is running the queue: the run button then reads "Stop the queue".
  void setRunning(bool running);
  // The row's text, for tests: "pending · seed 42 — a ferry…".
  QString rowText(int row) const;

 signals:
  void runRequested();
  void stopRequested();

 private:
  void reload();
  void updateRow(int row);
  void updateButtons();
  QString selectedId() const;

  JobQueue* queue_;
  QListWidget* list_;
  QLabel* summary_;
  QPushButton* up_;
  QPushButton* down_;
  QPushButton* remove_;
  QPushButton* run_;
  QPushButton* clear_;
  bool running_ = false;
};

}  // namespace ferry::gui
