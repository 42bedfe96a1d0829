// GenerationWorker on its own QThread with the demo model on the CPU backend (64×64, 5 frames,
// 2–3 steps: seconds): the signals arrive on the GUI thread in the order the job runs, a failure
// and a cancel each end the job with their own signal, a cancel leaves nothing behind, and each run
// has its own CancelToken: a cancel before the run or between stages is never lost, and never
// reaches the next run.
#include "gui/generation_worker.h"

#include <QSignalSpy>
#include <QThread>
#include <QtTest/QtTest>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "core/error.h"
#include "core/media/video_writer.h"
#include "tests/gui/gui_test_support.h"

using namespace ferry::gui;
using namespace ferry::gui::test;
namespace media = ferry::media;

class GenerationWorkerTest : public QObject {
  Q_OBJECT

 private:
  QThread thread_;
  GenerationWorker* worker_ = nullptr;
  QStringList log_;  // the signals in the order the GUI thread received them

  GenerationJob job(const QString& output, int steps = 3) {
    GenerationJob j;
    j.request.model = {toPath(demoFolder())};
    j.request.prompt = "a ferry crossing a fjord at dawn";
    j.request.width = 64;
    j.request.height = 64;
    j.request.frames = 5;
    j.request.steps = steps;
    j.request.seed = 7;
    j.request.preset = "cpu";
    j.request.output = toPath(output);
    j.logFolder = toPath(QFileInfo(output).dir().filePath(QStringLiteral("logs")));
    j.session = session(cpuMachine(), true);
    return j;
  }

  void run(const GenerationJob& j) {
    worker_->prepare();
    QMetaObject::invokeMethod(
        worker_, [w = worker_, j] { w->generate(j); }, Qt::QueuedConnection);
  }

  // Waits for the job's end (finished, failed or cancelled) and returns the log.
  bool waitForEnd(int ms = 120000) {
    QElapsedTimer timer;
    timer.start();
    while (timer.elapsed() < ms) {
      if (!log_.isEmpty() && (log_.back().startsWith(QLatin1String("finished")) ||
                              log_.back().startsWith(QLatin1String("failed")) ||
                              log_.back() == QLatin1String("cancelled"))) {
        return true;
      }
      QTest::qWait(10);
    }
    return false;
  }

 private slots:
  void init() {
    log_.clear();
    worker_ = new GenerationWorker;
    worker_->moveToThread(&thread_);
    connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
    thread_.start();
    // Receivers on the GUI thread: every signal arrives as a queued invocation.
    connect(worker_, &GenerationWorker::started, this, [this] {
      QVERIFY(QThread::currentThread() == thread());
      log_ << QStringLiteral("started");
    });
    connect(worker_, &GenerationWorker::stageChanged, this,
            [this](int, const QString& name) { log_ << QStringLiteral("stage ") + name; });
    connect(worker_, &GenerationWorker::step, this, [this](const StepInfo& s) {
      log_ << QStringLiteral("step %1/%2").arg(s.step).arg(s.steps);
    });
    connect(worker_, &GenerationWorker::preview, this, [this](const QImage& image) {
      QVERIFY(!image.isNull());
      log_ << QStringLiteral("preview");
    });
    connect(worker_, &GenerationWorker::finished, this,
            [this](const GenerationOutcome& o) { log_ << QStringLiteral("finished ") + o.video; });
    connect(worker_, &GenerationWorker::failed, this,
            [this](const QString& m, int) { log_ << QStringLiteral("failed ") + m; });
    connect(worker_, &GenerationWorker::cancelled, this,
            [this] { log_ << QStringLiteral("cancelled"); });
  }

  void cleanup() {
    worker_->cancel();
    thread_.quit();
    thread_.wait();
    worker_ = nullptr;
  }

  void signals_arrive_in_the_order_the_job_runs_and_end_with_finished() {
    QTemporaryDir out;
    const QString video = out.filePath(QStringLiteral("clip.mp4"));
    QSignalSpy finished(worker_, &GenerationWorker::finished);
    QSignalSpy steps(worker_, &GenerationWorker::step);
    run(job(video, 3));
    QVERIFY(waitForEnd());
    const QStringList expected = {QStringLiteral("started"),
                                  QStringLiteral("stage encoding the prompt"),
                                  QStringLiteral("stage denoising"),
                                  QStringLiteral("step 1/3"),
                                  QStringLiteral("preview"),
                                  QStringLiteral("step 2/3"),
                                  QStringLiteral("preview"),
                                  QStringLiteral("step 3/3"),
                                  QStringLiteral("preview"),
                                  QStringLiteral("stage decoding the video"),
                                  QStringLiteral("stage writing the video"),
                                  QStringLiteral("finished ") + video};
    QCOMPARE(log_, expected);
    // Spies on a worker signal record on the worker thread: poll, never wait() (a signal that
    // came before wait() would be missed).
    QTRY_COMPARE(finished.count(), 1);
    const auto outcome = finished.front().front().value<GenerationOutcome>();
    QVERIFY(QFileInfo::exists(outcome.video));
    QVERIFY(QFileInfo::exists(outcome.sidecar));
    QCOMPARE(outcome.frames, 5);
    QCOMPARE(outcome.seed, quint64{7});
    QVERIFY(outcome.settingsJson.contains(QLatin1String("\"prompt\"")));
    const auto last = steps.back().front().value<StepInfo>();
    QVERIFY(last.ramBytes > 0);
    QVERIFY(last.secondsPerStep > 0);
    // The run's log, in the job's log folder: the header, each step, the outcome.
    const QStringList logs =
        filesEndingIn(out.filePath(QStringLiteral("logs")), QStringLiteral(".log"));
    QCOMPARE(logs.size(), 1);
    QFile log(logs.front());
    QVERIFY(log.open(QIODevice::ReadOnly));
    const QString text = QString::fromUtf8(log.readAll());
    QVERIFY2(text.contains(QLatin1String("backend: CPU (")), qPrintable(text));
    QVERIFY(text.contains(QLatin1String("step 3/3 {")));
    QVERIFY(text.contains(QLatin1String("finished: ")));
  }

  void a_bad_request_ends_with_failed_and_the_engines_message() {
    QTemporaryDir out;
    GenerationJob j = job(out.filePath(QStringLiteral("clip.mp4")));
    j.request.model = {toPath(out.filePath(QStringLiteral("no-such-model")))};
    QSignalSpy failed(worker_, &GenerationWorker::failed);
    QSignalSpy started(worker_, &GenerationWorker::started);
    run(j);
    QVERIFY(waitForEnd());
    QCOMPARE(log_.front(), QStringLiteral("started"));
    QTRY_COMPARE(failed.count(), 1);
    const QString message = failed.front().at(0).toString();
    QVERIFY(!message.isEmpty());
    QVERIFY(failed.front().at(1).toInt() != static_cast<int>(ferry::ErrorCode::kInternal));
    QVERIFY(filesEndingIn(out.path(), QStringLiteral(".mp4")).isEmpty());
    // The log named by started() ends with the same message.
    QTRY_COMPARE(started.count(), 1);
    QFile log(started.front().front().toString());
    QVERIFY(log.open(QIODevice::ReadOnly));
    const QString last = QString::fromUtf8(log.readAll()).trimmed().split(QLatin1Char('\n')).back();
    QVERIFY2(last.contains(QLatin1String("failed (")) && last.contains(message), qPrintable(last));
  }

  void a_cancel_mid_run_ends_with_cancelled_and_writes_nothing() {
    QTemporaryDir out;
    QSignalSpy cancelled(worker_, &GenerationWorker::cancelled);
    QSignalSpy finished(worker_, &GenerationWorker::finished);
    // Cancel from the GUI thread as soon as the first step arrives.
    connect(worker_, &GenerationWorker::step, this, [this](const StepInfo& s) {
      if (s.step == 1) worker_->cancel();
    });
    run(job(out.filePath(QStringLiteral("clip.mp4")), 20));
    QVERIFY(waitForEnd());
    QCOMPARE(log_.back(), QStringLiteral("cancelled"));
    QTRY_COMPARE(cancelled.count(), 1);
    QCOMPARE(finished.count(), 0);
    QVERIFY(!log_.contains(QStringLiteral("step 20/20")));
    QVERIFY(!worker_->isRunning());
    QCOMPARE(QDir(out.path()).entryList(QDir::Files | QDir::NoDotAndDotDot), QStringList());
  }

  void a_cancel_before_the_job_starts_is_honoured() {
    QTemporaryDir out;
    QSignalSpy cancelled(worker_, &GenerationWorker::cancelled);
    worker_->prepare();
    worker_->cancel();
    QMetaObject::invokeMethod(
        worker_,
        [w = worker_, j = job(out.filePath(QStringLiteral("clip.mp4")))] { w->generate(j); },
        Qt::QueuedConnection);
    QTRY_COMPARE_WITH_TIMEOUT(cancelled.count(), 1, 30000);
    QTRY_COMPARE(log_, QStringList{QStringLiteral("cancelled")});
  }

  void a_cancel_between_stages_is_honoured_at_the_next_stage() {
    // Cancelled on the worker's thread as the prompt's stage is announced (before it runs, after
    // the run took its token): the run must stop there, not denoise. With a token reset when the
    // generator starts its work, such a cancel was lost (the old repeatCancel workaround).
    QTemporaryDir out;
    QSignalSpy cancelled(worker_, &GenerationWorker::cancelled);
    connect(
        worker_, &GenerationWorker::stageChanged, worker_,
        [w = worker_](int stage, const QString&) {
          if (stage == static_cast<int>(ferry::models::StageKind::kText)) w->cancel();
        },
        Qt::DirectConnection);
    run(job(out.filePath(QStringLiteral("clip.mp4")), 3));
    QVERIFY(waitForEnd());
    QCOMPARE(log_.back(), QStringLiteral("cancelled"));
    QVERIFY2(!log_.contains(QStringLiteral("stage denoising")), qPrintable(log_.join(", ")));
    QVERIFY(!log_.contains(QStringLiteral("step 1/3")));
    QCOMPARE(QDir(out.path()).entryList(QDir::Files | QDir::NoDotAndDotDot), QStringList());
  }

  void a_cancelled_run_does_not_cancel_the_next_one() {
    QTemporaryDir out;
    worker_->prepare();
    worker_->cancel();  // this run's token
    QMetaObject::invokeMethod(
        worker_,
        [w = worker_, j = job(out.filePath(QStringLiteral("a.mp4")), 2)] { w->generate(j); },
        Qt::QueuedConnection);
    QVERIFY(waitForEnd());
    QCOMPARE(log_.back(), QStringLiteral("cancelled"));
    log_.clear();
    const QString video = out.filePath(QStringLiteral("b.mp4"));
    run(job(video, 2));  // prepare(): a new token
    QVERIFY(waitForEnd());
    QCOMPARE(log_.back(), QStringLiteral("finished ") + video);
  }

  void frames_of_the_written_video_load_for_the_player() {
    QTemporaryDir out;
    const QString video = out.filePath(QStringLiteral("clip.mp4"));
    run(job(video, 2));
    QVERIFY(waitForEnd());
    QSignalSpy loaded(worker_, &GenerationWorker::framesLoaded);
    QMetaObject::invokeMethod(
        worker_, [w = worker_, video] { w->loadFrames(video, 32); }, Qt::QueuedConnection);
    QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 30000);
    const auto frames = loaded.front().at(1).value<QVector<QImage>>();
    QCOMPARE(frames.size(), 5);
    QCOMPARE(frames.front().width(), 32);
    QVERIFY(loaded.front().at(2).toDouble() > 0);
    QVERIFY(!loaded.front().at(3).value<SoundPtr>());  // Wan's clips are silent

    QSignalSpy failed(worker_, &GenerationWorker::framesFailed);
    loaded.clear();
    const QString text = out.filePath(QStringLiteral("notes.txt"));
    QFile f(text);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("not a video\n");
    f.close();
    QMetaObject::invokeMethod(
        worker_, [w = worker_, text] { w->loadFrames(text, 32); }, Qt::QueuedConnection);
    QTRY_VERIFY_WITH_TIMEOUT(failed.count() + loaded.count() > 0, 30000);
    QVERIFY2(failed.count() == 1, loaded.isEmpty() ? "neither" : "loaded");
    QVERIFY(!failed.front().at(1).toString().isEmpty());
  }

  // Replays (issue: two identical app runs gave different clips): two runs of the app's job in
  // one process (one session, the model opened once, as MainWindow runs the demo) hand the writer
  // the same pixels, end with the same latents, bit for bit, and write byte-identical MP4s.
  void two_runs_of_the_same_job_give_the_same_pixels_and_the_same_file() {
    struct Recorded {
      std::vector<float> latent;
      std::vector<float> pixels;  // every decoded chunk, in order, before the 8 bits
    };
    auto runs = std::make_shared<std::vector<Recorded>>();
    ferry::pipeline::SessionOptions o;
    o.machine = cpuMachine();
    o.presets = ferry::offload::builtin_presets();
    o.generator.stream_all = true;  // as MainWindow::demoSession()
    o.generator.final_latent = [runs](std::span<const float> v) {
      runs->back().latent.assign(v.begin(), v.end());
    };
    o.generator.decoded_frames = [runs](std::int64_t, std::int64_t, std::span<const float> v) {
      runs->back().pixels.insert(runs->back().pixels.end(), v.begin(), v.end());
    };
    const auto shared = std::make_shared<ferry::pipeline::Session>(o);
    const ferry::pipeline::ModelHandle model = shared->find({toPath(demoFolder())});
    QTemporaryDir out;
    QStringList videos;
    for (const char* name : {"a.mp4", "b.mp4"}) {
      GenerationJob j = job(out.filePath(QString::fromLatin1(name)), 2);
      j.session = shared;
      j.model = model;
      j.request.fps = 8;  // the app's demo settings (main_window_test's demoSettings)
      j.request.seed = 1234;
      j.request.guide_scale = 5.0f;
      j.request.shift = 5.0;
      j.request.sampler = "unipc";
      runs->emplace_back();
      log_.clear();
      run(j);
      QVERIFY(waitForEnd());
      QVERIFY2(log_.back().startsWith(QLatin1String("finished")), qPrintable(log_.back()));
      videos << out.filePath(QString::fromLatin1(name));
    }
    const Recorded& a = runs->at(0);
    const Recorded& b = runs->at(1);
    QVERIFY(!a.latent.empty() && !a.pixels.empty());
    QCOMPARE(b.latent.size(), a.latent.size());
    QCOMPARE(b.pixels.size(), a.pixels.size());
    const auto firstDifference = [](const std::vector<float>& x, const std::vector<float>& y) {
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (std::memcmp(&x[i], &y[i], sizeof(float)) != 0) return static_cast<qint64>(i);
      }
      return qint64{-1};
    };
    QCOMPARE(firstDifference(a.latent, b.latent), qint64{-1});
    QCOMPARE(firstDifference(a.pixels, b.pixels), qint64{-1});
    QFile fa(videos[0]), fb(videos[1]);
    QVERIFY(fa.open(QIODevice::ReadOnly) && fb.open(QIODevice::ReadOnly));
    QVERIFY(fa.readAll() == fb.readAll());
  }

  // A clip with a soundtrack (H3's 32 kHz stereo) gives the player its sound, as written (AAC:
  // the length is cut to the video's, the samples within AAC's error).
  void the_soundtrack_of_a_video_loads_for_the_player() {
    QTemporaryDir out;
    const QString video = out.filePath(QStringLiteral("sound.mp4"));
    media::VideoSettings settings;
    settings.width = 32;
    settings.height = 32;
    settings.fps = 24;
    settings.audio.sample_rate = 32000;
    settings.audio.channels = 2;
    const int frames = 12;
    const int samples = frames * 32000 / 24;
    for (int i = 0; i < samples; ++i) {
      const float t = static_cast<float>(i) / 32000.0f;
      settings.audio.samples.push_back(0.5f * std::sin(2.0f * 3.14159265f * 440.0f * t));
      settings.audio.samples.push_back(0.25f * std::sin(2.0f * 3.14159265f * 660.0f * t));
    }
    {
      media::VideoWriter writer(toPath(video), settings);
      media::RgbImage frame;
      frame.width = 32;
      frame.height = 32;
      frame.rgb.assign(32 * 32 * 3, 128);
      for (int i = 0; i < frames; ++i) writer.write(frame);
      writer.finish();
    }
    QSignalSpy loaded(worker_, &GenerationWorker::framesLoaded);
    QMetaObject::invokeMethod(
        worker_, [w = worker_, video] { w->loadFrames(video, 32); }, Qt::QueuedConnection);
    QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 30000);
    QCOMPARE(loaded.front().at(1).value<QVector<QImage>>().size(), frames);
    const SoundPtr sound = loaded.front().at(3).value<SoundPtr>();
    QVERIFY(sound);
    QCOMPARE(sound->sample_rate, 32000);
    QCOMPARE(sound->channels, 2);
    QVERIFY(std::abs(sound->frames() - samples) <= 1024);  // one AAC frame at most
  }
};

QTEST_MAIN(GenerationWorkerTest)
#include "generation_worker_test.moc"
