// The window's smaller parts: the frame player's controls, the start image box, the first-run
// verdict, the preset panel on a machine without a GPU, the model panel (its scan off the GUI
// thread, the newest folder winning), the video settings following the engine's rules (a Wan 2.1
// model takes sizes that are multiples of 16), and the keyboard: every input has an accessible
// name and no two mnemonics in the window collide.
#include <QAbstractButton>
#include <QAbstractSpinBox>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QPlainTextEdit>
#include <QSlider>
#include <QSpinBox>
#include <QTabWidget>
#include <QtTest/QtTest>
#include <atomic>
#include <filesystem>

#include "core/io/safetensors_writer.h"
#include "core/models/wan/dit_layout.h"
#include "gui/frame_player.h"
#include "gui/machine_check.h"
#include "gui/main_window.h"
#include "gui/model_panel.h"
#include "gui/preset_panel.h"
#include "gui/start_image_box.h"
#include "gui/video_settings_box.h"
#include "tests/gui/gui_test_support.h"

using namespace ferry::gui;
using namespace ferry::gui::test;

namespace {

QVector<QImage> frames(int n) {
  QVector<QImage> out;
  for (int i = 0; i < n; ++i) {
    QImage f(32, 16, QImage::Format_RGB888);
    f.fill(QColor::fromHsv(i * 60 % 360, 200, 200));
    out.push_back(f);
  }
  return out;
}

QChar mnemonic(const QString& text) {
  for (qsizetype i = 0; i + 1 < text.size(); ++i) {
    if (text[i] == QLatin1Char('&')) {
      if (text[i + 1] == QLatin1Char('&')) {
        ++i;
        continue;
      }
      return text[i + 1].toLower();
    }
  }
  return {};
}

// A Wan 2.1 T2V set: a one-block DiT with 16 latent channels reading the tiny umT5's 64-wide
// output (zeros: only names and shapes are read), and the umT5 and Wan 2.1 VAE fixtures.
QString writeWan21Model(const QTemporaryDir& dir) {
  namespace fs = std::filesystem;
  const fs::path folder = toPath(dir.filePath(QStringLiteral("wan21")));
  fs::create_directories(folder);
  ferry::models::wan::DitConfig c{"tiny", 256, 512, 1, 16, 16};
  c.text_dim = 64;
  ferry::io::write_safetensors(folder / "wan2.1_t2v_tiny.safetensors",
                               ferry::models::wan::dit_tensors(c, ferry::DType::kBF16), {},
                               [](std::size_t, std::uint64_t, std::span<std::byte> out) {
                                 std::fill(out.begin(), out.end(), std::byte{0});
                               });
  const fs::path data = FERRY_TEST_DATA_DIR;
  fs::copy_file(data / "umt5/encoder/comfy_fp16.safetensors", folder / "umt5.safetensors");
  fs::copy_file(data / "wan/vae/wan21_tiny.safetensors", folder / "wan2.1_vae.safetensors");
  return dir.filePath(QStringLiteral("wan21"));
}

}  // namespace

class WidgetsTest : public QObject {
  Q_OBJECT

 private slots:
  void the_player_plays_pauses_and_scrubs() {
    FramePlayer player;
    player.setFrames(frames(6), 30);
    QCOMPARE(player.frameCount(), 6);
    QCOMPARE(player.currentFrame(), 0);
    player.seek(4);
    QCOMPARE(player.currentFrame(), 4);
    QCOMPARE(player.shownImage().pixelColor(0, 0), frames(6)[4].pixelColor(0, 0));
    player.seek(99);
    QCOMPARE(player.currentFrame(), 5);
    player.play();
    QVERIFY(player.isPlaying());
    QCOMPARE(player.currentFrame(), 0);      // from the start again
    QTRY_COMPARE(player.currentFrame(), 5);  // plays through and stops on the last frame
    QTRY_VERIFY(!player.isPlaying());
    player.play();
    QVERIFY(player.isPlaying());
    player.pause();
    QVERIFY(!player.isPlaying());
    const int at = player.currentFrame();
    QTest::qWait(100);
    QCOMPARE(player.currentFrame(), at);
    // Keyboard: the arrow keys step, Space plays.
    player.seek(2);
    QTest::keyClick(&player, Qt::Key_Right);
    QCOMPARE(player.currentFrame(), 3);
    QTest::keyClick(&player, Qt::Key_Left);
    QCOMPARE(player.currentFrame(), 2);
    QTest::keyClick(&player, Qt::Key_Space);
    QVERIFY(player.isPlaying());
    QTest::keyClick(&player, Qt::Key_Space);
    QVERIFY(!player.isPlaying());
    // The slider scrubs.
    auto* slider = player.findChild<QSlider*>();
    QVERIFY(slider != nullptr);
    QCOMPARE(slider->maximum(), 5);
    slider->setValue(1);
    QCOMPARE(player.currentFrame(), 1);
  }

  void the_player_shows_a_preview_or_a_placeholder() {
    FramePlayer player;
    QImage preview(8, 8, QImage::Format_RGB888);
    preview.fill(Qt::red);
    player.showPreview(preview, QStringLiteral("step 1"));
    QCOMPARE(player.frameCount(), 0);
    QCOMPARE(player.shownImage().pixelColor(0, 0), QColor(Qt::red));
    player.clear(QStringLiteral("nothing"));
    QVERIFY(player.shownImage().isNull());
    player.play();  // nothing to play: no crash, not playing
    QVERIFY(!player.isPlaying());
  }

  void the_start_image_box_shows_and_clears_an_image() {
    QTemporaryDir dir;
    const QString png = dir.filePath(QStringLiteral("start.png"));
    QImage image(320, 200, QImage::Format_RGB888);
    image.fill(Qt::darkGreen);
    QVERIFY(image.save(png));
    StartImageBox box;
    QSignalSpy changed(&box, &StartImageBox::imageChanged);
    QVERIFY(box.setPath(png));
    QCOMPARE(box.path(), png);
    QCOMPARE(box.imageSize(), QSize(320, 200));
    QCOMPARE(changed.count(), 1);
    box.clear();
    QVERIFY(box.path().isEmpty());
    QCOMPARE(changed.count(), 2);
    QSignalSpy rejected(&box, &StartImageBox::rejected);
    QVERIFY(!box.setPath(dir.filePath(QStringLiteral("missing.png"))));
    QCOMPARE(rejected.count(), 1);
  }

  void without_a_gpu_the_verdict_is_the_cpu_preset_and_slow() {
    MachineReport r;
    r.machine = cpuMachine();
    judge(r);
    QCOMPARE(r.suggestedPreset, QStringLiteral("cpu"));
    QCOMPARE(r.verdict, MachineReport::Verdict::kSlow);
    QVERIFY(r.verdictText.contains(QLatin1String("CPU")));
    QVERIFY(r.verdictText.contains(QLatin1String("hours")));
    QVERIFY(r.details().contains(QLatin1String("GPU: none")));
  }

  void an_8gb_laptop_gets_the_laptop_preset_and_a_plain_yes() {
    MachineReport r;
    r.machine = laptopMachine();
    r.gpuName = QStringLiteral("NVIDIA GeForce RTX 4060 Laptop GPU");
    r.freeDiskBytes = 200 * kGiB;
    judge(r);
    QCOMPARE(r.suggestedPreset, QStringLiteral("laptop-8gb"));
    QCOMPARE(r.verdict, MachineReport::Verdict::kGood);
    QVERIFY(r.details().contains(r.gpuName));
    QVERIFY(r.details().contains(QLatin1String("Free disk")));

    r.machine.total_vram_bytes = r.machine.free_vram_bytes = 4 * kGiB;
    r.freeDiskBytes = kGiB;
    judge(r);
    QCOMPARE(r.verdict, MachineReport::Verdict::kTooSmall);
    QVERIFY(r.verdictText.contains(QLatin1String("disk")));
  }

  void this_machine_is_described() {
    const MachineReport r = checkMachine(ferry::pipeline::Session(), QDir::tempPath());
    QVERIFY(r.machine.total_ram_bytes > 0);
    QVERIFY(!r.verdictText.isEmpty());
    QVERIFY(r.freeDiskBytes > 0);
  }

  void a_gpu_preset_on_a_machine_without_one_plans_for_the_cpu_and_says_so() {
    PresetPanel panel;
    const auto engine = session(cpuMachine());
    panel.setSession(engine);
    panel.setModel(engine->find({toPath(demoFolder())}));
    ferry::models::GenerationRequest request;
    request.prompt = "plan";
    request.width = request.height = 64;
    request.frames = 5;
    request.output = toPath(QDir(QDir::tempPath()).filePath(QStringLiteral("plan.mp4")));
    panel.setRequest(request);
    panel.setPresetName(QStringLiteral("laptop-8gb"));
    panel.refresh();
    QTRY_VERIFY(!panel.planning());
    QVERIFY2(panel.fits(), qPrintable(panel.refusal()));
    QCOMPARE(QString::fromStdString(panel.target()->preset.name), QStringLiteral("cpu"));
    QVERIFY(panel.summaryText().contains(QLatin1String("slow")));
    QCOMPARE(panel.plan()->predicted_vram_peak, quint64{0});
  }

  void the_model_scan_runs_off_the_gui_thread_and_the_newest_folder_wins() {
    // A slow drive: every scan takes 400 ms. The window's thread keeps turning meanwhile, the
    // scan runs on another thread, and of two folders chosen one after the other only the second
    // is shown.
    ModelPanel panel(session(cpuMachine()));
    std::atomic<int> scans{0};
    std::atomic<bool> onGuiThread{false};
    QThread* gui = QThread::currentThread();
    panel.setScanHook([&] {
      if (QThread::currentThread() == gui) onGuiThread = true;
      ++scans;
      QThread::msleep(400);
    });
    QSignalSpy changed(&panel, &ModelPanel::modelChanged);
    QElapsedTimer blocked;
    blocked.start();
    QTemporaryDir empty;
    panel.setFolder(empty.path());  // superseded below, while it is being scanned
    panel.setFolder(demoFolder());
    QVERIFY2(blocked.elapsed() < 200, "setFolder waited for the drive");
    QVERIFY(panel.scanning());
    QVERIFY(!panel.model());
    int ticks = 0;
    QTimer ticker;
    connect(&ticker, &QTimer::timeout, this, [&] { ++ticks; });
    ticker.start(10);
    QTRY_VERIFY_WITH_TIMEOUT(!panel.scanning(), 10000);
    ticker.stop();
    QVERIFY(!onGuiThread);
    QVERIFY2(ticks >= 20, qPrintable(QString::number(ticks)));  // ≥ 400 ms of ticks: not frozen
    QVERIFY2(panel.model() != nullptr, qPrintable(panel.problem()));
    QVERIFY(panel.problem().isEmpty());
    QVERIFY(panel.model()->is_demo());
    QVERIFY(scans >= 1 && scans <= 2);  // the first folder's scan: skipped or its answer dropped
    QVERIFY(!panel.descriptionText().contains(QLatin1String("⚠")));
  }

  void a_wan21_model_takes_sizes_that_are_multiples_of_16() {
    // 848×480: 848 = 16·53, not a multiple of 32. The engine accepts it for Wan 2.1; the GUI's own
    // 32 rule used to refuse it.
    QTemporaryDir dir;
    const auto engine = session(laptopMachine());
    const auto model = engine->find({toPath(writeWan21Model(dir))});
    const ferry::models::RequestRules rules = model->rules();
    QCOMPARE(rules.size_multiple, 16);
    VideoSettingsBox box;
    box.setRules(rules, true);
    auto* width = box.findChild<QSpinBox*>();
    QVERIFY(width != nullptr);
    QCOMPARE(width->singleStep(), 16);
    GenerationSettings s;
    s.width = 848;
    s.height = 480;
    s.frames = 5;
    box.apply(s);
    QCOMPARE(box.videoSize(), QSize(848, 480));

    PresetPanel panel;
    panel.setSession(engine);
    panel.setModel(model);
    GenerationSettings run;
    box.fill(run);
    run.prompt = QStringLiteral("a lighthouse");
    run.preset = QStringLiteral("cpu");
    panel.setRequest(run.toRequest(QDir(QDir::tempPath()).filePath(QStringLiteral("plan.mp4"))));
    panel.setPresetName(QStringLiteral("cpu"));
    panel.refresh();
    QTRY_VERIFY(!panel.planning());
    QVERIFY2(panel.resolved().has_value(), qPrintable(panel.refusal()));
    QCOMPARE(panel.resolved()->width, 848);
    QVERIFY2(!panel.refusal().contains(QLatin1String("multiples")), qPrintable(panel.refusal()));

    // The TI2V demo keeps its own rule (multiples of 32), from the engine too.
    const auto demo = engine->find({toPath(demoFolder())});
    QCOMPARE(demo->rules().size_multiple, 32);
  }

  void the_distilled_sampler_is_offered_by_what_it_does() {
    const auto engine = session(laptopMachine());
    const auto demo = engine->find({toPath(demoFolder())});
    VideoSettingsBox box;
    box.setRules(demo->rules(), true);
    QComboBox* sampler = nullptr;
    for (QComboBox* combo : box.findChildren<QComboBox*>()) {
      if (combo->accessibleName() == QLatin1String("Sampler")) sampler = combo;
    }
    QVERIFY(sampler != nullptr);
    const int distilled = sampler->findData(QStringLiteral("distill4"));
    QVERIFY(distilled >= 0);
    QCOMPARE(sampler->itemText(distilled), QStringLiteral("4 steps (distilled)"));
    GenerationSettings s;
    box.fill(s);
    QCOMPARE(s.sampler, QStringLiteral("unipc"));  // the model's default stays first
    const int modelSteps = s.steps;
    // Picking it brings its recipe (4 steps, no CFG, shift 5); leaving it, the model's again.
    sampler->setCurrentIndex(distilled);
    box.fill(s);
    QCOMPARE(s.steps, 4);
    QCOMPARE(s.guideScale, 1.0);
    QCOMPARE(s.shift, 5.0);
    sampler->setCurrentIndex(sampler->findData(QStringLiteral("euler")));
    box.fill(s);
    QCOMPARE(s.steps, modelSteps);
    QCOMPARE(s.guideScale, static_cast<double>(demo->rules().guide_scale));
  }

  void every_input_has_a_name_and_no_two_mnemonics_collide() {
    QTemporaryDir data;
    MainWindowOptions o;
    o.dataFolder = data.path();
    o.machine = cpuMachine();
    o.firstRunCheck = false;
    MainWindow w(o);
    for (QWidget* input : w.findChildren<QWidget*>()) {
      if (qobject_cast<QLineEdit*>(input) == nullptr &&
          qobject_cast<QPlainTextEdit*>(input) == nullptr &&
          qobject_cast<QAbstractSpinBox*>(input) == nullptr &&
          qobject_cast<QComboBox*>(input) == nullptr) {
        continue;
      }
      if (qobject_cast<QLineEdit*>(input) && qobject_cast<QAbstractSpinBox*>(input->parent())) {
        continue;  // a spin box's own line edit
      }
      if (qobject_cast<QLineEdit*>(input) && qobject_cast<QComboBox*>(input->parent())) continue;
      QVERIFY2(!input->accessibleName().isEmpty(), input->metaObject()->className());
    }
    QMap<QChar, QString> seen;
    auto check = [&](const QString& text) {
      const QChar m = mnemonic(text);
      if (m.isNull()) return;
      QVERIFY2(!seen.contains(m), qPrintable(text + " and " + seen.value(m)));
      seen[m] = text;
    };
    for (QAction* menu : w.menuBar()->actions()) check(menu->text());
    for (QLabel* label : w.findChildren<QLabel*>()) {
      if (label->buddy() != nullptr) check(label->text());
    }
    for (QAbstractButton* b : w.findChildren<QAbstractButton*>()) check(b->text());
    for (QTabWidget* tabs : w.findChildren<QTabWidget*>()) {
      for (int i = 0; i < tabs->count(); ++i) check(tabs->tabText(i));
    }
    QVERIFY(seen.size() >= 15);
  }
};

QTEST_MAIN(WidgetsTest)
#include "widgets_test.moc"
