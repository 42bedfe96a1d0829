// The window's smaller parts: the frame player's controls, the start image box, the first-run
// verdict, the preset panel on a machine without a GPU, the model panel (its scan off the GUI
// thread, the newest folder winning), the video settings following the engine's rules (a Wan 2.1
// model takes sizes that are multiples of 16), and the keyboard: every input has an accessible
// name and no two mnemonics in the window collide.
#include <QAbstractButton>
#include <QAbstractSpinBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QPlainTextEdit>
#include <QSlider>
#include <QSpinBox>
#include <QTabWidget>
#include <QTreeWidget>
#include <QtTest/QtTest>
#include <atomic>
#include <filesystem>

#include "core/error.h"
#include "core/io/safetensors_writer.h"
#include "core/models/h3/synthetic_set.h"
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
    auto* slider = player.findChild<QSlider*>(QStringLiteral("frameSlider"));
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

  // ---- two-expert models and first–last frame (issue 17), fed the rules such a model publishes
  // ----

  // Issue 23 item 8: what is typed snaps to the nearest value the engine allows, and the box
  // says what it became (QSpinBox alone kept a width of 1000, which the engine then refused, and
  // turned 99999 frames into 999 by dropping the keystroke).
  void typed_sizes_and_frame_counts_snap_to_the_nearest_allowed_value() {
    ferry::models::RequestRules rules;
    rules.size_multiple = 32;
    rules.min_size = 32;
    rules.max_size = 2048;
    rules.frames_step = 4;
    rules.max_frames = 201;
    rules.width = 640;
    rules.height = 352;
    rules.frames = 41;
    rules.fps = 16;
    rules.steps = 20;
    rules.guide_scale = 5;
    rules.shift = 5;
    rules.sampler = "unipc";
    rules.samplers = {"unipc"};
    rules.sizes = {{640, 352}};
    VideoSettingsBox box;
    box.show();
    box.setRules(rules, true);
    QComboBox* size = nullptr;
    for (QComboBox* c : box.findChildren<QComboBox*>()) {
      if (c->accessibleName() == QLatin1String("Size")) size = c;
    }
    QVERIFY(size != nullptr);
    size->setCurrentIndex(size->count() - 1);  // custom: width and height typed
    const auto spin = [&box](const QString& name) -> QSpinBox* {
      for (QSpinBox* s : box.findChildren<QSpinBox*>()) {
        if (s->accessibleName() == name) return s;
      }
      return nullptr;
    };
    QSpinBox* width = spin(QStringLiteral("Width"));
    QSpinBox* frames = spin(QStringLiteral("Frames"));
    QVERIFY(width != nullptr && frames != nullptr);
    QVERIFY(width->isEnabled());
    // The note under the fields, as the user reads it.
    const auto note = [&box]() -> QString {
      for (QLabel* l : box.findChildren<QLabel*>()) {
        if (l->accessibleName() == QLatin1String("Snapped value") && l->isVisible())
          return l->text();
      }
      return {};
    };
    const auto type = [](QSpinBox* field, const QString& text) {
      field->selectAll();
      QTest::keyClicks(field, text);
      QTest::keyClick(field, Qt::Key_Return);
    };

    type(width, QStringLiteral("1000"));
    QCOMPARE(width->value(), 992);
    QVERIFY2(note().contains(QLatin1String("992")), qPrintable(note()));
    QVERIFY(note().contains(QLatin1String("multiple of 32")));
    type(width, QStringLiteral("1008"));  // halfway up: the nearer of 992 and 1024 by rounding
    QCOMPARE(width->value(), 1024);

    type(frames, QStringLiteral("80"));
    QCOMPARE(frames->value(), 81);
    QVERIFY2(note().contains(QLatin1String("80")) && note().contains(QLatin1String("81")),
             qPrintable(note()));

    type(frames, QStringLiteral("99999"));
    QCOMPARE(frames->value(), 201);
    QVERIFY2(note().contains(QLatin1String("99999")) && note().contains(QLatin1String("201")) &&
                 note().contains(QLatin1String("most")),
             qPrintable(note()));

    type(frames, QStringLiteral("121"));  // allowed: taken as typed, the note gone
    QCOMPARE(frames->value(), 121);
    GenerationSettings s;
    box.fill(s);
    QCOMPARE(s.width, 1024);
    QCOMPARE(s.frames, 121);
  }

  // Issue 23 item 8: under the cpu preset the blocks a stage keeps stay in host RAM, and the plan
  // table says so instead of "On GPU".
  void the_plan_table_says_where_the_kept_blocks_are() {
    PresetPanel panel;
    const auto engine = session(laptopMachine());
    panel.setSession(engine);
    panel.setModel(engine->find({toPath(demoFolder())}));
    ferry::models::GenerationRequest request;
    request.prompt = "plan";
    request.width = request.height = 64;
    request.frames = 5;
    request.output = toPath(QDir(QDir::tempPath()).filePath(QStringLiteral("plan.mp4")));
    panel.setRequest(request);
    auto* table = panel.findChild<QTreeWidget*>();
    QVERIFY(table != nullptr);
    for (const auto& [preset, column] :
         {std::pair{QStringLiteral("cpu"), QStringLiteral("Kept in RAM")},
          std::pair{QStringLiteral("laptop-8gb"), QStringLiteral("On GPU")}}) {
      panel.setPresetName(preset);
      panel.refresh();
      QTRY_VERIFY(!panel.planning());
      QVERIFY2(panel.fits(), qPrintable(panel.refusal()));
      QCOMPARE(table->headerItem()->text(1), column);
      QCOMPARE(panel.summaryText().contains(QLatin1String("on the GPU")),
               preset != QLatin1String("cpu"));
    }
  }

  // A family that lists stages it cannot run yet (MiniMax-H3's DiT and decoders): their rows
  // say "not built yet" instead of peaks of 0 B, and the totals say they cover the rest.
  void every_h3_stage_is_in_the_plan_table_with_its_figures() {
    QTemporaryDir dir;
    ferry::models::h3::SyntheticShapes small;
    small.dit_hidden = 64, small.dit_heads = 1, small.dit_layers = 2, small.dit_ffn = 128;
    small.refiner_layers = 1, small.time_hidden = 64, small.time_dim = 64;
    small.vocab = 1024, small.text_dim = 128, small.text_heads = 2, small.text_kv_heads = 1;
    small.text_ffn = 256, small.vision_dim = 144, small.vision_ffn = 128, small.vision_side = 4;
    small.vae_dim = 64, small.vae_ffn = 128, small.vae_blocks = 2;
    ferry::models::h3::write_header_only_set(toPath(dir.path()), small);
    PresetPanel panel;
    const auto engine = session(laptopMachine());
    panel.setSession(engine);
    panel.setModel(engine->find({toPath(dir.path())}));
    ferry::models::GenerationRequest request;
    request.prompt = "plan";
    request.output = toPath(QDir(QDir::tempPath()).filePath(QStringLiteral("plan.mp4")));
    panel.setRequest(request);
    panel.setPresetName(QStringLiteral("laptop-8gb"));
    panel.refresh();
    QTRY_VERIFY(!panel.planning());
    QVERIFY2(panel.plan().has_value(), qPrintable(panel.refusal()));
    auto* table = panel.findChild<QTreeWidget*>();
    QVERIFY(table != nullptr);
    // H3's stages, each built now: a row each, in the plan's order, with its figures (no row
    // says "not built yet", and the panel does not call the plan partial).
    QCOMPARE(table->topLevelItemCount(), static_cast<int>(panel.plan()->stages.size()));
    QVERIFY(table->topLevelItemCount() >= 4);  // T2VA: text, DiT, video and audio decode
    for (int row = 0; row < table->topLevelItemCount(); ++row) {
      const QTreeWidgetItem* item = table->topLevelItem(row);
      const auto& stage = panel.plan()->stages[static_cast<std::size_t>(row)];
      QVERIFY2(stage.implemented, stage.stage.c_str());
      QCOMPARE(item->text(0), QString::fromStdString(stage.stage));
      QVERIFY(item->text(1) != QLatin1String("not built yet"));
      QVERIFY(item->text(3) != QStringLiteral("—"));
    }
    for (const QLabel* label : panel.findChildren<QLabel*>()) {
      QVERIFY(!label->text().contains(QLatin1String("stages built so far")));
    }
  }

  void a_two_expert_model_gets_a_low_noise_cfg_that_reaches_the_request() {
    const auto engine = session(laptopMachine());
    ferry::models::RequestRules rules = engine->find({toPath(demoFolder())})->rules();
    QVERIFY(!rules.two_experts);
    VideoSettingsBox box;
    box.show();
    box.setRules(rules, true);
    QDoubleSpinBox* low = nullptr;
    for (QDoubleSpinBox* spin : box.findChildren<QDoubleSpinBox*>()) {
      if (spin->accessibleName().contains(QLatin1String("low-noise"))) low = spin;
    }
    QVERIFY(low != nullptr);
    QVERIFY(!low->isVisible());  // one expert: one CFG
    GenerationSettings s;
    box.fill(s);
    QCOMPARE(s.lowNoiseGuideScale, 0.0);
    QVERIFY(!s.toRequest(QStringLiteral("/out/a.mp4")).low_noise_guide_scale.has_value());

    rules.two_experts = true;
    rules.expert_boundary = 0.9;
    rules.guide_scale = 4;
    rules.low_noise_guide_scale = 3;
    box.setRules(rules, true);
    QVERIFY(low->isVisible());
    box.fill(s);
    QCOMPARE(s.guideScale, 4.0);
    QCOMPARE(s.lowNoiseGuideScale, 3.0);  // the model's default
    low->setValue(2.5);
    box.fill(s);
    const auto request = s.toRequest(QStringLiteral("/out/a.mp4"));
    QCOMPARE(request.guide_scale.value_or(0), 4.0f);
    QCOMPARE(request.low_noise_guide_scale.value_or(0), 2.5f);

    // A restored two-expert clip's value waits, hidden, for its model's rules.
    VideoSettingsBox restored;
    GenerationSettings clip = s;
    clip.lowNoiseGuideScale = 3.5;
    restored.apply(clip);
    restored.setRules(rules, false);
    GenerationSettings back;
    restored.fill(back);
    QCOMPARE(back.lowNoiseGuideScale, 3.5);
  }

  void the_end_image_box_reaches_the_request_and_the_engine_says_if_the_model_takes_one() {
    QTemporaryDir data;
    MainWindowOptions o;
    o.dataFolder = data.path();
    o.machine = cpuMachine();
    o.firstRunCheck = false;
    MainWindow w(o);
    w.show();
    // Beside the start image, in the same row.
    QVERIFY(w.endImage()->isVisible());
    QCOMPARE(w.endImage()->frame(), StartImageBox::Frame::kEnd);
    QCOMPARE(w.endImage()->geometry().top(), w.startImage()->geometry().top());
    QVERIFY(w.endImage()->geometry().left() > w.startImage()->geometry().right());
    QImage image(64, 64, QImage::Format_RGB888);
    image.fill(Qt::darkCyan);
    const QString start = data.filePath(QStringLiteral("start.png"));
    const QString end = data.filePath(QStringLiteral("end.png"));
    QVERIFY(image.save(start));
    QVERIFY(image.save(end));
    GenerationSettings s;
    s.prompt = QStringLiteral("a door opening");
    s.model = {demoFolder()};
    s.width = s.height = 64;
    s.frames = 5;
    s.steps = 1;
    s.preset = QStringLiteral("cpu");
    s.image = start;
    s.endImage = end;
    w.applySettings(s);
    QVERIFY(settle(w));
    QCOMPARE(w.settings().endImage, end);
    QVERIFY(w.endImage()->accessibleDescription().contains(QLatin1String("end.png")));
    // The demo (TI2V-5B) takes no end image: the engine's refusal is the reason Generate is off.
    QVERIFY(!w.generateEnabled());
    QVERIFY2(w.generateBlockedReason().contains(QLatin1String("end image")),
             qPrintable(w.generateBlockedReason()));
    w.endImage()->clear();
    QVERIFY(settle(w));
    QVERIFY2(w.generateEnabled(), qPrintable(w.generateBlockedReason()));
    QVERIFY(w.settings().endImage.isEmpty());
  }

  void the_progress_names_the_expert_of_each_step() {
    ferry::pipeline::StepProgress p;
    p.step = 3;
    p.steps = 20;
    p.seconds_per_step = 2;
    p.eta_seconds = 34;
    p.stats.phase = "high-noise expert";
    const StepInfo info = stepInfo(p);
    QCOMPARE(info.phase, QStringLiteral("high-noise expert"));
    QVERIFY2(stepProgressText(info).startsWith(QStringLiteral("High-noise expert · step 3/20 · ")),
             qPrintable(stepProgressText(info)));
    p.stats.phase.clear();
    QVERIFY(stepProgressText(stepInfo(p)).startsWith(QStringLiteral("step 3/20 · ")));

    // As the window shows it, in the status bar and the title.
    QTemporaryDir data;
    MainWindowOptions o;
    o.dataFolder = data.path();
    o.machine = cpuMachine();
    o.firstRunCheck = false;
    MainWindow w(o);
    p.step = 12;
    p.stats.phase = "low-noise expert";
    emit w.worker()->step(stepInfo(p));
    QVERIFY2(w.statusText().startsWith(QStringLiteral("Low-noise expert · step 12/20")),
             qPrintable(w.statusText()));
    QVERIFY(w.windowTitle().startsWith(QStringLiteral("Low-noise expert · step 12/20")));
  }

  // Issue 23 item 6: Alt+G is the Generate button's (it used to be typed into the prompt as a
  // "g": the button's setShortcut(Ctrl+Return) replaced its mnemonic), and the Run menu shows
  // Ctrl+Enter and Esc.
  void alt_g_generates_and_the_run_menu_shows_the_shortcuts() {
    QTemporaryDir data;
    MainWindowOptions o;
    o.dataFolder = data.path();
    o.machine = cpuMachine();
    o.firstRunCheck = false;
    o.askBeforeClosing = false;
    MainWindow w(o);
    w.show();
    QVERIFY(QTest::qWaitForWindowActive(&w));
    GenerationSettings s;
    s.prompt = QStringLiteral("a lighthouse");
    s.model = {demoFolder()};
    s.width = s.height = 64;
    s.frames = 5;
    s.steps = 1;
    s.preset = QStringLiteral("cpu");
    w.applySettings(s);
    QVERIFY(settle(w));
    QVERIFY(w.generateEnabled());
    QPlainTextEdit* prompt = nullptr;
    for (QPlainTextEdit* e : w.findChildren<QPlainTextEdit*>()) {
      if (e->accessibleName() == QLatin1String("Prompt")) prompt = e;
    }
    QVERIFY(prompt != nullptr);
    prompt->setFocus();
    QSignalSpy ended(&w, &MainWindow::generationEnded);
    QTest::keyClick(prompt, Qt::Key_G, Qt::AltModifier);
    QCOMPARE(prompt->toPlainText(), QStringLiteral("a lighthouse"));
    // A mnemonic clicks the button as a mouse would (animateClick: a moment later).
    QTRY_VERIFY_WITH_TIMEOUT(w.state() != MainWindow::State::kIdle || ended.count() == 1, 5000);
    QTRY_COMPARE_WITH_TIMEOUT(ended.count(), 1, 60000);
    QVERIFY2(w.lastMessage().isEmpty(), qPrintable(w.lastMessage()));

    QMenu* run = nullptr;
    for (QAction* a : w.menuBar()->actions()) {
      if (a->text() == QLatin1String("&Run")) run = a->menu();
    }
    QVERIFY(run != nullptr);
    QMap<QString, QKeySequence> shortcuts;
    for (QAction* a : run->actions()) shortcuts[a->text()] = a->shortcut();
    QCOMPARE(shortcuts.value(QStringLiteral("&Generate")), QKeySequence(Qt::CTRL | Qt::Key_Return));
    QCOMPARE(shortcuts.value(QStringLiteral("&Cancel")), QKeySequence(Qt::Key_Escape));
  }

  // Issue 23 item 7: a 10×4000 start image gives a valid size or a clear refusal in view, never
  // "the video will be 0 × 10240". The size rule is the engine's (resolve()); the window shows
  // what it says.
  void an_extreme_aspect_start_image_gives_a_valid_size_or_a_refusal_in_view() {
    QTemporaryDir data;
    QImage image(10, 4000, QImage::Format_RGB888);
    image.fill(Qt::gray);
    const QString sliver = data.filePath(QStringLiteral("sliver.png"));
    QVERIFY(image.save(sliver));
    const auto engine = session(cpuMachine());
    GenerationSettings s;
    s.prompt = QStringLiteral("a tower");
    s.model = {demoFolder()};
    s.width = s.height = 64;
    s.frames = 5;
    s.steps = 1;
    s.preset = QStringLiteral("cpu");
    s.image = sliver;
    // A zero side in view, as "0 × 1280" or "0x1280".
    static const QRegularExpression zeroSide(
        QStringLiteral("(^|[^0-9])0 ?[×x] ?[0-9]|[0-9] ?[×x] ?0($|[^0-9])"));
    // Until the engine's size rule is fixed (the lead's resolve(), issue 23 item 7) it gives a
    // zero side, or refuses naming one: then the window cannot do better than the engine.
    QString engineSays;
    try {
      const auto r = engine->validate(*engine->find({toPath(demoFolder())}),
                                      s.toRequest(data.filePath(QStringLiteral("x.mp4"))));
      engineSays = QStringLiteral("%1x%2").arg(r.width).arg(r.height);
    } catch (const ferry::Error& e) {
      engineSays = QString::fromUtf8(e.what());
    }
    if (zeroSide.match(engineSays).hasMatch()) {
      QSKIP(qPrintable(QStringLiteral("the engine's size rule gives a zero side for a 10x4000 "
                                      "image (%1): the window's part is checked once the "
                                      "engine's fix is merged")
                           .arg(engineSays)));
    }
    MainWindowOptions o;
    o.dataFolder = data.path();
    o.machine = cpuMachine();
    o.firstRunCheck = false;
    MainWindow w(o);
    w.show();
    w.applySettings(s);
    QVERIFY(settle(w));
    QCOMPARE(w.settings().image, sliver);
    for (QLabel* label : w.findChildren<QLabel*>()) {
      if (!label->isVisibleTo(&w)) continue;
      QVERIFY2(!zeroSide.match(label->text()).hasMatch(), qPrintable(label->text()));
    }
    if (!w.generateEnabled()) {
      // A refusal: said in view, beside the Generate button.
      const QString reason = w.generateBlockedReason();
      QVERIFY(!reason.isEmpty());
      bool shown = false;
      for (QLabel* label : w.findChildren<QLabel*>()) {
        if (label->isVisibleTo(&w) && label->text().contains(reason)) shown = true;
      }
      QVERIFY2(shown, qPrintable(reason));
    }
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
