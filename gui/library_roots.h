// The folders the model library scans (issue 22): Ferry's models folder (where downloads go), the
// folders the user added (kept in the window's settings), a ComfyUI install found where its
// installers put it, and the Hugging Face hub cache. A restored clip's model files are looked for
// below the same folders (clip_lookup.h).
#pragma once

#include <QSettings>
#include <QString>
#include <QStringList>

namespace ferry::gui {

// Where the user's added folders are kept in the window's settings.
inline constexpr char kLibraryFoldersKey[] = "library/folders";

QStringList addedLibraryFolders(const QSettings& store);
// Adds `folder` to the kept ones (once).
void addLibraryFolder(QSettings& store, const QString& folder);

// The usual places of a ComfyUI install under the user's home (~/ComfyUI, ~/Documents/ComfyUI, the
// Windows portable build unpacked in the home, Desktop or Downloads folder) that hold one
// (library::comfyui_model_folders). Reads the drive.
QStringList detectedComfyUiInstalls();

// Every root, each once ('/' separators): `modelsFolder`, `added`, the ComfyUI installs detected
// and the hub cache (library::hf_hub_cache_dir) where they exist. Reads the drive.
QStringList libraryRoots(const QString& modelsFolder, const QStringList& added);

}  // namespace ferry::gui
