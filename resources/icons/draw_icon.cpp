// Draws ferry.svg's picture with QPainter into the PNGs and the .ico next to it (no SVG renderer
// is needed at build time). Rebuild them after changing the drawing:
//   c++ -std=c++20 -fPIC draw_icon.cpp $(pkg-config --cflags --libs Qt6Gui) -o draw_icon
//   QT_QPA_PLATFORM=offscreen ./draw_icon resources/icons
#include <QDir>
#include <QGuiApplication>
#include <QImage>
#include <QImageWriter>
#include <QLinearGradient>
#include <QPainter>
#include <QPainterPath>

namespace {

QImage draw(int size) {
  QImage image(size, size, QImage::Format_ARGB32_Premultiplied);
  image.fill(Qt::transparent);
  QPainter p(&image);
  p.setRenderHint(QPainter::Antialiasing);
  p.scale(size / 256.0, size / 256.0);
  QPainterPath tile;
  tile.addRoundedRect(QRectF(8, 8, 240, 240), 48, 48);
  QLinearGradient sky(0, 8, 0, 248);
  sky.setColorAt(0, QColor("#ff9f5a"));
  sky.setColorAt(0.55, QColor("#e8566b"));
  sky.setColorAt(1, QColor("#3b3f9a"));
  p.fillPath(tile, sky);
  p.setClipPath(tile);
  p.setPen(Qt::NoPen);
  p.setBrush(QColor(255, 227, 163, 242));
  p.drawEllipse(QPointF(176, 92), 30, 30);
  // The ferry.
  p.setBrush(Qt::white);
  QPainterPath hull;
  hull.moveTo(60, 150);
  hull.lineTo(196, 150);
  hull.lineTo(180, 178);
  hull.lineTo(76, 178);
  hull.closeSubpath();
  p.drawPath(hull);
  p.drawRoundedRect(QRectF(86, 122, 78, 28), 5, 5);
  p.drawRoundedRect(QRectF(120, 100, 14, 22), 3, 3);
  p.setBrush(QColor("#e8566b"));
  p.drawRoundedRect(QRectF(120, 100, 14, 7), 2, 2);
  p.setBrush(QColor("#3b3f9a"));
  for (int x : {96, 116, 136}) p.drawRoundedRect(QRectF(x, 130, 12, 10), 2, 2);
  // The sea.
  QPainterPath sea;
  sea.moveTo(8, 176);
  sea.cubicTo(40, 164, 64, 188, 96, 176);
  sea.cubicTo(128, 164, 152, 188, 184, 176);
  sea.cubicTo(208, 167, 228, 178, 248, 174);
  sea.lineTo(248, 248);
  sea.lineTo(8, 248);
  sea.closeSubpath();
  QLinearGradient water(0, 170, 0, 248);
  water.setColorAt(0, QColor("#2a7fd4"));
  water.setColorAt(1, QColor("#173f8a"));
  p.fillPath(sea, water);
  if (size >= 32) {
    QPen wave(QColor("#8cc4ff"), 5, Qt::SolidLine, Qt::RoundCap);
    p.setPen(wave);
    p.setBrush(Qt::NoBrush);
    QPainterPath waves;
    waves.moveTo(30, 206);
    waves.cubicTo(52, 198, 70, 212, 92, 204);
    waves.moveTo(130, 214);
    waves.cubicTo(152, 206, 170, 220, 192, 212);
    p.drawPath(waves);
  }
  return image;
}

}  // namespace

int main(int argc, char** argv) {
  QGuiApplication app(argc, argv);
  const QDir out(argc > 1 ? QString::fromLocal8Bit(argv[1]) : QStringLiteral("."));
  for (int size : {16, 24, 32, 48, 64, 128}) {
    draw(size).save(out.filePath(QStringLiteral("ferry-%1.png").arg(size)));
  }
  draw(256).save(out.filePath(QStringLiteral("ferry.png")));
  // The Windows resource icon: Qt's ico writer stores one image per file, the largest that
  // Explorer scales down from.
  QImageWriter ico(out.filePath(QStringLiteral("ferry.ico")), "ico");
  return ico.write(draw(256)) ? 0 : 1;
}
