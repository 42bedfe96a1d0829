// Shared by the GUI test suites: the demo model written once per process into a temporary folder,
// the machines the tests plan for and sessions on them, and waiting for the window's lookups.
#pragma once

#include <QDir>
#include <QString>
#include <QTemporaryDir>
#include <QtTest/QtTest>
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/io/detail/os_file.h"
#include "core/memory/process_memory.h"
#include "core/models/family.h"
#include "core/offload/preset.h"
#include "core/pipeline/session.h"

namespace ferry::gui::test {

inline constexpr quint64 kMiB = quint64{1} << 20;
inline constexpr quint64 kGiB = quint64{1} << 30;

inline std::filesystem::path toPath(const QString& path) {
  return io::detail::path_from_utf8(path.toStdString());
}

// The demo model set (a tiny Wan 2.2 TI2V with random weights), written once.
inline QString demoFolder() {
  static QTemporaryDir dir;
  static const QString folder = [] {
    const QString f = dir.filePath(QStringLiteral("demo-model"));
    models::find_family("wan")->write_demo_model(toPath(f));
    return f;
  }();
  return folder;
}

// A machine without an NVIDIA GPU (the cpu preset) and the 8 GB laptop the product is for.
inline offload::MachineInfo cpuMachine() {
  return {false, 0, 0, 16 * kGiB, 12 * kGiB};
}
inline offload::MachineInfo laptopMachine() {
  return {true, 8192 * kMiB, 8192 * kMiB, 32768 * kMiB, 32768 * kMiB};
}

// A session planning for `machine` with the built-in presets; `streamAll` as the demo runs.
inline std::shared_ptr<pipeline::Session> session(const offload::MachineInfo& machine,
                                                  bool streamAll = false) {
  pipeline::SessionOptions o;
  o.machine = machine;
  o.presets = offload::builtin_presets();
  o.generator.stream_all = streamAll;
  return std::make_shared<pipeline::Session>(o);
}

// Waits until `settled()` (the model found, the plan made: they run off the GUI thread).
template <class Window>
bool settle(const Window& w, int ms = 30000) {
  QElapsedTimer t;
  t.start();
  QTest::qWait(1);
  while (!w.settled() && t.elapsed() < ms) QTest::qWait(5);
  return w.settled();
}

inline quint64 residentBytes() {
  return memory::sample_process_memory().resident_bytes;
}

// Files under `folder` whose names end in `suffix` (recursively).
inline QStringList filesEndingIn(const QString& folder, const QString& suffix) {
  QStringList out;
  QDirIterator it(folder, QDir::Files, QDirIterator::Subdirectories);
  while (it.hasNext()) {
    const QString f = it.next();
    if (f.endsWith(suffix)) out << f;
  }
  return out;
}

}  // namespace ferry::gui::test
