#include "gui/library_roots.h"

#include <QDir>
#include <QFileInfo>

#include "core/io/detail/os_file.h"
#include "core/library/roots.h"

namespace ferry::gui {
namespace {

QString cleaned(const QString& folder) {
  return QDir::cleanPath(QDir::fromNativeSeparators(folder));
}

bool isComfyUi(const QString& folder) {
  try {
    return !library::comfyui_model_folders(io::detail::path_from_utf8(folder.toStdString()))
                .empty();
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

QStringList addedLibraryFolders(const QSettings& store) {
  return store.value(QLatin1String(kLibraryFoldersKey)).toStringList();
}

void addLibraryFolder(QSettings& store, const QString& folder) {
  QStringList added = addedLibraryFolders(store);
  if (folder.isEmpty() || added.contains(cleaned(folder))) return;
  added << cleaned(folder);
  store.setValue(QLatin1String(kLibraryFoldersKey), added);
}

QStringList detectedComfyUiInstalls() {
  const QDir home = QDir::home();
  QStringList found;
  for (const QString& relative : {QStringLiteral("ComfyUI"), QStringLiteral("Documents/ComfyUI"),
                                  QStringLiteral("ComfyUI_windows_portable/ComfyUI"),
                                  QStringLiteral("Desktop/ComfyUI_windows_portable/ComfyUI"),
                                  QStringLiteral("Downloads/ComfyUI_windows_portable/ComfyUI")}) {
    const QString folder = cleaned(home.filePath(relative));
    if (QFileInfo(folder).isDir() && isComfyUi(folder)) found << folder;
  }
  return found;
}

QStringList libraryRoots(const QString& modelsFolder, const QStringList& added) {
  QStringList roots;
  const auto add = [&roots](const QString& folder) {
    const QString root = cleaned(folder);
    if (!folder.isEmpty() && !roots.contains(root) && QFileInfo(root).isDir()) roots << root;
  };
  add(modelsFolder);
  for (const QString& folder : added) add(folder);
  for (const QString& folder : detectedComfyUiInstalls()) add(folder);
  add(QString::fromStdString(io::detail::display(library::hf_hub_cache_dir())));
  return roots;
}

}  // namespace ferry::gui
