// Everything a user sets for one video, as the window holds it: turned into a
// models::GenerationRequest to run, and read back from the settings JSON the generator writes
// (the MP4's `comment` tag and its sidecar) to restore a history item or a dropped Ferry video.
#pragma once

#include <QJsonObject>
#include <QMetaType>
#include <QString>
#include <optional>

#include "core/models/request.h"

namespace ferry::gui {

enum class SeedMode { kFixed, kRandom, kIncrement };

struct GenerationSettings {
  QString prompt;
  QString negativePrompt;  // empty: the model's default
  QString image;           // start image; empty: text to video
  QString modelFolder;
  int width = 0;  // 0: the model's default
  int height = 0;
  int frames = 0;
  int fps = 0;
  int steps = 0;
  double guideScale = 0;  // 0: the model's default
  double shift = 0;       // 0: the model's default
  QString sampler;        // "unipc", "euler"; empty: the model's default
  quint64 seed = 0;
  SeedMode seedMode = SeedMode::kFixed;
  QString preset = QStringLiteral("auto");

  bool operator==(const GenerationSettings&) const = default;

  // The request for the engine, writing to `output`.
  models::GenerationRequest toRequest(const QString& output) const;

  // The generator's settings JSON keys (prompt, negative_prompt, seed, width, height, frames, fps,
  // steps, guide_scale, shift, sampler, preset, image, model_files) plus the GUI's own
  // (model_folder, seed_mode).
  QJsonObject toJson() const;
  // A negative prompt equal to `defaultNegative` (the model's default) restores as empty.
  static GenerationSettings fromJson(const QJsonObject& json, const QString& defaultNegative = {});
  // The settings a Ferry MP4 carries in its `comment` tag; nullopt with `why` set when the file
  // is not a video or carries no Ferry settings.
  static std::optional<GenerationSettings> fromVideo(const QString& path, QString* why = nullptr,
                                                     const QString& defaultNegative = {});
};

QString seedModeName(SeedMode mode);
SeedMode seedModeFromName(const QString& name);

}  // namespace ferry::gui

Q_DECLARE_METATYPE(ferry::gui::GenerationSettings)
