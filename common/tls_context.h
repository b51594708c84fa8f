// TLS 1.3 settings of one process, built once from certificate, key and CA files: the server's
// (certificate, key, and with a CA: client certificates required and verified against it) or a
// client's (CA to verify servers with, optional certificate and key for mutual TLS). Session
// tickets are off, so no post-handshake message ever reaches a stream that does not expect one.
// Immutable after creation; shared by every connection of the process (any thread).
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace ringfs::tls {

struct ServerFiles {
  std::string cert;  // PEM chain, leaf first
  std::string key;   // PEM private key of `cert`
  std::string ca;    // empty: no client certificate asked for; else required and verified
};

struct ClientFiles {
  std::string ca;    // empty: the system's trust store
  std::string cert;  // both empty, or a client certificate and its key for mutual TLS
  std::string key;
};

class Context {
 public:
  // Errors name the file (and the flag or option) that could not be used.
  static absl::StatusOr<std::shared_ptr<Context>> ForServer(const ServerFiles& files);
  static absl::StatusOr<std::shared_ptr<Context>> ForClient(const ClientFiles& files);

  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  SSL_CTX* get() const { return ctx_; }
  bool server() const { return server_; }
  bool requires_client_cert() const { return requires_client_cert_; }

 private:
  Context(SSL_CTX* ctx, bool server, bool requires_client_cert)
      : ctx_(ctx), server_(server), requires_client_cert_(requires_client_cert) {}

  SSL_CTX* const ctx_;
  const bool server_;
  const bool requires_client_cert_;
};

// The queued OpenSSL errors of this thread as one line (and clears them); `fallback` if none.
std::string DrainErrors(const char* fallback = "unknown TLS error");

}  // namespace ringfs::tls
