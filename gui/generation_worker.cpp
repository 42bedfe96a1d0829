#include "gui/generation_worker.h"

#include <QCoreApplication>
#include <QFile>
#include <QThread>
#include <cstring>
#include <optional>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/media/video_reader.h"
#include "core/models/wan/sampler.h"
#include "core/offload/machine.h"
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

}  // namespace

// Forwards the generator's callbacks as the worker's signals (queued to their receivers), and
// repeats a cancel the generator may have missed: generate() clears its flag when it starts.
class GenerationWorker::Sink final : public pipeline::ProgressSink {
 public:
  explicit Sink(GenerationWorker& worker) : worker_(worker) {}

  void stage(pipeline::Stage stage) override {
    worker_.repeatCancel();
    emit worker_.stageChanged(
        static_cast<int>(stage),
        QString::fromUtf8(pipeline::stage_name(stage).data(),
                          static_cast<qsizetype>(pipeline::stage_name(stage).size())));
  }
  void step(const pipeline::StepProgress& p) override {
    worker_.repeatCancel();
    StepInfo info;
    info.step = p.step;
    info.steps = p.steps;
    info.stepSeconds = p.stats.seconds;
    info.secondsPerStep = p.seconds_per_step;
    info.etaSeconds = p.eta_seconds;
    info.ramBytes = p.stats.process.resident_bytes;
    info.ramPeakBytes = std::max<quint64>(p.stats.peak_resident_in_step, info.ramBytes);
    info.vramBytes = p.stats.device.used_bytes;
    info.vramPeakBytes = std::max<quint64>(p.stats.device_peak_in_step, info.vramBytes);
    info.bytesRead = p.stats.bytes_read;
    info.ioWaitSeconds = p.stats.io_wait_seconds;
    emit worker_.step(info);
  }
  void preview(const media::RgbImage& image) override { emit worker_.preview(toQImage(image)); }

 private:
  GenerationWorker& worker_;
};

GenerationWorker::GenerationWorker(QObject* parent) : QObject(parent) {
  qRegisterMetaType<GenerationJob>();
  qRegisterMetaType<StepInfo>();
  qRegisterMetaType<GenerationOutcome>();
  qRegisterMetaType<QVector<QImage>>();
}

GenerationWorker::~GenerationWorker() = default;

void GenerationWorker::prepare() {
  cancelRequested_ = false;
}

void GenerationWorker::cancel() {
  cancelRequested_ = true;
  std::lock_guard lock(mutex_);
  if (generator_) generator_->cancel();
}

void GenerationWorker::repeatCancel() {
  if (!cancelRequested_) return;
  std::lock_guard lock(mutex_);
  if (generator_) generator_->cancel();
}

void GenerationWorker::generate(const GenerationJob& job) {
  assertNotGuiThread();
  if (cancelRequested_) {
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
  emit started(log ? fromPath(log->path()) : QString());
  pipeline::GenerationRequest request = job.request;
  try {
    const offload::Preset preset = offload::find_preset(job.presets, request.preset, job.machine);
    pipeline::GeneratorOptions options;
    options.stream_all = job.streamAll;
    offload::BackendChoice chosen = offload::choose_backend(preset, job.machine);
    options.device_memory = chosen.device_memory;
    // No usable NVIDIA GPU: the CPU backend with the cpu preset (slow, but it works).
    if (chosen.fell_back_to_cpu) request.preset = "cpu";
    std::unique_ptr<Backend> backend = std::move(chosen.backend);
    if (log) {
      log->started(request, job.machine, backend->name());
      if (chosen.fell_back_to_cpu) {
        log->note("preset " + job.request.preset + " wants a GPU and none is usable (" +
                  chosen.reason + "): the cpu preset runs instead");
      }
    }
    {
      std::lock_guard lock(mutex_);
      backend_ = std::move(backend);
      generator_ = std::make_unique<pipeline::Generator>(*backend_, job.machine, job.presets,
                                                         std::move(options));
    }
    repeatCancel();
    const pipeline::GenerationResult result =
        generator_->generate(request, log ? static_cast<pipeline::ProgressSink&>(*log) : sink);
    if (log) log->finished(result);

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
    QFile sidecar(outcome.sidecar);
    if (sidecar.open(QIODevice::ReadOnly))
      outcome.settingsJson = QString::fromUtf8(sidecar.readAll());
    releaseEngine();
    running_ = false;
    emit finished(outcome);
  } catch (const Error& e) {
    releaseEngine();
    running_ = false;
    if (log && e.code() == ErrorCode::kCancelled) log->cancelled();
    if (log && e.code() != ErrorCode::kCancelled) log->failed(e);
    if (e.code() == ErrorCode::kCancelled) {
      emit cancelled();
    } else {
      emit failed(QString::fromUtf8(e.what()), static_cast<int>(e.code()));
    }
  } catch (const std::bad_alloc&) {
    releaseEngine();
    running_ = false;
    if (log) log->failed("out of memory (std::bad_alloc)");
    emit failed(tr("Out of memory. Pick a smaller preset, size or number of frames."),
                static_cast<int>(ErrorCode::kOutOfMemory));
  } catch (const std::exception& e) {
    releaseEngine();
    running_ = false;
    if (log) log->failed(e.what());
    emit failed(QString::fromUtf8(e.what()), static_cast<int>(ErrorCode::kInternal));
  }
}

void GenerationWorker::releaseEngine() {
  std::lock_guard lock(mutex_);
  generator_.reset();
  backend_.reset();
}

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
    emit framesLoaded(video, images, info.fps > 0 ? info.fps : 16.0);
  } catch (const std::exception& e) {
    emit framesFailed(video, QString::fromUtf8(e.what()));
  }
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
