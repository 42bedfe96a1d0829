#include "net/hub_access.h"

#include <QDir>
#include <QFile>

#include "net/credentials.h"

namespace ferry::net {
namespace {

QString env(const char* name) {
  return qEnvironmentVariable(name).trimmed();
}

QString hf_home() {
  if (const QString home = env("HF_HOME"); !home.isEmpty()) return home;
  if (const QString xdg = env("XDG_CACHE_HOME"); !xdg.isEmpty()) return xdg + "/huggingface";
  return QDir::homePath() + "/.cache/huggingface";
}

QByteArray read_token_file(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) return {};
  return file.read(4096).trimmed();
}

}  // namespace

HubAccess HubAccess::from_environment() {
  HubAccess hub;
  if (const QString endpoint = env("HF_ENDPOINT"); !endpoint.isEmpty()) {
    hub.endpoint = QUrl(endpoint);
  }
  if (const QString token = env("HF_TOKEN"); !token.isEmpty()) {
    hub.token = token.toUtf8();
    hub.token_source = QStringLiteral("HF_TOKEN");
  } else if (const std::optional<std::string> stored = read_stored_token()) {
    hub.token = QByteArray::fromStdString(*stored);
    hub.token_source = QStringLiteral("the Windows credential store");
  } else {
    const QString path =
        env("HF_TOKEN_PATH").isEmpty() ? hf_home() + "/token" : env("HF_TOKEN_PATH");
    hub.token = read_token_file(path);
    if (!hub.token.isEmpty()) hub.token_source = QDir::toNativeSeparators(path);
  }
  return hub;
}

std::string HubAccess::endpoint_text() const {
  QString text = endpoint.toString(QUrl::FullyEncoded);
  while (text.endsWith('/')) text.chop(1);
  return text.toStdString();
}

}  // namespace ferry::net
