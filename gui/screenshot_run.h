// The screenshot run (gui/screenshots.sh): the demo model in the real window, a real generation,
// screenshots saved mid-run (at the third step) and at the end (the player showing the video),
// then three more seeds queued (a screenshot with the queue mid-way) and the history's gallery of
// the four videos; the app then quits with 0 (or 1 when the run failed).
#pragma once

#include <QString>

namespace ferry::gui {

class MainWindow;

void startScreenshotRun(MainWindow& window, const QString& folder);

}  // namespace ferry::gui
