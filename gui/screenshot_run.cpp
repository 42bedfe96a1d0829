#include "gui/screenshot_run.h"

#include <QApplication>
#include <QDir>
#include <QListWidget>
#include <QSpinBox>
#include <QTabWidget>
#include <QTimer>
#include <cstdio>
#include <memory>
#include <utility>

#include "gui/frame_player.h"
#include "gui/history.h"
#include "gui/job_queue.h"
#include "gui/main_window.h"

namespace ferry::gui {
namespace {

void save(MainWindow& window, const QString& folder, const QString& name) {
  const QString path = QDir(folder).filePath(name);
  if (window.grab().save(path)) {
    std::printf("saved %s\n", qPrintable(QDir::toNativeSeparators(path)));
  } else {
    std::fprintf(stderr, "could not save %s\n", qPrintable(path));
  }
  std::fflush(stdout);
}

// Three more seeds queued: the queue mid-way (one done, one running, one waiting), then the
// history's gallery of the four videos.
void startQueue(MainWindow& window, const QString& folder) {
  auto shot = std::make_shared<bool>(false);
  QObject::connect(
      window.worker(), &GenerationWorker::step, &window,
      [&window, folder, shot](const StepInfo& info) {
        const auto& jobs = window.jobQueue()->jobs();
        if (*shot || info.step < 2 || jobs.size() < 2 || window.currentJob() != jobs[1].id) {
          return;
        }
        *shot = true;
        QTimer::singleShot(150, &window, [&window, folder] {
          save(window, folder, QStringLiteral("ferry-4-queue.png"));
        });
      });
  QObject::connect(&window, &MainWindow::queueStopped, &window, [&window, folder] {
    window.sidePanels()->setCurrentWidget(window.historyPanel());
    window.historyPanel()->setGridView(true);
    QListWidget* gallery = window.historyPanel()->list();
    gallery->setCurrentRow(1);
    emit gallery->itemClicked(gallery->currentItem());  // as a click: plays it
    QTimer::singleShot(1500, &window, [&window, folder] {
      window.player()->pause();
      save(window, folder, QStringLiteral("ferry-5-gallery.png"));
      QApplication::exit(0);
    });
  });
  GenerationSettings s = window.settings();
  s.prompt = QStringLiteral("a lighthouse on a cliff in the fog, waves below");
  s.steps = 4;
  s.seed = 100;
  window.applySettings(s);
  QTimer::singleShot(300, &window, [&window] {
    window.batchCount()->setValue(3);
    window.enqueue();
  });
}

void startRun(MainWindow& window, const QString& folder) {
  auto* worker = window.worker();
  auto mid = std::make_shared<bool>(false);
  QObject::connect(worker, &GenerationWorker::step, &window,
                   [&window, folder, mid](const StepInfo& info) {
                     if (*mid || info.step < 3) return;
                     *mid = true;
                     // After the charts' ≤ 10 Hz repaint has drawn this step.
                     QTimer::singleShot(150, &window, [&window, folder] {
                       save(window, folder, QStringLiteral("ferry-2-running.png"));
                     });
                   });
  auto done = std::make_shared<bool>(false);
  QObject::connect(worker, &GenerationWorker::framesLoaded, &window, [&window, folder, done] {
    if (std::exchange(*done, true)) return;
    QTimer::singleShot(700, &window, [&window, folder] {
      window.player()->pause();
      window.player()->seek(window.player()->frameCount() / 2);
      save(window, folder, QStringLiteral("ferry-3-done.png"));
      startQueue(window, folder);
    });
  });
  QObject::connect(&window, &MainWindow::generationEnded, &window, [&window, folder] {
    if (window.lastVideo().isEmpty()) {
      save(window, folder, QStringLiteral("ferry-3-failed.png"));
      std::fprintf(stderr, "the run failed: %s\n", qPrintable(window.lastMessage()));
      QApplication::exit(1);
    }
  });
  window.generate();
  if (window.state() != MainWindow::State::kRunning) {
    std::fprintf(stderr, "could not start: %s\n", qPrintable(window.lastMessage()));
    QApplication::exit(1);
  }
}

}  // namespace

void startScreenshotRun(MainWindow& window, const QString& folder) {
  QDir().mkpath(folder);
  // FERRY_SCREENSHOT_SIZE=1536x864 shows a 1080p laptop at 125 % scaling.
  const QStringList size = qEnvironmentVariable("FERRY_SCREENSHOT_SIZE", QStringLiteral("1500x940"))
                               .split(QLatin1Char('x'));
  window.resize(size.value(0).toInt() > 0 ? size.value(0).toInt() : 1500,
                size.value(1).toInt() > 0 ? size.value(1).toInt() : 940);
  QTimer::singleShot(300, &window, [&window, folder] {
    window.useDemoModel();
    GenerationSettings s = window.settings();
    s.prompt = QStringLiteral("a red ferry crossing a calm fjord at sunrise, cinematic");
    s.width = 256;
    s.height = 256;
    s.frames = 17;
    s.steps = 8;
    s.seed = 42;
    s.seedMode = SeedMode::kFixed;
    s.preset = QStringLiteral("laptop-8gb");
    window.applySettings(s);
    // Let the layouts and the preset panel settle before the first picture.
    QTimer::singleShot(500, &window, [&window, folder] {
      save(window, folder, QStringLiteral("ferry-1-ready.png"));
      startRun(window, folder);
    });
  });
}

}  // namespace ferry::gui
