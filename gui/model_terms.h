// What the app says about a model beyond its settings, from the family's RequestRules (so that a
// family brings its own words and the app names no family): the mode the filled frame boxes make,
// in the family's names when it has them (H3: T2VA, I2VA, FL2VA); the notice for weights under
// their own licence, confirmed once and remembered in the settings; the prompt template a family
// offers.
#pragma once

#include <QString>
#include <optional>

#include "core/models/request.h"

class QSettings;

namespace ferry::gui {

// "Mode: …" for what the boxes make under `rules`: the family's own name and what it means when
// it names its modes, plain words otherwise; "with sound" for a model that makes sound.
QString frameModeText(models::FrameMode mode, const models::RequestRules& rules);

// The end-frame box's hint for the model found (none: nullopt), in the family's mode names.
QString endImageHint(const std::optional<models::RequestRules>& rules);

// The notice shown before the weights are first used, as rich text with the link.
QString licenceNotice(const models::WeightsLicence& licence);
// The notice's title ("MiniMax-H3's license").
QString licenceTitle(const models::WeightsLicence& licence);
// Why Generate is off until the notice is confirmed.
QString licenceBlockedReason(const models::WeightsLicence& licence);
// The settings key that holds the confirmation ("h3/licenseConfirmed").
QString licenceSettingsKey(const models::WeightsLicence& licence);
bool licenceConfirmed(const QSettings& store, const models::WeightsLicence& licence);

}  // namespace ferry::gui
