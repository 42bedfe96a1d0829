// libFuzzer target: GenerationSettings::fromClip on arbitrary bytes, taken as the settings JSON of
// a shared clip (an MP4's comment tag, or its sidecar). Whatever the bytes, the settings restored
// must carry no place on this machine (no model folder, noise or save path; file names that are
// plain names) and no negative size or count; a crash or a sanitizer report (UBSan included: an
// out-of-range double cast to an integer) is a finding.
#include <QByteArray>
#include <QString>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "core/io/safe_path.h"
#include "gui/generation_settings.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

bool plainName(const QString& name) {
  try {
    ferry::io::safe_file_name(name.toStdString());
    return true;
  } catch (const ferry::Error&) {
    return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using ferry::gui::ClipFile;
  using ferry::gui::GenerationSettings;
  const QByteArray json(reinterpret_cast<const char*>(data), static_cast<qsizetype>(size));
  QString why;
  const auto s = GenerationSettings::fromClip(json, QStringLiteral("fuzz.mp4"), &why);
  if (!s) {
    check(why.contains(QLatin1String("fuzz.mp4")));
    return 0;
  }
  check(s->model.isEmpty() && s->noise.isEmpty());
  check(s->saveNoisePath.isEmpty() && s->saveLatentsPath.isEmpty());
  check(s->image.isEmpty() || plainName(s->image));
  for (const ClipFile& f : s->modelFiles) check(plainName(f.name));
  check(s->noiseFile.name.isEmpty() || plainName(s->noiseFile.name));
  check(s->width >= 0 && s->height >= 0 && s->frames >= 0 && s->fps >= 0 && s->steps >= 0);
  // What the window would send the engine: a request built from it must not throw either.
  (void)s->toRequest(QStringLiteral("/tmp/fuzz-out.mp4"));
  return 0;
}
