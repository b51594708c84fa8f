// Runs a tls::Stream over one socket through its owner's io_uring, in the shape of the plain
// operations it replaces: Recv() reads plaintext into the owner's buffer like IORING_OP_RECV,
// Send() takes plaintext iovecs like SENDMSG (a short "send" is possible: at most
// kMaxPlaintextPerSend bytes are taken per call), and each finishes with exactly one
// completion (the owner's user_data, a byte count or -errno) that the owner handles as if the
// kernel had produced it. Underneath, ciphertext goes through one RECV and one SEND at a time
// into buffers owned here, with the user_data values given at Attach.
// Owned and called by the one thread that owns the ring (STYLE.md 3). After each On*() call
// the owner runs Drain(); completions that become ready at any other time post a NOP with the
// wake user_data, whose completion the owner answers with OnWake() and Drain(). The object (its
// buffers) must outlive every operation it posted: destroy or Attach() again only when !busy().
#pragma once

#include <liburing.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/tls_stream.h"

namespace ringfs::tls {

class RingTransport {
 public:
  struct Completion {
    uint64_t user_data;
    int res;
  };
  struct Tags {
    uint64_t recv;  // ciphertext RECV
    uint64_t send;  // ciphertext SEND
    uint64_t wake;  // NOP that makes the owner drain
  };
  static constexpr size_t kCipherInBytes = 256 * 1024;
  static constexpr size_t kMaxPlaintextPerSend = 512 * 1024;

  explicit RingTransport(io_uring* ring);
  RingTransport(const RingTransport&) = delete;
  RingTransport& operator=(const RingTransport&) = delete;

  // A new connection on `fd` (not owned). A ciphertext operation of the previous connection
  // still in the kernel is waited for (its completion must still reach On*()) before this
  // one's first operation of the same kind is posted.
  void Attach(int fd, std::unique_ptr<Stream> stream, Tags tags);
  bool attached() const { return stream_ != nullptr; }

  // Runs the TLS handshake; completes `user_data` with 0, or -EPROTO/-errno (see last_error()).
  void Handshake(uint64_t user_data);
  // REQUIRES: no Recv outstanding. Completes with bytes read (> 0), 0 at the peer's end of the
  // stream, or -errno (-EPROTO: a TLS error, see last_error()).
  void Recv(char* buf, size_t len, uint64_t user_data);
  // REQUIRES: no Send outstanding. Completes with the plaintext bytes taken once all their
  // ciphertext is on the wire, or -errno.
  void Send(const iovec* iov, size_t iovcnt, uint64_t user_data);

  void OnCipherRecv(int res);
  void OnCipherSend(int res);
  void OnWake() { wake_posted_ = false; }
  template <typename F>
  void Drain(F&& handle) {
    draining_ = true;
    while (ready_head_ != ready_tail_) {
      Completion c = ready_[ready_head_++ % kReady];
      handle(c);
    }
    draining_ = false;
  }

  // An operation of ours is in the kernel (its buffers are in use).
  bool busy() const { return cipher_recv_posted_ || cipher_send_posted_ || wake_posted_; }
  const std::string& last_error() const { return last_error_; }
  Stream* stream() const { return stream_.get(); }

 private:
  struct Pending {
    bool active = false;
    uint64_t user_data = 0;
    char* buf = nullptr;
    size_t len = 0;
    size_t total = 0;
  };
  io_uring_sqe* GetSqe();
  void Complete(Pending* op, int res);
  void Fail(const absl::Status& status);
  void ContinueHandshake();
  void TryRecv();
  void PostCipherRecv();
  void TakeCiphertext();
  void KickCipherSend();
  absl::Status Encrypt(const char* data, size_t size);

  io_uring* const ring_;
  int fd_ = -1;
  Tags tags_{};
  std::unique_ptr<Stream> stream_;
  Pending handshake_;
  Pending recv_;
  Pending send_;
  bool eof_ = false;
  bool failed_ = false;
  std::string last_error_;
  std::vector<char> cipher_in_;
  std::vector<char> cipher_out_;  // [out_begin_, out_end_) waits to be sent
  size_t out_begin_ = 0;
  size_t out_end_ = 0;
  std::vector<char> gather_;  // small plaintext pieces joined into one record
  // The posted operation belongs to an earlier connection: its completion only frees the buffer.
  bool stale_recv_ = false;
  bool stale_send_ = false;
  bool cipher_recv_posted_ = false;
  bool cipher_send_posted_ = false;
  bool wake_posted_ = false;
  bool draining_ = false;
  // At most one completion each of the handshake, the receive and the send is ever ready.
  static constexpr size_t kReady = 4;
  Completion ready_[kReady] = {};
  size_t ready_head_ = 0;
  size_t ready_tail_ = 0;
};

}  // namespace ringfs::tls
