#include "frontend/client_auth.h"

#include <unistd.h>

#include "absl/strings/str_format.h"
#include "common/auth_proof.h"
#include "common/wire.h"

namespace ringfs::frontend {

absl::StatusOr<std::string> AnswerChallenge(std::string_view secret, std::string_view server,
                                            std::string_view hello_body,
                                            const wire::AuthChallenge& challenge,
                                            std::string_view channel_binding) {
  if (secret.empty()) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "server %s requires authentication: give the mount a secret (token_file=) and a "
        "client_name= listed in the server's clients file",
        server));
  }
  if (challenge.server_nonce().size() != auth::kNonceBytes) {
    return absl::PermissionDeniedError(
        absl::StrFormat("server %s sent a malformed authentication challenge", server));
  }
  const std::string transcript =
      auth::Transcript(hello_body, challenge.server_nonce(), channel_binding);
  if (!auth::ProofEquals(challenge.server_proof(), auth::ServerProof(secret, transcript))) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "server %s does not know our secret (its proof is wrong): not talking to it; check "
        "token_file= and client_name= against the server's clients file",
        server));
  }
  wire::ClientProof proof;
  proof.set_client_proof(auth::ClientProof(secret, transcript));
  return wire::EncodeHandshake(proof);
}

std::string DefaultClientName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "localhost";
  return host;
}

}  // namespace ringfs::frontend
