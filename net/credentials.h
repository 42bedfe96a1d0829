// The hub token in the platform's credential store: on Windows the Credential Manager (a generic
// credential named "Ferry/huggingface", CredRead/CredWrite), never Ferry's plain settings.
// Elsewhere there is no store here: huggingface_hub's token file ($HF_HOME/token, written by
// `huggingface-cli login`) is the convention, and HubAccess reads it.
#pragma once

#include <optional>
#include <string>

namespace ferry::net {

inline constexpr const char* kCredentialName = "Ferry/huggingface";

// The stored token; nullopt when none is stored or the platform has no store.
std::optional<std::string> read_stored_token();
// Stores `token` (replacing one stored). False where the platform has no store or it refused.
bool store_token(const std::string& token);
// Removes the stored token. False when none was stored.
bool forget_stored_token();

}  // namespace ferry::net
