// The main window as a user drives it, on the offscreen platform with the demo model on the CPU:
// bad inputs give messages (never crashes), the preset panel predicts what `ferry-cli plan` prints,
// a run updates the status bar, title and charts and lands in the history, whose items (and the
// MP4 itself) restore every setting, and a cancel brings the window back to idle with memory back
// near where it was and nothing written.
#include "gui/main_window.h"

#include <QAbstractScrollArea>
#include <QElapsedTimer>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMimeData>
#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QSemaphore>
#include <QSignalSpy>
#include <QStatusBar>
#include <QToolButton>
#include <QtTest/QtTest>
#include <atomic>

#include "core/media/video_reader.h"
#include "gui/advanced_box.h"
#include "gui/frame_player.h"
#include "gui/history.h"
#include "gui/job_queue.h"
#include "gui/memory_chart.h"
#include "gui/model_panel.h"
#include "gui/preset_panel.h"
#include "gui/start_image_box.h"
#include "tests/gui/gui_test_support.h"

using namespace ferry::gui;
using namespace ferry::gui::test;

namespace {

// ferry-cli's byte format (cli/inspect.cpp human_bytes), to compare the panel's numbers with the
// CLI's text.
QString humanBytes(quint64 bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return QStringLiteral("%1 B").arg(bytes);
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text,
                value < 10    ? "%.2f %s"
                : value < 100 ? "%.1f %s"
                              : "%.0f %s",
                value, kUnits[unit]);
  return QString::fromLatin1(text);
}

struct CliStage {
  int resident = -1, pinned = -1, disk = -1;
  QString vram, ram;
};

struct CliPlan {
  int exitCode = 0;
  QString error;
  QMap<QString, CliStage> stages;  // "text encoder", "diffusion model"
};

CliPlan runCliPlan(const QString& dataFolder, const QString& preset, int w, int h, int frames) {
  QProcess cli;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert(QStringLiteral("FERRY_DATA_DIR"), dataFolder);
  cli.setProcessEnvironment(env);
  cli.start(QStringLiteral(FERRY_CLI),
            {QStringLiteral("plan"), QStringLiteral("--model"), demoFolder(),
             QStringLiteral("--preset"), preset, QStringLiteral("--width"), QString::number(w),
             QStringLiteral("--height"), QString::number(h), QStringLiteral("--frames"),
             QString::number(frames), QStringLiteral("--vram-mib"), QStringLiteral("8192"),
             QStringLiteral("--ram-mib"), QStringLiteral("32768")});
  CliPlan plan;
  if (!cli.waitForFinished(60000)) return plan;
  plan.exitCode = cli.exitCode();
  plan.error = QString::fromUtf8(cli.readAllStandardError()).trimmed();
  QString stage;
  static const QRegularExpression section(QStringLiteral("^== ([^:]+):"));
  static const QRegularExpression count(
      QStringLiteral("^(resident on the [A-Z]+|cached in pinned RAM|streamed from disk): (\\d+) "
                     "groups"));
  static const QRegularExpression peaks(QStringLiteral("^predicted peaks: VRAM (.+), RAM (.+)$"));
  for (const QString& line : QString::fromUtf8(cli.readAllStandardOutput()).split('\n')) {
    if (const auto m = section.match(line); m.hasMatch()) {
      stage = m.captured(1);
    } else if (const auto c = count.match(line); c.hasMatch()) {
      CliStage& s = plan.stages[stage];
      const int n = c.captured(2).toInt();
      if (c.captured(1).startsWith(QLatin1String("resident"))) s.resident = n;
      if (c.captured(1).startsWith(QLatin1String("cached"))) s.pinned = n;
      if (c.captured(1).startsWith(QLatin1String("streamed"))) s.disk = n;
    } else if (const auto p = peaks.match(line); p.hasMatch()) {
      plan.stages[stage].vram = p.captured(1);
      plan.stages[stage].ram = p.captured(2);
    }
  }
  return plan;
}

void writePreset(const QString& dataFolder, const QString& name, int vramMib) {
  QDir().mkpath(QDir(dataFolder).filePath(QStringLiteral("presets")));
  QFile f(QDir(dataFolder).filePath(QStringLiteral("presets/%1.json").arg(name)));
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(QStringLiteral(R"({"name": "%1", "description": "a test preset", "vram_budget_mib": %2,
    "vram_headroom_mib": 0, "ram_budget_mib": 2048, "max_pinned_fraction_of_ram": 0.35,
    "staging_slots": 2, "staging_slot_mib": 2, "look_ahead": 1, "read_method": "direct",
    "chunk_tokens": 0, "vae_tile_px": 0})")
              .arg(name)
              .arg(vramMib)
              .toUtf8());
}

GenerationSettings demoSettings(int steps) {
  GenerationSettings s;
  s.prompt = QStringLiteral("a ferry crossing a fjord at dawn");
  s.model = {demoFolder()};
  s.width = 64;
  s.height = 64;
  s.frames = 5;
  s.fps = 8;
  s.steps = steps;
  s.guideScale = 5;
  s.shift = 5;
  s.sampler = QStringLiteral("unipc");
  s.seed = 1234;
  s.seedMode = SeedMode::kFixed;
  s.preset = QStringLiteral("cpu");
  return s;
}

MainWindowOptions options(const QTemporaryDir& data, ferry::offload::MachineInfo machine) {
  MainWindowOptions o;
  o.dataFolder = data.path();
  o.machine = machine;
  o.firstRunCheck = false;
  o.askBeforeClosing = false;
  return o;
}

// A copy of the demo model in `to` (its files in the same subfolders).
bool copyDemoModel(const QString& to) {
  const QDir from(demoFolder());
  for (const QString& file : filesEndingIn(demoFolder(), QString())) {
    const QString target = QDir(to).filePath(from.relativeFilePath(file));
    if (!QDir().mkpath(QFileInfo(target).absolutePath()) || !QFile::copy(file, target))
      return false;
  }
  return true;
}

// A Ferry MP4 made through the engine's API from the model in `modelFolder`.
QString makeClip(const QString& modelFolder, const QString& video, const QString& noise = {},
                 const QString& saveNoise = {}) {
  GenerationSettings s;
  s.prompt = QStringLiteral("a ferry at dawn");
  s.model = {modelFolder};
  s.width = s.height = 64;
  s.frames = 5;
  s.steps = 1;
  s.preset = QStringLiteral("cpu");
  s.noise = noise;
  auto request = s.toRequest(video);
  if (!saveNoise.isEmpty()) request.save_noise = toPath(saveNoise);
  const auto engine = session(cpuMachine());
  ferry::pipeline::ProgressSink sink;
  ferry::pipeline::CancelToken cancel;
  engine->run(*engine->find(request.model), request, sink, cancel);
  return video;
}

// The seconds of "ETA 12.5 s" or "ETA 2 min 05 s" in a status line; -1 when it has none.
double etaIn(const QString& status) {
  static const QRegularExpression eta(QStringLiteral("ETA (?:(\\d+) min (\\d+) s|(\\d+\\.\\d) s)"));
  const auto m = eta.match(status);
  if (!m.hasMatch()) return -1;
  if (!m.captured(3).isEmpty()) return m.captured(3).toDouble();
  return m.captured(1).toInt() * 60 + m.captured(2).toInt();
}

bool waitForIdle(MainWindow& w, int ms = 120000) {
  QElapsedTimer t;
  t.start();
  QTest::qWait(1);
  while (w.state() != MainWindow::State::kIdle && t.elapsed() < ms) QTest::qWait(10);
  return w.state() == MainWindow::State::kIdle;
}

}  // namespace

class MainWindowTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { demoFolder(); }

  // ---- bad inputs: messages, not crashes ----

  void an_empty_prompt_is_refused_with_a_message() {
    QTemporaryDir data;
    MainWindow w(options(data, cpuMachine()));
    GenerationSettings s = demoSettings(2);
    s.prompt = QStringLiteral("   ");
    w.applySettings(s);
    QVERIFY(settle(w));
    QVERIFY(w.generateEnabled());
    w.generate();
    QCOMPARE(w.state(), MainWindow::State::kIdle);
    QVERIFY2(w.lastMessage().contains(QLatin1String("prompt")), qPrintable(w.lastMessage()));
  }

  void a_missing_model_folder_disables_generate_with_the_reason() {
    QTemporaryDir data;
    MainWindow w(options(data, cpuMachine()));
    GenerationSettings s = demoSettings(2);
    s.model = {data.filePath(QStringLiteral("no-such-folder"))};
    w.applySettings(s);
    QVERIFY(settle(w));
    QVERIFY(!w.generateEnabled());
    QVERIFY2(w.generateBlockedReason().contains(QLatin1String("does not exist")),
             qPrintable(w.generateBlockedReason()));
    w.generate();
    QVERIFY(!w.lastMessage().isEmpty());
    QCOMPARE(w.state(), MainWindow::State::kIdle);

    // A folder with no model in it: the engine's words for what is missing.
    w.modelPanel()->setFolder(data.path());
    QVERIFY(settle(w));
    QVERIFY(!w.generateEnabled());
    QVERIFY(!w.modelPanel()->problem().isEmpty());
    QVERIFY(w.modelPanel()->descriptionText().contains(w.modelPanel()->problem()));
  }

  // The plan line says what the last model lookup found once the window has settled, whatever
  // order the lookups and the plan answered in. A slow drive: the demo folder's scan is held on
  // the lookup thread while no folder is chosen and its plan refused; then the scan returns (its
  // answer superseded). The line once kept "⚠ Looking for the model…": the answer "no folder"
  // came before the lookup that superseded the scan had finished, and nothing came after it.
  void the_plan_line_follows_the_last_model_lookup_however_they_finish() {
    QSemaphore drive;  // before the window: its lookup thread may wait on it until it closes
    std::atomic<bool> reading{false};
    QTemporaryDir data;
    MainWindow w(options(data, cpuMachine()));
    w.show();
    QVERIFY(settle(w));
    QLabel* planLine = nullptr;
    for (QLabel* l : w.findChildren<QLabel*>()) {
      if (l->accessibleName() == QLatin1String("Memory prediction")) planLine = l;
    }
    QVERIFY(planLine != nullptr);
    w.modelPanel()->setScanHook([&] {
      reading = true;
      drive.tryAcquire(1, 20000);  // held until released below (never forever)
    });
    w.modelPanel()->setFolder(demoFolder());
    QTRY_VERIFY(reading);  // the scan is on the drive: the next lookup cannot skip it
    w.modelPanel()->setFolder(QString());
    QTRY_VERIFY(!w.presetPanel()->planning());  // the plan for no model answered first
    QVERIFY(w.modelPanel()->scanning());
    drive.release(8);
    QVERIFY(settle(w));
    QVERIFY(!w.modelPanel()->model());
    QVERIFY2(w.modelPanel()->problem().startsWith(QLatin1String("No model folder chosen")),
             qPrintable(w.modelPanel()->problem()));
    QCOMPARE(w.generateBlockedReason(), w.modelPanel()->problem());
    QVERIFY2(!planLine->text().contains(QLatin1String("Looking for the model")),
             qPrintable(planLine->text()));
    // Said once, by the model panel (main_window.cpp updateGenerateButton).
    QVERIFY2(planLine->text().isEmpty(), qPrintable(planLine->text()));
  }

  void a_text_file_as_start_image_is_refused_with_a_message() {
    QTemporaryDir data;
    MainWindow w(options(data, cpuMachine()));
    w.applySettings(demoSettings(2));
    QVERIFY(settle(w));
    const QString text = data.filePath(QStringLiteral("notes.png"));
    QFile f(text);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("this is not an image\n");
    f.close();
    QVERIFY(!w.startImage()->setPath(text));
    QVERIFY(w.startImage()->path().isEmpty());
    QVERIFY(!w.lastMessage().isEmpty());
    QVERIFY(w.lastMessage().contains(QLatin1String("notes.png")));
  }

  // Issue 23 item 3: before a model is chosen the video settings show no made-up values (the
  // old first start showed 32×32 px, 1 frame, CFG 0.0, shift 0.1) and the missing model is said
  // once, by the model panel at the top, not again above the button and in the preset panel.
  void before_a_model_no_made_up_values_and_no_model_said_once() {
    QTemporaryDir data;
    MainWindow w(options(data, cpuMachine()));
    w.show();
    QVERIFY(settle(w));
    const QStringList fields = {QStringLiteral("Width"),
                                QStringLiteral("Height"),
                                QStringLiteral("Frames"),
                                QStringLiteral("Steps"),
                                QStringLiteral("Guidance scale (CFG)"),
                                QStringLiteral("Shift")};
    const auto shown = [&w](const QString& name) {
      for (QAbstractSpinBox* spin : w.findChildren<QAbstractSpinBox*>()) {
        if (spin->accessibleName() == name) return spin->text();
      }
      return QStringLiteral("(no field)");
    };
    for (const QString& field : fields) {
      QVERIFY2(shown(field) == QStringLiteral("—"), qPrintable(field + ": " + shown(field)));
    }
    static const QRegularExpression noModel(QStringLiteral("(No|Pick a) model folder"));
    QStringList saying;
    for (QLabel* label : w.findChildren<QLabel*>()) {
      if (label->isVisible() && label->text().contains(noModel)) saying << label->text();
    }
    QVERIFY2(saying.size() == 1, qPrintable(saying.join(QStringLiteral(" | "))));

    // The demo model's own defaults once it is found.
    w.useDemoModel();
    QVERIFY(settle(w));
    QVERIFY2(shown(QStringLiteral("Width")) != QStringLiteral("—"),
             qPrintable(shown(QStringLiteral("Width"))));
    QVERIFY(w.settings().width > 0);
    QVERIFY(w.settings().steps > 0);
  }

  // Issue 23 item 3: a problem is said once where the user looks (beside the Generate button, in
  // view however the settings scroll), not again in the status bar for 8 s.
  void a_problem_is_said_once_and_in_view() {
    QTemporaryDir data;
    MainWindow w(options(data, cpuMachine()));
    w.show();
    w.resize(1280, 650);
    GenerationSettings s = demoSettings(2);
    s.model = {data.filePath(QStringLiteral("no-such-folder"))};
    w.applySettings(s);
    QVERIFY(settle(w));
    const QString reason = w.generateBlockedReason();
    QVERIFY(!reason.isEmpty());
    w.generate();
    QCOMPARE(w.lastMessage(), reason);
    const auto saying = [&w](const QString& text) {
      int n = 0;
      for (QLabel* label : w.findChildren<QLabel*>()) {
        if (label->isVisible() && label->text().contains(text)) ++n;
      }
      return n;
    };
    QVERIFY(!w.statusBar()->currentMessage().contains(reason));
    QVERIFY2(!w.statusText().contains(reason), qPrintable(w.statusText()));
    // The model panel's line (the field) and the line above the button: no third copy.
    QVERIFY2(saying(reason) <= 2, qPrintable(QString::number(saying(reason))));

    // A bad start image: the message beside the button, wholly in view.
    w.applySettings(demoSettings(2));
    QVERIFY(settle(w));
    const QString text = data.filePath(QStringLiteral("notes.png"));
    QFile f(text);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("this is not an image\n");
    f.close();
    QVERIFY(!w.startImage()->setPath(text));
    QLabel* banner = nullptr;
    for (QLabel* label : w.findChildren<QLabel*>()) {
      if (label->accessibleName() == QLatin1String("Message")) banner = label;
    }
    QVERIFY(banner != nullptr);
    QVERIFY(banner->isVisible());
    QVERIFY(banner->text().contains(QLatin1String("notes.png")));
    const QRect inWindow(banner->mapTo(&w, QPoint()), banner->size());
    QVERIFY(w.rect().contains(inWindow));
    for (QWidget* p = banner->parentWidget(); p != nullptr && p != &w; p = p->parentWidget()) {
      QVERIFY2(qobject_cast<QAbstractScrollArea*>(p) == nullptr, "the banner scrolls away");
    }
    QVERIFY(!w.statusBar()->currentMessage().contains(QLatin1String("notes.png")));
  }

  void odd_sizes_and_frame_counts_are_refused_with_the_rule() {
    QTemporaryDir data;
    MainWindow w(options(data, cpuMachine()));
    GenerationSettings s = demoSettings(2);
    s.width = 100;
    w.applySettings(s);
    QVERIFY(settle(w));
    QVERIFY(!w.generateEnabled());
    QVERIFY2(w.generateBlockedReason().contains(QLatin1String("32")),
             qPrintable(w.generateBlockedReason()));
    s.width = 64;
    s.frames = 6;
    w.applySettings(s);
    QVERIFY(settle(w));
    QVERIFY(!w.generateEnabled());
    QVERIFY2(w.generateBlockedReason().contains(QLatin1String("4k+1")),
             qPrintable(w.generateBlockedReason()));
    w.generate();
    QCOMPARE(w.state(), MainWindow::State::kIdle);
    QVERIFY(!w.lastMessage().isEmpty());
  }

  void a_start_image_with_a_text_only_model_is_refused_before_the_run() {
    // The demo is TI2V; an image it accepts. An unreadable image path restored from history is
    // reported instead.
    QTemporaryDir data;
    MainWindow w(options(data, cpuMachine()));
    GenerationSettings s = demoSettings(2);
    s.image = data.filePath(QStringLiteral("gone.png"));
    w.applySettings(s);
    QVERIFY(settle(w));
    QVERIFY(w.lastMessage().contains(QLatin1String("gone.png")));
    QVERIFY(w.startImage()->path().isEmpty());
  }

  // ---- the preset panel predicts what ferry-cli plan prints ----

  void the_preset_panel_predicts_what_ferry_cli_plan_prints_data() {
    QTest::addColumn<QString>("preset");
    QTest::addColumn<int>("width");
    QTest::addColumn<int>("height");
    QTest::addColumn<int>("frames");
    for (const char* p :
         {"auto", "laptop-8gb", "laptop-6gb", "desktop-24gb", "cpu", "small-test", "tiny-test"}) {
      QTest::addRow("%s 256x256x17", p) << QString::fromLatin1(p) << 256 << 256 << 17;
      QTest::addRow("%s 64x128x5", p) << QString::fromLatin1(p) << 64 << 128 << 5;
    }
  }
  void the_preset_panel_predicts_what_ferry_cli_plan_prints() {
    QFETCH(QString, preset);
    QFETCH(int, width);
    QFETCH(int, height);
    QFETCH(int, frames);
    QTemporaryDir data;
    writePreset(data.path(), QStringLiteral("small-test"), 11);
    writePreset(data.path(), QStringLiteral("tiny-test"), 6);  // the DiT does not fit
    MainWindow w(options(data, laptopMachine()));
    GenerationSettings s = demoSettings(2);
    s.preset = preset;
    s.width = width;
    s.height = height;
    s.frames = frames;
    w.applySettings(s);
    QVERIFY(settle(w));
    PresetPanel* panel = w.presetPanel();
    QVERIFY(settle(w));
    QCOMPARE(panel->presetName(), preset);

    const CliPlan cli = runCliPlan(data.path(), preset, width, height, frames);
    const bool ditPlanned = !cli.stages.value(QStringLiteral("diffusion model")).vram.isEmpty();
    if (!ditPlanned) {
      // The CLI refused a stage the panel plans: the panel refuses too, with the same words.
      QCOMPARE(cli.exitCode, 3);
      QVERIFY(!panel->fits());
      QVERIFY(!w.generateEnabled());
      const QString planner = panel->refusal().section(QStringLiteral(": "), 1);
      QVERIFY2(cli.error.contains(planner), qPrintable(cli.error + " / " + panel->refusal()));
      return;
    }
    QVERIFY2(panel->fits(), qPrintable(panel->refusal()));
    const auto& plan = panel->plan();
    QVERIFY(plan.has_value());
    QCOMPARE(plan->stages.size(), std::size_t{3});  // text encoder, diffusion model, VAE decode
    for (const ferry::models::StagePlan& planned : plan->stages) {
      const ferry::models::StagePlan* stage = &planned;
      const QString name = QString::fromStdString(planned.stage);
      QVERIFY2(cli.stages.contains(name), qPrintable(name));
      const CliStage c = cli.stages.value(name);
      if (stage->groups != 0) {  // block stages; the VAE decode plans tiles
        QCOMPARE(static_cast<int>(stage->resident_groups), c.resident);
        QCOMPARE(static_cast<int>(stage->pinned_groups), c.pinned);
        QCOMPARE(static_cast<int>(stage->disk_groups), c.disk);
      }
      QCOMPARE(humanBytes(stage->predicted_vram_peak), c.vram);
      QCOMPARE(humanBytes(stage->predicted_ram_peak), c.ram);
    }
    QVERIFY(panel->summaryText().contains(QLatin1String("Fits")));
  }

  // ---- a run, the history, restoring ----

  void a_run_reports_progress_and_lands_in_the_history_that_restores_it() {
    QTemporaryDir data;
    MainWindow w(options(data, cpuMachine()));
    w.show();
    const GenerationSettings s = demoSettings(3);
    w.applySettings(s);
    QVERIFY(settle(w));
    QStringList titles, statuses;
    // Connected after the window's own slots: sees the window as the step left it.
    connect(w.worker(), &GenerationWorker::step, this, [&] {
      titles << w.windowTitle();
      statuses << w.statusText();
    });
    // The GUI thread keeps turning while the engine works.
    QElapsedTimer sinceTick;
    qint64 longestGap = 0;
    QTimer ticker;
    ticker.setInterval(10);
    connect(&ticker, &QTimer::timeout, this,
            [&] { longestGap = std::max(longestGap, sinceTick.restart()); });
    sinceTick.start();
    ticker.start();
    QVERIFY(w.generateEnabled());
    w.generate();
    QCOMPARE(w.state(), MainWindow::State::kRunning);
    QVERIFY(!w.generateEnabled());
    QVERIFY(waitForIdle(w));
    ticker.stop();
    QVERIFY2(w.lastMessage().isEmpty(), qPrintable(w.lastMessage()));
    QVERIFY(QFileInfo::exists(w.lastVideo()));
    QVERIFY2(longestGap < 1000, qPrintable(QString::number(longestGap)));

    QCOMPARE(titles.size(), 3);
    QVERIFY2(titles.back().startsWith(QStringLiteral("step 3/3 · ")), qPrintable(titles.back()));
    QVERIFY(titles.back().contains(QStringLiteral("/step · ETA")));
    QVERIFY(titles.back().endsWith(QStringLiteral(" — Ferry")));
    QVERIFY(statuses.front().startsWith(QLatin1String("step 1/3")));
    QCOMPARE(w.windowTitle(), QStringLiteral("Ferry"));
    QVERIFY(w.statusText().startsWith(QLatin1String("Done")));
    QCOMPARE(w.ramChart()->sampleCount(), 3);
    QVERIFY(w.ramChart()->peak() > 0);

    // The frames reach the player, and the run reaches the history with a thumbnail.
    QTRY_COMPARE_WITH_TIMEOUT(w.historyPanel()->count(), 1, 30000);
    QCOMPARE(w.player()->frameCount(), 5);
    const HistoryStore store(QDir(data.path()).filePath(QStringLiteral("history")));
    const HistoryItem item = store.items().front();
    QVERIFY(QFileInfo::exists(item.thumbnail));
    QCOMPARE(item.video, w.lastVideo());

    // Change everything, then restore from the history item.
    GenerationSettings other = demoSettings(7);
    other.prompt = QStringLiteral("something else");
    other.seed = 1;
    other.width = 128;
    other.frames = 9;
    other.sampler = QStringLiteral("euler");
    w.applySettings(other);
    QVERIFY(settle(w));
    QCOMPARE(w.settings().prompt, other.prompt);
    emit w.historyPanel()->list()->itemActivated(w.historyPanel()->list()->item(0));
    GenerationSettings restored = w.settings();
    QCOMPARE(restored, s);

    // And from the MP4 itself, as when it is dropped on the window.
    w.applySettings(other);
    QVERIFY(settle(w));
    QVERIFY(w.openVideo(w.lastVideo()));
    QVERIFY(settle(w));
    restored = w.settings();
    restored.seedMode = s.seedMode;  // the video does not say how the seed was chosen
    QCOMPARE(restored, s);

    // Dropped on the window.
    w.applySettings(other);
    QVERIFY(settle(w));
    QMimeData mime;
    mime.setUrls({QUrl::fromLocalFile(w.lastVideo())});
    QDragEnterEvent enter(QPoint(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(&w, &enter);
    QVERIFY(enter.isAccepted());
    QDropEvent drop(QPointF(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(&w, &drop);
    restored = w.settings();
    restored.seedMode = s.seedMode;
    QCOMPARE(restored, s);
    QTRY_COMPARE_WITH_TIMEOUT(w.player()->frameCount(), 5, 30000);
  }

  // Issue 23 item 5: the status bar's ETA is the whole job's. At the last denoising step the
  // decode is still ahead (the old ETA read 0 there, then the decode ran under a busy bar), the
  // decode stage itself shows a time left, and the end says how long the whole job took. A second
  // run of the same size knows its whole time before its first step, from the first's stages.
  void the_eta_counts_the_decode_and_the_end_says_the_elapsed_time() {
    QTemporaryDir data;
    MainWindow w(options(data, cpuMachine()));
    w.applySettings(demoSettings(3));
    QVERIFY(settle(w));
    QString atLastStep, atDecode, atText;
    connect(w.worker(), &GenerationWorker::step, this, [&](const StepInfo& info) {
      if (info.step == info.steps) atLastStep = w.statusText();
    });
    connect(w.worker(), &GenerationWorker::stageChanged, this, [&](int stage, const QString&) {
      if (stage == static_cast<int>(ferry::pipeline::Stage::kDecode)) atDecode = w.statusText();
      if (stage == static_cast<int>(ferry::pipeline::Stage::kText)) atText = w.statusText();
    });
    w.generate();
    QVERIFY(waitForIdle(w));
    QVERIFY2(w.lastMessage().isEmpty(), qPrintable(w.lastMessage()));
    QVERIFY2(etaIn(atLastStep) > 0, qPrintable(atLastStep));
    QVERIFY2(atDecode.startsWith(QStringLiteral("Decoding the video…")), qPrintable(atDecode));
    QVERIFY2(etaIn(atDecode) > 0, qPrintable(atDecode));
    QVERIFY2(etaIn(atText) < 0, qPrintable(atText));  // the first run: nothing measured yet
    static const QRegularExpression done(QStringLiteral("^Done in (\\d+\\.\\d) s: "));
    QVERIFY2(done.match(w.statusText()).hasMatch(), qPrintable(w.statusText()));

    w.generate();
    QVERIFY(waitForIdle(w));
    QVERIFY2(etaIn(atText) > 0, qPrintable(atText));
    QVERIFY2(done.match(w.statusText()).hasMatch(), qPrintable(w.statusText()));
  }

  // Issue 23 item 8: the model's default negative prompt is text to edit (typing "blurry" adds
  // to it instead of silently replacing it), with a one-click reset; left as shown, the request
  // leaves it to the engine's default.
  void the_default_negative_prompt_is_editable_text_with_a_reset() {
    QTemporaryDir data;
    MainWindow w(options(data, cpuMachine()));
    w.applySettings(demoSettings(2));
    QVERIFY(settle(w));
    QPlainTextEdit* negative = nullptr;
    for (QPlainTextEdit* e : w.findChildren<QPlainTextEdit*>()) {
      if (e->accessibleName() == QLatin1String("Negative prompt")) negative = e;
    }
    QPushButton* reset = nullptr;
    for (QPushButton* b : w.findChildren<QPushButton*>()) {
      if (b->accessibleName() == QLatin1String("Reset the negative prompt")) reset = b;
    }
    QVERIFY(negative != nullptr);
    QVERIFY(reset != nullptr);
    const QString official = negative->toPlainText();
    QVERIFY2(official.size() > 20, qPrintable(official));
    QVERIFY(!reset->isEnabled());
    QVERIFY(w.settings().negativePrompt.isEmpty());

    negative->moveCursor(QTextCursor::End);
    QTest::keyClicks(negative, QStringLiteral(", blurry"));
    QCOMPARE(w.settings().negativePrompt, official + QStringLiteral(", blurry"));
    QVERIFY(reset->isEnabled());
    QTest::mouseClick(reset, Qt::LeftButton);
    QCOMPARE(negative->toPlainText(), official);
    QVERIFY(w.settings().negativePrompt.isEmpty());
    QVERIFY(!reset->isEnabled());
  }

  // Issue 23 item 4: a click on a history item plays its video and shows its settings
  // read-only, the window's settings untouched; "Use these settings" puts them back, and Undo
  // restore brings back what was there.
  void a_history_click_plays_and_shows_settings_and_use_these_settings_can_be_undone() {
    QTemporaryDir data;
    MainWindow w(options(data, cpuMachine()));
    w.show();
    GenerationSettings made = demoSettings(1);
    made.prompt = QStringLiteral("a lighthouse in the fog");
    made.seed = 777;
    w.applySettings(made);
    QVERIFY(settle(w));
    w.generate();
    QVERIFY(waitForIdle(w));
    QTRY_COMPARE_WITH_TIMEOUT(w.historyPanel()->count(), 1, 30000);
    const QString video = w.lastVideo();

    GenerationSettings other = demoSettings(2);
    other.prompt = QStringLiteral("a city at night");
    other.seed = 5;
    w.applySettings(other);
    QVERIFY(settle(w));
    w.player()->clear(QStringLiteral("nothing"));
    QCOMPARE(w.player()->frameCount(), 0);

    QListWidget* list = w.historyPanel()->list();
    QListWidgetItem* item = list->item(0);
    QTest::mouseClick(list->viewport(), Qt::LeftButton, {}, list->visualItemRect(item).center());
    QTRY_COMPARE_WITH_TIMEOUT(w.player()->frameCount(), 5, 30000);
    QCOMPARE(w.lastVideo(), video);
    QCOMPARE(w.settings().prompt, other.prompt);  // a click changes no setting
    QPlainTextEdit* details = nullptr;
    for (QPlainTextEdit* e : w.historyPanel()->findChildren<QPlainTextEdit*>()) {
      if (e->accessibleName() == QLatin1String("Settings of the chosen video")) details = e;
    }
    QVERIFY(details != nullptr);
    QVERIFY(details->isVisible());
    QVERIFY(details->isReadOnly());
    QVERIFY2(details->toPlainText().contains(made.prompt), qPrintable(details->toPlainText()));
    QVERIFY(details->toPlainText().contains(QLatin1String("Seed: 777")));

    QPushButton* use = nullptr;
    for (QPushButton* b : w.historyPanel()->findChildren<QPushButton*>()) {
      if (b->text() == QLatin1String("Use these settings")) use = b;
    }
    QVERIFY(use != nullptr);
    QTest::mouseClick(use, Qt::LeftButton);
    QVERIFY(settle(w));
    QCOMPARE(w.settings().prompt, made.prompt);
    QCOMPARE(w.settings().seed, quint64{777});
    QVERIFY(w.canUndoRestore());
    w.undoRestore();
    QVERIFY(settle(w));
    QCOMPARE(w.settings().prompt, other.prompt);
    QCOMPARE(w.settings().seed, quint64{5});
  }

  // Issue 23's gallery: the history as a grid of thumbnails, one per run; a search of the
  // prompts filters it (and the list); a click plays the clip and shows its settings read-only
  // with "Use these settings".
  void the_gallery_shows_a_thumbnail_per_run_filters_by_prompt_and_plays_a_click() {
    QTemporaryDir data;
    MainWindow w(options(data, cpuMachine()));
    w.show();
    w.applySettings(demoSettings(1));
    QVERIFY(settle(w));
    const QStringList prompts = {QStringLiteral("a red ferry at dawn"),
                                 QStringLiteral("a lighthouse in the fog"),
                                 QStringLiteral("a red kite over the sea")};
    for (int i = 0; i < prompts.size(); ++i) {
      GenerationSettings s = demoSettings(1);
      s.prompt = prompts[i];
      s.seed = 10 + i;
      w.jobQueue()->add(s, QStringLiteral("seed %1").arg(s.seed));
    }
    QSignalSpy stopped(&w, &MainWindow::queueStopped);
    w.runQueue();
    QVERIFY(stopped.wait(120000));
    QCOMPARE(w.historyPanel()->count(), 3);

    HistoryPanel* history = w.historyPanel();
    QToolButton* grid = nullptr;
    for (QToolButton* b : history->findChildren<QToolButton*>()) {
      if (b->text() == QLatin1String("Grid")) grid = b;
    }
    QVERIFY(grid != nullptr);
    QTest::mouseClick(grid, Qt::LeftButton);
    QVERIFY(history->gridView());
    QListWidget* list = history->list();
    QCOMPARE(list->viewMode(), QListView::IconMode);
    QCOMPARE(history->shownCount(), 3);
    // One thumbnail per run, side by side in rows (not one under the other).
    for (int i = 0; i < 3; ++i) QVERIFY(!list->item(i)->icon().isNull());
    QTRY_VERIFY2(
        list->visualItemRect(list->item(0)).top() == list->visualItemRect(list->item(1)).top(),
        qPrintable(
            QStringLiteral("a column of thumbnails in %1 px").arg(list->viewport()->width())));

    QLineEdit* search = nullptr;
    for (QLineEdit* e : history->findChildren<QLineEdit*>()) {
      if (e->accessibleName() == QLatin1String("Search the history by prompt")) search = e;
    }
    QVERIFY(search != nullptr);
    QTest::keyClicks(search, QStringLiteral("RED"));
    QCOMPARE(history->shownCount(), 2);
    QVERIFY(list->item(1)->isHidden());  // newest first: the lighthouse is the second
    history->setGridView(false);         // the list is filtered the same way
    QCOMPARE(history->shownCount(), 2);
    QVERIFY(list->item(1)->isHidden());
    history->setGridView(true);
    search->clear();
    QTest::keyClicks(search, QStringLiteral("lighthouse"));
    QCOMPARE(history->shownCount(), 1);

    w.player()->clear(QStringLiteral("nothing"));
    QListWidgetItem* item = list->item(1);
    QTest::mouseClick(list->viewport(), Qt::LeftButton, {}, list->visualItemRect(item).center());
    QTRY_COMPARE_WITH_TIMEOUT(w.player()->frameCount(), 5, 30000);
    QVERIFY2(history->settingsText().contains(prompts[1]), qPrintable(history->settingsText()));
    QVERIFY(history->settingsText().contains(QLatin1String("Seed: 11")));
    QPushButton* use = nullptr;
    for (QPushButton* b : history->findChildren<QPushButton*>()) {
      if (b->text() == QLatin1String("Use these settings")) use = b;
    }
    QVERIFY(use != nullptr && use->isEnabled());
    QTest::mouseClick(use, Qt::LeftButton);
    QVERIFY(settle(w));
    QCOMPARE(w.settings().prompt, prompts[1]);
    QCOMPARE(w.settings().seed, quint64{11});
  }

  void a_clip_restores_its_start_and_end_images_from_beside_it() {
    QTemporaryDir data;
    QTemporaryDir clips;
    QImage image(48, 32, QImage::Format_RGB888);
    image.fill(Qt::darkYellow);
    QVERIFY(image.save(clips.filePath(QStringLiteral("first.png"))));
    QVERIFY(image.save(clips.filePath(QStringLiteral("last.png"))));
    MainWindow w(options(data, cpuMachine()));
    w.applySettings(demoSettings(1));
    QVERIFY(settle(w));
    QJsonObject json = demoSettings(1).toJson();
    json[QStringLiteral("image")] = QStringLiteral("first.png");
    json[QStringLiteral("end_image")] = QStringLiteral("last.png");
    json[QStringLiteral("low_noise_guide_scale")] = 3.0;
    const QString clip = clips.filePath(QStringLiteral("a14b.mp4"));
    QString why;
    const auto s = GenerationSettings::fromClip(QJsonDocument(json).toJson(), clip, &why);
    QVERIFY2(s.has_value(), qPrintable(why));
    QCOMPARE(s->lowNoiseGuideScale, 3.0);
    w.applySettings(*s, clip);
    QCOMPARE(w.settings().image, clips.filePath(QStringLiteral("first.png")));
    QCOMPARE(w.settings().endImage, clips.filePath(QStringLiteral("last.png")));
    // An end image gone from beside the clip is named, and the box is left empty.
    QVERIFY(QFile::remove(clips.filePath(QStringLiteral("last.png"))));
    w.applySettings(*s, clip);
    QVERIFY2(w.lastMessage().contains(QLatin1String("last.png")), qPrintable(w.lastMessage()));
    QVERIFY(w.settings().endImage.isEmpty());
  }

  void restoring_a_run_makes_it_again_frame_for_frame() {
    // Issue 23 item 2: a run made with "random each time", restored from the history or from its
    // MP4, and generated again, gives the same frames (the seed restored fixed, not rolled anew).
    QTemporaryDir data;
    MainWindow w(options(data, cpuMachine()));
    GenerationSettings s = demoSettings(2);
    s.seedMode = SeedMode::kRandom;
    w.applySettings(s);
    QVERIFY(settle(w));
    w.generate();
    QVERIFY(waitForIdle(w));
    QVERIFY2(w.lastMessage().isEmpty(), qPrintable(w.lastMessage()));
    QTRY_COMPARE_WITH_TIMEOUT(w.historyPanel()->count(), 1, 30000);
    const QString first = w.lastVideo();
    const auto frames = [](const QString& video) {
      return ferry::media::read_video_frames(toPath(video), 100);
    };
    const auto original = frames(first);
    QCOMPARE(original.size(), std::size_t{5});

    GenerationSettings other = demoSettings(1);
    other.prompt = QStringLiteral("something else");
    other.seed = 1;
    w.applySettings(other);
    QVERIFY(settle(w));
    // The history: the item's settings, seed fixed; undo brings back what was replaced.
    emit w.historyPanel()->list()->itemActivated(w.historyPanel()->list()->item(0));
    QVERIFY(settle(w));
    QCOMPARE(w.settings().seedMode, SeedMode::kFixed);
    QVERIFY(w.canUndoRestore());
    w.undoRestore();
    QVERIFY(settle(w));
    QCOMPARE(w.settings(), other);
    emit w.historyPanel()->list()->itemActivated(w.historyPanel()->list()->item(0));
    QVERIFY(settle(w));
    w.generate();
    QVERIFY(waitForIdle(w));
    QVERIFY2(w.lastMessage().isEmpty(), qPrintable(w.lastMessage()));
    QVERIFY(w.lastVideo() != first);
    const auto again = frames(w.lastVideo());
    QCOMPARE(again.size(), original.size());
    // Two encodes of the same frames give the same file (the writer is reproducible), so the same
    // frames read back.
    for (std::size_t i = 0; i < original.size(); ++i) {
      QVERIFY2(again[i].rgb == original[i].rgb, qPrintable(QStringLiteral("frame %1").arg(i)));
    }

    // The MP4 alone (dropped on the window, or opened) does the same.
    QTRY_COMPARE_WITH_TIMEOUT(w.historyPanel()->count(), 2, 30000);
    w.applySettings(other);
    QVERIFY(settle(w));
    QVERIFY(w.openVideo(first));
    QVERIFY(settle(w));
    QCOMPARE(w.settings().seedMode, SeedMode::kFixed);
    w.generate();
    QVERIFY(waitForIdle(w));
    QVERIFY2(w.lastMessage().isEmpty(), qPrintable(w.lastMessage()));
    const auto fromClip = frames(w.lastVideo());
    QCOMPARE(fromClip.size(), original.size());
    for (std::size_t i = 0; i < original.size(); ++i) {
      QVERIFY2(fromClip[i].rgb == original[i].rgb, qPrintable(QStringLiteral("frame %1").arg(i)));
    }
  }

  // ---- replays (the Advanced section) and restoring clips on another machine ----

  void the_advanced_settings_reach_the_run() {
    QTemporaryDir data;
    MainWindow w(options(data, cpuMachine()));
    QVERIFY(!w.advancedBox()->expanded());  // collapsed until asked for
    GenerationSettings s = demoSettings(1);
    s.saveNoise = true;
    s.saveLatents = true;
    s.saveTextStates = true;
    w.applySettings(s);
    QVERIFY(settle(w));
    QCOMPARE(w.settings(), s);
    // Open, it still fits the left column of a 1280×720 window (about 480 px wide).
    QVERIFY(w.advancedBox()->expanded());
    QVERIFY2(w.advancedBox()->minimumSizeHint().width() <= 460,
             qPrintable(QString::number(w.advancedBox()->minimumSizeHint().width())));
    w.generate();
    QVERIFY(waitForIdle(w));
    QVERIFY2(w.lastMessage().isEmpty(), qPrintable(w.lastMessage()));
    const QString noise = defaultSavePath(w.lastVideo(), QStringLiteral("noise"));
    const QString latents = defaultSavePath(w.lastVideo(), QStringLiteral("latents"));
    QVERIFY2(QFileInfo::exists(noise), qPrintable(noise));
    QVERIFY2(QFileInfo::exists(latents), qPrintable(latents));
    QVERIFY(noise.endsWith(QFileInfo(w.lastVideo()).completeBaseName() +
                           QStringLiteral(".noise.safetensors")));

    // The noise file loaded for the next run reaches it: its clip says where its noise came from.
    QTRY_COMPARE_WITH_TIMEOUT(w.historyPanel()->count(), 1, 30000);
    const QString first = w.lastVideo();
    s.saveNoise = s.saveLatents = s.saveTextStates = false;
    s.noise = noise;
    w.applySettings(s);
    QVERIFY(settle(w));
    QCOMPARE(w.settings().noise, noise);
    w.generate();
    QVERIFY(waitForIdle(w));
    QVERIFY2(w.lastMessage().isEmpty(), qPrintable(w.lastMessage()));
    QVERIFY(w.lastVideo() != first);
    const auto clip = GenerationSettings::fromVideo(w.lastVideo());
    QVERIFY(clip.has_value());
    QCOMPARE(clip->noiseFile.name, QFileInfo(noise).fileName());
  }

  void restoring_a_clip_made_from_a_noise_file_says_so() {
    QTemporaryDir data;
    QTemporaryDir clips;
    const QString noise = clips.filePath(QStringLiteral("replay.noise.safetensors"));
    makeClip(demoFolder(), clips.filePath(QStringLiteral("seeded.mp4")), {}, noise);
    const QString video =
        makeClip(demoFolder(), clips.filePath(QStringLiteral("replayed.mp4")), noise);
    MainWindow w(options(data, cpuMachine()));
    w.applySettings(demoSettings(1));
    QVERIFY(settle(w));
    QVERIFY(w.advancedBox()->noise().isEmpty());

    // Beside the clip, with the same fingerprint: named and filled in.
    QVERIFY(w.openVideo(video));
    QVERIFY(settle(w));
    QVERIFY2(w.lastMessage().isEmpty(), qPrintable(w.lastMessage()));
    QVERIFY2(w.restoreNotice().contains(QLatin1String("replay.noise.safetensors")),
             qPrintable(w.restoreNotice()));
    QCOMPARE(w.settings().noise, noise);
    QVERIFY(w.advancedBox()->expanded());

    // Gone (and nowhere else): the user hears the seed alone will not make it again.
    QVERIFY(QFile::rename(noise, clips.filePath(QStringLiteral("moved.safetensors"))));
    w.advancedBox()->setNoise(QString());
    QVERIFY(w.openVideo(video));
    QVERIFY(settle(w));
    QVERIFY2(w.lastMessage().contains(QLatin1String("replay.noise.safetensors")),
             qPrintable(w.lastMessage()));
    QVERIFY2(w.lastMessage().contains(QLatin1String("seed alone will not reproduce")),
             qPrintable(w.lastMessage()));
    QVERIFY(w.settings().noise.isEmpty());

    // A file of that name with other contents is not it.
    QFile other(noise);
    QVERIFY(other.open(QIODevice::WriteOnly));
    other.write("not the noise");
    other.close();
    QVERIFY(w.openVideo(video));
    QVERIFY(settle(w));
    QVERIFY(w.lastMessage().contains(QLatin1String("seed alone will not reproduce")));
    QVERIFY(w.settings().noise.isEmpty());
  }

  void restoring_a_clip_finds_its_model_by_file_name_in_a_renamed_folder() {
    QTemporaryDir data;
    QTemporaryDir root;
    const QString original = root.filePath(QStringLiteral("wan-original"));
    QVERIFY(copyDemoModel(original));
    const QString video = makeClip(original, root.filePath(QStringLiteral("clip.mp4")));
    // The user moved and renamed the model since; the window points at the folder above it.
    const QString models = root.filePath(QStringLiteral("models"));
    const QString renamed = QDir(models).filePath(QStringLiteral("wan renamed"));
    QVERIFY(QDir().mkpath(models));
    QVERIFY(QDir().rename(original, renamed));

    MainWindow w(options(data, cpuMachine()));
    GenerationSettings s = demoSettings(1);
    s.model = {models};
    w.applySettings(s);
    QVERIFY(settle(w));
    QVERIFY(!QFileInfo::exists(original));

    QVERIFY(w.openVideo(video));
    QVERIFY(settle(w));
    QVERIFY2(w.lastMessage().isEmpty(), qPrintable(w.lastMessage()));
    QCOMPARE(QDir::fromNativeSeparators(w.modelPanel()->folder()), renamed);
    QVERIFY(w.modelPanel()->model());
    QVERIFY2(w.restoreNotice().contains(QDir::toNativeSeparators(renamed)),
             qPrintable(w.restoreNotice()));
    QCOMPARE(w.settings().prompt, QStringLiteral("a ferry at dawn"));
    QCOMPARE(w.settings().steps, 1);
    QVERIFY(w.generateEnabled());

    // A file the clip names is gone: the window names it and keeps the model it has.
    const auto clip = GenerationSettings::fromVideo(video);
    QVERIFY(clip.has_value());
    const QString gone = clip->modelFiles.back().name;
    const QStringList copies = filesEndingIn(renamed, QLatin1Char('/') + gone);
    QCOMPARE(copies.size(), 1);
    QVERIFY(QFile::rename(copies.front(), copies.front() + QStringLiteral(".bak")));
    w.modelPanel()->setFolder(models);
    QVERIFY(settle(w));
    QVERIFY(w.openVideo(video));
    QVERIFY(settle(w));
    QVERIFY2(w.lastMessage().contains(gone), qPrintable(w.lastMessage()));
    QVERIFY2(w.lastMessage().contains(QLatin1String("missing")), qPrintable(w.lastMessage()));
    QCOMPARE(QDir::fromNativeSeparators(w.modelPanel()->folder()), models);
  }

  void increment_mode_moves_the_seed_on_after_a_run() {
    QTemporaryDir data;
    MainWindow w(options(data, cpuMachine()));
    GenerationSettings s = demoSettings(1);
    s.seedMode = SeedMode::kIncrement;
    s.seed = 41;
    w.applySettings(s);
    QVERIFY(settle(w));
    w.generate();
    QVERIFY(waitForIdle(w));
    QCOMPARE(w.settings().seed, quint64{42});
  }

  // ---- a crash report from the last run ----

  void a_crash_report_from_the_last_run_is_mentioned_once() {
    QTemporaryDir data;
    QVERIFY(QDir().mkpath(data.filePath(QStringLiteral("logs"))));
    const QString report = data.filePath(
        QStringLiteral("logs/crash-%1-42.txt").arg(QDateTime::currentSecsSinceEpoch() - 60));
    QFile file(report);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("Ferry crashed: signal 11\n");
    file.close();
    {
      MainWindow w(options(data, cpuMachine()));
      QVERIFY2(w.lastMessage().contains(QLatin1String("closed unexpectedly")),
               qPrintable(w.lastMessage()));
      QVERIFY(w.lastMessage().contains(QDir::toNativeSeparators(report)));
    }
    MainWindow again(options(data, cpuMachine()));
    QVERIFY2(again.lastMessage().isEmpty(), qPrintable(again.lastMessage()));
  }

  // ---- cancel ----

  void cancel_mid_run_returns_to_idle_with_memory_back_and_nothing_written() {
    QTemporaryDir data;
    MainWindow w(options(data, cpuMachine()));
    w.applySettings(demoSettings(2));
    QVERIFY(settle(w));
    // A first run warms up what stays for the process's life (code, thread pools, fonts).
    w.generate();
    QVERIFY(waitForIdle(w));
    QTRY_COMPARE_WITH_TIMEOUT(w.historyPanel()->count(), 1, 30000);
    const QStringList before = filesEndingIn(data.path(), QString());
    const quint64 baseline = residentBytes();

    w.applySettings(demoSettings(40));

    QVERIFY(settle(w));
    connect(w.worker(), &GenerationWorker::step, &w, [&w](const StepInfo& info) {
      if (info.step == 2) w.cancel();
    });
    QSignalSpy ended(&w, &MainWindow::generationEnded);
    w.generate();
    QCOMPARE(w.state(), MainWindow::State::kRunning);
    QVERIFY(ended.wait(120000));
    QCOMPARE(w.state(), MainWindow::State::kIdle);
    QVERIFY(w.statusText().startsWith(QLatin1String("Cancelled")));
    QCOMPARE(w.windowTitle(), QStringLiteral("Ferry"));
    QVERIFY(w.generateEnabled());
    QVERIFY(w.ramChart()->sampleCount() < 40);
    // Nothing new, nothing partial — but the run's log, which says it was cancelled.
    QStringList now = filesEndingIn(data.path(), QString());
    const QStringList newLogs = [&] {
      QStringList logs;
      for (const QString& f : now) {
        if (!before.contains(f)) logs << f;
      }
      return logs;
    }();
    QCOMPARE(newLogs.size(), 1);
    QVERIFY(newLogs.front().endsWith(QLatin1String(".log")));
    QFile log(newLogs.front());
    QVERIFY(log.open(QIODevice::ReadOnly));
    QVERIFY(QString::fromUtf8(log.readAll()).trimmed().endsWith(QLatin1String("cancelled")));
    now.removeOne(newLogs.front());
    QCOMPARE(now, before);
    QCOMPARE(w.historyPanel()->count(), 1);
    const quint64 after = residentBytes();
    QVERIFY2(
        after < baseline + 64 * kMiB,
        qPrintable(QStringLiteral("RSS %1 after, %2 before")
                       .arg(MemoryChart::formatBytes(after), MemoryChart::formatBytes(baseline))));
  }

  void closing_during_a_run_cancels_it_then_closes() {
    QTemporaryDir data;
    MainWindow w(options(data, cpuMachine()));
    w.show();
    w.applySettings(demoSettings(40));
    QVERIFY(settle(w));
    QSignalSpy ended(&w, &MainWindow::generationEnded);
    QSignalSpy firstStep(w.worker(), &GenerationWorker::step);
    w.generate();
    QTRY_VERIFY_WITH_TIMEOUT(firstStep.count() > 0, 60000);  // recorded on the worker thread
    w.close();
    QVERIFY(w.isVisible());  // still running: the close waits for the engine to stop
    QVERIFY(ended.wait(60000));
    QTRY_VERIFY(!w.isVisible());
    QVERIFY(
        filesEndingIn(QDir(data.path()).filePath(QStringLiteral("videos")), QString()).isEmpty());
  }

  void settings_persist_across_windows() {
    QTemporaryDir data;
    GenerationSettings s = demoSettings(6);
    s.prompt = QStringLiteral("persisted prompt");
    s.seed = 777;
    {
      MainWindow w(options(data, cpuMachine()));
      w.applySettings(s);
      QVERIFY(settle(w));
      w.close();
    }
    MainWindow w(options(data, cpuMachine()));
    QCOMPARE(w.settings(), s);
  }
};

QTEST_MAIN(MainWindowTest)
#include "main_window_test.moc"
