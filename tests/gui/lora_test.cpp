// LoRAs in the app (issue 16): the list under the model panel (add, remove, strength, enable,
// drops, the model's check off the GUI thread, a bad file's error, the step-distilled switch),
// the LoRAs' settings JSON as the history and clips carry it, and restoring them from the history
// and from a clip, whose LoRAs are found by file name where the user keeps LoRAs.
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QJsonArray>
#include <QJsonDocument>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMimeData>
#include <QPushButton>
#include <QSlider>
#include <QThread>
#include <QToolButton>
#include <QtTest/QtTest>
#include <atomic>
#include <cmath>

#include "core/error.h"
#include "core/io/fingerprint.h"
#include "core/io/safetensors_writer.h"
#include "core/models/wan/demo_model.h"
#include "gui/history.h"
#include "gui/lora_list.h"
#include "gui/main_window.h"
#include "gui/model_panel.h"
#include "gui/preset_panel.h"
#include "gui/start_image_box.h"
#include "gui/video_settings_box.h"
#include "tests/gui/gui_test_support.h"

using namespace ferry;
using namespace ferry::gui;
using namespace ferry::gui::test;

namespace {

// A stand-in for ModelParts::check_lora where a test is about the list, not the engine: every
// module matches, and a file named as LightX2V's is a 4-step distillation (the contract's rule).
models::LoraReport fakeReport(const std::filesystem::path& path) {
  models::LoraReport r;
  r.path = path;
  r.modules = r.matched = 312;
  r.adapter_bytes = 1 << 20;
  const QString name = QString::fromStdString(path.filename().string()).toLower();
  if (name.contains(QLatin1String("lightx2v"))) r.distilled_steps = 4;
  return r;
}

// A file of `bytes` bytes (the list's check reads it through the checker only).
QString writeFile(const QString& path, const QByteArray& bytes = QByteArray("lora bytes")) {
  QDir().mkpath(QFileInfo(path).absolutePath());
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly)) return {};
  f.write(bytes);
  return path;
}

LoraSetting lora(const QString& path, double strength, bool enabled = true) {
  LoraSetting l;
  l.path = path;
  l.name = QFileInfo(path).fileName();
  l.strength = strength;
  l.enabled = enabled;
  return l;
}

GenerationSettings demoSettings() {
  GenerationSettings s;
  s.prompt = QStringLiteral("a ferry crossing a fjord at dawn");
  s.model = {demoFolder()};
  s.width = s.height = 64;
  s.frames = 5;
  s.fps = 8;
  s.steps = 1;
  s.guideScale = 5;
  s.shift = 5;
  s.sampler = QStringLiteral("unipc");
  s.seed = 1234;
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

bool checked(const LoraList& list, int ms = 30000) {
  QElapsedTimer t;
  t.start();
  QTest::qWait(1);
  while (list.checking() && t.elapsed() < ms) QTest::qWait(5);
  return !list.checking();
}

void drop(QWidget* target, const QStringList& paths) {
  QMimeData mime;
  QList<QUrl> urls;
  for (const QString& p : paths) urls << QUrl::fromLocalFile(p);
  mime.setUrls(urls);
  QDragEnterEvent enter(QPoint(5, 5), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
  QApplication::sendEvent(target, &enter);
  QVERIFY(enter.isAccepted());
  QDropEvent dropEvent(QPointF(5, 5), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
  QApplication::sendEvent(target, &dropEvent);
}

// A LoRA for the demo Wan DiT as trainers write it: lora_down [r, D] and lora_up [D, r] on each
// block's self-attention query, small deterministic f32 values.
// `dim`: another model's width makes a LoRA that does not fit the demo.
// `foreign`: also a module the demo does not have (Wan 2.1 I2V's k_img).
QString writeDemoLora(const QString& path, std::uint64_t rank = 4,
                      std::uint64_t dim = models::wan::DemoModel::kDit.dim, bool foreign = false) {
  std::vector<std::string> modules;
  for (std::uint64_t b = 0; b < models::wan::DemoModel::kDit.layers; ++b) {
    modules.push_back("diffusion_model.blocks." + std::to_string(b) + ".self_attn.q");
  }
  if (foreign) modules.push_back("diffusion_model.blocks.0.cross_attn.k_img");
  std::vector<io::TensorSpec> tensors;
  for (const std::string& module : modules) {
    tensors.push_back({module + ".lora_down.weight", DType::kF32, {rank, dim}});
    tensors.push_back({module + ".lora_up.weight", DType::kF32, {dim, rank}});
  }
  QDir().mkpath(QFileInfo(path).absolutePath());
  io::write_safetensors(toPath(path), tensors, {},
                        [](std::size_t index, std::uint64_t offset, std::span<std::byte> out) {
                          for (std::size_t k = 0; k < out.size(); ++k) {
                            const std::uint64_t byte = offset + k;
                            const float v =
                                0.01f * std::sin(0.37f * static_cast<float>(byte / 4 + index * 7));
                            out[k] = reinterpret_cast<const std::byte*>(&v)[byte % 4];
                          }
                        });
  return path;
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

bool waitForIdle(MainWindow& w, int ms = 120000) {
  QElapsedTimer t;
  t.start();
  QTest::qWait(1);
  while (w.state() != MainWindow::State::kIdle && t.elapsed() < ms) QTest::qWait(10);
  return w.state() == MainWindow::State::kIdle;
}

QByteArray clipJson(const QJsonArray& loras) {
  QJsonObject j{{QStringLiteral("prompt"), QStringLiteral("a ferry")},
                {QStringLiteral("steps"), 4},
                {QStringLiteral("loras"), loras}};
  return QJsonDocument(j).toJson();
}

QJsonObject clipLora(const QString& name, double strength, quint64 bytes = 0,
                     const QString& fingerprint = {}) {
  QJsonObject j{{QStringLiteral("name"), name}, {QStringLiteral("strength"), strength}};
  if (bytes != 0) j[QStringLiteral("bytes")] = static_cast<double>(bytes);
  if (!fingerprint.isEmpty()) j[QStringLiteral("fingerprint")] = fingerprint;
  return j;
}

}  // namespace

class LoraTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { demoFolder(); }

  // ---- the list ----

  void the_slider_and_the_spin_box_show_one_strength() {
    LoraList list;
    list.setLoras({lora(QStringLiteral("/loras/style.safetensors"), 0.8)});
    QCOMPARE(list.slider(0)->value(), 16);  // 0.8 in steps of 0.05
    QCOMPARE(list.spinBox(0)->value(), 0.8);
    QSignalSpy changed(&list, &LoraList::lorasChanged);

    list.slider(0)->setValue(-30);
    QCOMPARE(list.spinBox(0)->value(), -1.5);
    QCOMPARE(list.loras().front().strength, -1.5);
    list.spinBox(0)->setValue(1.25);
    QCOMPARE(list.slider(0)->value(), 25);
    QCOMPARE(list.loras().front().strength, 1.25);
    // Past the slider's ±2 the spin box holds the value; the slider stays at its end.
    list.spinBox(0)->setValue(3.5);
    QCOMPARE(list.slider(0)->value(), list.slider(0)->maximum());
    QCOMPARE(list.loras().front().strength, 3.5);
    QCOMPARE(changed.count(), 3);
    QCOMPARE(list.spinBox(0)->maximum(), kMaxLoraStrength);
    QCOMPARE(list.spinBox(0)->minimum(), -kMaxLoraStrength);
  }

  void the_request_has_exactly_the_enabled_loras_with_their_strengths() {
    LoraList list;
    list.addLoras({QStringLiteral("/loras/a.safetensors"), QStringLiteral("/loras/b.safetensors"),
                   QStringLiteral("/loras/c.safetensors")});
    QCOMPARE(list.count(), 3);
    list.addLoras({QStringLiteral("/loras/b.safetensors")});  // listed already
    QCOMPARE(list.count(), 3);
    list.spinBox(0)->setValue(0.5);
    list.spinBox(2)->setValue(-0.75);
    list.enableBox(1)->click();  // b off

    GenerationSettings s;
    s.prompt = QStringLiteral("x");
    s.loras = list.loras();
    const auto request = s.toRequest(QStringLiteral("/out/v.mp4"));
    QCOMPARE(request.loras.size(), std::size_t{2});
    QCOMPARE(request.loras[0].path, std::filesystem::path("/loras/a.safetensors"));
    QCOMPARE(request.loras[0].strength, 0.5f);
    QCOMPARE(request.loras[1].path, std::filesystem::path("/loras/c.safetensors"));
    QCOMPARE(request.loras[1].strength, -0.75f);
    QVERIFY(!s.loras[1].enabled);

    list.enableBox(1)->click();  // on again: in the request, in its place
    s.loras = list.loras();
    const auto all = s.toRequest(QStringLiteral("/out/v.mp4"));
    QCOMPARE(all.loras.size(), std::size_t{3});
    QCOMPARE(all.loras[1].path, std::filesystem::path("/loras/b.safetensors"));
    QCOMPARE(all.loras[1].strength, 1.0f);
  }

  void a_removed_lora_leaves_the_list_and_the_request() {
    LoraList list;
    list.addLoras({QStringLiteral("/loras/a.safetensors"), QStringLiteral("/loras/b.safetensors")});
    QSignalSpy changed(&list, &LoraList::lorasChanged);
    list.removeButton(0)->click();
    QCOMPARE(changed.count(), 1);
    QCOMPARE(list.count(), 1);
    QCOMPARE(list.loras().front().name, QStringLiteral("b.safetensors"));
    // The remaining row's inputs are still its own.
    list.spinBox(0)->setValue(0.3);
    QCOMPARE(list.loras().front().strength, 0.3);
    GenerationSettings s;
    s.loras = list.loras();
    QCOMPARE(s.toRequest(QStringLiteral("/o.mp4")).loras.size(), std::size_t{1});
  }

  void every_control_has_a_name_and_is_reached_by_tab() {
    LoraList list;
    list.addLoras({QStringLiteral("/loras/style.safetensors")});
    for (QWidget* w : std::initializer_list<QWidget*>{list.enableBox(0), list.slider(0),
                                                      list.spinBox(0), list.removeButton(0),
                                                      list.addButton(), list.distilledButton()}) {
      QVERIFY2(!w->accessibleName().isEmpty(), w->metaObject()->className());
      QVERIFY2(w->focusPolicy() & Qt::TabFocus, w->metaObject()->className());
    }
    QVERIFY(list.slider(0)->accessibleName().contains(QLatin1String("style.safetensors")));
  }

  void tab_goes_through_the_rows_in_reading_order() {
    QTemporaryDir data;
    MainWindow w(options(data));
    LoraList* list = w.loraList();
    // Rows made after the window come where they are shown: after the model folder, before
    // "Add LoRA…" and the settings below, each row in order.
    list->addLoras(
        {QStringLiteral("/loras/a.safetensors"), QStringLiteral("/loras/b.safetensors")});
    list->removeLora(0);
    list->addLoras({QStringLiteral("/loras/c.safetensors")});
    const QList<QWidget*> expected{list->enableBox(0), list->slider(0),
                                   list->spinBox(0),   list->removeButton(0),
                                   list->enableBox(1), list->slider(1),
                                   list->spinBox(1),   list->removeButton(1),
                                   list->addButton(),  w.presetPanel()->presetBox()};
    QList<QWidget*> chain;
    QWidget* at = w.modelPanel()->folderEdit();
    for (int i = 0; i < 1000 && chain.size() < expected.size(); ++i, at = at->nextInFocusChain()) {
      if (expected.contains(at)) chain << at;
    }
    QCOMPARE(chain, expected);
  }

  void dropped_safetensors_files_join_the_list_and_the_window() {
    QTemporaryDir dir;
    const QString a = writeFile(dir.filePath(QStringLiteral("a.safetensors")));
    const QString b = writeFile(dir.filePath(QStringLiteral("b.safetensors")));
    LoraList list;
    drop(&list, {a, b});
    QCOMPARE(list.count(), 2);

    // On the window: LoRAs join the list; a video still restores its settings (main window test).
    QTemporaryDir data;
    MainWindow w(options(data));
    drop(&w, {a});
    QCOMPARE(w.loraList()->count(), 1);
    QCOMPARE(w.settings().loras.front().path, a);
    QVERIFY(w.startImage()->path().isEmpty());
  }

  void each_lora_is_checked_off_the_gui_thread_and_again_when_the_model_changes() {
    LoraList list;
    list.addLoras({QStringLiteral("/nowhere/a.safetensors")});
    QCOMPARE(list.statusText(0), QStringLiteral("checked once a model is found"));
    QVERIFY(!list.checking());

    QTemporaryDir dir;
    const QString path = writeFile(dir.filePath(QStringLiteral("style.safetensors")));
    std::atomic<int> calls{0};
    std::atomic<bool> onGuiThread{false};
    QThread* gui = QThread::currentThread();
    list.setLoras({lora(path, 1.0)});
    list.setChecker([&](const std::filesystem::path& p) {
      ++calls;
      if (QThread::currentThread() == gui) onGuiThread = true;
      return fakeReport(p);
    });
    QCOMPARE(list.statusText(0), QStringLiteral("checking…"));
    QVERIFY(checked(list));
    QVERIFY(!onGuiThread);
    QCOMPARE(list.statusText(0), QStringLiteral("312 of 312 layers"));
    QCOMPARE(calls.load(), 1);
    QVERIFY(list.problem().isEmpty());

    // Another model: every LoRA is checked again.
    list.setChecker([&](const std::filesystem::path& p) {
      ++calls;
      models::LoraReport r = fakeReport(p);
      r.matched = 300;
      r.unmatched = {"blocks.0.cross_attn.k_img"};
      return r;
    });
    QVERIFY(checked(list));
    QCOMPARE(calls.load(), 2);
    QCOMPARE(list.statusText(0), QStringLiteral("300 of 312 layers"));
  }

  void a_bad_lora_file_shows_its_error_and_blocks_generate() {
    QTemporaryDir data;
    QTemporaryDir dir;
    const QString bad = writeFile(dir.filePath(QStringLiteral("not-a-lora.safetensors")),
                                  QByteArray("this is a text file, not safetensors"));
    MainWindow w(options(data));
    w.applySettings(demoSettings());
    QVERIFY(settle(w));
    QVERIFY2(w.generateEnabled(), qPrintable(w.generateBlockedReason()));
    w.loraList()->addLoras({bad});
    QVERIFY(settle(w));
    // The model's own check says why (the engine's words, naming the file), in red, in full in
    // the tooltip; Generate says it too.
    const QString error = w.loraList()->statusText(0);
    QVERIFY2(error.contains(QLatin1String("not-a-lora.safetensors")), qPrintable(error));
    const auto labels = w.loraList()->findChildren<QLabel*>();
    const auto status = std::find_if(labels.begin(), labels.end(),
                                     [&](QLabel* l) { return l->toolTip() == error; });
    QVERIFY(status != labels.end());
    QVERIFY((*status)->styleSheet().contains(QLatin1String("#d9534f")));
    QVERIFY(!w.generateEnabled());
    QVERIFY2(w.generateBlockedReason().contains(error), qPrintable(w.generateBlockedReason()));

    // Disabled, it is out of the request and out of the way.
    w.loraList()->enableBox(0)->click();
    QVERIFY(settle(w));
    QVERIFY2(w.generateEnabled(), qPrintable(w.generateBlockedReason()));

    // A file that is gone says so.
    w.loraList()->setLoras({lora(dir.filePath(QStringLiteral("gone.safetensors")), 1)});
    QVERIFY(settle(w));
    QVERIFY2(w.loraList()->statusText(0).contains(QLatin1String("is not there")),
             qPrintable(w.loraList()->statusText(0)));
  }

  void the_distilled_switch_appears_only_for_a_distillation_lora() {
    QTemporaryDir dir;
    const QString style = writeFile(dir.filePath(QStringLiteral("style.safetensors")));
    const QString distill = writeFile(dir.filePath(
        QStringLiteral("Wan21_T2V_14B_lightx2v_cfg_step_distill_lora_rank32.safetensors")));
    LoraList list;
    list.show();
    list.setChecker(fakeReport);
    list.addLoras({style});
    QVERIFY(checked(list));
    QVERIFY(!list.distilledButton()->isVisible());
    QCOMPARE(list.distilledSteps(), 0);

    list.addLoras({distill});
    QVERIFY(checked(list));
    QVERIFY(list.distilledButton()->isVisible());
    QVERIFY(list.distilledHint()->text().contains(QLatin1String("lightx2v")));
    QCOMPARE(list.distilledSteps(), 4);
    QSignalSpy asked(&list, &LoraList::distilledRequested);
    list.distilledButton()->click();
    QCOMPARE(asked.count(), 1);
    QCOMPARE(asked.front().front().toInt(), 4);

    list.enableBox(1)->click();  // disabled: no offer
    QVERIFY(!list.distilledButton()->isVisible());
  }

  void the_distilled_switch_sets_sampler_steps_guidance_and_shift() {
    QTemporaryDir data;
    MainWindow w(options(data));
    GenerationSettings s = demoSettings();
    s.steps = 30;
    w.applySettings(s);
    QVERIFY(settle(w));
    w.useDistilledSampler(4);
    const GenerationSettings now = w.settings();
    QCOMPARE(now.sampler, QStringLiteral("distill4"));
    QCOMPARE(now.steps, 4);
    QCOMPARE(now.guideScale, 1.0);
    QCOMPARE(now.shift, 5.0);
    QCOMPARE(now.prompt, s.prompt);  // nothing else moves
    QCOMPARE(now.width, s.width);
  }

  void the_list_fits_the_left_column_of_a_1280x720_window() {
    LoraList list;
    list.setChecker(fakeReport);
    list.addLoras({QStringLiteral("/loras/Wan21_T2V_14B_lightx2v_cfg_step_distill_lora_rank32_"
                                  "with_a_very_long_name_indeed.safetensors"),
                   QStringLiteral("/loras/style.safetensors")});
    QVERIFY(checked(list));
    list.setChecker([](const std::filesystem::path& p) -> models::LoraReport {
      throw Error(ErrorCode::kBadModelFile,
                  p.filename().string() +
                      ": a shape disagrees: blocks.0.self_attn.q is [5120, "
                      "5120] in the model and [3072, 32] in the LoRA, so it "
                      "was made for another model size");
    });
    QVERIFY(checked(list));
    QVERIFY2(list.minimumSizeHint().width() <= 460,
             qPrintable(QString::number(list.minimumSizeHint().width())));
  }

  // ---- settings JSON ----

  void loras_survive_their_json() {
    GenerationSettings s;
    s.prompt = QStringLiteral("x");
    s.loras = {lora(QStringLiteral("/loras/a.safetensors"), 0.8),
               lora(QStringLiteral("/loras/b.safetensors"), -1.25, false)};
    s.loras[0].bytes = 12345;
    s.loras[0].fingerprint = QStringLiteral("fp1:0123456789abcdef");
    QCOMPARE(GenerationSettings::fromJson(s.toJson()), s);
    // The generator's keys are there for a clip.
    const QJsonObject first = s.toJson()[QStringLiteral("loras")].toArray().at(0).toObject();
    QCOMPARE(first[QStringLiteral("name")].toString(), QStringLiteral("a.safetensors"));
    QCOMPARE(first[QStringLiteral("bytes")].toDouble(), 12345.0);
    QCOMPARE(first[QStringLiteral("fingerprint")].toString(),
             QStringLiteral("fp1:0123456789abcdef"));
    QCOMPARE(first[QStringLiteral("strength")].toDouble(), 0.8);
  }

  void a_clip_restores_lora_names_only_clamped_and_enabled() {
    QJsonArray loras{clipLora(QStringLiteral("a.safetensors"), 0.8, 1000, QStringLiteral("fp1:1")),
                     clipLora(QStringLiteral("b.safetensors"), 99),
                     clipLora(QStringLiteral("c.safetensors"), -99)};
    // The GUI's own keys in a stranger's clip are not restored: no path, nothing disabled.
    QJsonObject withPath = clipLora(QStringLiteral("d.safetensors"), 1);
    withPath[QStringLiteral("path")] = QStringLiteral("/etc/d.safetensors");
    withPath[QStringLiteral("enabled")] = false;
    loras.append(withPath);
    QString why;
    const auto s = GenerationSettings::fromClip(clipJson(loras), QStringLiteral("c.mp4"), &why);
    QVERIFY2(s.has_value(), qPrintable(why));
    QCOMPARE(s->loras.size(), qsizetype{4});
    QCOMPARE(s->loras[0].name, QStringLiteral("a.safetensors"));
    QCOMPARE(s->loras[0].bytes, quint64{1000});
    QCOMPARE(s->loras[0].fingerprint, QStringLiteral("fp1:1"));
    QCOMPARE(s->loras[0].strength, 0.8);
    QCOMPARE(s->loras[1].strength, kMaxLoraStrength);
    QCOMPARE(s->loras[2].strength, -kMaxLoraStrength);
    for (const LoraSetting& l : s->loras) {
      QVERIFY(l.path.isEmpty());
      QVERIFY(l.enabled);
    }
    QVERIFY(s->toRequest(QStringLiteral("/o.mp4")).loras.empty());  // until found
  }

  void a_clip_naming_a_lora_outside_its_folder_or_too_many_is_refused() {
    for (const char* name :
         {"../../lora.safetensors", "/etc/lora.safetensors", "C:lora.safetensors",
          "sub\\lora.safetensors", "NUL.safetensors", "lora.safetensors:hidden"}) {
      QString why;
      const auto s = GenerationSettings::fromClip(clipJson({clipLora(QString::fromUtf8(name), 1)}),
                                                  QStringLiteral("shared.mp4"), &why);
      QVERIFY2(!s.has_value(), name);
      QVERIFY2(why.contains(QLatin1String("shared.mp4")), qPrintable(why));
    }
    QJsonArray many;
    for (int i = 0; i <= kMaxClipLoras; ++i) {
      many.append(clipLora(QStringLiteral("l%1.safetensors").arg(i), 1));
    }
    QString why;
    QVERIFY(!GenerationSettings::fromClip(clipJson(many), QStringLiteral("many.mp4"), &why));
    QVERIFY2(why.contains(QLatin1String("65 LoRAs")), qPrintable(why));
    many.removeLast();
    QVERIFY(GenerationSettings::fromClip(clipJson(many), QStringLiteral("many.mp4")));
  }

  // ---- restoring ----

  void restoring_from_the_history_restores_every_lora() {
    QTemporaryDir data;
    QTemporaryDir dir;
    GenerationSettings s = demoSettings();
    s.loras = {lora(writeFile(dir.filePath(QStringLiteral("a.safetensors"))), 0.8),
               lora(writeFile(dir.filePath(QStringLiteral("b.safetensors"))), -0.4, false)};
    s.loras[0].bytes = 10;
    s.loras[0].fingerprint = QStringLiteral("fp1:0000000000000001");
    HistoryStore store(data.filePath(QStringLiteral("history")));
    QImage thumb(8, 8, QImage::Format_RGB32);
    thumb.fill(Qt::black);
    QVERIFY(!store.add(s, data.filePath(QStringLiteral("v.mp4")), QStringLiteral("v"), thumb)
                 .id.isEmpty());

    MainWindow w(options(data));
    w.historyPanel()->reload();
    QCOMPARE(w.historyPanel()->count(), 1);
    w.loraList()->addLoras({QStringLiteral("/other/x.safetensors")});  // replaced
    w.historyPanel()->list()->setCurrentRow(0);
    emit w.historyPanel()->list()->itemActivated(w.historyPanel()->list()->item(0));
    QVERIFY(settle(w));
    QCOMPARE(w.settings().loras, s.loras);
    QCOMPARE(w.loraList()->count(), 2);
    QVERIFY(!w.loraList()->enableBox(1)->isChecked());
    QCOMPARE(w.loraList()->spinBox(1)->value(), -0.4);
  }

  void the_last_session_s_loras_come_back() {
    QTemporaryDir data;
    QTemporaryDir dir;
    const QString a = writeFile(dir.filePath(QStringLiteral("a.safetensors")));
    {
      MainWindow w(options(data));
      w.loraList()->addLoras({a});
      w.loraList()->spinBox(0)->setValue(0.65);
      w.close();
    }
    MainWindow again(options(data));
    QCOMPARE(again.loraList()->count(), 1);
    QCOMPARE(again.settings().loras.front().path, a);
    QCOMPARE(again.settings().loras.front().strength, 0.65);
  }

  void restoring_a_clip_finds_its_loras_by_name_and_says_which_are_missing() {
    QTemporaryDir data;
    QTemporaryDir root;
    // The user's LoRAs: one beside a LoRA already in the list, one in the model folder's loras/
    // folder (a subfolder of it), one nowhere.
    const QString listed = writeFile(root.filePath(QStringLiteral("mine/listed.safetensors")));
    const QString beside = writeFile(root.filePath(QStringLiteral("mine/beside.safetensors")));
    const QString models = root.filePath(QStringLiteral("models"));
    const QString inModel = writeFile(
        QDir(models).filePath(QStringLiteral("loras/motion/inmodel.safetensors")), "12345678");
    const QString clip = root.filePath(QStringLiteral("clips/shared.mp4"));

    MainWindow w(options(data));
    GenerationSettings current = demoSettings();
    current.model = {models};
    current.loras = {lora(listed, 1)};
    w.applySettings(current);
    QVERIFY(settle(w));

    const auto s = GenerationSettings::fromClip(
        clipJson({clipLora(QStringLiteral("beside.safetensors"), 0.5),
                  clipLora(QStringLiteral("missing.safetensors"), 1),
                  clipLora(QStringLiteral("inmodel.safetensors"), -0.3, 8)}),
        clip);
    QVERIFY(s.has_value());
    w.applySettings(*s, clip);
    QVERIFY(settle(w));
    const QList<LoraSetting> restored = w.settings().loras;
    QCOMPARE(restored.size(), qsizetype{2});
    QCOMPARE(restored[0].path, beside);
    QCOMPARE(restored[0].strength, 0.5);
    QCOMPARE(restored[1].path, inModel);
    QCOMPARE(restored[1].strength, -0.3);
    QVERIFY2(w.lastMessage().contains(QLatin1String("missing.safetensors")),
             qPrintable(w.lastMessage()));
    QVERIFY2(w.lastMessage().contains(QLatin1String("not found")), qPrintable(w.lastMessage()));
    QVERIFY(!w.lastMessage().contains(QLatin1String("beside.safetensors")));
    QCOMPARE(w.restoreNotice(), w.lastMessage());

    // A file of the name but another size is not it, and the message says what differs.
    const auto other = GenerationSettings::fromClip(
        clipJson({clipLora(QStringLiteral("inmodel.safetensors"), 1, 9)}), clip);
    w.applySettings(*other, clip);
    QVERIFY(settle(w));
    QVERIFY(w.settings().loras.isEmpty());
    QVERIFY2(w.lastMessage().contains(QLatin1String("inmodel.safetensors")),
             qPrintable(w.lastMessage()));
  }

  void a_found_lora_with_other_contents_is_said_to_differ() {
    QTemporaryDir data;
    QTemporaryDir root;
    const QString models = root.filePath(QStringLiteral("ComfyUI/models/diffusion_models"));
    QDir().mkpath(models);
    // ComfyUI keeps LoRAs in models/loras, beside the diffusion models.
    const QString path =
        writeFile(root.filePath(QStringLiteral("ComfyUI/models/loras/style.safetensors")));
    MainWindow w(options(data));
    GenerationSettings current = demoSettings();
    current.model = {models};
    w.applySettings(current);
    QVERIFY(settle(w));
    const QString clip = root.filePath(QStringLiteral("clip.mp4"));
    const auto s = GenerationSettings::fromClip(
        clipJson({clipLora(QStringLiteral("style.safetensors"), 1, QFileInfo(path).size(),
                           QStringLiteral("fp1:0000000000000000"))}),
        clip);
    w.applySettings(*s, clip);
    QVERIFY(settle(w));
    QCOMPARE(w.settings().loras.size(), qsizetype{1});
    QCOMPARE(w.settings().loras.front().path, path);
    QVERIFY2(w.restoreNotice().contains(QLatin1String("other contents")),
             qPrintable(w.restoreNotice()));
    QVERIFY2(w.restoreNotice().contains(QDir::toNativeSeparators(path)),
             qPrintable(w.restoreNotice()));
  }

  // ---- the engine's check and a run, on the demo model ----

  void the_model_says_how_many_layers_a_lora_adapts_or_why_it_does_not_fit() {
    QTemporaryDir data;
    QTemporaryDir dir;
    const QString fits = writeDemoLora(dir.filePath(QStringLiteral("style.safetensors")));
    const QString wider = writeDemoLora(dir.filePath(QStringLiteral("for-5b.safetensors")), 4,
                                        models::wan::DemoModel::kDit.dim * 2);
    MainWindow w(options(data));
    w.applySettings(demoSettings());
    QVERIFY(settle(w));
    w.loraList()->addLoras({fits, wider});
    QVERIFY(settle(w));
    const QString layers =
        QStringLiteral("%1 of %1 layers").arg(models::wan::DemoModel::kDit.layers);
    QCOMPARE(w.loraList()->statusText(0), layers);
    QVERIFY2(w.loraList()->statusText(1).contains(QLatin1String("for-5b.safetensors")),
             qPrintable(w.loraList()->statusText(1)));
    QVERIFY(!w.generateEnabled());
    w.loraList()->removeLora(1);
    QVERIFY(settle(w));
    QVERIFY2(w.generateEnabled(), qPrintable(w.generateBlockedReason()));
    QCOMPARE(w.settings().toRequest(QStringLiteral("/o.mp4")).loras.size(), std::size_t{1});
  }

  void the_engine_tells_a_distillation_lora_and_the_switch_applies_its_recipe() {
    QTemporaryDir data;
    QTemporaryDir dir;
    const QString lightx2v = writeDemoLora(
        dir.filePath(QStringLiteral("demo_lightx2v_4steps_lora.safetensors")));
    MainWindow w(options(data));
    w.applySettings(demoSettings());
    QVERIFY(settle(w));
    w.loraList()->addLoras({lightx2v});
    QVERIFY(settle(w));
    QCOMPARE(w.loraList()->distilledSteps(), 4);  // the engine's check, not a stand-in
    QVERIFY(w.loraList()->distilledButton()->isVisibleTo(&w));
    w.loraList()->distilledButton()->click();
    const GenerationSettings s = w.settings();
    QCOMPARE(s.sampler, QStringLiteral("distill4"));
    QCOMPARE(s.steps, 4);
    QCOMPARE(s.guideScale, 1.0);
  }

  void the_engine_s_doubts_about_the_request_are_in_view_before_the_run() {
    QTemporaryDir data;
    QTemporaryDir dir;
    MainWindow w(options(data));
    w.applySettings(demoSettings());
    QVERIFY(settle(w));
    w.loraList()->addLoras({writeDemoLora(dir.filePath(QStringLiteral("i2v.safetensors")), 4,
                                          models::wan::DemoModel::kDit.dim, true)});
    QVERIFY(settle(w));
    const QString layers = QStringLiteral("%1 of %2 layers")
                               .arg(models::wan::DemoModel::kDit.layers)
                               .arg(models::wan::DemoModel::kDit.layers + 1);
    QCOMPARE(w.loraList()->statusText(0), layers);
    // Allowed (Generate is on), and said beside the buttons.
    QVERIFY2(w.generateEnabled(), qPrintable(w.generateBlockedReason()));
    QLabel* planLine = nullptr;
    for (QLabel* l : w.findChildren<QLabel*>()) {
      if (l->accessibleName() == QLatin1String("Memory prediction")) planLine = l;
    }
    QVERIFY(planLine != nullptr);
    QVERIFY2(planLine->text().contains(QStringLiteral("⚠")), qPrintable(planLine->text()));
    QVERIFY2(planLine->text().contains(QLatin1String("i2v.safetensors")),
             qPrintable(planLine->text()));
  }

  void a_run_with_loras_lands_in_the_history_and_its_mp4_restores_them() {
    QTemporaryDir data;
    QTemporaryDir root;
    const QString model = root.filePath(QStringLiteral("wan demo"));
    QVERIFY(copyDemoModel(model));
    const QString style =
        writeDemoLora(QDir(model).filePath(QStringLiteral("loras/style.safetensors")));
    const QString off =
        writeDemoLora(root.filePath(QStringLiteral("elsewhere/off.safetensors")), 2);
    MainWindow w(options(data));
    GenerationSettings s = demoSettings();
    s.model = {model};
    s.loras = {lora(style, 0.7), lora(off, 1.0, false)};
    w.applySettings(s);
    QVERIFY(settle(w));
    QVERIFY2(w.generateEnabled(), qPrintable(w.generateBlockedReason()));
    w.generate();
    QVERIFY(waitForIdle(w));
    QVERIFY2(w.lastMessage().isEmpty(), qPrintable(w.lastMessage()));

    // The clip names the LoRA that ran, by file name, size and fingerprint, with its strength.
    const auto clip = GenerationSettings::fromVideo(w.lastVideo());
    QVERIFY(clip.has_value());
    QCOMPARE(clip->loras.size(), qsizetype{1});
    QCOMPARE(clip->loras[0].name, QStringLiteral("style.safetensors"));
    QCOMPARE(clip->loras[0].bytes, static_cast<quint64>(QFileInfo(style).size()));
    QCOMPARE(clip->loras[0].fingerprint,
             QString::fromStdString(io::file_fingerprint(toPath(style))));
    QCOMPARE(static_cast<float>(clip->loras[0].strength), 0.7f);  // the engine's float

    // The history keeps the whole list (the disabled one too) with what the clip says.
    QTRY_COMPARE_WITH_TIMEOUT(w.historyPanel()->count(), 1, 30000);
    w.loraList()->setLoras({});
    emit w.historyPanel()->list()->itemActivated(w.historyPanel()->list()->item(0));
    QVERIFY(settle(w));
    QList<LoraSetting> expected = s.loras;
    expected[0].bytes = clip->loras[0].bytes;
    expected[0].fingerprint = clip->loras[0].fingerprint;
    QCOMPARE(w.settings().loras, expected);

    // The MP4 alone: the LoRA is found in the model folder's loras folder.
    w.loraList()->setLoras({});
    QVERIFY(w.openVideo(w.lastVideo()));
    QVERIFY(settle(w));
    QVERIFY2(w.lastMessage().isEmpty(), qPrintable(w.lastMessage()));
    QCOMPARE(w.settings().loras.size(), qsizetype{1});
    QCOMPARE(w.settings().loras[0].path, style);
    QCOMPARE(static_cast<float>(w.settings().loras[0].strength), 0.7f);
    QCOMPARE(w.loraList()->spinBox(0)->value(), 0.7);
    QVERIFY(w.settings().loras[0].enabled);
    QVERIFY2(w.generateEnabled(), qPrintable(w.generateBlockedReason()));
  }
};

QTEST_MAIN(LoraTest)
#include "lora_test.moc"
