// The machine the app plans for, and the first-run check a user reads: GPU, driver, VRAM, RAM and
// free disk, with a plain verdict. Without an NVIDIA GPU the app still works, with the cpu
// preset, and says it will be slow.
#pragma once

#include <QString>

#include "core/offload/preset.h"

namespace ferry::gui {

// This machine as the planner sees it (offload::probe_machine: the GPU from the device registry,
// RAM from the OS).
offload::MachineInfo describeMachine();

struct MachineReport {
  enum class Verdict { kGood, kSlow, kTooSmall };
  offload::MachineInfo machine;
  QString gpuName;            // empty without a usable NVIDIA GPU
  QString driver;             // "CUDA 13.0"; empty without one
  QString whyNoGpu;           // why none was found (no driver, driver too old, CPU-only build)
  quint64 freeDiskBytes = 0;  // where videos and the demo model go
  QString diskFolder;
  Verdict verdict = Verdict::kGood;
  QString verdictText;      // one plain sentence
  QString suggestedPreset;  // "laptop-8gb", "cpu", ...
  QString details() const;  // one line per item, for the dialog and the log
};

// Measures this machine; `dataFolder` is where the free disk space counts.
MachineReport checkMachine(const QString& dataFolder);
// The verdict for a described machine (tests give their own).
void judge(MachineReport& report);

}  // namespace ferry::gui
