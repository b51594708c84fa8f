// The pure crypto of the data-wire authentication (proto/wire_format.md section 1): nonces, the
// transcript both proofs cover, and the two HMAC-SHA256 proofs. Shared by ringfs-mount and
// ringfs-server; no I/O, no state. Any thread.
// The channel binding (a TLS exporter once the wire runs over TLS) is a parameter, empty for
// plain TCP, so a proof made on one channel is worthless on another.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ringfs::auth {

inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kProofBytes = 32;       // HMAC-SHA256
inline constexpr size_t kTranscriptBytes = 32;  // SHA-256

// kNonceBytes from the kernel's CSPRNG. Internal error only when it is unavailable.
absl::StatusOr<std::string> DrawNonce();

// SHA-256 of "ringfs auth v1\0" and then, each as u32 little-endian length + bytes, the
// ClientHello body exactly as sent, the server nonce and the channel binding.
std::string Transcript(std::string_view client_hello_body, std::string_view server_nonce,
                       std::string_view channel_binding);

// HMAC-SHA256(secret, "ringfs server proof" || transcript).
std::string ServerProof(std::string_view secret, std::string_view transcript);
// HMAC-SHA256(secret, "ringfs client proof" || transcript). Another label than the server's,
// so a server proof can never be replayed as a client proof.
std::string ClientProof(std::string_view secret, std::string_view transcript);

// Constant-time comparison (no early exit on the first differing byte); sizes may differ.
bool ProofEquals(std::string_view a, std::string_view b);

}  // namespace ringfs::auth
