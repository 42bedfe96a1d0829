// The job queue as a user drives it, on the offscreen platform with the demo model on the CPU:
// jobs queued while a video is made run after it in order and land in the history, a cancel goes
// on to the next job and "Stop the queue" stops them all, ×N queues N seeds, the rows reorder and
// go, the pending jobs survive a restart (a file that is not a queue is set aside and said), and
// memory is back near its baseline after each job.
#include <QListWidget>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QtTest/QtTest>

#include "gui/history.h"
#include "gui/job_queue.h"
#include "gui/main_window.h"
#include "gui/memory_chart.h"
#include "gui/queue_panel.h"
#include "tests/gui/gui_test_support.h"

using namespace ferry::gui;
using namespace ferry::gui::test;

namespace {

GenerationSettings demoSettings(const QString& prompt, quint64 seed, int steps = 1) {
  GenerationSettings s;
  s.prompt = prompt;
  s.model = {demoFolder()};
  s.width = 64;
  s.height = 64;
  s.frames = 5;
  s.fps = 8;
  s.steps = steps;
  s.guideScale = 5;
  s.shift = 5;
  s.sampler = QStringLiteral("unipc");
  s.seed = seed;
  s.seedMode = SeedMode::kFixed;
  s.preset = QStringLiteral("cpu");
  return s;
}

MainWindowOptions options(const QTemporaryDir& data) {
  MainWindowOptions o;
  o.dataFolder = data.path();
  o.machine = cpuMachine();
  o.firstRunCheck = false;
  o.askBeforeClosing = false;
  return o;
}

QPushButton* button(const QWidget& parent, const QString& text) {
  for (QPushButton* b : parent.findChildren<QPushButton*>()) {
    if (b->text() == text) return b;
  }
  return nullptr;
}

// Waits until the window runs no queued job and none is left to start.
bool waitForQueue(const MainWindow& w, int ms = 180000) {
  QElapsedTimer t;
  t.start();
  QTest::qWait(1);
  while ((w.queueRunning() || w.state() != MainWindow::State::kIdle) && t.elapsed() < ms) {
    QTest::qWait(10);
  }
  return !w.queueRunning() && w.state() == MainWindow::State::kIdle;
}

QStringList statuses(const JobQueue& queue) {
  QStringList out;
  for (const QueuedJob& job : queue.jobs()) out << statusName(job.status);
  return out;
}

QStringList prompts(const JobQueue& queue) {
  QStringList out;
  for (const QueuedJob& job : queue.jobs()) out << job.settings.prompt;
  return out;
}

// The history's prompts, oldest first.
QStringList historyPrompts(const QString& dataFolder) {
  QStringList out;
  for (const HistoryItem& item : HistoryStore(QDir(dataFolder).filePath("history")).items()) {
    out.prepend(item.settings.prompt);
  }
  return out;
}

}  // namespace

class QueueTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { demoFolder(); }

  // Issue 23: "Queue" while a run is going; the jobs run one after another, in order, each
  // landing in the history as it finishes.
  void three_jobs_queued_during_a_run_complete_in_order() {
    QTemporaryDir data;
    MainWindow w(options(data));
    w.show();
    w.applySettings(demoSettings(QStringLiteral("the first run"), 1, 12));
    QVERIFY(settle(w));
    QSignalSpy firstStep(w.worker(), &GenerationWorker::step);
    w.generate();
    QCOMPARE(w.state(), MainWindow::State::kRunning);
    QTRY_VERIFY_WITH_TIMEOUT(firstStep.count() > 0, 60000);
    QVERIFY(w.state() == MainWindow::State::kRunning);

    QPushButton* queue = button(w, QStringLiteral("&Queue"));
    QVERIFY(queue != nullptr);
    QSignalSpy ended(&w, &MainWindow::jobEnded);
    const QStringList queued = {QStringLiteral("job one"), QStringLiteral("job two"),
                                QStringLiteral("job three")};
    for (int i = 0; i < queued.size(); ++i) {
      // The settings are editable during the run, and Queue takes what they show.
      w.applySettings(demoSettings(queued[i], 100 + i));
      QVERIFY(settle(w));
      QVERIFY2(w.queueEnabled(), qPrintable(w.queueBlockedReason()));
      QTest::mouseClick(queue, Qt::LeftButton);
    }
    QVERIFY2(w.state() != MainWindow::State::kIdle, "the first run ended before the queueing");
    QCOMPARE(w.jobQueue()->jobs().size(), 3);
    QCOMPARE(statuses(*w.jobQueue()),
             (QStringList{QStringLiteral("pending"), QStringLiteral("pending"),
                          QStringLiteral("pending")}));
    QVERIFY(w.queuePanel()->rowText(0).contains(QLatin1String("seed 100")));

    QVERIFY(waitForQueue(w));
    QCOMPARE(ended.count(), 3);
    QStringList endedOrder;
    for (const auto& args : ended) {
      endedOrder << w.jobQueue()->find(args.at(0).toString())->settings.prompt;
    }
    QCOMPARE(endedOrder, queued);
    QCOMPARE(statuses(*w.jobQueue()),
             (QStringList{QStringLiteral("done"), QStringLiteral("done"), QStringLiteral("done")}));
    QCOMPARE(historyPrompts(data.path()), QStringList{QStringLiteral("the first run")} + queued);
    QCOMPARE(w.historyPanel()->count(), 4);
    // Each job ran with the seed its row said.
    const QList<HistoryItem> items = HistoryStore(QDir(data.path()).filePath("history")).items();
    QCOMPARE(items.front().settings.seed, quint64{102});
    QCOMPARE(items.front().settings.prompt, QStringLiteral("job three"));
    QVERIFY(w.queuePanel()->rowText(2).startsWith(QLatin1String("done")));
  }

  // Cancelling the running job goes on to the next; "Stop the queue" stops them all.
  void a_cancel_mid_queue_goes_on_to_the_next_and_stop_stops_all() {
    QTemporaryDir data;
    MainWindow w(options(data));
    w.applySettings(demoSettings(QStringLiteral("a"), 1));
    QVERIFY(settle(w));
    JobQueue& queue = *w.jobQueue();
    queue.add(demoSettings(QStringLiteral("first"), 1), QStringLiteral("seed 1"));
    queue.add(demoSettings(QStringLiteral("cancelled"), 2, 40), QStringLiteral("seed 2"));
    queue.add(demoSettings(QStringLiteral("after the cancel"), 3), QStringLiteral("seed 3"));
    const auto cancelAtStep2 =
        connect(w.worker(), &GenerationWorker::step, &w, [&w](const StepInfo& info) {
          if (info.steps == 40 && info.step == 2) w.cancel();
        });
    w.runQueue();
    QVERIFY(waitForQueue(w));
    disconnect(cancelAtStep2);
    QCOMPARE(statuses(queue), (QStringList{QStringLiteral("done"), QStringLiteral("cancelled"),
                                           QStringLiteral("done")}));
    QCOMPARE(historyPrompts(data.path()),
             (QStringList{QStringLiteral("first"), QStringLiteral("after the cancel")}));

    // Stop: the running job is cancelled, the others stay pending, nothing else starts.
    queue.clearEnded();
    QVERIFY(queue.jobs().isEmpty());
    queue.add(demoSettings(QStringLiteral("stopped"), 4, 40), QStringLiteral("seed 4"));
    queue.add(demoSettings(QStringLiteral("left waiting"), 5), QStringLiteral("seed 5"));
    QPushButton* run = button(*w.queuePanel(), QStringLiteral("Run the queue"));
    QVERIFY(run != nullptr);
    QTest::mouseClick(run, Qt::LeftButton);
    QVERIFY(w.queueRunning());
    QCOMPARE(run->text(), QStringLiteral("Stop the queue"));
    QSignalSpy step(w.worker(), &GenerationWorker::step);
    QTRY_VERIFY_WITH_TIMEOUT(step.count() >= 2, 60000);
    QTest::mouseClick(run, Qt::LeftButton);
    QVERIFY(!w.queueRunning());
    QVERIFY(waitForQueue(w));
    QTest::qWait(200);  // nothing starts afterwards
    QCOMPARE(w.state(), MainWindow::State::kIdle);
    QCOMPARE(statuses(queue),
             (QStringList{QStringLiteral("cancelled"), QStringLiteral("pending")}));
    QCOMPARE(run->text(), QStringLiteral("Run the queue"));
  }

  // A job the engine refuses fails with its message in its row (and the banner), and the
  // queue goes on with the next one.
  void a_failed_job_says_why_and_the_queue_goes_on() {
    QTemporaryDir data;
    MainWindow w(options(data));
    w.applySettings(demoSettings(QStringLiteral("a"), 1));
    QVERIFY(settle(w));
    const QString notAnImage = data.filePath(QStringLiteral("notes.png"));
    {
      QFile f(notAnImage);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write("these are notes, not a picture");
    }
    GenerationSettings bad = demoSettings(QStringLiteral("from a text file"), 2);
    bad.image = notAnImage;
    w.jobQueue()->add(bad, QStringLiteral("seed 2"));
    w.jobQueue()->add(demoSettings(QStringLiteral("after the failure"), 3),
                      QStringLiteral("seed 3"));
    w.runQueue();
    QVERIFY(waitForQueue(w));
    QCOMPARE(statuses(*w.jobQueue()),
             (QStringList{QStringLiteral("failed"), QStringLiteral("done")}));
    const QString failure = w.jobQueue()->jobs()[0].detail;
    QVERIFY(!failure.isEmpty());
    QVERIFY2(w.queuePanel()->rowText(0).contains(failure), qPrintable(w.queuePanel()->rowText(0)));
    QVERIFY2(w.lastMessage().contains(failure), qPrintable(w.lastMessage()));
    QCOMPARE(historyPrompts(data.path()), QStringList{QStringLiteral("after the failure")});
  }

  // A job queued for another model folder than the one shown runs on its own model (opened on
  // the engine thread; a folder without one fails the job), the window's model left as it is.
  void a_job_for_another_model_folder_runs_on_that_model() {
    QTemporaryDir data;
    QTemporaryDir other;
    const QDir from(demoFolder());
    for (const QString& file : filesEndingIn(demoFolder(), QString())) {
      const QString target = other.filePath(from.relativeFilePath(file));
      QVERIFY(QDir().mkpath(QFileInfo(target).absolutePath()));
      QVERIFY(QFile::copy(file, target));
    }
    MainWindow w(options(data));
    w.applySettings(demoSettings(QStringLiteral("shown"), 1));
    QVERIFY(settle(w));
    GenerationSettings elsewhere = demoSettings(QStringLiteral("elsewhere"), 2);
    elsewhere.model = {QDir::fromNativeSeparators(other.path())};
    w.jobQueue()->add(elsewhere, QStringLiteral("seed 2"));
    // A folder without a model: the job fails (it is not run on the model shown).
    QTemporaryDir empty;
    GenerationSettings nowhere = demoSettings(QStringLiteral("nowhere"), 3);
    nowhere.model = {QDir::fromNativeSeparators(empty.path())};
    w.jobQueue()->add(nowhere, QStringLiteral("seed 3"));
    w.runQueue();
    QVERIFY(waitForQueue(w));
    QCOMPARE(statuses(*w.jobQueue()),
             (QStringList{QStringLiteral("done"), QStringLiteral("failed")}));
    QVERIFY(!w.jobQueue()->jobs()[1].detail.isEmpty());
    const QList<HistoryItem> items = HistoryStore(QDir(data.path()).filePath("history")).items();
    QCOMPARE(items.size(), 1);
    QCOMPARE(items.front().settings.model, elsewhere.model);
    QCOMPARE(w.settings().model, QStringList{QDir::fromNativeSeparators(demoFolder())});
  }

  // ×N: N jobs, seeds s, s+1, … (or a new random seed each), said in each row.
  void a_batch_queues_n_seeds_said_in_each_row() {
    QTemporaryDir data;
    MainWindow w(options(data));
    w.applySettings(demoSettings(QStringLiteral("batch"), 500, 40));
    QVERIFY(settle(w));
    w.batchCount()->setValue(3);
    w.enqueue();
    QCOMPARE(w.state(), MainWindow::State::kRunning);  // idle: queued and started
    QCOMPARE(w.jobQueue()->jobs().size(), 3);
    for (int i = 0; i < 3; ++i) {
      const QueuedJob& job = w.jobQueue()->jobs()[i];
      QCOMPARE(job.settings.seed, quint64(500 + i));
      QCOMPARE(job.settings.seedMode, SeedMode::kFixed);
      QVERIFY2(w.queuePanel()->rowText(i).contains(QStringLiteral("seed %1").arg(500 + i)),
               qPrintable(w.queuePanel()->rowText(i)));
      QVERIFY(w.queuePanel()->rowText(i).contains(QStringLiteral("%1 of 3").arg(i + 1)));
    }
    GenerationSettings random = demoSettings(QStringLiteral("random batch"), 7);
    random.seedMode = SeedMode::kRandom;
    w.applySettings(random);
    QVERIFY(settle(w));
    w.batchCount()->setValue(2);
    w.enqueue();
    QCOMPARE(w.jobQueue()->jobs().size(), 5);
    QVERIFY(w.queuePanel()->rowText(3).contains(QLatin1String("a random seed each")));
    QCOMPARE(w.jobQueue()->jobs()[3].settings.seedMode, SeedMode::kFixed);
    w.stopQueue();
    QVERIFY(waitForQueue(w));
  }

  // Up, Down, Remove and a drag change what runs and in which order.
  void the_rows_move_and_go_and_the_queue_runs_in_their_order() {
    QTemporaryDir data;
    MainWindow w(options(data));
    w.applySettings(demoSettings(QStringLiteral("a"), 1));
    QVERIFY(settle(w));
    JobQueue& queue = *w.jobQueue();
    for (const char* p : {"A", "B", "C", "D"}) {
      queue.add(demoSettings(QString::fromLatin1(p), 1), QStringLiteral("seed 1"));
    }
    QListWidget* list = w.queuePanel()->list();
    QCOMPARE(list->count(), 4);
    list->setCurrentRow(2);  // C up: A C B D
    QTest::mouseClick(button(*w.queuePanel(), QStringLiteral("Up")), Qt::LeftButton);
    QCOMPARE(prompts(queue), (QStringList{"A", "C", "B", "D"}));
    QCOMPARE(list->currentRow(), 1);  // the selection follows the job
    list->setCurrentRow(0);           // A down: C A B D
    QTest::mouseClick(button(*w.queuePanel(), QStringLiteral("Down")), Qt::LeftButton);
    QCOMPARE(prompts(queue), (QStringList{"C", "A", "B", "D"}));
    list->setCurrentRow(2);  // B out: C A D
    QTest::mouseClick(button(*w.queuePanel(), QStringLiteral("Remove")), Qt::LeftButton);
    QCOMPARE(prompts(queue), (QStringList{"C", "A", "D"}));
    // A drag moves the row in the list's model; the queue follows: D to the top, D C A.
    QVERIFY(list->model()->moveRow(QModelIndex(), 2, QModelIndex(), 0));
    QTRY_COMPARE(prompts(queue), (QStringList{"D", "C", "A"}));
    QCOMPARE(list->count(), 3);
    QVERIFY(w.queuePanel()->rowText(0).endsWith(QLatin1String("D")));
    w.runQueue();
    QVERIFY(waitForQueue(w));
    QCOMPARE(historyPrompts(data.path()), (QStringList{"D", "C", "A"}));
  }

  // The pending jobs are saved as they change: a quit mid-job keeps that job too, and the next
  // start lists them all, waiting for "Run the queue".
  void a_restart_restores_the_pending_jobs() {
    QTemporaryDir data;
    {
      MainWindow w(options(data));
      w.show();
      w.applySettings(demoSettings(QStringLiteral("saved"), 42, 40));
      QVERIFY(settle(w));
      w.batchCount()->setValue(3);
      QSignalSpy step(w.worker(), &GenerationWorker::step);
      QSignalSpy ended(&w, &MainWindow::generationEnded);
      w.enqueue();
      QTRY_VERIFY_WITH_TIMEOUT(step.count() > 0, 60000);
      w.close();  // cancels the running job, then closes
      QVERIFY(ended.wait(60000));
      QTRY_VERIFY(!w.isVisible());
      QCOMPARE(statuses(*w.jobQueue()),
               (QStringList{QStringLiteral("pending"), QStringLiteral("pending"),
                            QStringLiteral("pending")}));
    }
    MainWindow w(options(data));
    QCOMPARE(w.lastMessage(), QString());
    QCOMPARE(statuses(*w.jobQueue()),
             (QStringList{QStringLiteral("pending"), QStringLiteral("pending"),
                          QStringLiteral("pending")}));
    QVERIFY(!w.queueRunning());  // a job that crashed the app is not run again unasked
    QCOMPARE(w.state(), MainWindow::State::kIdle);
    for (int i = 0; i < 3; ++i) {
      const QueuedJob& job = w.jobQueue()->jobs()[i];
      QCOMPARE(job.settings.seed, quint64(42 + i));
      QCOMPARE(job.settings.prompt, QStringLiteral("saved"));
      QCOMPARE(job.settings.steps, 40);
      QVERIFY(w.queuePanel()->rowText(i).contains(QStringLiteral("seed %1").arg(42 + i)));
    }
    QVERIFY(button(*w.queuePanel(), QStringLiteral("Run the queue"))->isEnabled());
  }

  // A queue file that is not one (cut short by a full disk, edited by hand) is said and set
  // aside; the app starts with an empty queue and saves a good one from then on.
  void an_unreadable_queue_file_is_said_and_set_aside() {
    QTemporaryDir data;
    const QString file = QDir(data.path()).filePath(QStringLiteral("queue.json"));
    {
      QFile f(file);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write("{\"version\": 1, \"jobs\": [{\"settings\": {\"prompt\": \"cut sh");
    }
    MainWindow w(options(data));
    QVERIFY2(w.lastMessage().contains(QLatin1String("queue")), qPrintable(w.lastMessage()));
    QVERIFY(w.lastMessage().contains(QLatin1String("set aside")));
    QVERIFY(w.jobQueue()->jobs().isEmpty());
    QVERIFY(QFileInfo::exists(file + QStringLiteral(".unreadable")));
    QVERIFY(!QFileInfo::exists(file));
    w.jobQueue()->add(demoSettings(QStringLiteral("new"), 1), QStringLiteral("seed 1"));
    JobQueue again(file);
    QCOMPARE(again.load(), QString());
    QCOMPARE(prompts(again), QStringList{QStringLiteral("new")});
    // Valid JSON that is not a queue is set aside too, beside the first one.
    {
      QFile f(file);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write("[1, 2, 3]");
    }
    JobQueue third(file);
    QVERIFY(third.load().contains(QLatin1String(".unreadable-2")));
    QVERIFY(third.jobs().isEmpty());
  }

  // Memory is back near its baseline after each job: nothing a job allocates outlives it.
  void memory_is_back_to_baseline_between_jobs() {
    QTemporaryDir data;
    MainWindow w(options(data));
    w.applySettings(demoSettings(QStringLiteral("warm-up"), 1, 2));
    QVERIFY(settle(w));
    // A first run warms up what stays for the process's life (code, thread pools, fonts).
    w.generate();
    QTRY_COMPARE_WITH_TIMEOUT(w.historyPanel()->count(), 1, 120000);
    const quint64 baseline = residentBytes();
    QList<quint64> after;
    connect(&w, &MainWindow::jobEnded, &w, [&after] { after << residentBytes(); });
    w.batchCount()->setValue(4);
    w.applySettings(demoSettings(QStringLiteral("measured"), 10, 3));
    QVERIFY(settle(w));
    w.enqueue();
    QVERIFY(waitForQueue(w));
    QCOMPARE(after.size(), 4);
    for (const quint64 rss : after) {
      QVERIFY2(
          rss < baseline + 64 * kMiB,
          qPrintable(QStringLiteral("RSS %1 after a job, %2 before the queue")
                         .arg(MemoryChart::formatBytes(rss), MemoryChart::formatBytes(baseline))));
    }
    qInfo("RSS before the queue %s; after each job: %s %s %s %s",
          qPrintable(MemoryChart::formatBytes(baseline)),
          qPrintable(MemoryChart::formatBytes(after[0])),
          qPrintable(MemoryChart::formatBytes(after[1])),
          qPrintable(MemoryChart::formatBytes(after[2])),
          qPrintable(MemoryChart::formatBytes(after[3])));
  }
};

QTEST_MAIN(QueueTest)
#include "queue_test.moc"
