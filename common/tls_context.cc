#include "common/tls_context.h"

#include <openssl/err.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ringfs::tls {
namespace {

// OpenSSL's own message for a missing file is "system lib"; say which file and why first.
absl::Status CheckReadable(const std::string& path, const char* what) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cannot read %s '%s': %s", what, path, std::strerror(errno)));
  }
  std::fclose(f);
  return absl::OkStatus();
}

absl::Status FileError(const std::string& path, const char* what) {
  return absl::InvalidArgumentError(
      absl::StrFormat("cannot use %s '%s': %s", what, path, DrainErrors()));
}

absl::StatusOr<SSL_CTX*> NewContext(bool server) {
  SSL_CTX* ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
  if (ctx == nullptr) return absl::InternalError(DrainErrors("SSL_CTX_new failed"));
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
  // No tickets: the stream after the handshake carries only our frames (and alerts).
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  if (server) SSL_CTX_set_num_tickets(ctx, 0);
  return ctx;
}

absl::Status LoadPair(SSL_CTX* ctx, const std::string& cert, const std::string& key,
                      const char* cert_what, const char* key_what) {
  if (absl::Status s = CheckReadable(cert, cert_what); !s.ok()) return s;
  if (absl::Status s = CheckReadable(key, key_what); !s.ok()) return s;
  if (SSL_CTX_use_certificate_chain_file(ctx, cert.c_str()) != 1) {
    return FileError(cert, cert_what);
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1) {
    return FileError(key, key_what);
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return absl::InvalidArgumentError(absl::StrFormat("%s '%s' is not the key of %s '%s': %s",
                                                      key_what, key, cert_what, cert,
                                                      DrainErrors()));
  }
  return absl::OkStatus();
}

absl::Status LoadCa(SSL_CTX* ctx, const std::string& ca, const char* what) {
  if (absl::Status s = CheckReadable(ca, what); !s.ok()) return s;
  if (SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr) != 1) return FileError(ca, what);
  return absl::OkStatus();
}

}  // namespace

std::string DrainErrors(const char* fallback) {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    // "error:0A000086:SSL routines::certificate verify failed": the reason is what helps.
    const char* reason = ERR_reason_error_string(e);
    if (!out.empty()) out += "; ";
    out += reason != nullptr ? reason : buf;
  }
  return out.empty() ? std::string(fallback) : out;
}

Context::~Context() { SSL_CTX_free(ctx_); }

absl::StatusOr<std::shared_ptr<Context>> Context::ForServer(const ServerFiles& files) {
  if (files.cert.empty() || files.key.empty()) {
    return absl::InvalidArgumentError("TLS needs both --tls-cert and --tls-key");
  }
  absl::StatusOr<SSL_CTX*> ctx = NewContext(/*server=*/true);
  if (!ctx.ok()) return ctx.status();
  std::shared_ptr<Context> context(new Context(*ctx, true, !files.ca.empty()));
  if (absl::Status s = LoadPair(*ctx, files.cert, files.key, "--tls-cert", "--tls-key");
      !s.ok()) {
    return s;
  }
  if (!files.ca.empty()) {
    if (absl::Status s = LoadCa(*ctx, files.ca, "--tls-ca"); !s.ok()) return s;
    SSL_CTX_set_verify(*ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  return context;
}

absl::StatusOr<std::shared_ptr<Context>> Context::ForClient(const ClientFiles& files) {
  if (files.cert.empty() != files.key.empty()) {
    return absl::InvalidArgumentError("a TLS client certificate needs both tls_cert= and tls_key=");
  }
  absl::StatusOr<SSL_CTX*> ctx = NewContext(/*server=*/false);
  if (!ctx.ok()) return ctx.status();
  std::shared_ptr<Context> context(new Context(*ctx, false, false));
  if (files.ca.empty()) {
    if (SSL_CTX_set_default_verify_paths(*ctx) != 1) {
      return absl::InternalError(DrainErrors("cannot load the system's trust store"));
    }
  } else if (absl::Status s = LoadCa(*ctx, files.ca, "tls_ca"); !s.ok()) {
    return s;
  }
  if (!files.cert.empty()) {
    if (absl::Status s = LoadPair(*ctx, files.cert, files.key, "tls_cert", "tls_key"); !s.ok()) {
      return s;
    }
  }
  SSL_CTX_set_verify(*ctx, SSL_VERIFY_PEER, nullptr);
  return context;
}

}  // namespace ringfs::tls
