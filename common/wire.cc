#include "common/wire.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "common/status.h"

namespace ringfs::wire {

absl::StatusOr<std::string> EncodeHandshake(const google::protobuf::MessageLite& message) {
  std::string body;
  if (!message.SerializeToString(&body)) return absl::InternalError("cannot encode handshake");
  if (body.size() > kMaxHandshakeBytes) return absl::InternalError("handshake too large");
  uint32_t prefix[2] = {kHandshakeMagic, static_cast<uint32_t>(body.size())};
  std::string frame(reinterpret_cast<const char*>(prefix), sizeof(prefix));
  frame += body;
  return frame;
}

absl::StatusOr<uint32_t> HandshakeBodyLength(const char (&bytes)[8]) {
  uint32_t prefix[2];
  std::memcpy(prefix, bytes, sizeof(prefix));
  if (prefix[0] != kHandshakeMagic) {
    // A TLS record header: content type 22 (handshake), version 3.x.
    if (bytes[0] == 0x16 && bytes[1] == 0x03) {
      return absl::FailedPreconditionError(
          "peer started a TLS handshake, but TLS is off here (server: --tls-cert/--tls-key; "
          "mount: -o tls)");
    }
    return absl::InvalidArgumentError("peer does not speak the ringfs wire (bad magic)");
  }
  if (prefix[1] > kMaxHandshakeBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("handshake of ", prefix[1], " bytes exceeds ", kMaxHandshakeBytes));
  }
  return prefix[1];
}

absl::Status SendHandshake(int fd, const google::protobuf::MessageLite& message,
                           std::chrono::milliseconds timeout) {
  ASSIGN_OR_RETURN(std::string frame, EncodeHandshake(message));
  return SendAll(fd, frame.data(), frame.size(), timeout);
}

absl::Status ReceiveHandshakeBody(int fd, std::string* body,
                                  std::chrono::milliseconds timeout) {
  char prefix[8];
  RETURN_IF_ERROR(ReceiveAll(fd, prefix, sizeof(prefix), timeout));
  ASSIGN_OR_RETURN(uint32_t length, HandshakeBodyLength(prefix));
  body->assign(length, '\0');
  return ReceiveAll(fd, body->data(), body->size(), timeout);
}

absl::Status ReceiveHandshake(int fd, google::protobuf::MessageLite* message,
                              std::chrono::milliseconds timeout) {
  std::string body;
  RETURN_IF_ERROR(ReceiveHandshakeBody(fd, &body, timeout));
  if (!message->ParseFromString(body)) {
    return absl::InvalidArgumentError("malformed handshake message");
  }
  return absl::OkStatus();
}

}  // namespace ringfs::wire
