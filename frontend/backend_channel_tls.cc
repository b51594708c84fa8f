// The TLS side of BackendChannel: the handshake after the TCP connect, and the switch that
// sends the channel's RECV/SEND/SENDMSG through tls::RingTransport when the mount uses TLS.
// Without TLS, PostRecv/PostSend are the plain operations and nothing else here runs.
#include <sys/socket.h>

#include "absl/strings/str_format.h"
#include "common/log.h"
#include "frontend/backend_channel.h"

namespace ringfs::frontend {

std::string TlsServerName(const BackendConfig& config) {
  if (!config.tls_name.empty()) return config.tls_name;
  // "HOST:PORT", "[V6]:PORT", either followed by " (NUMERIC)" after resolution.
  std::string_view text = config.address.text;
  text = text.substr(0, text.find(" ("));
  if (text.starts_with("[")) return std::string(text.substr(1, text.find(']') - 1));
  return std::string(text.substr(0, text.rfind(':')));
}

void BackendChannel::StartTlsHandshake() {
  absl::StatusOr<std::unique_ptr<tls::Stream>> stream =
      tls::Stream::Client(config_.tls, TlsServerName(config_));
  if (!stream.ok()) {
    ConnectFailed(stream.status());
    return;
  }
  tls_->Attach(attempt_fd_.get(), *std::move(stream),
               {Tag(Op::kTlsRecv), Tag(Op::kTlsSend), Tag(Op::kTlsWake)});
  tls_->Handshake(Tag(Op::kTlsHandshake));
}

// Not checked against the generation: the transport itself tells a late completion of an
// earlier connection from a current one, and must see both to know its buffers are free.
void BackendChannel::OnTlsStep(Op op, int res) {
  if (tls_ == nullptr) return;
  if (op == Op::kTlsRecv) {
    tls_->OnCipherRecv(res);
  } else if (op == Op::kTlsSend) {
    tls_->OnCipherSend(res);
  } else {
    tls_->OnWake();
  }
  tls_->Drain([this](tls::RingTransport::Completion done) {
    OnCompletion(done.user_data, done.res);
  });
}

void BackendChannel::PostRecv(int fd, char* buf, size_t len, Op op) {
  if (tls_ != nullptr) {
    tls_->Recv(buf, len, Tag(op));
    return;
  }
  io_uring_sqe* sqe = io_uring_get_sqe(ring_);
  while (sqe == nullptr) {
    io_uring_submit(ring_);
    sqe = io_uring_get_sqe(ring_);
  }
  io_uring_prep_recv(sqe, fd, buf, len, 0);
  io_uring_sqe_set_data64(sqe, Tag(op));
}

void BackendChannel::PostSend(int fd, const iovec* iov, size_t iovcnt, Op op) {
  if (tls_ != nullptr) {
    tls_->Send(iov, iovcnt, Tag(op));
    return;
  }
  io_uring_sqe* sqe = io_uring_get_sqe(ring_);
  while (sqe == nullptr) {
    io_uring_submit(ring_);
    sqe = io_uring_get_sqe(ring_);
  }
  if (op == Op::kSend) {
    send_msg_ = msghdr{};
    send_msg_.msg_iov = const_cast<iovec*>(iov);
    send_msg_.msg_iovlen = iovcnt;
    io_uring_prep_sendmsg(sqe, fd, &send_msg_, MSG_NOSIGNAL);
  } else {
    io_uring_prep_send(sqe, fd, iov[0].iov_base, iov[0].iov_len, MSG_NOSIGNAL);
  }
  io_uring_sqe_set_data64(sqe, Tag(op));
}

}  // namespace ringfs::frontend
