// The history (JSON + PNG thumbnail per item in the data folder) and the settings it restores:
// every setting survives the round trip through the store, through the generator's settings JSON
// and through a Ferry MP4's metadata; files that are not Ferry videos give a message.
#include "gui/history.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QListWidget>
#include <QtTest/QtTest>
#include <limits>

#include "core/pipeline/session.h"
#include "gui/generation_settings.h"
#include "tests/gui/gui_test_support.h"

using namespace ferry::gui;
using namespace ferry::gui::test;

namespace {

GenerationSettings sample() {
  GenerationSettings s;
  s.prompt = QStringLiteral("a lighthouse in a storm, waves breaking — 灯塔");
  s.negativePrompt = QStringLiteral("blurry");
  s.image = QStringLiteral("/photos/start.png");
  s.endImage = QStringLiteral("/photos/end.png");
  s.model = {QStringLiteral("/models/wan2.2-ti2v-5b")};
  s.width = 1280;
  s.height = 704;
  s.frames = 121;
  s.fps = 24;
  s.steps = 30;
  s.guideScale = 4.5;
  s.lowNoiseGuideScale = 3;
  s.shift = 7;
  s.sampler = QStringLiteral("euler");
  s.seed = (quint64{1} << 40) + 3;
  s.seedMode = SeedMode::kIncrement;
  s.preset = QStringLiteral("laptop-8gb");
  s.noise = QStringLiteral("/replays/noise.safetensors");
  s.saveNoise = true;
  s.saveLatents = true;
  s.saveTextStates = true;
  s.modelFiles = {{QStringLiteral("vae"), QStringLiteral("Wan2.2_VAE.safetensors"), 1409400000,
                   QStringLiteral("fp1:0123456789abcdef")}};
  s.noiseFile = {
      {}, QStringLiteral("noise.safetensors"), 0, QStringLiteral("fp1:fedcba9876543210")};
  return s;
}

// A real Ferry MP4 from the demo model, made through the engine's API.
QString makeVideo(const QTemporaryDir& dir, const GenerationSettings& s) {
  const auto engine = session(cpuMachine());
  ferry::pipeline::ProgressSink sink;
  ferry::pipeline::CancelToken cancel;
  const QString video = dir.filePath(QStringLiteral("made.mp4"));
  const auto request = s.toRequest(video);
  engine->run(*engine->find(request.model), request, sink, cancel);
  return video;
}

}  // namespace

class HistoryTest : public QObject {
  Q_OBJECT

 private slots:
  void settings_survive_their_json() {
    const GenerationSettings s = sample();
    QCOMPARE(GenerationSettings::fromJson(s.toJson()), s);
  }

  void the_end_image_and_the_low_noise_guide_scale_reach_the_request() {
    const auto r = sample().toRequest(QStringLiteral("/out/a.mp4"));
    QVERIFY(r.end_image.has_value());
    QCOMPARE(*r.end_image, std::filesystem::path("/photos/end.png"));
    QVERIFY(r.low_noise_guide_scale.has_value());
    QCOMPARE(*r.low_noise_guide_scale, 3.0f);
    GenerationSettings one = sample();
    one.endImage.clear();
    one.lowNoiseGuideScale = 0;  // the model's default (one expert: none)
    const auto plain = one.toRequest(QStringLiteral("/out/a.mp4"));
    QVERIFY(!plain.end_image.has_value());
    QVERIFY(!plain.low_noise_guide_scale.has_value());
  }

  void the_advanced_settings_reach_the_request() {
    GenerationSettings s = sample();
    const QString video = QStringLiteral("/videos/ferry-20261130-031502.mp4");
    auto r = s.toRequest(video);
    QCOMPARE(r.noise, toPath(QStringLiteral("/replays/noise.safetensors")));
    // The save targets default to files next to the video, named for it.
    QCOMPARE(r.save_noise,
             toPath(QStringLiteral("/videos/ferry-20261130-031502.noise.safetensors")));
    QCOMPARE(r.save_latents,
             toPath(QStringLiteral("/videos/ferry-20261130-031502.latents.safetensors")));
    QVERIFY(r.save_text_states);
    // Or the files chosen.
    s.saveNoisePath = QStringLiteral("/replays/run-noise.safetensors");
    s.saveLatentsPath = QStringLiteral("/replays/run-latents.safetensors");
    r = s.toRequest(video);
    QCOMPARE(r.save_noise, toPath(s.saveNoisePath));
    QCOMPARE(r.save_latents, toPath(s.saveLatentsPath));
    // Off: nothing asked, and the text states only ever with the latents.
    s.noise.clear();
    s.saveNoise = false;
    s.saveLatents = false;
    r = s.toRequest(video);
    QVERIFY(r.noise.empty());
    QVERIFY(r.save_noise.empty());
    QVERIFY(r.save_latents.empty());
    QVERIFY(!r.save_text_states);
  }

  void the_chosen_save_paths_are_not_remembered() {
    GenerationSettings s = sample();
    s.saveNoisePath = QStringLiteral("/replays/run-noise.safetensors");
    const GenerationSettings back = GenerationSettings::fromJson(s.toJson());
    QVERIFY(back.saveNoisePath.isEmpty());  // a later run would overwrite it
    QVERIFY(back.saveNoise);
    QCOMPARE(back.noise, s.noise);
  }

  void an_old_clip_names_its_model_files_by_their_file_names() {
    // Clips made before the session API carry absolute paths as plain strings.
    const QJsonObject old = QJsonDocument::fromJson(R"({"prompt": "x", "model_files": [
        "/home/ana/models/wan/diffusion_models/wan2.2_ti2v_5B_fp16.safetensors",
        "/home/ana/models/wan/vae/wan2.2_vae.safetensors"]})")
                                .object();
    const GenerationSettings s = GenerationSettings::fromJson(old);
    QCOMPARE(s.modelFiles.size(), 2);
    QCOMPARE(s.modelFiles[0].name, QStringLiteral("wan2.2_ti2v_5B_fp16.safetensors"));
    QCOMPARE(s.modelFiles[1].name, QStringLiteral("wan2.2_vae.safetensors"));
    QCOMPARE(s.modelFiles[1].bytes, quint64{0});  // unknown: not checked
    QCOMPARE(s.model, QStringList{QStringLiteral("/home/ana/models/wan")});
  }

  void an_item_keeps_its_settings_video_and_thumbnail_newest_first() {
    QTemporaryDir dir;
    HistoryStore store(dir.filePath(QStringLiteral("history")));
    QImage thumb(320, 180, QImage::Format_RGB888);
    thumb.fill(Qt::darkCyan);
    const HistoryItem first =
        store.add(sample(), QStringLiteral("/videos/a.mp4"), QStringLiteral("1280×704"), thumb);
    QVERIFY(!first.id.isEmpty());
    QTest::qWait(5);
    GenerationSettings second = sample();
    second.prompt = QStringLiteral("second");
    QVERIFY(!store.add(second, QStringLiteral("/videos/b.mp4"), {}, {}).id.isEmpty());

    const QList<HistoryItem> items = store.items();
    QCOMPARE(items.size(), 2);
    QCOMPARE(items[0].settings.prompt, QStringLiteral("second"));
    QCOMPARE(items[1].settings, sample());
    QCOMPARE(items[1].video, QStringLiteral("/videos/a.mp4"));
    QVERIFY(items[0].thumbnail.isEmpty());
    QVERIFY(QFileInfo::exists(items[1].thumbnail));
    QCOMPARE(QImage(items[1].thumbnail).width(), 160);
    // Only the item's two files, nothing temporary left behind.
    QCOMPARE(QDir(store.folder()).entryList(QDir::Files).size(), 3);

    QVERIFY(store.remove(items[1].id));
    QCOMPARE(store.items().size(), 1);
  }

  void unreadable_items_are_skipped() {
    QTemporaryDir dir;
    HistoryStore store(dir.path());
    QFile junk(dir.filePath(QStringLiteral("junk.json")));
    QVERIFY(junk.open(QIODevice::WriteOnly));
    junk.write("{ not json");
    junk.close();
    store.add(sample(), QStringLiteral("/v.mp4"), {}, {});
    QCOMPARE(store.items().size(), 1);
  }

  void the_panel_restores_every_setting_of_an_item() {
    QTemporaryDir dir;
    HistoryStore store(dir.path());
    store.add(sample(), QStringLiteral("/videos/a.mp4"), QStringLiteral("x"), {});
    HistoryPanel panel(&store);
    QCOMPARE(panel.count(), 1);
    QSignalSpy restore(&panel, &HistoryPanel::restoreRequested);
    panel.list()->setCurrentRow(0);
    emit panel.list()->itemActivated(panel.list()->item(0));
    QCOMPARE(restore.count(), 1);
    QCOMPARE(restore.front().front().value<GenerationSettings>(), sample());
  }

  void a_ferry_mp4_carries_the_settings_that_made_it() {
    QTemporaryDir dir;
    GenerationSettings s;
    s.prompt = QStringLiteral("a ferry at dawn");
    s.negativePrompt = QStringLiteral("rain");
    s.model = {demoFolder()};
    s.width = 64;
    s.height = 64;
    s.frames = 5;
    s.fps = 12;
    s.steps = 2;
    s.guideScale = 4;
    s.shift = 3;
    s.sampler = QStringLiteral("euler");
    s.seed = 99;
    s.preset = QStringLiteral("cpu");
    const QString video = makeVideo(dir, s);
    QString why;
    const auto restored = GenerationSettings::fromVideo(video, &why);
    QVERIFY2(restored.has_value(), qPrintable(why));
    QCOMPARE(restored->prompt, s.prompt);
    QCOMPARE(restored->negativePrompt, s.negativePrompt);
    QCOMPARE(restored->width, 64);
    QCOMPARE(restored->height, 64);
    QCOMPARE(restored->frames, 5);
    QCOMPARE(restored->fps, 12);
    QCOMPARE(restored->steps, 2);
    QCOMPARE(restored->guideScale, 4.0);
    QCOMPARE(restored->shift, 3.0);
    QCOMPARE(restored->sampler, QStringLiteral("euler"));
    QCOMPARE(restored->seed, quint64{99});
    QCOMPARE(restored->preset, QStringLiteral("cpu"));
    // The video names its model files without their folder (a shared clip leaks no folder
    // names): no model folder restores, the window keeps the one chosen.
    QVERIFY2(restored->model.isEmpty(), qPrintable(restored->model.join(',')));
    QVERIFY(!restored->modelFiles.isEmpty());
    for (const ClipFile& f : restored->modelFiles) {
      QVERIFY2(!f.name.contains(QLatin1Char('/')), qPrintable(f.name));
      QVERIFY2(QFileInfo::exists(QDir(demoFolder()).filePath(f.name)) ||
                   !filesEndingIn(demoFolder(), QLatin1Char('/') + f.name).isEmpty(),
               qPrintable(f.name));
      QVERIFY(f.bytes > 0);
      QVERIFY(f.fingerprint.startsWith(QLatin1String("fp1:")));
    }
    QVERIFY(restored->noiseFile.name.isEmpty());  // the seed's noise
  }

  void the_default_negative_prompt_restores_as_empty() {
    QTemporaryDir dir;
    GenerationSettings s;
    s.prompt = QStringLiteral("x");
    s.model = {demoFolder()};
    s.width = s.height = 64;
    s.frames = 5;
    s.steps = 1;
    s.preset = QStringLiteral("cpu");
    const QString video = makeVideo(dir, s);
    // The model's default, as the engine resolves an empty negative prompt.
    const auto engine = session(cpuMachine());
    const auto resolved = engine->validate(*engine->find({toPath(demoFolder())}),
                                           s.toRequest(dir.filePath(QStringLiteral("x.mp4"))));
    const QString defaultNegative = QString::fromStdString(resolved.negative_prompt);
    QVERIFY(!defaultNegative.isEmpty());
    const auto restored = GenerationSettings::fromVideo(video, nullptr, defaultNegative);
    QVERIFY(restored.has_value());
    QVERIFY(restored->negativePrompt.isEmpty());
    // Without the model's default the prompt used is what restores.
    QCOMPARE(GenerationSettings::fromVideo(video)->negativePrompt, defaultNegative);
  }

  // What a shared clip can make Ferry do (GenerationSettings::fromClip): restore settings, never
  // point it at a place of the clip author's choosing.
  void a_clip_restores_no_folder_and_no_path_it_names() {
    const QJsonObject clip{
        {QStringLiteral("prompt"), QStringLiteral("a ferry")},
        {QStringLiteral("seed"), 7},
        {QStringLiteral("model_folder"), QStringLiteral("\\\\attacker\\share\\models")},
        {QStringLiteral("noise"), QStringLiteral("/home/victim/.ssh/id_rsa")},
        {QStringLiteral("image"), QStringLiteral("start.png")},
        {QStringLiteral("end_image"), QStringLiteral("end.png")},
        {QStringLiteral("low_noise_guide_scale"), 3.5},
        {QStringLiteral("model_files"),
         QJsonArray{QStringLiteral("C:\\Users\\me\\models\\wan\\dit.safetensors"),
                    QStringLiteral("/home/me/models/wan/vae.safetensors")}},
        {QStringLiteral("noise_file"),
         QJsonObject{{QStringLiteral("name"), QStringLiteral("/tmp/replay.noise.safetensors")},
                     {QStringLiteral("fingerprint"), QStringLiteral("fp1:00")}}},
        {QStringLiteral("save_noise"), true}};
    const QByteArray json = QJsonDocument(clip).toJson();
    QString why;
    const auto s = GenerationSettings::fromClip(json, QStringLiteral("clip.mp4"), &why);
    QVERIFY2(s.has_value(), qPrintable(why));
    QCOMPARE(s->prompt, QStringLiteral("a ferry"));
    // A legacy clip's absolute model files no longer make a model folder (they used to: the
    // folder common to them was restored and scanned).
    QVERIFY2(s->model.isEmpty(), qPrintable(s->model.join(',')));
    QVERIFY2(s->noise.isEmpty(), qPrintable(s->noise));
    QCOMPARE(s->image, QStringLiteral("start.png"));
    QCOMPARE(s->endImage, QStringLiteral("end.png"));
    QCOMPARE(s->lowNoiseGuideScale, 3.5);
    QCOMPARE(s->modelFiles.size(), 2);
    QCOMPARE(s->modelFiles[0].name, QStringLiteral("dit.safetensors"));
    QCOMPARE(s->modelFiles[1].name, QStringLiteral("vae.safetensors"));
    QCOMPARE(s->noiseFile.name, QStringLiteral("replay.noise.safetensors"));
    // Saving is restored as a choice; where is the run's output folder's business.
    QVERIFY(s->saveNoise);
    QVERIFY(s->saveNoisePath.isEmpty());
    const auto request = s->toRequest(QStringLiteral("/out/clip.mp4"));
    QCOMPARE(request.save_noise.parent_path(), std::filesystem::path("/out"));
  }

  void a_clip_naming_a_file_outside_its_folder_is_refused_with_a_message() {
    for (const char* key : {"image", "end_image"}) {
      for (const char* image : {"../../secret.png", "/etc/passwd", "C:x.png", "NUL.png",
                                "start.png:hidden", "start.png."}) {
        QJsonObject j{{QStringLiteral("prompt"), QStringLiteral("x")},
                      {QString::fromLatin1(key), QString::fromUtf8(image)}};
        QString why;
        const auto s = GenerationSettings::fromClip(QJsonDocument(j).toJson(),
                                                    QStringLiteral("shared.mp4"), &why);
        QVERIFY2(!s.has_value(), image);
        QVERIFY2(why.contains(QLatin1String("shared.mp4")), qPrintable(why));
        QVERIFY2(why.contains(QLatin1String("refused")), qPrintable(why));
      }
    }
    QJsonObject j{
        {QStringLiteral("prompt"), QStringLiteral("x")},
        {QStringLiteral("model_files"),
         QJsonArray{QJsonObject{{QStringLiteral("name"), QStringLiteral("com1.safetensors")}}}}};
    QVERIFY(!GenerationSettings::fromClip(QJsonDocument(j).toJson(), QStringLiteral("c.mp4")));
  }

  void a_clip_with_numbers_out_of_range_restores_them_clamped() {
    const QByteArray json =
        "{\"prompt\": \"x\", \"seed\": -1, \"width\": -832, \"height\": 1e300, "
        "\"frames\": 2147483648, \"steps\": -3, \"model_files\": ["
        "{\"name\": \"a.safetensors\", \"bytes\": -5}, "
        "{\"name\": \"b.safetensors\", \"bytes\": 1e30}]}";
    const auto s = GenerationSettings::fromClip(json, QStringLiteral("c.mp4"));
    QVERIFY(s.has_value());
    QCOMPARE(s->seed, quint64{0});
    QCOMPARE(s->width, 0);
    QCOMPARE(s->height, 0);
    QCOMPARE(s->frames, 0);
    QCOMPARE(s->steps, 0);
    QCOMPARE(s->modelFiles[0].bytes, quint64{0});
    QCOMPARE(s->modelFiles[1].bytes, std::numeric_limits<quint64>::max());
    const auto huge = GenerationSettings::fromClip("{\"prompt\": \"x\", \"seed\": 1e300}",
                                                   QStringLiteral("c.mp4"));
    QCOMPARE(huge->seed, std::numeric_limits<quint64>::max());
  }

  void a_clip_larger_than_its_bound_is_refused_unread() {
    QByteArray json = "{\"prompt\": \"";
    json += QByteArray(kMaxClipSettingsBytes, 'a');
    json += "\"}";
    QString why;
    QVERIFY(!GenerationSettings::fromClip(json, QStringLiteral("big.mp4"), &why));
    QVERIFY2(why.contains(QLatin1String("big.mp4")), qPrintable(why));
    // Deep nesting is Qt's parser's to bound: refused as no settings, no crash.
    QByteArray deep = "{\"prompt\": \"x\", \"a\": ";
    deep += QByteArray(100000, '[');
    QVERIFY(!GenerationSettings::fromClip(deep, QStringLiteral("deep.mp4"), &why));
  }

  // Closed nesting well inside the clip's and the history file's 1 MiB bounds reaches Qt's parser:
  // its own depth limit (1024 in Qt 6) refuses it, as no settings, without a deep recursion. A
  // history file over its bound is refused before it is parsed.
  void deep_or_oversized_settings_json_is_refused_without_recursion() {
    const QByteArray deep = QByteArray(100000, '[') + QByteArray(100000, ']');
    QString why;
    QVERIFY(!GenerationSettings::fromClip(deep, QStringLiteral("deep.mp4"), &why));
    QVERIFY2(why.contains(QLatin1String("deep.mp4")), qPrintable(why));
    QVERIFY(!GenerationSettings::fromClip("{\"prompt\": \"x\", \"loras\": " + deep + "}",
                                          QStringLiteral("deep.mp4"), &why));
    QVERIFY(!historyItemFromJson(deep, QStringLiteral("deep")));
    QVERIFY(!historyItemFromJson("{\"video\": \"a.mp4\", \"settings\": " + deep + "}",
                                 QStringLiteral("deep")));
    // Just under Qt's limit the same shape parses: the refusals above are the depth's.
    const QByteArray shallow = QByteArray(1000, '[') + QByteArray(1000, ']');
    QVERIFY(historyItemFromJson("{\"video\": \"a.mp4\", \"x\": " + shallow + "}",
                                QStringLiteral("ok")));

    QByteArray big = "{\"video\": \"a.mp4\", \"summary\": \"";
    big += QByteArray(kMaxHistoryFileBytes, 'a');
    big += "\"}";
    QVERIFY(!historyItemFromJson(big, QStringLiteral("big")));
    QVERIFY(historyItemFromJson(big.left(1000) + "\"}", QStringLiteral("small")));
  }

  void a_file_that_is_not_a_ferry_video_gives_a_message() {
    QTemporaryDir dir;
    const QString text = dir.filePath(QStringLiteral("notes.mp4"));
    QFile f(text);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("hello\n");
    f.close();
    QString why;
    QVERIFY(!GenerationSettings::fromVideo(text, &why).has_value());
    QVERIFY(!why.isEmpty());
    QVERIFY(!GenerationSettings::fromVideo(dir.filePath(QStringLiteral("missing.mp4")), &why));
    QVERIFY(!why.isEmpty());
  }
};

QTEST_MAIN(HistoryTest)
#include "history_test.moc"
