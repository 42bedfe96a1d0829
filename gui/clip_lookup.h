// Restoring a clip on this machine: its model files found by NAME (a clip names no folders) in
// the model folders the window offers, and the noise file it was made from found by name and
// fingerprint. It reads the drive (a recursive listing, fingerprints), so the window runs it on a
// LatestQuery thread.
#pragma once

#include <QList>
#include <QString>
#include <QStringList>

#include "gui/generation_settings.h"

namespace ferry::gui {

struct ClipLookup {
  // The folder holding every model file the clip names (the smallest one below the folder
  // searched); empty when none holds them all.
  QString modelFolder;
  QString searched;      // the folder `missing` is about
  QStringList missing;   // each file not found there, with why ("x.safetensors (VAE)")
  QStringList warnings;  // found, but another content (the fingerprint differs)
  // A file with the clip's noise file's name and fingerprint; empty when none was found.
  QString noisePath;
};

// Looks for every one of `files` below each of `modelFolders` in turn (recursively; names compared
// exactly; a file of another size is not it) and for the noise file among `noiseCandidates`
// (paths). Never throws.
ClipLookup lookUpClip(const QList<ClipFile>& files, const QStringList& modelFolders,
                      const ClipFile& noise, const QStringList& noiseCandidates);

}  // namespace ferry::gui
