#include "gui/model_terms.h"

#include <QCoreApplication>
#include <QSettings>

namespace ferry::gui {

namespace {

QString tr(const char* text) {
  return QCoreApplication::translate("ferry::gui::ModelTerms", text);
}

QString text(const std::string& s) {
  return QString::fromStdString(s);
}

}  // namespace

QString frameModeText(models::FrameMode mode, const models::RequestRules& rules) {
  const std::string& name = rules.mode_names[static_cast<std::size_t>(mode)];
  if (name.empty()) {
    switch (mode) {
      case models::FrameMode::kText:
        return rules.makes_sound ? tr("Mode: text to video with sound") : tr("Mode: text to video");
      case models::FrameMode::kFirstFrame:
        return rules.makes_sound ? tr("Mode: image to video with sound")
                                 : tr("Mode: image to video");
      case models::FrameMode::kLastFrame:
        return tr("Mode: end frame only");
      case models::FrameMode::kFirstLast:
        return tr("Mode: first–last frame");
    }
    return {};
  }
  QString meaning;
  switch (mode) {
    case models::FrameMode::kText:
      meaning = tr("text to video");
      break;
    case models::FrameMode::kFirstFrame:
      meaning = tr("the video starts on the start frame");
      break;
    case models::FrameMode::kLastFrame:
      meaning = tr("the video leads up to the end frame");
      break;
    case models::FrameMode::kFirstLast:
      meaning = tr("from the start frame to the end frame");
      break;
  }
  if (rules.makes_sound) meaning += tr(", with sound");
  return tr("Mode: %1 — %2").arg(text(name), meaning);
}

QString endImageHint(const std::optional<models::RequestRules>& rules) {
  if (rules && rules->end_image_alone) {  // H3's I2VA from the last frame
    const auto name = [&](models::FrameMode mode) {
      const std::string& own = rules->mode_names[static_cast<std::size_t>(mode)];
      return own.empty() ? QString() : QStringLiteral(": ") + text(own);
    };
    return tr("Optional: the frame the video ends on (alone%1; with a start frame%2).")
        .arg(name(models::FrameMode::kLastFrame), name(models::FrameMode::kFirstLast));
  }
  return !rules || rules->takes_end_image
             ? tr("Optional: the frame the video ends on (needs a start image).")
             : tr("This model takes no end image (first–last frame: Wan 2.2 A14B I2V).");
}

QString licenceNotice(const models::WeightsLicence& licence) {
  return tr("<p><b>%1's weights are not Ferry's.</b> They are under the <b>%2</b>, not under "
            "Ferry's MIT license. That license has %3. Read it before you use them:<br>"
            "<a href=\"%4\">%4</a></p>"
            "<p>Ferry does not ship or download these weights: you use the files you have, under "
            "their license.</p>")
      .arg(text(licence.model), text(licence.name), text(licence.restrictions), text(licence.url));
}

QString licenceTitle(const models::WeightsLicence& licence) {
  return tr("%1's license").arg(text(licence.model));
}

QString licenceBlockedReason(const models::WeightsLicence& licence) {
  return tr("%1's weights are under their own license: confirm the notice first (it shows when "
            "these weights are chosen).")
      .arg(text(licence.model));
}

QString licenceSettingsKey(const models::WeightsLicence& licence) {
  return text(licence.key) + QStringLiteral("/licenseConfirmed");
}

bool licenceConfirmed(const QSettings& store, const models::WeightsLicence& licence) {
  return store.value(licenceSettingsKey(licence)).toBool();
}

}  // namespace ferry::gui
