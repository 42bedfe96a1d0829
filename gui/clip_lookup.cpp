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

struct FolderResult {
  QString folder;
  QStringList paths;  // the file found for each of the clip's, in its order
  QStringList missing;
  QStringList warnings;
};

// The clip's `files` among `found` (name → candidate paths).
FolderResult match(const QList<ClipFile>& files, const QHash<QString, QStringList>& found,
                   const QString& root) {
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
  if (r.missing.isEmpty()) {
    r.paths = paths;
    r.folder = commonFolderOf(paths, root);
  }
  return r;
}

FolderResult lookIn(const QList<ClipFile>& files, const QString& root) {
  QSet<QString> wanted;
  for (const ClipFile& f : files) wanted.insert(f.name);
  QHash<QString, QStringList> found;  // name → paths below root
  QDirIterator it(root, QDir::Files | QDir::Hidden, QDirIterator::Subdirectories);
  while (it.hasNext()) {
    const QString path = it.next();
    if (wanted.contains(it.fileName())) found[it.fileName()] << path;
  }
  return match(files, found, root);
}

// The clip's `files` among a set's `paths` (files, by name).
FolderResult lookAmong(const QList<ClipFile>& files, const QStringList& paths) {
  QHash<QString, QStringList> found;
  for (const QString& path : paths) {
    if (QFileInfo(path).isFile()) found[QFileInfo(path).fileName()] << path;
  }
  return match(files, found, QString());
}

// The diffusers pipeline folder (it holds model_index.json) that holds every one of the clip's
// files found below a library root, from where they meet up to `root`; empty when there is none.
// Such a folder is one model, and the engine reads it whole (its tokenizer and configuration are
// no model files a clip names), where a ComfyUI folder or a hub repository of loose files holds
// many.
QString pipelineFolder(const QString& common, const QString& root) {
  for (QString folder = common; folder.size() >= root.size();) {
    if (QFileInfo(QDir(folder).filePath(QStringLiteral("model_index.json"))).isFile()) {
      return folder;
    }
    const QString up = QFileInfo(folder).path();
    if (up == folder) break;
    folder = up;
  }
  return {};
}

// The folders a model's LoRAs may sit near: a folder model's own, a set's files' folders.
QStringList foldersOf(const QStringList& model) {
  if (model.size() == 1) return model;
  QStringList folders;
  for (const QString& file : model) {
    const QString folder = QFileInfo(file).absolutePath();
    if (!folders.contains(folder)) folders << folder;
  }
  return folders;
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

ClipLookup lookUpClip(const QList<ClipFile>& files, const QList<QStringList>& models,
                      const QStringList& libraryRoots, const ClipFile& noise,
                      const QStringList& noiseCandidates, const QList<LoraSetting>& loras,
                      const QStringList& loraListFolders) {
  ClipLookup out;
  if (!files.isEmpty()) {
    QStringList seen;
    // What the clip's files are found as: the folder holding them (a model folder), or the
    // files themselves (a set's, or below a library root: a ComfyUI install's folders each hold
    // many models, so no folder of it is one model).
    const auto found = [&](const FolderResult& r, const QString& searched, bool asFiles,
                           bool chosen) {
      if (r.folder.isEmpty()) {
        // What is missing from the last model the user chose is what they hear (the current
        // one comes last); from a library root only when no model was searched.
        if (chosen || out.searched.isEmpty()) {
          out.searched = searched;
          out.missing = r.missing;
        }
        return false;
      }
      out.model = asFiles ? r.paths : QStringList{r.folder};
      if (asFiles && !chosen) {
        if (const QString pipeline = pipelineFolder(r.folder, searched); !pipeline.isEmpty()) {
          out.model = {pipeline};
        }
      }
      out.warnings = r.warnings;
      out.missing.clear();
      out.searched = searched;
      return true;
    };
    bool done = false;
    for (const QStringList& model : models) {
      if (model.isEmpty() || done) continue;
      if (model.size() > 1) {
        done = found(lookAmong(files, model), modelShortName(model), true, true);
        if (done) out.model = model;  // the set as it was chosen
        seen << model.join(QLatin1Char('\n'));
        continue;
      }
      const QString root = QDir::cleanPath(QDir::fromNativeSeparators(model.front()));
      if (seen.contains(root) || !QFileInfo(root).isDir()) continue;
      seen << root;
      done = found(lookIn(files, root), root, false, true);
    }
    for (const QString& folder : libraryRoots) {
      const QString root = QDir::cleanPath(QDir::fromNativeSeparators(folder));
      if (done || folder.isEmpty() || seen.contains(root) || !QFileInfo(root).isDir()) continue;
      seen << root;
      done = found(lookIn(files, root), root, true, false);
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
    QStringList folders;
    if (!out.model.isEmpty()) {
      folders = foldersOf(out.model);
    } else {
      for (const QStringList& model : models) folders << foldersOf(model);
    }
    lookUpLoras(loras, loraFolders(loraListFolders, folders), out);
  }
  return out;
}

}  // namespace ferry::gui
