#include "common/hello_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "common/net.h"
#include "common/status.h"

namespace ringfs {
namespace {

std::chrono::milliseconds Left(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return left.count() > 0 ? left : std::chrono::milliseconds(0);
}

absl::Status WaitReadable(int fd, std::chrono::steady_clock::time_point deadline,
                          const char* during) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int n = poll(&p, 1, static_cast<int>(Left(deadline).count()));
    if (n > 0) return absl::OkStatus();
    if (n == 0) {
      return absl::DeadlineExceededError(absl::StrFormat("no answer during %s in time", during));
    }
    if (errno != EINTR) return ErrnoError(errno, "poll");
  }
}

}  // namespace

HelloChannel::HelloChannel(int fd, std::chrono::milliseconds timeout)
    : fd_(fd), deadline_(Clock::now() + timeout) {}

absl::StatusOr<HelloChannel> HelloChannel::ClientTls(int fd,
                                                     std::shared_ptr<tls::Context> context,
                                                     std::string_view server_name,
                                                     std::chrono::milliseconds timeout) {
  HelloChannel channel(fd, timeout);
  ASSIGN_OR_RETURN(channel.stream_, tls::Stream::Client(std::move(context), server_name));
  RETURN_IF_ERROR(channel.RunTlsHandshake());
  return channel;
}

absl::StatusOr<HelloChannel> HelloChannel::ServerTls(int fd,
                                                     std::shared_ptr<tls::Context> context,
                                                     std::chrono::milliseconds timeout) {
  HelloChannel channel(fd, timeout);
  // A plaintext client starts with the magic; answer it in plaintext so it does not wait for a
  // TLS ServerHello that never comes.
  char first[4] = {};
  size_t have = 0;
  while (have < sizeof(first)) {
    RETURN_IF_ERROR(WaitReadable(fd, channel.deadline_, "the TLS handshake"));
    ssize_t n = recv(fd, first, sizeof(first), MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return absl::UnavailableError("the client closed the connection");
    if (n < 0 && errno != EINTR && errno != EAGAIN) return ErrnoError(errno, "receive");
    if (n > 0) have = static_cast<size_t>(n);
    if (have > 0 && first[0] != 'R') break;  // not the magic: let TLS judge
    if (have > 0 && have < sizeof(first)) usleep(1000);  // the rest of the magic is coming
  }
  uint32_t magic = 0;
  std::memcpy(&magic, first, sizeof(magic));
  if (have == sizeof(first) && magic == wire::kHandshakeMagic) {
    wire::ClientHello hello;
    if (wire::ReceiveHandshake(fd, &hello, Left(channel.deadline_)).ok()) {
      wire::ServerHello refusal;
      refusal.set_wire_version(wire::kWireVersion);
      refusal.set_result(wire::ServerHello::BAD_REQUEST);
      refusal.set_message(
          "this server requires TLS: mount with -o tls (and tls_ca= for its CA)");
      (void)wire::SendHandshake(fd, refusal, Left(channel.deadline_));
    }
    return absl::FailedPreconditionError(
        "the client speaks the plaintext ringfs wire, but this server requires TLS");
  }
  ASSIGN_OR_RETURN(channel.stream_, tls::Stream::Server(std::move(context)));
  RETURN_IF_ERROR(channel.RunTlsHandshake());
  return channel;
}

absl::Status HelloChannel::Flush() {
  char buf[16384];
  while (size_t n = stream_->TakeCiphertext(buf, sizeof(buf))) {
    RETURN_IF_ERROR(SendAll(fd_, buf, n, Left(deadline_)));
  }
  return absl::OkStatus();
}

absl::Status HelloChannel::ReceiveSome(const char* during) {
  char buf[16384];
  for (;;) {
    RETURN_IF_ERROR(WaitReadable(fd_, deadline_, during));
    ssize_t n = recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      stream_->FeedCiphertext(buf, static_cast<size_t>(n));
      return absl::OkStatus();
    }
    if (n == 0 || (n < 0 && errno == ECONNRESET)) {
      return absl::UnavailableError(absl::StrFormat(
          "the peer closed the connection during %s (a peer without TLS does that)", during));
    }
    if (errno != EINTR && errno != EAGAIN) return ErrnoError(errno, during);
  }
}

absl::Status HelloChannel::RunTlsHandshake() {
  for (;;) {
    absl::StatusOr<bool> done = stream_->Handshake();
    // Sent even after an error: it carries the alert that tells the peer why.
    absl::Status flushed = Flush();
    if (!done.ok()) return done.status();
    RETURN_IF_ERROR(flushed);
    if (*done) return absl::OkStatus();
    RETURN_IF_ERROR(ReceiveSome("the TLS handshake"));
  }
}

absl::Status HelloChannel::ReadExact(char* out, size_t size) {
  while (size > 0) {
    ASSIGN_OR_RETURN(size_t n, stream_->ReadPlaintext(out, size));
    out += n;
    size -= n;
    if (size > 0 && n == 0) RETURN_IF_ERROR(ReceiveSome("the hello exchange"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ChannelBinding(tls::Stream* stream) {
  if (stream == nullptr) return std::string();
  return stream->ExportKeyingMaterial("EXPORTER-ringfs-auth-binding", 32);
}

absl::Status HelloChannel::Send(const google::protobuf::MessageLite& message) {
  ASSIGN_OR_RETURN(std::string frame, wire::EncodeHandshake(message));
  return SendFrame(frame);
}

absl::Status HelloChannel::SendFrame(std::string_view frame) {
  if (stream_ == nullptr) return SendAll(fd_, frame.data(), frame.size(), Left(deadline_));
  RETURN_IF_ERROR(stream_->WritePlaintext(frame.data(), frame.size()));
  return Flush();
}

absl::Status HelloChannel::Receive(google::protobuf::MessageLite* message) {
  std::string body;
  RETURN_IF_ERROR(ReceiveBody(&body));
  if (!message->ParseFromString(body)) {
    return absl::InvalidArgumentError("malformed handshake message");
  }
  return absl::OkStatus();
}

absl::Status HelloChannel::ReceiveBody(std::string* body) {
  if (stream_ == nullptr) return wire::ReceiveHandshakeBody(fd_, body, Left(deadline_));
  char prefix[8];
  RETURN_IF_ERROR(ReadExact(prefix, sizeof(prefix)));
  ASSIGN_OR_RETURN(uint32_t length, wire::HandshakeBodyLength(prefix));
  body->assign(length, '\0');
  return ReadExact(body->data(), body->size());
}

}  // namespace ringfs
