// One item of the history (history.h) and how its JSON file is read back: Qt Core only, so the
// reader is fuzzed without the widgets (tests/fuzz/history_item_fuzzer.cpp).
#pragma once

#include <QByteArray>
#include <QDateTime>
#include <QString>
#include <optional>

#include "gui/generation_settings.h"

namespace ferry::gui {

struct HistoryItem {
  QString id;  // file stem: "20261130-031502-123"
  QDateTime created;
  QString video;
  GenerationSettings settings;
  QString summary;    // "1280×704 · 121 frames · seed 42"
  QString thumbnail;  // the PNG's path; empty when there is none
  // The id of the draft this video is the full VAE decode of; empty for any other video.
  QString draftOf;
};

// Where a draft's latents are kept (beside its video, under the name its clip gives); empty when
// the item is no draft or names none.
QString keptLatentsPath(const HistoryItem& item);

// History files larger than this are skipped unread (one is about 2 KB).
inline constexpr qint64 kMaxHistoryFileBytes = 1 << 20;

// The item a history file `json` (named `id`.json) holds; nullopt when it is not a JSON object or
// is larger than kMaxHistoryFileBytes. The thumbnail is the caller's to find.
std::optional<HistoryItem> historyItemFromJson(const QByteArray& json, const QString& id);

}  // namespace ferry::gui
