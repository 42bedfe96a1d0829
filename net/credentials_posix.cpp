// No credential store outside Windows (credentials.h): huggingface_hub's token file is read by
// HubAccess instead.
#include "net/credentials.h"

namespace ferry::net {

std::optional<std::string> read_stored_token() {
  return std::nullopt;
}

bool store_token(const std::string&) {
  return false;
}

bool forget_stored_token() {
  return false;
}

}  // namespace ferry::net
