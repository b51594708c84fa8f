#include "common/wire.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "common/status.h"

namespace ringfs::wire {

absl::Status SendHandshake(int fd, const google::protobuf::MessageLite& message,
                           std::chrono::milliseconds timeout) {
  std::string body;
  if (!message.SerializeToString(&body)) return absl::InternalError("cannot encode handshake");
  if (body.size() > kMaxHandshakeBytes) return absl::InternalError("handshake too large");
  uint32_t prefix[2] = {kHandshakeMagic, static_cast<uint32_t>(body.size())};
  std::string frame(reinterpret_cast<const char*>(prefix), sizeof(prefix));
  frame += body;
  return SendAll(fd, frame.data(), frame.size(), timeout);
}

absl::Status ReceiveHandshake(int fd, google::protobuf::MessageLite* message,
                              std::chrono::milliseconds timeout) {
  uint32_t prefix[2];
  RETURN_IF_ERROR(ReceiveAll(fd, prefix, sizeof(prefix), timeout));
  if (prefix[0] != kHandshakeMagic) {
    return absl::InvalidArgumentError("peer does not speak the ringfs wire (bad magic)");
  }
  if (prefix[1] > kMaxHandshakeBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("handshake of ", prefix[1], " bytes exceeds ", kMaxHandshakeBytes));
  }
  std::string body(prefix[1], '\0');
  RETURN_IF_ERROR(ReceiveAll(fd, body.data(), body.size(), timeout));
  if (!message->ParseFromString(body)) {
    return absl::InvalidArgumentError("malformed handshake message");
  }
  return absl::OkStatus();
}

}  // namespace ringfs::wire
