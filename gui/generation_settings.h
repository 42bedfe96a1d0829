// Everything a user sets for one video, as the window holds it: turned into a
// models::GenerationRequest to run, and read back from the settings JSON the generator writes
// (the MP4's `comment` tag and its sidecar) to restore a history item or a dropped Ferry video.
#pragma once

#include <QByteArray>
#include <QJsonObject>
#include <QList>
#include <QMetaType>
#include <QString>
#include <QStringList>
#include <optional>

#include "core/models/request.h"

namespace ferry::gui {

enum class SeedMode { kFixed, kRandom, kIncrement };

// A model file as a clip names it: its file name only (no folder: a shared clip leaks none), its
// size and content fingerprint (io::file_fingerprint). Clips made before the session API carry an
// absolute path instead: then the name is its file name, and bytes and fingerprint are unknown.
struct ClipFile {
  QString role;
  QString name;
  quint64 bytes = 0;    // 0: unknown
  QString fingerprint;  // "fp1:…"; empty: unknown
  bool operator==(const ClipFile&) const = default;
};

// A clip's settings JSON is about 2 KB; larger ones are refused unread.
inline constexpr qsizetype kMaxClipSettingsBytes = 1 << 20;

// A LoRA in the list: the file, its strength, and whether it runs (disabled ones stay in the list
// and out of the request). A clip names the LoRAs that ran like its model files: file name, size
// and fingerprint, with the strength; `path` is empty until the file is found on this machine.
struct LoraSetting {
  QString path;
  double strength = 1.0;
  bool enabled = true;
  QString name;         // the file name; a clip's, or the path's
  quint64 bytes = 0;    // 0: unknown
  QString fingerprint;  // "fp1:…"; empty: unknown
  bool operator==(const LoraSetting&) const = default;
};

// What a clip may carry: more LoRAs, or strengths beyond these, are not Ferry's.
inline constexpr qsizetype kMaxClipLoras = 64;
inline constexpr double kMaxLoraStrength = 10.0;

struct GenerationSettings {
  QString prompt;
  QString negativePrompt;  // empty: the model's default
  QString image;           // start image; empty: text to video
  QString endImage;        // end image (first–last frame; needs a start image); empty: none
  // The model: one folder, or a set's files wherever they are (a library set spread over a
  // ComfyUI install's diffusion_models/, text_encoders/ and vae/); '/' separators. Handed to the
  // engine as is (GenerationRequest::model).
  QStringList model;
  int width = 0;  // 0: the model's default
  int height = 0;
  int frames = 0;
  int fps = 0;
  int steps = 0;
  double guideScale = 0;  // 0: the model's default (two experts: the high-noise expert's)
  // Two-expert models (Wan 2.2 A14B): the low-noise expert's guide scale; 0: the model's default.
  double lowNoiseGuideScale = 0;
  double shift = 0;  // 0: the model's default
  QString sampler;   // "unipc", "euler"; empty: the model's default
  quint64 seed = 0;
  SeedMode seedMode = SeedMode::kFixed;
  QString preset = QStringLiteral("auto");
  // Advanced (replays across tools): the initial noise read from this safetensors file instead of
  // drawn from the seed; empty: the seed's.
  QString noise;
  // Write the noise the run used / its final latents (with the text encoder's output) when it
  // succeeds, to the path chosen or, empty, next to the video (<stem>.noise.safetensors,
  // <stem>.latents.safetensors). The paths are the run's, not remembered: a later run would
  // overwrite them.
  bool saveNoise = false;
  bool saveLatents = false;
  bool saveTextStates = false;
  QString saveNoisePath;
  QString saveLatentsPath;
  // A draft: the video decoded by the model set's TAEHV decoder instead of its VAE (seconds, softer
  // detail), its final latents kept beside it ("decode": "taehv-draft" in the clip).
  bool draft = false;
  // The final latents to decode instead of denoising (a draft's, for the full VAE decode): the
  // run's, never stored in the settings JSON nor restored.
  QString latents;
  // What a clip says about its latents (read back): the file a draft kept beside it, and the
  // saved latents a clip was decoded from (name and fingerprint; empty: it was denoised).
  QString keptLatents;
  ClipFile latentsFile;
  // What the clip says about where it came from (read back, never sent to the engine): its model
  // files, and the noise file it was made from (name and fingerprint; empty: the seed's noise).
  QList<ClipFile> modelFiles;
  ClipFile noiseFile;
  // Applied in this order; the enabled ones reach the request.
  QList<LoraSetting> loras;

  bool operator==(const GenerationSettings&) const = default;

  // The request for the engine, writing to `output`.
  models::GenerationRequest toRequest(const QString& output) const;

  // The generator's settings JSON keys (prompt, negative_prompt, seed, width, height, frames, fps,
  // steps, guide_scale, low_noise_guide_scale, shift, sampler, preset, image, end_image,
  // model_files, noise_file, loras: name, bytes, fingerprint, strength; decode, latents_kept,
  // latents_file) plus the GUI's own (model_paths: the model's folder or files;
  // seed_mode, noise, save_noise, save_latents, save_text_states; each LoRA's path and enabled).
  QJsonObject toJson() const;
  // A negative prompt equal to `defaultNegative` (the model's default) restores as empty. Settings
  // written before "model_paths" (history items, the last session, clips) name one "model_folder":
  // it restores as the one-folder model.
  static GenerationSettings fromJson(const QJsonObject& json, const QString& defaultNegative = {});
  // The settings a clip carries (a Ferry MP4's `comment` tag, or its sidecar .json: the same
  // JSON), read as a stranger may have written them: settings only. No model path, noise path
  // or save path is restored, the start and end images are file names to look for beside the
  // clip, and
  // out-of-range numbers are clamped (LoRA strengths to ±kMaxLoraStrength); the LoRAs are names to
  // look for, all enabled; a clip whose file names could reach outside a folder ("../x", "C:x",
  // "nul", ...) or that lists more than kMaxClipLoras LoRAs is refused. nullopt with `why` set
  // (naming `source`) when refused or when there are no Ferry settings.
  static std::optional<GenerationSettings> fromClip(const QByteArray& json, const QString& source,
                                                    QString* why = nullptr,
                                                    const QString& defaultNegative = {});
  // The settings a Ferry MP4 carries in its `comment` tag (fromClip); nullopt with `why` set when
  // the file is not a video or carries no Ferry settings.
  static std::optional<GenerationSettings> fromVideo(const QString& path, QString* why = nullptr,
                                                     const QString& defaultNegative = {});
};

// Where a run writes what the Advanced settings ask to save, next to `video` unless chosen.
QString defaultSavePath(const QString& video, const QString& what);  // what: "noise", "latents"

// A model's name in a few words: its folder's name, or its first file's (a library set lists its
// diffusion model first) without the extension, "+ N files" after it.
QString modelShortName(const QStringList& model);

// The deepest folder holding every one of `files` ('/' separators), never above `root` when one is
// given (then `root` itself); empty when they share none (files on two drives).
QString commonFolderOf(const QStringList& files, const QString& root = {});

QString seedModeName(SeedMode mode);
SeedMode seedModeFromName(const QString& name);

}  // namespace ferry::gui

Q_DECLARE_METATYPE(ferry::gui::GenerationSettings)
