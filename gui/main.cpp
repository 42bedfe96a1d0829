// Ferry, the desktop app. Options (for scripts and support, not for users):
//   --data DIR                 use DIR as the per-user data folder (like FERRY_DATA_DIR)
//   --demo-screenshots DIR     run the demo model in the real window and save screenshots
//                              mid-run and at the end to DIR, then quit (gui/screenshots.sh)
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QIcon>
#include <QPalette>
#include <QSettings>
#include <QStyleFactory>

#include "core/io/crash_report.h"
#include "core/io/detail/os_file.h"
#include "core/memory/process_memory.h"
#include "gui/main_window.h"
#include "gui/screenshot_run.h"

namespace {

// Qt 6.4's Windows style draws light only; when Windows is set to dark mode, Fusion with a dark
// palette follows it. Elsewhere the platform theme already gives the system's palette.
void followSystemColors(QApplication& app) {
#ifdef _WIN32
  const QSettings personalize(
      QStringLiteral("HKEY_CURRENT_USER\\Software\\Microsoft\\Windows\\CurrentVersion\\Themes\\"
                     "Personalize"),
      QSettings::NativeFormat);
  if (personalize.value(QStringLiteral("AppsUseLightTheme"), 1).toInt() != 0) return;
  app.setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
  QPalette p;
  const QColor window(32, 32, 32), base(24, 24, 24), text(235, 235, 235), accent(0, 120, 215);
  p.setColor(QPalette::Window, window);
  p.setColor(QPalette::WindowText, text);
  p.setColor(QPalette::Base, base);
  p.setColor(QPalette::AlternateBase, window.lighter(115));
  p.setColor(QPalette::ToolTipBase, window.lighter(130));
  p.setColor(QPalette::ToolTipText, text);
  p.setColor(QPalette::Text, text);
  p.setColor(QPalette::PlaceholderText, text.darker(170));
  p.setColor(QPalette::Button, window.lighter(120));
  p.setColor(QPalette::ButtonText, text);
  p.setColor(QPalette::Highlight, accent);
  p.setColor(QPalette::HighlightedText, Qt::white);
  p.setColor(QPalette::Link, accent.lighter(140));
  p.setColor(QPalette::Mid, window.lighter(160));
  p.setColor(QPalette::Dark, window.darker(150));
  for (auto role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText}) {
    p.setColor(QPalette::Disabled, role, text.darker(200));
  }
  app.setPalette(p);
#else
  (void)app;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  ferry::memory::configure_allocator();
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("Ferry"));
  QApplication::setApplicationName(QStringLiteral("Ferry"));
  QApplication::setApplicationDisplayName(QStringLiteral("Ferry"));
  QApplication::setApplicationVersion(QStringLiteral(FERRY_VERSION));
  QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/ferry.png")));
  followSystemColors(app);

  QCommandLineParser parser;
  parser.setApplicationDescription(QApplication::translate(
      "main", "Videos from a prompt and an optional start image with Wan models"));
  parser.addHelpOption();
  parser.addVersionOption();
  const QCommandLineOption data(QStringLiteral("data"),
                                QApplication::translate("main", "Per-user data folder"),
                                QStringLiteral("DIR"));
  const QCommandLineOption screenshots(
      QStringLiteral("demo-screenshots"),
      QApplication::translate("main", "Run the demo and save screenshots to DIR, then quit"),
      QStringLiteral("DIR"));
  parser.addOption(data);
  parser.addOption(screenshots);
  parser.addPositionalArgument(QStringLiteral("video"),
                               QApplication::translate("main", "A Ferry MP4 to open"),
                               QStringLiteral("[video]"));
  parser.process(app);

  ferry::gui::MainWindowOptions options;
  if (parser.isSet(data)) {
    options.dataFolder = parser.value(data);
    qputenv("FERRY_DATA_DIR", QDir(options.dataFolder).absolutePath().toLocal8Bit());
  }
  if (parser.isSet(screenshots)) {
    options.firstRunCheck = false;
    options.askBeforeClosing = false;
  }
  ferry::gui::MainWindow window(options);
  // From here on a crash leaves a report in the logs folder, which the next start mentions, and
  // a model file lost mid-run stays an I/O error.
  try {
    ferry::io::install_process_guards(
        ferry::io::detail::path_from_utf8(window.logsFolder().toStdString()));
  } catch (const std::exception&) {
    // No report then; the app runs as before.
  }
  window.show();
  if (parser.isSet(screenshots)) {
    ferry::gui::startScreenshotRun(window, parser.value(screenshots));
  } else if (!parser.positionalArguments().isEmpty()) {
    window.openVideo(parser.positionalArguments().front());
  }
  return QApplication::exec();
}
