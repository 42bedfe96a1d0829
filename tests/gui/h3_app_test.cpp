// MiniMax-H3 in the app (issue 21, Must show 4, as far as the engine allows today): the mode
// follows from the filled frame boxes (T2VA / I2VA first / I2VA last / FL2VA), the licence notice
// shows the first time H3 weights are chosen and, confirmed, never again (stored in settings), the
// prompt template is offered for H3 only and a plain prompt still reaches the request, and an
// end frame alone is restored from a clip and from the history's settings. The H3 set is
// DiffSynth's layout at tiny shapes, header-only (the app only finds and plans it).
#include <QDoubleSpinBox>
#include <QJsonDocument>
#include <QMessageBox>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QToolButton>
#include <QtTest/QtTest>
#include <algorithm>
#include <cmath>

#include "core/media/audio.h"
#include "core/media/video_writer.h"
#include "core/models/family.h"
#include "core/models/h3/synthetic_set.h"
#include "gui/frame_player.h"
#include "gui/main_window.h"
#include "gui/start_image_box.h"
#include "tests/gui/gui_test_support.h"

using namespace ferry::gui;
using namespace ferry::gui::test;

namespace {

// A header-only H3 set at tiny shapes, written once.
QString h3Folder() {
  static QTemporaryDir dir;
  static const QString folder = [] {
    ferry::models::h3::SyntheticShapes small;
    small.dit_hidden = 64, small.dit_heads = 1, small.dit_layers = 2, small.dit_ffn = 128;
    small.refiner_layers = 1, small.time_hidden = 64, small.time_dim = 64;
    small.vocab = 1024, small.text_dim = 128, small.text_heads = 2, small.text_kv_heads = 1;
    small.text_ffn = 256, small.vision_dim = 144, small.vision_ffn = 128, small.vision_side = 4;
    small.vae_dim = 64, small.vae_ffn = 128, small.vae_blocks = 2;
    ferry::models::h3::write_header_only_set(toPath(dir.path()), small);
    return dir.path();
  }();
  return folder;
}

MainWindowOptions options(const QTemporaryDir& data) {
  MainWindowOptions o;
  o.dataFolder = data.path();
  o.machine = laptopMachine();
  o.firstRunCheck = false;
  o.askBeforeClosing = false;
  return o;
}

GenerationSettings h3Settings() {
  GenerationSettings s;
  s.prompt = QStringLiteral("a lighthouse keeper says good night");
  s.model = {h3Folder()};
  s.preset = QStringLiteral("laptop-8gb");
  return s;
}

QAbstractButton* noticeButton(QMessageBox* notice, QMessageBox::ButtonRole role) {
  for (QAbstractButton* b : notice->buttons()) {
    if (notice->buttonRole(b) == role) return b;
  }
  return nullptr;
}

QString saveImage(const QTemporaryDir& dir, const QString& name) {
  QImage image(64, 64, QImage::Format_RGB888);
  image.fill(Qt::darkCyan);
  const QString path = dir.filePath(name);
  return image.save(path) ? path : QString();
}

// A 0.5 s clip (12 frames at 24 fps) with a 32 kHz stereo ramp as its soundtrack, or silent.
QString writeClip(const QTemporaryDir& dir, const QString& name, bool withSound) {
  ferry::media::VideoSettings s;
  s.width = 64;
  s.height = 48;
  s.fps = 24;
  if (withSound) {
    std::vector<std::vector<float>> planar(2, std::vector<float>(16000));
    for (std::size_t i = 0; i < 16000; ++i) {
      planar[0][i] = 0.5f * std::sin(static_cast<float>(i) * 0.0864f);
      planar[1][i] = 0.3f * std::sin(static_cast<float>(i) * 0.1728f);
    }
    s.audio = ferry::media::interleave(planar, 32000);
  }
  const QString path = dir.filePath(name);
  ferry::media::VideoWriter writer(toPath(path), s);
  ferry::media::RgbImage frame{64, 48, std::vector<std::uint8_t>(64 * 48 * 3, 90)};
  for (int i = 0; i < 12; ++i) writer.write(frame);
  writer.finish();
  return path;
}

}  // namespace

class H3AppTest : public QObject {
  Q_OBJECT

 private slots:
  void the_mode_follows_from_the_filled_frame_boxes() {
    using ferry::models::frame_mode;
    using ferry::models::FrameMode;
    QCOMPARE(frame_mode(false, false), FrameMode::kText);
    QCOMPARE(frame_mode(true, false), FrameMode::kFirstFrame);
    QCOMPARE(frame_mode(false, true), FrameMode::kLastFrame);
    QCOMPARE(frame_mode(true, true), FrameMode::kFirstLast);

    QTemporaryDir data;
    MainWindow w(options(data));
    w.show();
    w.applySettings(h3Settings());
    QVERIFY(settle(w));
    QVERIFY2(w.frameModeText().contains(QLatin1String("T2VA")), qPrintable(w.frameModeText()));
    const QString start = saveImage(data, QStringLiteral("first.png"));
    const QString end = saveImage(data, QStringLiteral("last.png"));
    QVERIFY(w.startImage()->setPath(start));
    QVERIFY(w.frameModeText().contains(QLatin1String("I2VA (first frame)")));
    QVERIFY(w.endImage()->setPath(end));
    QVERIFY(w.frameModeText().contains(QLatin1String("FL2VA")));
    w.startImage()->clear();
    QVERIFY(w.frameModeText().contains(QLatin1String("I2VA (last frame)")));
    // The end box says H3 takes an end frame alone.
    QVERIFY(w.endImage()->isVisible());
    w.endImage()->clear();
    QVERIFY(w.frameModeText().contains(QLatin1String("T2VA")));
    // A Wan model: the same boxes in plain words, no H3 names.
    GenerationSettings wan = h3Settings();
    wan.model = {demoFolder()};
    wan.preset = QStringLiteral("cpu");
    w.applySettings(wan);
    QVERIFY(settle(w));
    QCOMPARE(w.frameModeText(), QStringLiteral("Mode: text to video"));
    QVERIFY(!w.frameModeText().contains(QLatin1String("T2VA")));
  }

  void the_licence_notice_shows_once_and_is_remembered() {
    QTemporaryDir data;
    {
      MainWindow w(options(data));
      w.show();
      w.applySettings(h3Settings());
      QVERIFY(settle(w));
      QTRY_VERIFY(w.licenceNoticeBox() != nullptr);
      const QString text = w.licenceNoticeBox()->text();
      for (const char* said : {"MiniMax H3 Community License", "territory", "use restrictions",
                               "https://huggingface.co/MiniMaxAI/MiniMax-H3/blob/main/LICENSE",
                               "Ferry does not ship or download these weights"}) {
        QVERIFY2(text.contains(QLatin1String(said)), said);
      }
      // Until confirmed, Generate says why it is off.
      QVERIFY(!w.generateEnabled());
      QVERIFY2(w.generateBlockedReason().contains(QLatin1String("license")),
               qPrintable(w.generateBlockedReason()));
      noticeButton(w.licenceNoticeBox(), QMessageBox::AcceptRole)->click();
      QTRY_VERIFY(w.licenceNoticeBox() == nullptr);
      QVERIFY2(!w.generateBlockedReason().contains(QLatin1String("license")),
               qPrintable(w.generateBlockedReason()));
      // Choosing the model again does not ask again.
      GenerationSettings wan = h3Settings();
      wan.model = {demoFolder()};
      wan.preset = QStringLiteral("cpu");
      w.applySettings(wan);
      QVERIFY(settle(w));
      w.applySettings(h3Settings());
      QVERIFY(settle(w));
      QTest::qWait(50);
      QVERIFY(w.licenceNoticeBox() == nullptr);
    }
    QSettings stored(QDir(data.path()).filePath(QStringLiteral("settings.ini")),
                     QSettings::IniFormat);
    // The key earlier versions stored, so that a confirmation made before is kept.
    QVERIFY(stored.value(QStringLiteral("h3/licenseConfirmed")).toBool());
    {  // The next session remembers.
      MainWindow w(options(data));
      w.show();
      w.applySettings(h3Settings());
      QVERIFY(settle(w));
      QTest::qWait(50);
      QVERIFY(w.licenceNoticeBox() == nullptr);
    }
    // "Not now": nothing stored, Generate stays off with the reason.
    QTemporaryDir other;
    MainWindow w(options(other));
    w.show();
    w.applySettings(h3Settings());
    QVERIFY(settle(w));
    QTRY_VERIFY(w.licenceNoticeBox() != nullptr);
    noticeButton(w.licenceNoticeBox(), QMessageBox::RejectRole)->click();
    QTRY_VERIFY(w.licenceNoticeBox() == nullptr);
    QVERIFY(w.generateBlockedReason().contains(QLatin1String("license")));
    QSettings notStored(QDir(other.path()).filePath(QStringLiteral("settings.ini")),
                        QSettings::IniFormat);
    QVERIFY(!notStored.value(QStringLiteral("h3/licenseConfirmed")).toBool());
  }

  void the_prompt_template_is_offered_for_h3_and_plain_prompts_still_work() {
    QTemporaryDir data;
    MainWindow w(options(data));
    w.show();
    GenerationSettings wan = h3Settings();
    wan.model = {demoFolder()};
    wan.preset = QStringLiteral("cpu");
    w.applySettings(wan);
    QVERIFY(settle(w));
    QVERIFY(!w.promptTemplateButton()->isVisible());  // Wan: no template
    GenerationSettings s = h3Settings();
    w.applySettings(s);
    QVERIFY(settle(w));
    QVERIFY(w.promptTemplateButton()->isVisible());
    QVERIFY(w.promptTemplateButton()->toolTip().contains(QLatin1String("structured prompts")));
    const QString text = QString::fromStdString(
        ferry::models::open_model({toPath(h3Folder())})->rules().prompt_template);
    QVERIFY(text.contains(QLatin1String("<d>[English]")));
    QVERIFY(text.contains(QLatin1String("summary:")));
    QVERIFY(text.contains(QLatin1String("overall_soundscape:")));
    // A plain prompt reaches the request as typed.
    QCOMPARE(QString::fromStdString(w.settings().toRequest(QStringLiteral("/o/a.mp4")).prompt),
             s.prompt);
    // Typed text stays, the structure follows it.
    w.promptTemplateButton()->click();
    QVERIFY(w.settings().prompt.startsWith(s.prompt));
    QVERIFY(w.settings().prompt.endsWith(text.trimmed()) || w.settings().prompt.endsWith(text));
    // An empty prompt becomes the template.
    s.prompt.clear();
    w.applySettings(s);
    QVERIFY(settle(w));
    w.promptTemplateButton()->click();
    QCOMPARE(w.settings().prompt, text);
  }

  // H3's frames are 17n+5 (n >= 1) at 24 fps: the frames box offers only those, and a duration in
  // seconds becomes the nearest of them (Wan's 4k+1 grid is the same code with other rules).
  void the_duration_in_seconds_becomes_h3s_frame_grid() {
    QTemporaryDir data;
    MainWindow w(options(data));
    w.show();
    w.applySettings(h3Settings());
    QVERIFY(settle(w));
    QSpinBox* frames = nullptr;
    QDoubleSpinBox* duration = nullptr;
    for (auto* box : w.findChildren<QSpinBox*>()) {
      if (box->accessibleName() == QLatin1String("Frames")) frames = box;
    }
    for (auto* box : w.findChildren<QDoubleSpinBox*>()) {
      if (box->accessibleName() == QLatin1String("Duration")) duration = box;
    }
    QVERIFY(frames && duration);
    QCOMPARE(frames->minimum(), 22);
    QCOMPARE(frames->singleStep(), 17);
    QCOMPARE(frames->value(), 124);  // H3's default: 5.2 s
    QVERIFY2(frames->toolTip().contains(QLatin1String("17k+5 (22, 39, 56")),
             qPrintable(frames->toolTip()));
    duration->setValue(10.0);  // 241 frames would be 10 s; the grid's nearest is 243 (17·14+5)
    QCOMPARE(frames->value(), 243);
    duration->setValue(0.5);
    QCOMPARE(frames->value(), 22);
    frames->setValue(39);
    QCOMPARE(duration->value(), 1.6);  // (39 − 1) / 24 = 1.58 s, shown to a tenth
    QCOMPARE(w.settings().frames, 39);
  }

  // Issue 20's WAV export in the app: a clip with sound shows "Save soundtrack" with the player's
  // sound controls; the WAV holds what the player plays (its AAC track decoded) to 16 bits. A
  // silent clip hides the button and has nothing to save; a folder that is not there is a message.
  void the_soundtrack_of_the_clip_shown_is_saved_as_a_wav() {
    QTemporaryDir data;
    QTemporaryDir clips;
    MainWindow w(options(data));
    w.show();
    auto* save = w.player()->findChild<QToolButton*>(QStringLiteral("saveSoundtrackButton"));
    QVERIFY(save != nullptr);
    w.showVideo(writeClip(clips, QStringLiteral("with-sound.mp4"), true));
    QTRY_VERIFY(w.player()->frameCount() == 12);
    QVERIFY(w.player()->hasSound());
    QVERIFY(save->isVisible());
    const QString wav = clips.filePath(QStringLiteral("with-sound.wav"));
    QVERIFY2(w.saveSoundtrack(wav), qPrintable(w.lastMessage()));
    const ferry::media::AudioTrack written = ferry::media::read_wav(toPath(wav));
    const ferry::media::AudioTrack& played = *w.player()->sound();
    QCOMPARE(written.sample_rate, 32000);
    QCOMPARE(written.channels, 2);
    QCOMPARE(written.samples.size(), played.samples.size());
    for (std::size_t i = 0; i < written.samples.size(); ++i) {
      QVERIFY(std::abs(written.samples[i] - std::clamp(played.samples[i], -1.0f, 1.0f)) <=
              0.5f / 32767 + 1e-6f);
    }
    QVERIFY(!QFile::exists(wav + QStringLiteral(".partial")));
    QVERIFY(!w.saveSoundtrack(clips.filePath(QStringLiteral("missing/x.wav"))));
    QVERIFY(w.lastMessage().contains(QLatin1String("not saved")));

    w.showVideo(writeClip(clips, QStringLiteral("silent.mp4"), false));
    QTRY_VERIFY(w.player()->frameCount() == 12 && !w.player()->hasSound());
    QVERIFY(!save->isVisible());
    QVERIFY(!w.saveSoundtrack(clips.filePath(QStringLiteral("silent.wav"))));
    QVERIFY(!QFile::exists(clips.filePath(QStringLiteral("silent.wav"))));
  }

  // I2VA last frame: an end frame alone, restored from a clip (found beside it) and from the
  // history's settings JSON, and the mode says so.
  void an_end_frame_alone_is_restored_from_a_clip_and_the_history() {
    QTemporaryDir data;
    QTemporaryDir clips;
    QVERIFY(!saveImage(clips, QStringLiteral("last.png")).isEmpty());
    MainWindow w(options(data));
    w.show();
    w.applySettings(h3Settings());
    QVERIFY(settle(w));
    QJsonObject json = h3Settings().toJson();
    json[QStringLiteral("end_image")] = QStringLiteral("last.png");
    const QString clip = clips.filePath(QStringLiteral("h3.mp4"));
    QString why;
    const auto fromClip = GenerationSettings::fromClip(QJsonDocument(json).toJson(), clip, &why);
    QVERIFY2(fromClip.has_value(), qPrintable(why));
    QVERIFY(fromClip->image.isEmpty());
    w.applySettings(*fromClip, clip);
    QCOMPARE(w.settings().endImage, clips.filePath(QStringLiteral("last.png")));
    QVERIFY(w.settings().image.isEmpty());
    QVERIFY2(w.frameModeText().contains(QLatin1String("I2VA (last frame)")),
             qPrintable(w.frameModeText()));
    // The history keeps a run's settings as this JSON (with paths): read back, the end frame
    // alone comes back.
    GenerationSettings history = h3Settings();
    history.endImage = clips.filePath(QStringLiteral("last.png"));
    const GenerationSettings back = GenerationSettings::fromJson(history.toJson());
    QCOMPARE(back.endImage, history.endImage);
    QVERIFY(back.image.isEmpty());
    w.applySettings(GenerationSettings{});
    w.applySettings(back);
    QCOMPARE(w.settings().endImage, history.endImage);
    QVERIFY(w.frameModeText().contains(QLatin1String("I2VA (last frame)")));
    // The request the engine gets: an end image and no start image.
    const auto request = w.settings().toRequest(QStringLiteral("/o/a.mp4"));
    QVERIFY(request.end_image.has_value());
    QVERIFY(!request.image.has_value());
  }
};

QTEST_MAIN(H3AppTest)
#include "h3_app_test.moc"
