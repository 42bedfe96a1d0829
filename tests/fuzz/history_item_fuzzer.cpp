// libFuzzer target: historyItemFromJson on arbitrary bytes, taken as one history file (Ferry's
// own, but a user may copy history folders between machines and editors can leave anything). A
// crash or a sanitizer report is a finding; an item restored must keep the id it was given.
#include <QByteArray>
#include <QString>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "gui/history_item.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const QByteArray json(reinterpret_cast<const char*>(data), static_cast<qsizetype>(size));
  const QString id = QStringLiteral("20261130-031502-123");
  const auto item = ferry::gui::historyItemFromJson(json, id);
  if (!item) return 0;
  check(item->id == id);
  check(item->settings.width >= 0 && item->settings.steps >= 0);
  check(item->thumbnail.isEmpty());
  return 0;
}
