#include "gui/clip_lookup.h"

#include <QDir>
#include <QDirIterator>
#include <QFileInfo>
#include <QHash>
#include <QSet>

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

}  // namespace

ClipLookup lookUpClip(const QList<ClipFile>& files, const QStringList& modelFolders,
                      const ClipFile& noise, const QStringList& noiseCandidates) {
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
  return out;
}

}  // namespace ferry::gui
