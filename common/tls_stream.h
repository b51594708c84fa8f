// One TLS 1.3 connection over memory BIOs: it never touches a socket. The owner feeds it the
// ciphertext it received, reads plaintext out, writes plaintext in and takes the ciphertext to
// send, so the same object runs under a blocking helper (handshake threads) or an io_uring loop.
// Not thread-safe: one thread at a time (ownership may move, e.g. handshake thread → worker).
#pragma once

#include <openssl/ssl.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/tls_context.h"

namespace ringfs::tls {

class Stream {
 public:
  // The client verifies the server's certificate against its CA and `server_name` (a DNS name,
  // or an IPv4/IPv6 literal matched against IP subjectAltNames).
  static absl::StatusOr<std::unique_ptr<Stream>> Client(std::shared_ptr<Context> context,
                                                        std::string_view server_name);
  static absl::StatusOr<std::unique_ptr<Stream>> Server(std::shared_ptr<Context> context);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Advances the handshake with what was fed so far: true once it is complete, false when it
  // needs more ciphertext (send PendingCiphertext() first). On an error the alert for the peer,
  // if any, is still in PendingCiphertext().
  [[nodiscard]] absl::StatusOr<bool> Handshake();
  bool handshake_done() const { return done_; }

  void FeedCiphertext(const char* data, size_t size);
  // Plaintext bytes read (up to `size`); 0 when more ciphertext is needed. The peer closing the
  // TLS session or a bad record is an error.
  [[nodiscard]] absl::StatusOr<size_t> ReadPlaintext(char* out, size_t size);
  // Whether plaintext (or ciphertext not yet decrypted) is buffered, so a read may succeed
  // without feeding more.
  bool HasBuffered() const;
  // REQUIRES: handshake_done(). Encrypts all of it (memory BIOs never push back).
  [[nodiscard]] absl::Status WritePlaintext(const char* data, size_t size);
  size_t PendingCiphertext() const;
  // Moves up to `size` bytes of ciphertext to `out`; returns how many.
  size_t TakeCiphertext(char* out, size_t size);

  // The peer's certificate subject ("CN=..,O=..") and common name; empty without a certificate.
  std::string PeerSubject() const;
  std::string PeerCommonName() const;
  // RFC 8446 §7.5 exporter over this session (no context), for channel binding.
  // REQUIRES: handshake_done().
  [[nodiscard]] absl::StatusOr<std::string> ExportKeyingMaterial(std::string_view label,
                                                                 size_t size = 32) const;

 private:
  Stream(std::shared_ptr<Context> context, SSL* ssl, BIO* in, BIO* out)
      : context_(std::move(context)), ssl_(ssl), in_(in), out_(out) {}
  // An SSL over two memory BIOs, in neither role yet.
  static absl::StatusOr<std::unique_ptr<Stream>> New(std::shared_ptr<Context> context);
  absl::Status Error(int rc, const char* during);

  std::shared_ptr<Context> context_;
  SSL* ssl_;
  BIO* in_;   // ciphertext from the peer; owned by ssl_
  BIO* out_;  // ciphertext for the peer; owned by ssl_
  bool done_ = false;
  // The first bytes the peer sent, to name a plaintext ringfs peer instead of "bad record".
  char first_[4] = {};
  size_t first_size_ = 0;
};

}  // namespace ringfs::tls
