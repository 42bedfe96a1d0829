// The window as a laptop user first sees it, on the offscreen platform with two screens, a
// 1280×720 laptop and a 1920×1080 monitor: the first start fills the screen, the primary controls
// (model folder, demo button, prompt, start image, Generate, the memory plan) are in view without
// scrolling and no button is cut short, even in a 1280×650 window (a taskbar and a title bar
// less), and the window opens as it was left.
#include <QAbstractScrollArea>
#include <QApplication>
#include <QComboBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScreen>
#include <QTabWidget>
#include <QTemporaryFile>
#include <QtTest/QtTest>

#include "gui/history.h"
#include "gui/main_window.h"
#include "gui/preset_panel.h"
#include "gui/queue_panel.h"
#include "tests/gui/gui_test_support.h"

using namespace ferry::gui;
using namespace ferry::gui::test;

namespace {

MainWindowOptions options(const QTemporaryDir& data, QScreen* screen) {
  MainWindowOptions o;
  o.dataFolder = data.path();
  o.machine = cpuMachine();
  o.firstRunCheck = false;
  o.askBeforeClosing = false;
  o.screen = screen;
  return o;
}

// Why `w` is not wholly in view (cut by its window or by a scroll area's viewport), or empty.
QString outOfView(const QWidget* w) {
  if (w == nullptr) return QStringLiteral("not found");
  if (!w->isVisible()) return QStringLiteral("hidden");
  QRect rect = w->rect();
  for (const QWidget* p = w; p->parentWidget() != nullptr && !p->isWindow();
       p = p->parentWidget()) {
    rect = QRect(p->mapToParent(rect.topLeft()), rect.size());
    const QRect parent = p->parentWidget()->rect();
    if (!parent.contains(rect)) {
      return QStringLiteral("%1 (%2) cut by %3 (%4×%5)")
          .arg(w->accessibleName(), w->metaObject()->className(),
               p->parentWidget()->metaObject()->className())
          .arg(parent.width())
          .arg(parent.height());
    }
  }
  return {};
}

template <class T>
T* named(const QWidget& window, const QString& name) {
  for (T* w : window.findChildren<T*>()) {
    if (w->accessibleName() == name || w->property("text").toString() == name) return w;
  }
  return nullptr;
}

// Every visible button shows its whole text.
void checkButtonsWhole(const MainWindow& w) {
  for (const QPushButton* b : w.findChildren<QPushButton*>()) {
    if (!b->isVisible() || !outOfView(b).isEmpty()) continue;
    QVERIFY2(b->width() >= b->sizeHint().width(),
             qPrintable(QStringLiteral("\"%1\" is %2 px wide, needs %3")
                            .arg(b->text())
                            .arg(b->width())
                            .arg(b->sizeHint().width())));
  }
}

// The primary controls are in view and every visible button shows its whole text.
void checkInView(const MainWindow& w) {
  const QList<QWidget*> primary = {
      named<QWidget>(w, QStringLiteral("Model folder")),
      named<QPushButton>(w, QStringLiteral("Use the demo model")),
      named<QPlainTextEdit>(w, QStringLiteral("Prompt")),
      named<QPlainTextEdit>(w, QStringLiteral("Negative prompt")),
      named<QWidget>(w, QStringLiteral("Start image")),
      named<QPushButton>(w, QStringLiteral("&Generate")),
      named<QPushButton>(w, QStringLiteral("Cancel")),
      named<QPushButton>(w, QStringLiteral("&Queue")),
      named<QWidget>(w, QStringLiteral("Jobs to queue")),
      named<QComboBox>(w, QStringLiteral("Memory preset")),
      named<QWidget>(w, QStringLiteral("Predicted memory per stage")),
      named<QWidget>(w, QStringLiteral("History of generations")),
  };
  for (const QWidget* c : primary) {
    const QString why = outOfView(c);
    QVERIFY2(why.isEmpty(), qPrintable(why));
  }
  checkButtonsWhole(w);
  // The history is a side panel, not a fifth of the window.
  const auto* history = named<QWidget>(w, QStringLiteral("History of generations"));
  QVERIFY2(history->width() <= w.width() / 5,
           qPrintable(QStringLiteral("%1 of %2").arg(history->width()).arg(w.width())));
}

// The side panels' other faces: the history's gallery (its search and toggles) and the queue
// (its list and buttons) fit the same column, in view and uncut.
void checkSidePanels(MainWindow& w) {
  w.historyPanel()->setGridView(true);
  for (const QWidget* c :
       {named<QWidget>(w, QStringLiteral("Search the history by prompt")),
        named<QWidget>(w, QStringLiteral("Grid")), named<QWidget>(w, QStringLiteral("List"))}) {
    const QString why = outOfView(c);
    QVERIFY2(why.isEmpty(), qPrintable(why));
  }
  w.sidePanels()->setCurrentWidget(w.queuePanel());
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  QVERIFY2(outOfView(named<QWidget>(w, QStringLiteral("Queued jobs"))).isEmpty(),
           qPrintable(outOfView(named<QWidget>(w, QStringLiteral("Queued jobs")))));
  for (const QString& text :
       {QStringLiteral("Up"), QStringLiteral("Down"), QStringLiteral("Remove"),
        QStringLiteral("Clear ended"), QStringLiteral("Run the queue")}) {
    const QPushButton* b = named<QPushButton>(*w.queuePanel(), text);
    QVERIFY2(outOfView(b).isEmpty(), qPrintable(text + QStringLiteral(": ") + outOfView(b)));
  }
  checkButtonsWhole(w);  // the queue's included
  w.sidePanels()->setCurrentIndex(0);
  w.historyPanel()->setGridView(false);
}

}  // namespace

class LayoutTest : public QObject {
  Q_OBJECT

 private slots:
  void the_first_start_fills_the_screen_with_the_primary_controls_in_view_data() {
    QTest::addColumn<int>("screen");
    QTest::addRow("1280x720") << 0;
    QTest::addRow("1920x1080") << 1;
  }
  void the_first_start_fills_the_screen_with_the_primary_controls_in_view() {
    QFETCH(int, screen);
    QScreen* s = QGuiApplication::screens().value(screen);
    QVERIFY(s != nullptr);
    QTemporaryDir data;
    MainWindow w(options(data, s));
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QTRY_VERIFY(w.isMaximized());
    QCOMPARE(w.screen(), s);
    QTRY_COMPARE(w.frameGeometry().size(), s->availableGeometry().size());
    QVERIFY(settle(w));
    checkInView(w);
    checkSidePanels(w);
  }

  void a_1280x650_window_keeps_them_in_view_and_opens_as_it_was_left() {
    QScreen* laptop = QGuiApplication::screens().value(0);
    QTemporaryDir data;
    QRect left;
    {
      MainWindow w(options(data, laptop));
      w.show();
      QVERIFY(QTest::qWaitForWindowExposed(&w));
      QTRY_VERIFY(w.isMaximized());
      w.setWindowState(Qt::WindowNoState);
      w.setGeometry(QRect(0, 30, 1280, 650));  // a taskbar and a title bar less than 720
      QTRY_COMPARE(w.size(), QSize(1280, 650));
      QVERIFY(settle(w));
      checkInView(w);
      checkSidePanels(w);
      left = w.geometry();
      w.close();
    }
    MainWindow again(options(data, laptop));
    again.show();
    QVERIFY(QTest::qWaitForWindowExposed(&again));
    QVERIFY(!again.isMaximized());
    QCOMPARE(again.geometry(), left);
  }

  void the_first_run_placement_maximises_up_to_2200_px_and_centres_beyond() {
    const FirstRunPlacement laptop = firstRunPlacement(QRect(0, 0, 1280, 680));
    QVERIFY(laptop.maximized);
    const FirstRunPlacement wide = firstRunPlacement(QRect(0, 0, 3840, 2110));
    QVERIFY(!wide.maximized);
    QCOMPARE(wide.geometry.size(), QSize(1920, 1200));
    QCOMPARE(wide.geometry.center(), QRect(0, 0, 3840, 2110).center());
  }
};

// Two offscreen screens side by side (Qt's offscreen platform reads them from a JSON file named
// before the application starts).
int main(int argc, char** argv) {
  QTemporaryFile config(QDir::tempPath() + QStringLiteral("/ferry-screens-XXXXXX.json"));
  if (!config.open()) return 1;
  config.write(R"({"screens": [
    {"name": "laptop", "x": 0, "y": 0, "width": 1280, "height": 720, "logicalDpi": 96,
     "logicalBaseDpi": 96, "dpr": 1},
    {"name": "monitor", "x": 1280, "y": 0, "width": 1920, "height": 1080, "logicalDpi": 96,
     "logicalBaseDpi": 96, "dpr": 1}]})");
  config.flush();
  qputenv("QT_QPA_PLATFORM", ("offscreen:configfile=" + config.fileName()).toLocal8Bit());
  QApplication app(argc, argv);
  LayoutTest test;
  return QTest::qExec(&test, argc, argv);
}

#include "layout_test.moc"
