// The hub token in the Windows Credential Manager: a generic credential, persisted for the local
// machine's user, its blob the token's UTF-8 bytes.
// windows.h first: wincred.h needs its types.
#include <windows.h>
// clang-format off
#include <wincred.h>
// clang-format on

#include <vector>

#include "net/credentials.h"

namespace ferry::net {
namespace {

std::wstring credential_name() {
  const std::string name = kCredentialName;
  return std::wstring(name.begin(), name.end());  // ASCII
}

}  // namespace

std::optional<std::string> read_stored_token() {
  PCREDENTIALW credential = nullptr;
  const std::wstring name = credential_name();
  if (!CredReadW(name.c_str(), CRED_TYPE_GENERIC, 0, &credential)) return std::nullopt;
  std::string token(reinterpret_cast<const char*>(credential->CredentialBlob),
                    credential->CredentialBlobSize);
  CredFree(credential);
  if (token.empty()) return std::nullopt;
  return token;
}

bool store_token(const std::string& token) {
  std::wstring name = credential_name();
  std::vector<BYTE> blob(token.begin(), token.end());
  CREDENTIALW credential{};
  credential.Type = CRED_TYPE_GENERIC;
  credential.TargetName = name.data();
  credential.CredentialBlobSize = static_cast<DWORD>(blob.size());
  credential.CredentialBlob = blob.data();
  credential.Persist = CRED_PERSIST_LOCAL_MACHINE;
  return CredWriteW(&credential, 0) != FALSE;
}

bool forget_stored_token() {
  const std::wstring name = credential_name();
  return CredDeleteW(name.c_str(), CRED_TYPE_GENERIC, 0) != FALSE;
}

}  // namespace ferry::net
