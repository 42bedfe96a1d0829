// What the app shows for MiniMax-H3 (issue 21, app): the mode that follows from the frame boxes
// filled (T2VA / I2VA first / I2VA last / FL2VA), the licence notice confirmed once before H3
// weights are used, and the structured prompt template offered for H3 (plain prompts work too).
#pragma once

#include <QString>

#include "core/models/family.h"

class QSettings;

namespace ferry::gui {

enum class FrameMode { kText, kFirstFrame, kLastFrame, kFirstLast };

FrameMode frameMode(bool hasStartImage, bool hasEndImage);

// H3's names for the mode (T2VA, I2VA (first frame), ...) for an H3 model, plain words
// otherwise; with what it makes.
QString frameModeText(FrameMode mode, bool h3);

bool isH3(const models::ModelParts* model);

// The notice shown the first time H3 weights are selected, as rich text with the link.
QString h3LicenseNotice();
inline constexpr const char* kH3LicenseUrl =
    "https://huggingface.co/MiniMaxAI/MiniMax-H3/blob/main/LICENSE";
// The settings key that holds the confirmation.
inline constexpr const char* kH3LicenseKey = "h3/licenseConfirmed";
bool h3LicenseConfirmed(const QSettings& store);

// resources/h3/prompt_template.txt: H3's structured prompt (sections, one shot, a dialogue line in
// H3's <d>[Language] …</d> markup) with placeholders to replace.
QString h3PromptTemplate();

}  // namespace ferry::gui
