// The first-run check a user reads: the machine as the engine's session sees it (GPU, VRAM, RAM),
// free disk, with a plain verdict. Without a usable NVIDIA GPU the app still works, with the cpu
// preset, and says it will be slow.
#pragma once

#include <QString>

#include "core/pipeline/session.h"

namespace ferry::gui {

struct MachineReport {
  enum class Verdict { kGood, kSlow, kTooSmall };
  offload::MachineInfo machine;
  QString gpuName;            // the GPU's name where known; empty: "NVIDIA GPU"
  QString summary;            // the session's one line (pipeline::Session::machine_summary)
  QString whyNoGpu;           // why no GPU is usable (no driver, driver too old, CPU-only build)
  quint64 freeDiskBytes = 0;  // where videos and the demo model go
  QString diskFolder;
  Verdict verdict = Verdict::kGood;
  QString verdictText;      // one plain sentence
  QString suggestedPreset;  // "laptop-8gb", "cpu", ...
  QString details() const;  // one line per item, for the dialog and the log
};

// The machine `session` probed; `dataFolder` is where the free disk space counts.
MachineReport checkMachine(const pipeline::Session& session, const QString& dataFolder);
// The verdict for a described machine (tests give their own).
void judge(MachineReport& report);

}  // namespace ferry::gui
