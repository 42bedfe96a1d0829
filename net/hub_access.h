// How Ferry reaches the Hugging Face hub, from the conventions huggingface_hub users already have:
//   - the endpoint: $HF_ENDPOINT (a mirror, where the main hub is blocked), else huggingface.co;
//   - the token for gated repositories: $HF_TOKEN, else the platform's credential store
//     (credentials.h: Windows), else huggingface_hub's token file ($HF_TOKEN_PATH, else
//     $HF_HOME/token, else ~/.cache/huggingface/token);
//   - the system proxy (QNetworkProxyFactory::setUseSystemConfiguration).
// The token is sent only to the endpoint's own host, never along a redirect to another one.
#pragma once

#include <QByteArray>
#include <QString>
#include <QUrl>

namespace ferry::net {

struct HubAccess {
  QUrl endpoint = QUrl(QStringLiteral("https://huggingface.co"));
  QByteArray token;      // empty: anonymous
  QString token_source;  // where it came from, for messages ("HF_TOKEN", a file): never the token
  bool use_system_proxy = true;

  // From the environment and the platform, as above.
  static HubAccess from_environment();
  // The endpoint without a trailing '/', as hub_api.h's addresses want it.
  std::string endpoint_text() const;
};

}  // namespace ferry::net
