#include "gui/generation_settings.h"

#include <QDir>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>

#include "core/io/detail/os_file.h"
#include "core/media/video_reader.h"

namespace ferry::gui {
namespace {

std::filesystem::path toPath(const QString& text) {
  return io::detail::path_from_utf8(text.toStdString());
}

// The folder that holds every one of `files` (what find_model_set was pointed at, or near it).
// Videos made since the session API carry file names only (no folder leaks when a clip is
// shared): then there is none, and the window keeps the model folder the user chose.
QString commonFolder(const QJsonArray& files) {
  QString common;
  for (const auto& value : files) {
    const QString file = value.toString();
    if (!QFileInfo(file).isAbsolute()) return {};
    const QString folder = QFileInfo(file).absolutePath();
    if (common.isEmpty()) {
      common = folder;
      continue;
    }
    while (!common.isEmpty() &&
           !(folder == common || folder.startsWith(common + QLatin1Char('/')))) {
      const QString up = QFileInfo(common).path();
      if (up == common) return {};
      common = up;
    }
  }
  return common;
}

QJsonObject clipFileJson(const ClipFile& f) {
  QJsonObject j;
  if (!f.role.isEmpty()) j[QStringLiteral("role")] = f.role;
  j[QStringLiteral("name")] = f.name;
  if (f.bytes != 0) j[QStringLiteral("bytes")] = static_cast<double>(f.bytes);
  if (!f.fingerprint.isEmpty()) j[QStringLiteral("fingerprint")] = f.fingerprint;
  return j;
}

// An entry of "model_files" or "noise_file": an object, or (clips made before the session API)
// an absolute path, of which only the file name is kept.
ClipFile clipFileFromJson(const QJsonValue& value) {
  ClipFile f;
  if (value.isString()) {
    f.name = QFileInfo(value.toString()).fileName();
    return f;
  }
  const QJsonObject j = value.toObject();
  f.role = j.value(QStringLiteral("role")).toString();
  f.name = QFileInfo(j.value(QStringLiteral("name")).toString()).fileName();
  f.bytes = static_cast<quint64>(j.value(QStringLiteral("bytes")).toDouble());
  f.fingerprint = j.value(QStringLiteral("fingerprint")).toString();
  return f;
}

}  // namespace

QString defaultSavePath(const QString& video, const QString& what) {
  const QFileInfo info(video);
  return info.dir().filePath(info.completeBaseName() + QLatin1Char('.') + what +
                             QStringLiteral(".safetensors"));
}

QString seedModeName(SeedMode mode) {
  switch (mode) {
    case SeedMode::kFixed:
      return QStringLiteral("fixed");
    case SeedMode::kRandom:
      return QStringLiteral("random");
    case SeedMode::kIncrement:
      return QStringLiteral("increment");
  }
  return QStringLiteral("fixed");
}

SeedMode seedModeFromName(const QString& name) {
  if (name == QLatin1String("random")) return SeedMode::kRandom;
  if (name == QLatin1String("increment")) return SeedMode::kIncrement;
  return SeedMode::kFixed;
}

models::GenerationRequest GenerationSettings::toRequest(const QString& output) const {
  models::GenerationRequest r;
  if (!modelFolder.isEmpty()) r.model = {toPath(modelFolder)};
  r.prompt = prompt.toStdString();
  r.negative_prompt = negativePrompt.toStdString();
  if (!image.isEmpty()) r.image = toPath(image);
  r.width = width;
  r.height = height;
  r.frames = frames;
  r.fps = fps;
  r.steps = steps;
  if (guideScale > 0) r.guide_scale = static_cast<float>(guideScale);
  if (shift > 0) r.shift = shift;
  if (!sampler.isEmpty()) r.sampler = sampler.toStdString();
  r.seed = seed;
  r.preset = preset.isEmpty() ? std::string("auto") : preset.toStdString();
  r.output = toPath(output);
  if (!noise.isEmpty()) r.noise = toPath(noise);
  if (saveNoise) {
    r.save_noise = toPath(saveNoisePath.isEmpty() ? defaultSavePath(output, QStringLiteral("noise"))
                                                  : saveNoisePath);
  }
  if (saveLatents) {
    r.save_latents =
        toPath(saveLatentsPath.isEmpty() ? defaultSavePath(output, QStringLiteral("latents"))
                                         : saveLatentsPath);
    r.save_text_states = saveTextStates;
  }
  return r;
}

QJsonObject GenerationSettings::toJson() const {
  QJsonObject j;
  j[QStringLiteral("prompt")] = prompt;
  j[QStringLiteral("negative_prompt")] = negativePrompt;
  j[QStringLiteral("seed")] = static_cast<double>(seed);
  j[QStringLiteral("seed_mode")] = seedModeName(seedMode);
  j[QStringLiteral("width")] = width;
  j[QStringLiteral("height")] = height;
  j[QStringLiteral("frames")] = frames;
  j[QStringLiteral("fps")] = fps;
  j[QStringLiteral("steps")] = steps;
  j[QStringLiteral("guide_scale")] = guideScale;
  j[QStringLiteral("shift")] = shift;
  j[QStringLiteral("sampler")] = sampler;
  j[QStringLiteral("preset")] = preset;
  j[QStringLiteral("model_folder")] = modelFolder;
  if (!image.isEmpty()) j[QStringLiteral("image")] = image;
  if (!noise.isEmpty()) j[QStringLiteral("noise")] = noise;
  j[QStringLiteral("save_noise")] = saveNoise;
  j[QStringLiteral("save_latents")] = saveLatents;
  j[QStringLiteral("save_text_states")] = saveTextStates;
  if (!modelFiles.isEmpty()) {
    QJsonArray files;
    for (const ClipFile& f : modelFiles) files.append(clipFileJson(f));
    j[QStringLiteral("model_files")] = files;
  }
  if (!noiseFile.name.isEmpty()) j[QStringLiteral("noise_file")] = clipFileJson(noiseFile);
  return j;
}

GenerationSettings GenerationSettings::fromJson(const QJsonObject& j,
                                                const QString& defaultNegative) {
  GenerationSettings s;
  s.prompt = j.value(QStringLiteral("prompt")).toString();
  s.negativePrompt = j.value(QStringLiteral("negative_prompt")).toString();
  // The generator writes the negative prompt it used; the model's default is shown as the
  // placeholder, so it restores as "empty".
  if (!defaultNegative.isEmpty() && s.negativePrompt == defaultNegative) s.negativePrompt.clear();
  s.image = j.value(QStringLiteral("image")).toString();
  s.seed = static_cast<quint64>(j.value(QStringLiteral("seed")).toDouble());
  s.seedMode = seedModeFromName(j.value(QStringLiteral("seed_mode")).toString());
  s.width = j.value(QStringLiteral("width")).toInt();
  s.height = j.value(QStringLiteral("height")).toInt();
  s.frames = j.value(QStringLiteral("frames")).toInt();
  s.fps = j.value(QStringLiteral("fps")).toInt();
  s.steps = j.value(QStringLiteral("steps")).toInt();
  s.guideScale = j.value(QStringLiteral("guide_scale")).toDouble();
  s.shift = j.value(QStringLiteral("shift")).toDouble();
  s.sampler = j.value(QStringLiteral("sampler")).toString();
  s.preset = j.value(QStringLiteral("preset")).toString(QStringLiteral("auto"));
  s.modelFolder = j.value(QStringLiteral("model_folder")).toString();
  const QJsonArray files = j.value(QStringLiteral("model_files")).toArray();
  if (s.modelFolder.isEmpty()) s.modelFolder = commonFolder(files);
  for (const auto& value : files) {
    ClipFile f = clipFileFromJson(value);
    if (!f.name.isEmpty()) s.modelFiles.push_back(std::move(f));
  }
  s.noise = j.value(QStringLiteral("noise")).toString();
  s.saveNoise = j.value(QStringLiteral("save_noise")).toBool();
  s.saveLatents = j.value(QStringLiteral("save_latents")).toBool();
  s.saveTextStates = j.value(QStringLiteral("save_text_states")).toBool();
  if (j.contains(QStringLiteral("noise_file"))) {
    s.noiseFile = clipFileFromJson(j.value(QStringLiteral("noise_file")));
  }
  return s;
}

std::optional<GenerationSettings> GenerationSettings::fromVideo(const QString& path, QString* why,
                                                                const QString& defaultNegative) {
  try {
    const media::VideoInfo info = media::probe_video(toPath(path));
    const auto comment = info.metadata.find("comment");
    if (comment == info.metadata.end()) {
      if (why)
        *why = QObject::tr("%1 is a video, but not one Ferry made (it has no Ferry settings).")
                   .arg(QDir::toNativeSeparators(path));
      return std::nullopt;
    }
    QJsonParseError error{};
    const QJsonDocument doc =
        QJsonDocument::fromJson(QByteArray::fromStdString(comment->second), &error);
    if (!doc.isObject() || !doc.object().contains(QStringLiteral("prompt"))) {
      if (why)
        *why = QObject::tr("%1 carries no Ferry settings.").arg(QDir::toNativeSeparators(path));
      return std::nullopt;
    }
    return fromJson(doc.object(), defaultNegative);
  } catch (const std::exception& e) {
    if (why) *why = QString::fromUtf8(e.what());
    return std::nullopt;
  }
}

}  // namespace ferry::gui
