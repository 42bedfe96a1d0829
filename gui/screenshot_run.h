// The screenshot run (gui/screenshots.sh): the demo model in the real window, a real generation,
// screenshots saved mid-run (at the second step) and at the end (the player showing the video),
// then the app quits with 0 (or 1 when the run failed).
#pragma once

#include <QString>

namespace ferry::gui {

class MainWindow;

void startScreenshotRun(MainWindow& window, const QString& folder);

}  // namespace ferry::gui
