#include "gui/generation_worker.h"

#include <QCoreApplication>
#include <QFile>
#include <QThread>
#include <algorithm>
#include <cstring>
#include <optional>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/media/video_reader.h"
#include "core/pipeline/run_log.h"

namespace ferry::gui {
namespace {

QString fromPath(const std::filesystem::path& path) {
  return QString::fromStdString(io::detail::display(path));
}

// The engine must never run on the GUI thread (the GUI would freeze for the whole job).
void assertNotGuiThread() {
  Q_ASSERT_X(QCoreApplication::instance() == nullptr ||
                 QThread::currentThread() != QCoreApplication::instance()->thread(),
             "GenerationWorker", "the engine ran on the GUI thread");
}

// The run log's "backend" line: where the session will run the preset, and why when it falls back.
std::string backendLine(const pipeline::Session& session, const std::string& preset) {
  try {
    const pipeline::RunTarget t = session.target(preset);
    if (t.on_gpu) return "GPU (" + session.machine_summary() + ")";
    return "CPU (preset " + t.preset.name + (t.fell_back_to_cpu ? "; " + t.reason : "") + ")";
  } catch (const std::exception&) {
    return "unknown (" + session.machine_summary() + ")";  // run() names the bad preset
  }
}

GenerationOutcome outcomeOf(const pipeline::GenerationResult& result) {
  GenerationOutcome outcome;
  outcome.video = fromPath(result.video);
  outcome.sidecar = fromPath(result.sidecar);
  outcome.encoder = QString::fromStdString(result.encoder);
  const auto& s = result.settings;
  outcome.width = s.width;
  outcome.height = s.height;
  outcome.frames = s.frames;
  outcome.fps = s.fps;
  outcome.steps = s.steps;
  outcome.seed = s.request.seed;
  outcome.peakDeviceBytes = result.peak_device_bytes;
  for (const offload::StageStats& stage : result.stages) {
    outcome.stageSeconds.push_back({QString::fromStdString(stage.stage), stage.seconds});
  }
  QFile sidecar(outcome.sidecar);
  if (sidecar.open(QIODevice::ReadOnly))
    outcome.settingsJson = QString::fromUtf8(sidecar.readAll());
  return outcome;
}

}  // namespace

// Forwards the session's callbacks as the worker's signals (queued to their receivers).
class GenerationWorker::Sink final : public pipeline::ProgressSink {
 public:
  explicit Sink(GenerationWorker& worker) : worker_(worker) {}

  void stage(pipeline::Stage stage) override {
    const std::string_view name = pipeline::stage_name(stage);
    emit worker_.stageChanged(static_cast<int>(stage),
                              QString::fromUtf8(name.data(), static_cast<qsizetype>(name.size())));
  }
  void step(const pipeline::StepProgress& p) override { emit worker_.step(stepInfo(p)); }
  void preview(const media::RgbImage& image) override { emit worker_.preview(toQImage(image)); }
  bool wants_preview_frames() const override { return true; }
  void preview_frames(const std::vector<media::RgbImage>& frames) override {
    QVector<QImage> images;
    for (const media::RgbImage& f : frames) images.push_back(toQImage(f));
    emit worker_.previewFrames(images);
  }

 private:
  GenerationWorker& worker_;
};

GenerationWorker::GenerationWorker(QObject* parent)
    : QObject(parent), token_(std::make_shared<pipeline::CancelToken>()) {
  qRegisterMetaType<GenerationJob>();
  qRegisterMetaType<StepInfo>();
  qRegisterMetaType<GenerationOutcome>();
  qRegisterMetaType<QVector<QImage>>();
  qRegisterMetaType<SoundPtr>();
}

GenerationWorker::~GenerationWorker() = default;

void GenerationWorker::prepare() {
  std::lock_guard lock(mutex_);
  token_ = std::make_shared<pipeline::CancelToken>();
}

void GenerationWorker::cancel() {
  std::lock_guard lock(mutex_);
  token_->cancel();
}

std::shared_ptr<pipeline::CancelToken> GenerationWorker::takeToken() {
  std::lock_guard lock(mutex_);
  return token_;
}

void GenerationWorker::generate(const GenerationJob& job) {
  assertNotGuiThread();
  // The token prepare() made for this run, held by the run: a later prepare() cannot take it away.
  const std::shared_ptr<pipeline::CancelToken> cancel = takeToken();
  if (cancel->cancelled()) {
    emit cancelled();
    return;
  }
  running_ = true;
  Sink sink(*this);
  // The run's log wraps the sink. A log that cannot be written never stops the run.
  std::optional<pipeline::RunLog> log;
  if (!job.logFolder.empty()) {
    try {
      log.emplace(job.logFolder, sink);
    } catch (const std::exception&) {
    }
  }
  pipeline::ProgressSink& events = log ? static_cast<pipeline::ProgressSink&>(*log) : sink;
  emit started(log ? fromPath(log->path()) : QString());
  try {
    if (!job.session) throw Error(ErrorCode::kInternal, "a generation job without a session");
    const pipeline::Session& session = *job.session;
    if (log) {
      log->started(job.request, session.machine(), backendLine(session, job.request.preset));
    }
    const pipeline::ModelHandle model = job.model ? job.model : session.find(job.request.model);
    const pipeline::Session& runner =
        model->is_demo() && job.demoSession ? *job.demoSession : session;
    const pipeline::GenerationResult result = runner.run(*model, job.request, events, *cancel);
    if (log) log->finished(result);
    const GenerationOutcome outcome = outcomeOf(result);
    running_ = false;
    emit finished(outcome);
  } catch (const Error& e) {
    running_ = false;
    if (e.code() == ErrorCode::kCancelled) {
      if (log) log->cancelled();
      emit cancelled();
    } else {
      if (log) log->failed(e);
      emit failed(QString::fromUtf8(e.what()), static_cast<int>(e.code()));
    }
  } catch (const std::bad_alloc&) {
    running_ = false;
    if (log) log->failed("out of memory (std::bad_alloc)");
    emit failed(tr("Out of memory. Pick a smaller preset, size or number of frames."),
                static_cast<int>(ErrorCode::kOutOfMemory));
  } catch (const std::exception& e) {
    running_ = false;
    if (log) log->failed(e.what());
    emit failed(QString::fromUtf8(e.what()), static_cast<int>(ErrorCode::kInternal));
  }
}

namespace {

// The soundtrack of a video the player loads; null when it has none. A soundtrack Ferry cannot
// decode does not keep the picture from showing: the clip plays silent.
SoundPtr readSound(const std::filesystem::path& path, const media::VideoInfo& info) {
  if (info.audio_codec.empty()) return nullptr;
  try {
    auto track = std::make_shared<media::AudioTrack>(media::read_audio(path));
    if (track->empty()) return nullptr;
    return track;
  } catch (const std::exception&) {
    return nullptr;
  }
}

}  // namespace

void GenerationWorker::loadFrames(const QString& video, int maxWidth) {
  assertNotGuiThread();
  try {
    const std::filesystem::path path = io::detail::path_from_utf8(video.toStdString());
    const media::VideoInfo info = media::probe_video(path);
    const std::vector<media::RgbImage> frames = media::read_video_frames(path, 2000);
    QVector<QImage> images;
    images.reserve(static_cast<qsizetype>(frames.size()));
    for (const auto& f : frames) {
      QImage image = toQImage(f);
      if (maxWidth > 0 && image.width() > maxWidth) {
        image = image.scaledToWidth(maxWidth, Qt::SmoothTransformation);
      }
      images.push_back(std::move(image));
    }
    emit framesLoaded(video, images, info.fps > 0 ? info.fps : 16.0, readSound(path, info));
  } catch (const std::exception& e) {
    emit framesFailed(video, QString::fromUtf8(e.what()));
  }
}

StepInfo stepInfo(const pipeline::StepProgress& p) {
  StepInfo info;
  info.step = p.step;
  info.steps = p.steps;
  info.phase = QString::fromStdString(p.stats.phase);
  info.stepSeconds = p.stats.seconds;
  info.secondsPerStep = p.seconds_per_step;
  info.etaSeconds = p.eta_seconds;
  info.ramBytes = p.stats.process.resident_bytes;
  info.ramPeakBytes = std::max<quint64>(p.stats.peak_resident_in_step, info.ramBytes);
  info.vramBytes = p.stats.device.used_bytes;
  info.vramPeakBytes = std::max<quint64>(p.stats.device_peak_in_step, info.vramBytes);
  info.bytesRead = p.stats.bytes_read;
  info.ioWaitSeconds = p.stats.io_wait_seconds;
  info.previewSeconds = p.stats.preview_seconds;
  info.previewSkipped = p.stats.preview_skipped;
  return info;
}

QImage toQImage(const media::RgbImage& image) {
  if (image.empty()) return {};
  QImage out(image.width, image.height, QImage::Format_RGB888);
  const std::size_t row = static_cast<std::size_t>(image.width) * 3;
  for (int y = 0; y < image.height; ++y) {
    std::memcpy(out.scanLine(y), image.rgb.data() + static_cast<std::size_t>(y) * row, row);
  }
  return out;
}

}  // namespace ferry::gui
