// The client half of the data-wire authentication (proto/wire_format.md section 1): checks the
// server's proof before anything of ours that depends on the secret leaves the host, then makes
// the client's proof. Pure (no I/O), so the ring-driven connect (BackendChannel) and the blocking
// ConnectToServer share it. Any thread.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "proto/handshake.pb.h"

namespace ringfs::frontend {

// The ClientProof handshake frame answering `challenge`, for the ClientHello sent as
// `hello_body` (its exact bytes). PermissionDenied when we have no secret (the server requires
// one) or the server's proof is wrong: that server does not know the secret and must get
// nothing more from us. `server` names it in messages; `channel_binding` as in
// common/auth_proof.h (empty on plain TCP).
absl::StatusOr<std::string> AnswerChallenge(std::string_view secret, std::string_view server,
                                            std::string_view hello_body,
                                            const wire::AuthChallenge& challenge,
                                            std::string_view channel_binding);

// The default client name: the host name (what a clients file lists for a machine).
std::string DefaultClientName();

}  // namespace ringfs::frontend
