// Constants and the handshake exchange of the ringfs data wire (see proto/wire_format.md).
// The handshake helpers block with a deadline and run once per connection, before any worker
// loop takes the socket over. Callable from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/handshake.pb.h"

namespace ringfs::wire {

inline constexpr uint32_t kWireVersion = 1;
// "RGFS" read as a little-endian u32; lets the server reject non-ringfs peers at the first bytes.
inline constexpr uint32_t kHandshakeMagic = 0x53464752;
inline constexpr uint32_t kMaxHandshakeBytes = 64 * 1024;

// Largest data payload of one READ or WRITE (FUSE max_pages 256 × 4 KiB).
inline constexpr uint32_t kMaxIoBytes = 1024 * 1024;
// Largest frame either side accepts: a maximal WRITE plus headers, or a SETXATTR with a 64 KiB
// value and a 255-byte name, whichever is larger.
inline constexpr uint32_t kMaxFrameBytes = kMaxIoBytes + 4096;
// Default cap on requests one connection may have in flight at the server.
inline constexpr uint32_t kDefaultMaxInflight = 256;

inline constexpr std::chrono::milliseconds kHandshakeTimeout{5000};

// Handle-less listings (ClientHello.want_handleless_listings): a server never hands out an fh
// with this bit; a client answers OPENDIR itself with such handles and sends fh 0 instead.
inline constexpr uint64_t kClientDirHandleBit = uint64_t{1} << 63;

// The handshake frame (magic, length, body) of `message`.
absl::StatusOr<std::string> EncodeHandshake(const google::protobuf::MessageLite& message);
// Length of the body that follows an 8-byte handshake prefix; refuses a bad magic or size.
absl::StatusOr<uint32_t> HandshakeBodyLength(const char (&prefix)[8]);

absl::Status SendHandshake(int fd, const google::protobuf::MessageLite& message,
                           std::chrono::milliseconds timeout = kHandshakeTimeout);
absl::Status ReceiveHandshake(int fd, google::protobuf::MessageLite* message,
                              std::chrono::milliseconds timeout = kHandshakeTimeout);
// The body of one handshake frame as received, unparsed: authentication proofs cover the
// ClientHello's exact bytes (common/auth_proof.h), not a re-encoding.
absl::Status ReceiveHandshakeBody(int fd, std::string* body,
                                  std::chrono::milliseconds timeout = kHandshakeTimeout);

}  // namespace ringfs::wire
