#include "gui/clip_lookup.h"

#include <QDir>
#include <QDirIterator>
#include <QFileInfo>
#include <QHash>
#include <QSet>
#include <algorithm>

#include "core/io/detail/os_file.h"
#include "core/io/fingerprint.h"
#include "gui/memory_chart.h"

namespace ferry::gui {
namespace {

QString fingerprintOf(const QString& path) {
  try {
    return QString::fromStdString(
        io::file_fingerprint(io::detail::path_from_utf8(path.toStdString())));
  } catch (const std::exception&) {
    return {};
  }
}

QString describe(const ClipFile& f) {
  return f.role.isEmpty() ? f.name : QStringLiteral("%1 (%2)").arg(f.name, f.role);
}

// The deepest folder holding every one of `paths`, but never above `root`.
QString commonFolder(const QStringList& paths, const QString& root) {
  QString common;
  for (const QString& path : paths) {
    const QString folder = QFileInfo(path).absolutePath();
    if (common.isEmpty()) {
      common = folder;
      continue;
    }
    while (common.size() > root.size() &&
           !(folder == common || folder.startsWith(common + QLatin1Char('/')))) {
      common = QFileInfo(common).path();
    }
  }
  return common.size() < root.size() ? root : common;
}

struct FolderResult {
  QString folder;
  QStringList missing;
  QStringList warnings;
};

FolderResult lookIn(const QList<ClipFile>& files, const QString& root) {
  QSet<QString> wanted;
  for (const ClipFile& f : files) wanted.insert(f.name);
  QHash<QString, QStringList> found;  // name → paths below root
  QDirIterator it(root, QDir::Files | QDir::Hidden, QDirIterator::Subdirectories);
  while (it.hasNext()) {
    const QString path = it.next();
    if (wanted.contains(it.fileName())) found[it.fileName()] << path;
  }
  FolderResult r;
  QStringList paths;
  for (const ClipFile& f : files) {
    QString match;
    QString otherSize;
    for (const QString& path : found.value(f.name)) {
      const quint64 bytes = static_cast<quint64>(QFileInfo(path).size());
      if (f.bytes == 0 || bytes == f.bytes) {
        match = path;
        break;
      }
      otherSize =
          QObject::tr("%1: the file found there has %2, the clip's had %3")
              .arg(describe(f), MemoryChart::formatBytes(bytes), MemoryChart::formatBytes(f.bytes));
    }
    if (match.isEmpty()) {
      r.missing << (otherSize.isEmpty() ? describe(f) : otherSize);
      continue;
    }
    paths << match;
    if (!f.fingerprint.isEmpty() && fingerprintOf(match) != f.fingerprint) {
      r.warnings << QObject::tr(
                        "%1 has the clip's name and size but other contents (another "
                        "fine-tune or quantisation?): the video may differ")
                        .arg(QDir::toNativeSeparators(match));
    }
  }
  if (r.missing.isEmpty()) r.folder = commonFolder(paths, root);
  return r;
}

// Each LoRA of `loras` without a path: the first file below `folders` with its name and size.
void lookUpLoras(const QList<LoraSetting>& loras, const QList<LoraFolder>& folders,
                 ClipLookup& out) {
  QSet<QString> wanted;
  for (const LoraSetting& l : loras) {
    if (l.path.isEmpty()) wanted.insert(l.name);
  }
  QHash<QString, QStringList> found;  // name → paths, in the folders' order
  for (const LoraFolder& folder : folders) {
    if (wanted.isEmpty()) break;
    QDirIterator it(
        folder.path, QDir::Files | QDir::Hidden,
        folder.recursive ? QDirIterator::Subdirectories : QDirIterator::NoIteratorFlags);
    while (it.hasNext()) {
      const QString path = it.next();
      if (wanted.contains(it.fileName())) found[it.fileName()] << path;
    }
  }
  for (LoraSetting l : loras) {
    if (!l.path.isEmpty()) {
      out.loras << l;
      continue;
    }
    QString otherSize;
    for (const QString& path : found.value(l.name)) {
      const quint64 bytes = static_cast<quint64>(QFileInfo(path).size());
      if (l.bytes == 0 || bytes == l.bytes) {
        l.path = path;
        break;
      }
      otherSize =
          QObject::tr("%1 (the file found has %2, the clip's had %3)")
              .arg(l.name, MemoryChart::formatBytes(bytes), MemoryChart::formatBytes(l.bytes));
    }
    if (l.path.isEmpty()) {
      out.lorasMissing << (otherSize.isEmpty() ? l.name : otherSize);
    } else if (!l.fingerprint.isEmpty() && fingerprintOf(l.path) != l.fingerprint) {
      out.loraWarnings << QObject::tr(
                              "the LoRA %1 has the clip's name and size but other contents: the "
                              "video may differ")
                              .arg(QDir::toNativeSeparators(l.path));
    }
    out.loras << l;
  }
}

}  // namespace

QList<LoraFolder> loraFolders(const QStringList& listFolders, const QStringList& modelFolders) {
  QList<LoraFolder> out;
  const auto add = [&out](const QString& path, bool recursive) {
    if (path.isEmpty()) return;
    const LoraFolder f{QDir::cleanPath(QDir::fromNativeSeparators(path)), recursive};
    const bool seen =
        std::any_of(out.begin(), out.end(), [&](const LoraFolder& o) { return o.path == f.path; });
    if (!seen && QFileInfo(f.path).isDir()) out << f;
  };
  for (const QString& folder : listFolders) add(folder, false);
  for (const QString& folder : modelFolders) {
    if (folder.isEmpty()) continue;
    const QDir dir(QDir::cleanPath(QDir::fromNativeSeparators(folder)));
    add(dir.path(), false);
    add(dir.filePath(QStringLiteral("loras")), true);
    const QString name = dir.dirName();
    if (name == QLatin1String("diffusion_models") || name == QLatin1String("unet") ||
        name == QLatin1String("checkpoints")) {
      add(QFileInfo(dir.path()).path() + QStringLiteral("/loras"), true);
    }
  }
  return out;
}

ClipLookup lookUpClip(const QList<ClipFile>& files, const QStringList& modelFolders,
                      const ClipFile& noise, const QStringList& noiseCandidates,
                      const QList<LoraSetting>& loras, const QStringList& loraListFolders) {
  ClipLookup out;
  if (!files.isEmpty()) {
    QStringList seen;
    for (const QString& folder : modelFolders) {
      const QString root = QDir::cleanPath(QDir::fromNativeSeparators(folder));
      if (folder.isEmpty() || seen.contains(root) || !QFileInfo(root).isDir()) continue;
      seen << root;
      FolderResult r = lookIn(files, root);
      if (!r.folder.isEmpty()) {
        out.modelFolder = r.folder;
        out.warnings = r.warnings;
        out.missing.clear();
        out.searched = root;
        break;
      }
      // The folder the user chose is searched last: what is missing there is what they hear.
      out.searched = root;
      out.missing = r.missing;
    }
    if (seen.isEmpty()) {
      for (const ClipFile& f : files) out.missing << describe(f);
    }
  }
  if (!noise.name.isEmpty()) {
    for (const QString& path : noiseCandidates) {
      if (path.isEmpty() || QFileInfo(path).fileName() != noise.name || !QFileInfo(path).isFile()) {
        continue;
      }
      if (noise.fingerprint.isEmpty() || fingerprintOf(path) == noise.fingerprint) {
        out.noisePath = QDir::fromNativeSeparators(path);
        break;
      }
    }
  }
  if (!loras.isEmpty()) {
    const QStringList models =
        out.modelFolder.isEmpty() ? modelFolders : QStringList{out.modelFolder};
    lookUpLoras(loras, loraFolders(loraListFolders, models), out);
  }
  return out;
}

}  // namespace ferry::gui
