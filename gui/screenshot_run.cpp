#include "gui/screenshot_run.h"

#include <QApplication>
#include <QDir>
#include <QTimer>
#include <cstdio>
#include <memory>

#include "gui/frame_player.h"
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
  QObject::connect(worker, &GenerationWorker::framesLoaded, &window, [&window, folder] {
    QTimer::singleShot(700, &window, [&window, folder] {
      window.player()->pause();
      window.player()->seek(window.player()->frameCount() / 2);
      save(window, folder, QStringLiteral("ferry-3-done.png"));
      QApplication::exit(0);
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
