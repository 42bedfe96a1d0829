#include "gui/machine_check.h"

#include <QDir>
#include <QObject>
#include <QStorageInfo>

#include "core/offload/machine.h"
#include "gui/memory_chart.h"

namespace ferry::gui {
namespace {

constexpr quint64 kGiB = quint64{1} << 30;

}  // namespace

offload::MachineInfo describeMachine() {
  return offload::probe_machine();
}

MachineReport checkMachine(const QString& dataFolder) {
  MachineReport r;
  r.machine = describeMachine();
  std::string why;
  if (const auto gpu = offload::find_gpu(&why)) {
    r.gpuName = QString::fromStdString(gpu->name);
    r.driver = QString::fromStdString(gpu->driver);
  } else {
    r.whyNoGpu = QString::fromStdString(why);
  }
  QString folder = dataFolder;
  while (!folder.isEmpty() && !QDir(folder).exists()) {
    const QString up = QDir(folder).absoluteFilePath(QStringLiteral(".."));
    if (QDir::cleanPath(up) == QDir::cleanPath(folder)) break;
    folder = QDir::cleanPath(up);
  }
  r.diskFolder = dataFolder;
  const QStorageInfo storage(folder.isEmpty() ? QDir::homePath() : folder);
  r.freeDiskBytes = storage.isValid() ? static_cast<quint64>(storage.bytesAvailable()) : 0;
  judge(r);
  return r;
}

void judge(MachineReport& r) {
  const auto& m = r.machine;
  if (!m.has_gpu) {
    r.suggestedPreset = QStringLiteral("cpu");
    r.verdict = MachineReport::Verdict::kSlow;
    r.verdictText = QObject::tr(
        "No NVIDIA GPU found: Ferry will run on the CPU with the cpu preset. It works, but a "
        "video will take hours instead of minutes.");
  } else if (m.total_vram_bytes >= 22 * kGiB) {
    r.suggestedPreset = QStringLiteral("desktop-24gb");
  } else if (m.total_vram_bytes >= 15 * kGiB) {
    r.suggestedPreset = QStringLiteral("desktop-16gb");
  } else if (m.total_vram_bytes >= 11 * kGiB) {
    r.suggestedPreset = QStringLiteral("desktop-12gb");
  } else if (m.total_vram_bytes >= 7 * kGiB) {
    r.suggestedPreset = QStringLiteral("laptop-8gb");
  } else {
    r.suggestedPreset = QStringLiteral("laptop-6gb");
  }
  if (m.has_gpu) {
    r.verdict = MachineReport::Verdict::kGood;
    r.verdictText =
        QObject::tr("This machine can make videos. Suggested preset: %1.").arg(r.suggestedPreset);
    if (m.total_vram_bytes < 5 * kGiB) {
      r.verdict = MachineReport::Verdict::kTooSmall;
      r.verdictText = QObject::tr(
          "The GPU has less than 6 GB of memory: most models will not fit. Try the cpu preset "
          "or a smaller size.");
    }
  }
  if (m.total_ram_bytes != 0 && m.total_ram_bytes < 12 * kGiB) {
    r.verdictText += QLatin1Char(' ') + QObject::tr(
                                            "With less than 16 GB of RAM, keep other programs "
                                            "closed while generating.");
  }
  if (r.freeDiskBytes != 0 && r.freeDiskBytes < 2 * kGiB) {
    r.verdictText +=
        QLatin1Char(' ') + QObject::tr("The disk is almost full: free some space for the videos.");
  }
}

QString MachineReport::details() const {
  QStringList lines;
  if (machine.has_gpu) {
    lines << QObject::tr("GPU: %1").arg(gpuName.isEmpty() ? QObject::tr("NVIDIA GPU") : gpuName);
    if (!driver.isEmpty()) lines << QObject::tr("Driver: %1").arg(driver);
    lines << QObject::tr("VRAM: %1 free of %2")
                 .arg(MemoryChart::formatBytes(machine.free_vram_bytes),
                      MemoryChart::formatBytes(machine.total_vram_bytes));
  } else {
    lines << QObject::tr("GPU: none usable (%1)")
                 .arg(whyNoGpu.isEmpty() ? QObject::tr("no NVIDIA GPU") : whyNoGpu);
  }
  lines << QObject::tr("RAM: %1 available of %2")
               .arg(MemoryChart::formatBytes(machine.available_ram_bytes),
                    MemoryChart::formatBytes(machine.total_ram_bytes));
  lines << QObject::tr("Free disk: %1 (%2)")
               .arg(MemoryChart::formatBytes(freeDiskBytes), QDir::toNativeSeparators(diskFolder));
  return lines.join(QLatin1Char('\n'));
}

}  // namespace ferry::gui
