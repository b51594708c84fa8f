// The handshake-frame exchange (wire_format.md §1) on a connected socket, in plaintext or
// inside TLS, blocking with a deadline: used once per connection by the server's handshake
// threads and the mount's pre-flight check, never by a ring-driven loop. With TLS the TLS
// handshake runs first (ServerTls/ClientTls), then the frames go through the stream, which the
// caller takes afterwards for the data path. One thread at a time; the fd stays the caller's.
#pragma once

#include <chrono>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/tls_stream.h"
#include "common/wire.h"

namespace ringfs {

// What authentication proofs bind to (the transcript's channel_binding, common/auth_proof.h):
// with TLS, 32 bytes of keying material exported from the TLS session, the same on both ends and
// different on every connection, so a proof relayed by a man in the middle does not verify;
// without TLS, nothing.
absl::StatusOr<std::string> ChannelBinding(tls::Stream* stream);

class HelloChannel {
 public:
  // Plaintext.
  explicit HelloChannel(int fd, std::chrono::milliseconds timeout = wire::kHandshakeTimeout);
  // Connects TLS as the client, verifying the server as `server_name`.
  static absl::StatusOr<HelloChannel> ClientTls(
      int fd, std::shared_ptr<tls::Context> context, std::string_view server_name,
      std::chrono::milliseconds timeout = wire::kHandshakeTimeout);
  // Accepts TLS. A client that starts with a plaintext ClientHello gets a plaintext ServerHello
  // refusal (BAD_REQUEST, "requires TLS") so it fails fast with a message too; the error here
  // says so.
  static absl::StatusOr<HelloChannel> ServerTls(
      int fd, std::shared_ptr<tls::Context> context,
      std::chrono::milliseconds timeout = wire::kHandshakeTimeout);

  HelloChannel(HelloChannel&&) = default;
  HelloChannel& operator=(HelloChannel&&) = default;

  [[nodiscard]] absl::Status Send(const google::protobuf::MessageLite& message);
  [[nodiscard]] absl::Status Receive(google::protobuf::MessageLite* message);
  // A frame already encoded (wire::EncodeHandshake), and a frame's body as received, unparsed:
  // authentication proofs cover a ClientHello's exact bytes (common/auth_proof.h).
  [[nodiscard]] absl::Status SendFrame(std::string_view frame);
  [[nodiscard]] absl::Status ReceiveBody(std::string* body);

  // Null without TLS.
  tls::Stream* stream() const { return stream_.get(); }
  std::unique_ptr<tls::Stream> TakeStream() { return std::move(stream_); }

 private:
  using Clock = std::chrono::steady_clock;
  absl::Status RunTlsHandshake();
  absl::Status Flush();
  absl::Status ReceiveSome(const char* during);
  absl::Status ReadExact(char* out, size_t size);

  int fd_;
  Clock::time_point deadline_;
  std::unique_ptr<tls::Stream> stream_;
};

}  // namespace ringfs
