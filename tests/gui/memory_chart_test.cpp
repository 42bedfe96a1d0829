// MemoryChart: the figures it reports, the budget line where the budget is, and repaints held
// to ten a second however fast samples arrive.
#include "gui/memory_chart.h"

#include <QElapsedTimer>
#include <QImage>
#include <QtTest/QtTest>

using ferry::gui::MemoryChart;

namespace {

constexpr quint64 kMiB = quint64{1} << 20;
constexpr quint64 kGiB = quint64{1} << 30;

class PaintCounter : public QObject {
 public:
  int paints = 0;

 protected:
  bool eventFilter(QObject*, QEvent* event) override {
    if (event->type() == QEvent::Paint) ++paints;
    return false;
  }
};

// Pixels in row y (inside the plot) that are close to `color`.
int pixels_like(const QImage& image, int y, const QColor& color, const QRect& area) {
  int n = 0;
  for (int x = area.left(); x <= area.right(); ++x) {
    const QColor c = image.pixelColor(x, y);
    if (std::abs(c.red() - color.red()) < 40 && std::abs(c.green() - color.green()) < 40 &&
        std::abs(c.blue() - color.blue()) < 40) {
      ++n;
    }
  }
  return n;
}

}  // namespace

class MemoryChartTest : public QObject {
  Q_OBJECT

 private slots:
  void peak_latest_and_over_budget_follow_the_samples() {
    MemoryChart chart("Host RAM");
    chart.setBudget(12 * kGiB);
    chart.addSample(1, 5 * kGiB);
    chart.addSample(2, 9 * kGiB);
    chart.addSample(3, 7 * kGiB);
    QCOMPARE(chart.sampleCount(), 3);
    QCOMPARE(chart.latest(), 7 * kGiB);
    QCOMPARE(chart.peak(), 9 * kGiB);
    QVERIFY(!chart.overBudget());
    chart.addSample(4, 13 * kGiB);
    QVERIFY(chart.overBudget());
    QVERIFY(chart.accessibleDescription().contains("over budget"));
    chart.clear();
    QCOMPARE(chart.sampleCount(), 0);
    QCOMPARE(chart.peak(), quint64{0});
  }

  void describes_itself_for_screen_readers() {
    MemoryChart chart("VRAM");
    chart.setBudget(7 * kGiB + kGiB / 2);
    chart.addSample(12, 6 * kGiB);
    const QString text = chart.accessibleDescription();
    QVERIFY2(text.contains("VRAM: 6.00 GiB at step 12"), qPrintable(text));
    QVERIFY2(text.contains("budget 7.50 GiB"), qPrintable(text));
    QCOMPARE(chart.accessibleName(), QString("VRAM"));
    QVERIFY(chart.focusPolicy() & Qt::TabFocus);
  }

  void a_placeholder_says_why_there_are_no_samples_until_the_first() {
    MemoryChart chart("VRAM");
    chart.resize(360, 160);
    chart.setPlaceholder("No NVIDIA GPU");
    QCOMPARE(chart.placeholder(), QString("No NVIDIA GPU"));
    QVERIFY(chart.accessibleDescription().contains("No NVIDIA GPU"));
    const QImage empty = chart.grab().toImage();
    chart.setPlaceholder(QString());
    const QImage blank = chart.grab().toImage();
    QVERIFY(empty != blank);  // the text is drawn
    chart.setPlaceholder("No NVIDIA GPU");
    chart.addSample(1, 1 << 20);
    QVERIFY(!chart.accessibleDescription().contains("No NVIDIA GPU"));
  }

  void draws_the_budget_line_where_the_budget_is() {
    MemoryChart chart("Host RAM");
    chart.resize(400, 200);
    chart.setBudget(8 * kGiB);
    for (int step = 1; step <= 10; ++step) chart.addSample(step, 3 * kGiB);
    const QImage image = chart.grab().toImage();
    const QRect area = chart.plotArea();
    const int budget_y = chart.yFor(8 * kGiB);
    const QColor orange(230, 140, 0);
    QVERIFY2(pixels_like(image, budget_y, orange, area) > area.width() / 3,
             "no dashed budget line at the budget's height");
    QVERIFY(pixels_like(image, chart.yFor(5 * kGiB), orange, area) == 0);
    // The flat series is drawn at its own height in the highlight colour.
    const QColor highlight = chart.palette().color(QPalette::Highlight);
    QVERIFY(pixels_like(image, chart.yFor(3 * kGiB), highlight, area) > area.width() / 2);
    QVERIFY(chart.scaleTop() > 8 * kGiB);
  }

  // Issue 23 item 8: a run far under its budget (300 MiB of a 12 GiB budget) is drawn at its own
  // scale, not as a flat line at the bottom of a scale made for the budget, and the x axis is the
  // run's time.
  void a_run_far_under_its_budget_fills_the_chart_over_a_time_axis() {
    MemoryChart chart("Host RAM");
    chart.resize(400, 200);
    chart.setBudget(12 * kGiB);
    for (int step = 1; step <= 10; ++step) {
      chart.addSample(step, 300 * kMiB + static_cast<quint64>(step) * 10 * kMiB, step * 2.0);
    }
    QVERIFY2(chart.scaleTop() < kGiB, qPrintable(QString::number(chart.scaleTop())));
    const QRect area = chart.plotArea();
    QVERIFY(chart.yFor(chart.peak()) < area.top() + area.height() / 3);  // near the top
    QCOMPARE(chart.timeLabels(), QStringList({QStringLiteral("2.0 s"), QStringLiteral("11.0 s"),
                                              QStringLiteral("20.0 s")}));
    QVERIFY2(chart.accessibleDescription().contains(QLatin1String("over 20.0 s")),
             qPrintable(chart.accessibleDescription()));
    QVERIFY(chart.accessibleDescription().contains(QLatin1String("budget 12.00 GiB")));
  }

  void repaints_at_most_ten_times_a_second() {
    MemoryChart chart("VRAM");
    chart.resize(300, 150);
    chart.show();
    QVERIFY(QTest::qWaitForWindowExposed(&chart));
    PaintCounter counter;
    chart.installEventFilter(&counter);
    QElapsedTimer timer;
    timer.start();
    int step = 0;
    while (timer.elapsed() < 500) {
      ++step;
      chart.addSample(step, static_cast<quint64>(step) * 1000);
      QCoreApplication::processEvents();
    }
    QTest::qWait(2 * MemoryChart::kRefreshIntervalMs);
    const qint64 elapsed = timer.elapsed();
    QVERIFY2(step > 1000, "the loop should have delivered samples much faster than 10 Hz");
    const int allowed = static_cast<int>(elapsed / MemoryChart::kRefreshIntervalMs) + 2;
    QVERIFY2(counter.paints >= 3 && counter.paints <= allowed,
             qPrintable(QString("%1 paints for %2 samples in %3 ms")
                            .arg(counter.paints)
                            .arg(step)
                            .arg(elapsed)));
  }
};

QTEST_MAIN(MemoryChartTest)
#include "memory_chart_test.moc"
