#include "common/tls_ring.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace ringfs::tls {
namespace {

// Pieces below this are copied together so one TLS record (16 KiB) carries many of them.
constexpr size_t kGatherBytes = 16 * 1024;

}  // namespace

RingTransport::RingTransport(io_uring* ring) : ring_(ring), cipher_in_(kCipherInBytes) {
  gather_.reserve(kGatherBytes);
}

io_uring_sqe* RingTransport::GetSqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(ring_);
  while (sqe == nullptr) {
    io_uring_submit(ring_);
    sqe = io_uring_get_sqe(ring_);
  }
  return sqe;
}

void RingTransport::Attach(int fd, std::unique_ptr<Stream> stream, Tags tags) {
  stale_recv_ = cipher_recv_posted_;
  stale_send_ = cipher_send_posted_;
  fd_ = fd;
  stream_ = std::move(stream);
  tags_ = tags;
  handshake_ = recv_ = send_ = Pending{};
  eof_ = failed_ = false;
  last_error_.clear();
  out_begin_ = out_end_ = 0;
  ready_head_ = ready_tail_ = 0;
}

void RingTransport::Complete(Pending* op, int res) {
  if (!op->active) return;
  op->active = false;
  ready_[ready_tail_++ % kReady] = {op->user_data, res};
  if (!draining_ && !wake_posted_) {
    io_uring_sqe* sqe = GetSqe();
    io_uring_prep_nop(sqe);
    io_uring_sqe_set_data64(sqe, tags_.wake);
    wake_posted_ = true;
  }
}

void RingTransport::Fail(const absl::Status& status) {
  if (!failed_) last_error_ = std::string(status.message());
  failed_ = true;
  // The alert, if any, still goes out.
  TakeCiphertext();
  KickCipherSend();
}

void RingTransport::Handshake(uint64_t user_data) {
  handshake_ = Pending{.active = true, .user_data = user_data};
  ContinueHandshake();
}

void RingTransport::ContinueHandshake() {
  if (!handshake_.active) return;
  absl::StatusOr<bool> done = stream_->Handshake();
  if (!done.ok()) {
    Fail(done.status());
    // Completed once the alert is sent, so no SEND of ours outlives the attempt.
    if (!cipher_send_posted_) Complete(&handshake_, -EPROTO);
    return;
  }
  TakeCiphertext();
  KickCipherSend();
  if (*done) {
    Complete(&handshake_, 0);
  } else if (eof_) {
    last_error_ = "the peer closed the connection during the TLS handshake (a peer without TLS "
                  "does that)";
    Complete(&handshake_, -ECONNRESET);
  } else if (!cipher_recv_posted_) {
    PostCipherRecv();
  }
}

void RingTransport::Recv(char* buf, size_t len, uint64_t user_data) {
  recv_ = Pending{.active = true, .user_data = user_data, .buf = buf, .len = len};
  TryRecv();
}

void RingTransport::TryRecv() {
  if (!recv_.active) return;
  if (failed_) {
    Complete(&recv_, -EPROTO);
    return;
  }
  absl::StatusOr<size_t> n = stream_->ReadPlaintext(recv_.buf, recv_.len);
  // A read may have produced records of our own (a KeyUpdate answer, an alert).
  if (stream_->PendingCiphertext() > 0) {
    TakeCiphertext();
    KickCipherSend();
  }
  if (!n.ok()) {
    Fail(n.status());
    Complete(&recv_, -EPROTO);
  } else if (*n > 0) {
    Complete(&recv_, static_cast<int>(*n));
  } else if (eof_) {
    Complete(&recv_, 0);
  } else if (!cipher_recv_posted_) {
    PostCipherRecv();
  }
}

void RingTransport::PostCipherRecv() {
  io_uring_sqe* sqe = GetSqe();
  io_uring_prep_recv(sqe, fd_, cipher_in_.data(), cipher_in_.size(), 0);
  io_uring_sqe_set_data64(sqe, tags_.recv);
  cipher_recv_posted_ = true;
}

void RingTransport::OnCipherRecv(int res) {
  cipher_recv_posted_ = false;
  if (stream_ == nullptr) return;
  if (stale_recv_) {
    stale_recv_ = false;
    ContinueHandshake();
    TryRecv();
    return;
  }
  if (res == -EINTR || res == -EAGAIN) {
    if (handshake_.active || recv_.active) PostCipherRecv();
    return;
  }
  if (res < 0) {
    Complete(&handshake_, res);
    Complete(&recv_, res);
    return;
  }
  if (res == 0) {
    eof_ = true;
  } else {
    stream_->FeedCiphertext(cipher_in_.data(), static_cast<size_t>(res));
  }
  ContinueHandshake();
  TryRecv();
}

absl::Status RingTransport::Encrypt(const char* data, size_t size) {
  return stream_->WritePlaintext(data, size);
}

void RingTransport::Send(const iovec* iov, size_t iovcnt, uint64_t user_data) {
  send_ = Pending{.active = true, .user_data = user_data};
  if (failed_) {
    Complete(&send_, -EPROTO);
    return;
  }
  absl::Status status;
  size_t total = 0;
  gather_.clear();
  for (size_t i = 0; i < iovcnt && total < kMaxPlaintextPerSend && status.ok(); ++i) {
    const char* p = static_cast<const char*>(iov[i].iov_base);
    size_t len = std::min(iov[i].iov_len, kMaxPlaintextPerSend - total);
    total += len;
    if (gather_.size() + len <= kGatherBytes) {
      gather_.insert(gather_.end(), p, p + len);
      continue;
    }
    if (!gather_.empty()) {
      status = Encrypt(gather_.data(), gather_.size());
      gather_.clear();
    }
    if (status.ok()) status = Encrypt(p, len);
  }
  if (status.ok() && !gather_.empty()) status = Encrypt(gather_.data(), gather_.size());
  if (!status.ok()) {
    Fail(status);
    Complete(&send_, -EPROTO);
    return;
  }
  send_.total = total;
  TakeCiphertext();
  KickCipherSend();
}

void RingTransport::TakeCiphertext() {
  const size_t n = stream_->PendingCiphertext();
  if (n == 0) return;
  if (out_begin_ == out_end_) out_begin_ = out_end_ = 0;
  if (cipher_out_.size() < out_end_ + n) {
    // Only while no SEND of ours reads from it may the buffer move.
    if (!cipher_send_posted_ && out_begin_ > 0) {
      std::memmove(cipher_out_.data(), cipher_out_.data() + out_begin_, out_end_ - out_begin_);
      out_end_ -= out_begin_;
      out_begin_ = 0;
    }
    if (cipher_out_.size() < out_end_ + n) {
      if (cipher_send_posted_) {
        // Leave it in the stream; OnCipherSend takes it once the buffer is free to move.
        return;
      }
      cipher_out_.resize(out_end_ + n);
    }
  }
  out_end_ += stream_->TakeCiphertext(cipher_out_.data() + out_end_, n);
}

void RingTransport::KickCipherSend() {
  if (cipher_send_posted_) return;
  if (out_begin_ == out_end_) {
    if (failed_) Complete(&handshake_, -EPROTO);
    Complete(&send_, failed_ ? -EPROTO : static_cast<int>(send_.total));
    return;
  }
  io_uring_sqe* sqe = GetSqe();
  io_uring_prep_send(sqe, fd_, cipher_out_.data() + out_begin_, out_end_ - out_begin_,
                     MSG_NOSIGNAL);
  io_uring_sqe_set_data64(sqe, tags_.send);
  cipher_send_posted_ = true;
}

void RingTransport::OnCipherSend(int res) {
  cipher_send_posted_ = false;
  if (stream_ == nullptr) return;
  if (stale_send_) {
    stale_send_ = false;
    KickCipherSend();
    return;
  }
  if (res < 0 && res != -EINTR && res != -EAGAIN) {
    out_begin_ = out_end_ = 0;
    if (!failed_) last_error_ = std::strerror(-res);
    failed_ = true;
    Complete(&handshake_, res);
    Complete(&send_, res);
    return;
  }
  if (res > 0) out_begin_ += static_cast<size_t>(res);
  TakeCiphertext();
  KickCipherSend();
}

}  // namespace ringfs::tls
