// Restoring a clip on this machine: its model files found by NAME (a clip names no folders) in
// the models the window offers (folders, or a set's files), then below the model library's roots,
// the noise file it was made from found by name and fingerprint, and its LoRAs by name and size
// where the user keeps LoRAs. It reads the drive (a recursive listing, fingerprints), so the window
// runs it on a LatestQuery thread.
#pragma once

#include <QList>
#include <QString>
#include <QStringList>

#include "gui/generation_settings.h"

namespace ferry::gui {

struct ClipLookup {
  // The model holding every file the clip names, as GenerationSettings::model: the smallest folder
  // below a model folder searched, a model's own files, or the files found below a library root
  // (a set spread over a ComfyUI install's folders; the diffusers pipeline folder holding them
  // when there is one); empty when none holds them all.
  QStringList model;
  QString searched;      // the folder `missing` is about
  QStringList missing;   // each file not found there, with why ("x.safetensors (VAE)")
  QStringList warnings;  // found, but another content (the fingerprint differs)
  // A file with the clip's noise file's name and fingerprint; empty when none was found.
  QString noisePath;
  // The clip's LoRAs in order, each with the path it was found at (empty where it was not), the
  // ones not found (with why), and those found with other contents (the fingerprint differs).
  QList<LoraSetting> loras;
  QStringList lorasMissing;
  QStringList loraWarnings;
};

// Where a user keeps LoRAs, for a clip's: `listFolders` (the folders of the LoRAs in the list,
// searched flat), then for each of `modelFolders` the folder itself (flat), its `loras` folder
// and, for a ComfyUI model folder (models/diffusion_models, unet or checkpoints), models/loras
// (both searched recursively). Existing folders only, each once. Reads the drive.
struct LoraFolder {
  QString path;
  bool recursive = false;
  bool operator==(const LoraFolder&) const = default;
};
QList<LoraFolder> loraFolders(const QStringList& listFolders, const QStringList& modelFolders);

// Looks for every one of `files` in each of `models` in turn — below a one-folder model
// (recursively), among a set's files — then below each of `libraryRoots` (recursively; names
// compared exactly; a file of another size is not it), and for the noise file among
// `noiseCandidates` (paths), and for each of `loras` without a path in loraFolders(
// `loraListFolders`, the model's folders found, else the models' folders). Never throws.
ClipLookup lookUpClip(const QList<ClipFile>& files, const QList<QStringList>& models,
                      const QStringList& libraryRoots, const ClipFile& noise,
                      const QStringList& noiseCandidates, const QList<LoraSetting>& loras = {},
                      const QStringList& loraListFolders = {});

}  // namespace ferry::gui
