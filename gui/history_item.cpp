#include "gui/history_item.h"

#include <QDir>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>

namespace ferry::gui {

std::optional<HistoryItem> historyItemFromJson(const QByteArray& json, const QString& id) {
  if (json.size() > kMaxHistoryFileBytes) return std::nullopt;
  const QJsonDocument doc = QJsonDocument::fromJson(json);
  if (!doc.isObject()) return std::nullopt;
  const QJsonObject j = doc.object();
  HistoryItem item;
  item.id = id;
  item.created =
      QDateTime::fromString(j.value(QStringLiteral("created")).toString(), Qt::ISODateWithMs);
  item.video = j.value(QStringLiteral("video")).toString();
  item.summary = j.value(QStringLiteral("summary")).toString();
  item.settings = GenerationSettings::fromJson(j.value(QStringLiteral("settings")).toObject());
  item.draftOf = j.value(QStringLiteral("draft_of")).toString();
  return item;
}

QString keptLatentsPath(const HistoryItem& item) {
  if (!item.settings.draft || item.settings.keptLatents.isEmpty()) return {};
  return QFileInfo(item.video).dir().filePath(item.settings.keptLatents);
}

}  // namespace ferry::gui
