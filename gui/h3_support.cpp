#include "gui/h3_support.h"

#include <QCoreApplication>
#include <QFile>
#include <QSettings>

namespace ferry::gui {

namespace {

QString tr(const char* text) {
  return QCoreApplication::translate("ferry::gui::H3", text);
}

}  // namespace

FrameMode frameMode(bool hasStartImage, bool hasEndImage) {
  if (hasStartImage && hasEndImage) return FrameMode::kFirstLast;
  if (hasStartImage) return FrameMode::kFirstFrame;
  if (hasEndImage) return FrameMode::kLastFrame;
  return FrameMode::kText;
}

QString frameModeText(FrameMode mode, bool h3) {
  switch (mode) {
    case FrameMode::kText:
      return h3 ? tr("Mode: T2VA — text to video with sound") : tr("Mode: text to video");
    case FrameMode::kFirstFrame:
      return h3 ? tr("Mode: I2VA (first frame) — the video starts on the start frame, with sound")
                : tr("Mode: image to video");
    case FrameMode::kLastFrame:
      return h3 ? tr("Mode: I2VA (last frame) — the video leads up to the end frame, with sound")
                : tr("Mode: end frame only");
    case FrameMode::kFirstLast:
      return h3 ? tr("Mode: FL2VA — from the start frame to the end frame, with sound")
                : tr("Mode: first–last frame");
  }
  return {};
}

bool isH3(const models::ModelParts* model) {
  return model != nullptr && model->family() == "h3";
}

QString h3LicenseNotice() {
  return tr("<p><b>MiniMax-H3's weights are not Ferry's.</b> They are under the <b>MiniMax H3 "
            "Community License</b>, not under Ferry's MIT license. That license has its own "
            "territory restrictions (where the weights may be used) and use restrictions (what "
            "they may be used for). Read it before you use them:<br><a href=\"%1\">%1</a></p>"
            "<p>Ferry does not ship or download these weights: you use the files you have, under "
            "their license.</p>")
      .arg(QString::fromLatin1(kH3LicenseUrl));
}

bool h3LicenseConfirmed(const QSettings& store) {
  return store.value(QString::fromLatin1(kH3LicenseKey)).toBool();
}

QString h3PromptTemplate() {
  QFile file(QStringLiteral(":/h3/prompt_template.txt"));
  if (!file.open(QIODevice::ReadOnly)) return {};
  return QString::fromUtf8(file.readAll());
}

}  // namespace ferry::gui
