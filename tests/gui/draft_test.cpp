// TAEHV in the app (issue 27), on the offscreen platform with the demo model on the CPU: with the
// tiny taew2_2 decoder of the TAEHV tests beside the model, each step's preview is a picture (half
// the video's size, every step the budget allows: the first always) and "Decode draft with TAEHV"
// is offered; a draft lands in the history with its badge, and "Decode with the full VAE" makes
// from its kept latents, without denoising, a new item linked to it whose frames are those of a
// normal run; a small animated preview of every latent frame loops while a video is made. Without
// the decoder the preview is the latent's colour sketch and its caption says which file to put
// where; the draft box is disabled with the same advice.
#include <QCheckBox>
#include <QDir>
#include <QFile>
#include <QListWidget>
#include <QPushButton>
#include <QTemporaryDir>
#include <QtTest/QtTest>

#include "core/media/video_reader.h"
#include "gui/history.h"
#include "gui/main_window.h"
#include "gui/preset_panel.h"
#include "tests/gui/gui_test_support.h"

using namespace ferry::gui;
using namespace ferry::gui::test;

namespace {

// A copy of the demo model in `to`, with the tiny TAEHV decoder beside it when `taehv`.
bool demoModelIn(const QString& to, bool taehv) {
  const QDir from(demoFolder());
  for (const QString& file : filesEndingIn(demoFolder(), QString())) {
    const QString target = QDir(to).filePath(from.relativeFilePath(file));
    if (!QDir().mkpath(QFileInfo(target).absolutePath()) || !QFile::copy(file, target)) {
      return false;
    }
  }
  return !taehv ||
         QFile::copy(QStringLiteral(FERRY_TEST_DATA_DIR "/taehv/taew2_2_tiny.safetensors"),
                     QDir(to).filePath(QStringLiteral("taew2_2.safetensors")));
}

GenerationSettings settingsFor(const QString& model, int steps) {
  GenerationSettings s;
  s.prompt = QStringLiteral("a ferry crossing a fjord at dawn");
  s.model = {model};
  s.width = 64;
  s.height = 64;
  s.frames = 5;
  s.fps = 8;
  s.steps = steps;
  s.guideScale = 5;
  s.shift = 5;
  s.sampler = QStringLiteral("unipc");
  s.seed = 77;
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

bool waitForIdle(MainWindow& w, int ms = 120000) {
  QElapsedTimer t;
  t.start();
  QTest::qWait(1);
  while (w.state() != MainWindow::State::kIdle && t.elapsed() < ms) QTest::qWait(10);
  return w.state() == MainWindow::State::kIdle;
}

// What a run showed: each preview's size, and per step whether its preview was skipped.
struct Watched {
  QList<QSize> previews;
  QList<bool> skipped;
  QStringList stages;
};

void watch(MainWindow& w, Watched& seen) {
  QObject::connect(w.worker(), &GenerationWorker::preview, &w,
                   [&seen](const QImage& image) { seen.previews << image.size(); });
  QObject::connect(w.worker(), &GenerationWorker::step, &w,
                   [&seen](const StepInfo& info) { seen.skipped << info.previewSkipped; });
  QObject::connect(w.worker(), &GenerationWorker::stageChanged, &w,
                   [&seen](int, const QString& name) { seen.stages << name; });
}

std::vector<ferry::media::RgbImage> frames(const QString& video) {
  return ferry::media::read_video_frames(toPath(video), 100);
}

}  // namespace

class DraftTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { demoFolder(); }

  void a_preview_arrives_each_step_with_a_taehv_file_beside_the_model() {
    QTemporaryDir data, models;
    const QString model = models.filePath(QStringLiteral("demo"));
    QVERIFY(demoModelIn(model, true));
    MainWindow w(options(data));
    w.applySettings(settingsFor(model, 4));
    QVERIFY(settle(w));
    QVERIFY(w.draftBox()->isEnabled());
    Watched seen;
    watch(w, seen);
    // The animated preview: every latent frame small (2 of 8 × 8 px for 5 frames at 64 × 64),
    // shown looping beside the player's buttons while the video is made.
    QList<QList<QSize>> animations;
    bool shown = true;
    connect(w.worker(), &GenerationWorker::previewFrames, &w, [&](const QVector<QImage>& f) {
      QList<QSize> sizes;
      for (const QImage& image : f) sizes << image.size();
      animations << sizes;
      shown = shown && w.animatedPreviewShown() && w.animatedPreviewFrames() == f.size();
    });
    w.generate();
    QVERIFY(waitForIdle(w));
    QVERIFY2(w.lastMessage().isEmpty(), qPrintable(w.lastMessage()));
    QVERIFY(!w.animatedPreviewShown());  // the video plays now
    QCOMPARE(animations.size(), seen.previews.size());
    for (const QList<QSize>& sizes : animations) {
      QCOMPARE(sizes, (QList<QSize>{QSize(8, 8), QSize(8, 8)}));
    }
    QVERIFY(shown);
    QCOMPARE(seen.skipped.size(), 4);
    // A picture for every step whose preview was made (the first always: it measures the cost),
    // at half the video's size (the preview decoder's last upsample is off), none for the others.
    QVERIFY(!seen.skipped.front());
    QCOMPARE(seen.previews.size(), static_cast<qsizetype>(seen.skipped.count(false)));
    for (const QSize& size : seen.previews) QCOMPARE(size, QSize(32, 32));
    QCOMPARE(w.previewCaption(), QStringLiteral("preview"));
    qInfo("previews made at %lld of 4 steps", static_cast<long long>(seen.previews.size()));
  }

  void without_a_taehv_file_the_preview_says_which_file_to_put_where() {
    QTemporaryDir data, models;
    const QString model = models.filePath(QStringLiteral("demo"));
    QVERIFY(demoModelIn(model, false));
    MainWindow w(options(data));
    w.applySettings(settingsFor(model, 2));
    QVERIFY(settle(w));
    // No draft without the decoder: the box says how to get it.
    QVERIFY(!w.draftBox()->isEnabled());
    QVERIFY2(w.draftBox()->toolTip().contains(QStringLiteral("taew2_2.safetensors")),
             qPrintable(w.draftBox()->toolTip()));
    Watched seen;
    watch(w, seen);
    w.generate();
    QVERIFY(waitForIdle(w));
    QVERIFY2(w.lastMessage().isEmpty(), qPrintable(w.lastMessage()));
    // The colour sketch: one pixel per latent position (64 / 16), every step.
    QCOMPARE(seen.previews.size(), 2);
    for (const QSize& size : seen.previews) QCOMPARE(size, QSize(4, 4));
    const QString caption = w.previewCaption();
    QVERIFY2(caption.contains(QStringLiteral("colour sketch")), qPrintable(caption));
    QVERIFY2(caption.contains(QStringLiteral("taew2_2.safetensors")), qPrintable(caption));
    QVERIFY2(caption.contains(QStringLiteral("github.com/madebyollin/taehv")), qPrintable(caption));
    QVERIFY2(caption.contains(QDir::toNativeSeparators(model)), qPrintable(caption));
    QCOMPARE(w.animatedPreviewFrames(), 0);  // no TAEHV, no animation
  }

  void a_draft_is_badged_in_the_history_and_its_full_decode_equals_a_normal_run() {
    QTemporaryDir data, models;
    const QString model = models.filePath(QStringLiteral("demo"));
    QVERIFY(demoModelIn(model, true));
    MainWindow w(options(data));
    w.applySettings(settingsFor(model, 2));
    QVERIFY(settle(w));

    // A normal run first: the frames the full decode must give.
    w.generate();
    QVERIFY(waitForIdle(w));
    QVERIFY2(w.lastMessage().isEmpty(), qPrintable(w.lastMessage()));
    QTRY_COMPARE_WITH_TIMEOUT(w.historyPanel()->count(), 1, 30000);
    const auto normal = frames(w.lastVideo());
    QCOMPARE(normal.size(), std::size_t{5});

    // The draft: the plan shows the TAEHV stage in place of the VAE's.
    w.draftBox()->setChecked(true);
    QVERIFY(settle(w));
    QVERIFY(w.settings().draft);
    QVERIFY(w.presetPanel()->plan().has_value());
    QCOMPARE(QString::fromStdString(w.presetPanel()->plan()->stages.back().stage),
             QStringLiteral("TAEHV draft decode"));
    w.generate();
    QVERIFY(waitForIdle(w));
    QVERIFY2(w.lastMessage().isEmpty(), qPrintable(w.lastMessage()));
    QTRY_COMPARE_WITH_TIMEOUT(w.historyPanel()->count(), 2, 30000);
    const QString draftVideo = w.lastVideo();
    const HistoryStore store(QDir(data.path()).filePath(QStringLiteral("history")));
    const HistoryItem draft = store.items().front();
    QVERIFY(draft.settings.draft);
    QVERIFY(QFileInfo::exists(keptLatentsPath(draft)));
    QVERIFY(frames(draftVideo).front().rgb != normal.front().rgb);  // TAEHV's, not the VAE's
    HistoryPanel* history = w.historyPanel();
    QVERIFY2(history->rowText(0).startsWith(QStringLiteral("[draft] ")),
             qPrintable(history->rowText(0)));
    QVERIFY(!history->rowText(1).startsWith(QStringLiteral("[draft]")));
    history->list()->setCurrentRow(1);
    QVERIFY(history->fullDecodeButton()->isHidden());
    history->list()->setCurrentRow(0);
    QVERIFY(!history->fullDecodeButton()->isHidden());
    QVERIFY(history->fullDecodeButton()->isEnabled());
    QVERIFY(history->settingsText().contains(QStringLiteral("Draft: decoded with TAEHV")));

    // The full decode: the VAE on the kept latents, no denoising step.
    Watched seen;
    watch(w, seen);
    history->fullDecodeButton()->click();
    QCOMPARE(w.state(), MainWindow::State::kRunning);
    QVERIFY(waitForIdle(w));
    QVERIFY2(w.lastMessage().isEmpty(), qPrintable(w.lastMessage()));
    QVERIFY(seen.skipped.isEmpty());
    QCOMPARE(seen.stages, QStringList{QStringLiteral("decoding the video")} +
                              QStringList{QStringLiteral("writing the video")});
    QTRY_COMPARE_WITH_TIMEOUT(history->count(), 3, 30000);
    const HistoryItem full = store.items().front();
    QCOMPARE(full.draftOf, draft.id);
    QVERIFY(!full.settings.draft);
    QCOMPARE(full.settings.latentsFile.name, draft.settings.keptLatents);
    QVERIFY(!history->rowText(0).startsWith(QStringLiteral("[draft]")));
    const auto decoded = frames(full.video);
    QCOMPARE(decoded.size(), normal.size());
    // The VAE on the kept latents gives the run's frames, and the writer the same file for them.
    for (std::size_t i = 0; i < normal.size(); ++i) {
      QVERIFY2(decoded[i].rgb == normal[i].rgb, qPrintable(QStringLiteral("frame %1").arg(i)));
    }

    // Latents that are gone: a message, no run.
    QVERIFY(QFile::remove(keptLatentsPath(draft)));
    w.decodeDraft(draft.settings, draft.video, draft.id);
    QCOMPARE(w.state(), MainWindow::State::kIdle);
    QVERIFY2(w.lastMessage().contains(draft.settings.keptLatents), qPrintable(w.lastMessage()));
  }
};

QTEST_MAIN(DraftTest)
#include "draft_test.moc"
