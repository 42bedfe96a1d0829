#include "gui/generation_settings.h"

#include <QDir>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <algorithm>
#include <limits>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/io/safe_path.h"
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
  QStringList paths;
  for (const auto& value : files) {
    if (!QFileInfo(value.toString()).isAbsolute()) return {};
    paths << value.toString();
  }
  return commonFolderOf(paths);
}

// The model the settings name: "model_paths" (an array: a folder, or a set's files), else
// (settings written before it) "model_folder"; empty paths are dropped. ("model" is the
// generator's: the model's name.)
QStringList modelFromJson(const QJsonObject& j) {
  QStringList paths;
  if (j.contains(QStringLiteral("model_paths"))) {
    for (const auto& value : j.value(QStringLiteral("model_paths")).toArray()) {
      if (const QString path = value.toString(); !path.isEmpty()) paths << path;
    }
  } else if (const QString folder = j.value(QStringLiteral("model_folder")).toString();
             !folder.isEmpty()) {
    paths << folder;
  }
  return paths;
}

// A JSON number as a count: negative, NaN and fractional parts to 0 and down, past 2^64 to the
// largest (a cast of such a double is undefined behaviour).
quint64 countFromJson(const QJsonValue& value) {
  const double v = value.toDouble();
  if (!(v > 0)) return 0;
  if (v >= 18446744073709551616.0) return std::numeric_limits<quint64>::max();
  return static_cast<quint64>(v);
}

// The last component of `path`, with either separator: a clip made on Windows names
// "C:\\models\\x.safetensors" on every platform.
QString lastComponent(const QString& path) {
  const qsizetype cut =
      std::max(path.lastIndexOf(QLatin1Char('/')), path.lastIndexOf(QLatin1Char('\\')));
  return cut < 0 ? path : path.mid(cut + 1);
}

// Why `name`, a file name a clip carries, could lead outside the folder it is looked up in; empty
// when it is a plain file name (io::safe_file_name's rules).
QString unsafeName(const QString& name) {
  try {
    io::safe_file_name(name.toStdString());
    return {};
  } catch (const Error& e) {
    return QString::fromUtf8(e.what());
  }
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
    f.name = lastComponent(value.toString());
    return f;
  }
  const QJsonObject j = value.toObject();
  f.role = j.value(QStringLiteral("role")).toString();
  f.name = lastComponent(j.value(QStringLiteral("name")).toString());
  f.bytes = countFromJson(j.value(QStringLiteral("bytes")));
  f.fingerprint = j.value(QStringLiteral("fingerprint")).toString();
  return f;
}

QJsonObject loraJson(const LoraSetting& l) {
  QJsonObject j;
  j[QStringLiteral("name")] = l.name;
  if (l.bytes != 0) j[QStringLiteral("bytes")] = static_cast<double>(l.bytes);
  if (!l.fingerprint.isEmpty()) j[QStringLiteral("fingerprint")] = l.fingerprint;
  j[QStringLiteral("strength")] = l.strength;
  if (!l.path.isEmpty()) j[QStringLiteral("path")] = l.path;
  j[QStringLiteral("enabled")] = l.enabled;
  return j;
}

// An entry of "loras". The name is kept as written (a clip's is checked by fromClip: a name with
// a folder in it is refused, not cut down to its last component); the GUI's own entries also
// carry the path. Strengths beyond ±kMaxLoraStrength are clamped; a missing one is 1.
LoraSetting loraFromJson(const QJsonValue& value) {
  const QJsonObject j = value.toObject();
  LoraSetting l;
  l.path = j.value(QStringLiteral("path")).toString();
  l.name = j.value(QStringLiteral("name")).toString();
  if (l.name.isEmpty()) l.name = lastComponent(l.path);
  l.bytes = countFromJson(j.value(QStringLiteral("bytes")));
  l.fingerprint = j.value(QStringLiteral("fingerprint")).toString();
  l.strength = std::clamp(j.value(QStringLiteral("strength")).toDouble(1.0), -kMaxLoraStrength,
                          kMaxLoraStrength);
  l.enabled = j.value(QStringLiteral("enabled")).toBool(true);
  return l;
}

}  // namespace

QString defaultSavePath(const QString& video, const QString& what) {
  const QFileInfo info(video);
  return info.dir().filePath(info.completeBaseName() + QLatin1Char('.') + what +
                             QStringLiteral(".safetensors"));
}

QString commonFolderOf(const QStringList& files, const QString& root) {
  QString common;
  for (const QString& file : files) {
    const QString folder = QFileInfo(file).absolutePath();
    if (common.isEmpty()) {
      common = folder;
      continue;
    }
    while (!(folder == common || folder.startsWith(common + QLatin1Char('/')))) {
      if (!root.isEmpty() && common.size() <= root.size()) return root;
      const QString up = QFileInfo(common).path();
      if (up == common) return {};
      common = up;
    }
  }
  return !root.isEmpty() && common.size() < root.size() ? root : common;
}

QString modelShortName(const QStringList& model) {
  if (model.isEmpty()) return {};
  const QFileInfo first(model.front());
  if (model.size() == 1) return first.fileName();
  return QObject::tr("%1 + %n file(s)", nullptr, static_cast<int>(model.size() - 1))
      .arg(first.completeBaseName());
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
  for (const QString& path : model) {
    if (!path.isEmpty()) r.model.push_back(toPath(path));
  }
  r.prompt = prompt.toStdString();
  r.negative_prompt = negativePrompt.toStdString();
  if (!image.isEmpty()) r.image = toPath(image);
  if (!endImage.isEmpty()) r.end_image = toPath(endImage);
  r.width = width;
  r.height = height;
  r.frames = frames;
  r.fps = fps;
  r.steps = steps;
  if (guideScale > 0) r.guide_scale = static_cast<float>(guideScale);
  if (lowNoiseGuideScale > 0) r.low_noise_guide_scale = static_cast<float>(lowNoiseGuideScale);
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
  for (const LoraSetting& l : loras) {
    if (l.enabled && !l.path.isEmpty()) {
      r.loras.push_back({toPath(l.path), static_cast<float>(l.strength)});
    }
  }
  r.decoder = draft ? models::VideoDecoder::kTaehvDraft : models::VideoDecoder::kVae;
  if (!latents.isEmpty()) {
    // Saved latents are decoded alone: what a denoising run would save is not asked for.
    r.latents = toPath(latents);
    r.noise.clear();
    r.save_noise.clear();
    r.save_latents.clear();
    r.save_text_states = false;
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
  if (lowNoiseGuideScale > 0) j[QStringLiteral("low_noise_guide_scale")] = lowNoiseGuideScale;
  j[QStringLiteral("shift")] = shift;
  j[QStringLiteral("sampler")] = sampler;
  j[QStringLiteral("preset")] = preset;
  j[QStringLiteral("model_paths")] = QJsonArray::fromStringList(model);
  if (!image.isEmpty()) j[QStringLiteral("image")] = image;
  if (!endImage.isEmpty()) j[QStringLiteral("end_image")] = endImage;
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
  if (draft) j[QStringLiteral("decode")] = QStringLiteral("taehv-draft");
  if (!keptLatents.isEmpty()) j[QStringLiteral("latents_kept")] = keptLatents;
  if (!latentsFile.name.isEmpty()) j[QStringLiteral("latents_file")] = clipFileJson(latentsFile);
  if (!loras.isEmpty()) {
    QJsonArray list;
    for (const LoraSetting& l : loras) list.append(loraJson(l));
    j[QStringLiteral("loras")] = list;
  }
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
  s.endImage = j.value(QStringLiteral("end_image")).toString();
  s.seed = countFromJson(j.value(QStringLiteral("seed")));
  s.seedMode = seedModeFromName(j.value(QStringLiteral("seed_mode")).toString());
  s.width = std::max(0, j.value(QStringLiteral("width")).toInt());
  s.height = std::max(0, j.value(QStringLiteral("height")).toInt());
  s.frames = std::max(0, j.value(QStringLiteral("frames")).toInt());
  s.fps = std::max(0, j.value(QStringLiteral("fps")).toInt());
  s.steps = std::max(0, j.value(QStringLiteral("steps")).toInt());
  s.guideScale = j.value(QStringLiteral("guide_scale")).toDouble();
  s.lowNoiseGuideScale = std::max(0.0, j.value(QStringLiteral("low_noise_guide_scale")).toDouble());
  s.shift = j.value(QStringLiteral("shift")).toDouble();
  s.sampler = j.value(QStringLiteral("sampler")).toString();
  s.preset = j.value(QStringLiteral("preset")).toString(QStringLiteral("auto"));
  s.model = modelFromJson(j);
  const QJsonArray files = j.value(QStringLiteral("model_files")).toArray();
  if (s.model.isEmpty()) {
    if (const QString folder = commonFolder(files); !folder.isEmpty()) s.model = {folder};
  }
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
  for (const auto& value : j.value(QStringLiteral("loras")).toArray()) {
    LoraSetting l = loraFromJson(value);
    if (!l.name.isEmpty()) s.loras.push_back(std::move(l));
  }
  s.draft = j.value(QStringLiteral("decode")).toString() == QLatin1String("taehv-draft");
  s.keptLatents = lastComponent(j.value(QStringLiteral("latents_kept")).toString());
  if (j.contains(QStringLiteral("latents_file"))) {
    s.latentsFile = clipFileFromJson(j.value(QStringLiteral("latents_file")));
  }
  return s;
}

std::optional<GenerationSettings> GenerationSettings::fromClip(const QByteArray& json,
                                                               const QString& source, QString* why,
                                                               const QString& defaultNegative) {
  const auto refuse = [&](const QString& reason) -> std::optional<GenerationSettings> {
    if (why) *why = reason;
    return std::nullopt;
  };
  const QString shown = QDir::toNativeSeparators(source);
  if (json.size() > kMaxClipSettingsBytes) {
    return refuse(QObject::tr("%1 carries settings larger than %2 KiB: they are not Ferry's.")
                      .arg(shown)
                      .arg(kMaxClipSettingsBytes / 1024));
  }
  QJsonParseError error{};
  const QJsonDocument doc = QJsonDocument::fromJson(json, &error);
  if (!doc.isObject() || !doc.object().contains(QStringLiteral("prompt"))) {
    return refuse(QObject::tr("%1 carries no Ferry settings.").arg(shown));
  }
  const QJsonArray loras = doc.object().value(QStringLiteral("loras")).toArray();
  if (loras.size() > kMaxClipLoras) {
    return refuse(QObject::tr("%1 lists %2 LoRAs, more than the %3 a Ferry video carries: its "
                              "settings are not restored.")
                      .arg(shown)
                      .arg(loras.size())
                      .arg(kMaxClipLoras));
  }
  GenerationSettings s = fromJson(doc.object(), defaultNegative);
  // A clip says what was made, never where things are on this machine: its model files and noise
  // file are found by name in the folders the user chose (clip_lookup.h), its start image beside
  // the clip. A folder or path in a clip (the GUI's own keys, or a legacy clip's absolute model
  // files) is not restored: loading or scanning it would read wherever the clip's author chose.
  s.model.clear();
  s.noise.clear();
  s.saveNoisePath.clear();
  s.saveLatentsPath.clear();
  QStringList names;
  // The LoRAs that ran, by name: each is looked for where the user keeps LoRAs (clip_lookup.h).
  for (LoraSetting& l : s.loras) {
    l.path.clear();
    l.enabled = true;
    names << l.name;
  }
  if (!s.image.isEmpty()) names << s.image;
  if (!s.endImage.isEmpty()) names << s.endImage;
  for (const ClipFile& f : s.modelFiles) names << f.name;
  if (!s.noiseFile.name.isEmpty()) names << s.noiseFile.name;
  if (!s.keptLatents.isEmpty()) names << s.keptLatents;
  if (!s.latentsFile.name.isEmpty()) names << s.latentsFile.name;
  for (const QString& name : names) {
    const QString problem = unsafeName(name);
    if (!problem.isEmpty()) {
      return refuse(
          QObject::tr("%1 carries settings that are not restored: %2").arg(shown, problem));
    }
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
    return fromClip(QByteArray::fromStdString(comment->second), path, why, defaultNegative);
  } catch (const std::exception& e) {
    if (why) *why = QString::fromUtf8(e.what());
    return std::nullopt;
  }
}

}  // namespace ferry::gui
