#include "common/tls_stream.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "common/status.h"
#include "common/wire.h"

namespace ringfs::tls {

absl::StatusOr<std::unique_ptr<Stream>> Stream::New(std::shared_ptr<Context> context) {
  SSL* ssl = SSL_new(context->get());
  if (ssl == nullptr) return absl::InternalError(DrainErrors("SSL_new failed"));
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  // A drained memory BIO reports "retry" instead of EOF.
  BIO_set_mem_eof_return(in, -1);
  SSL_set_bio(ssl, in, out);
  return std::unique_ptr<Stream>(new Stream(std::move(context), ssl, in, out));
}

absl::StatusOr<std::unique_ptr<Stream>> Stream::Client(std::shared_ptr<Context> context,
                                                       std::string_view server_name) {
  ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream, New(std::move(context)));
  SSL* ssl = stream->ssl_;
  SSL_set_connect_state(ssl);
  std::string name(server_name);
  in6_addr ip{};
  const bool is_ip = inet_pton(AF_INET, name.c_str(), &ip) == 1 ||
                     inet_pton(AF_INET6, name.c_str(), &ip) == 1;
  if (is_ip) {
    if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str()) != 1) {
      return absl::InvalidArgumentError(absl::StrFormat("bad TLS peer address '%s'", name));
    }
  } else {
    SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    if (SSL_set1_host(ssl, name.c_str()) != 1 ||
        SSL_set_tlsext_host_name(ssl, name.c_str()) != 1) {
      return absl::InvalidArgumentError(absl::StrFormat("bad TLS server name '%s'", name));
    }
  }
  return stream;
}

absl::StatusOr<std::unique_ptr<Stream>> Stream::Server(std::shared_ptr<Context> context) {
  ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream, New(std::move(context)));
  SSL_set_accept_state(stream->ssl_);
  return stream;
}

Stream::~Stream() { SSL_free(ssl_); }

absl::Status Stream::Error(int rc, const char* during) {
  const int code = SSL_get_error(ssl_, rc);
  if (code == SSL_ERROR_ZERO_RETURN) {
    return absl::UnavailableError("the peer closed the TLS session");
  }
  uint32_t magic = 0;
  std::memcpy(&magic, first_, sizeof(magic));
  if (first_size_ == sizeof(first_) && magic == wire::kHandshakeMagic) {
    ERR_clear_error();
    return absl::FailedPreconditionError(
        "the peer speaks the plaintext ringfs wire: TLS is on here and off there");
  }
  std::string reason = DrainErrors(code == SSL_ERROR_SYSCALL ? "unexpected end of the stream"
                                                             : "TLS protocol error");
  const long verify = SSL_get_verify_result(ssl_);
  if (verify != X509_V_OK) {
    reason = absl::StrFormat("%s (%s)", reason, X509_verify_cert_error_string(verify));
  }
  return absl::UnavailableError(absl::StrFormat("TLS %s failed: %s", during, reason));
}

absl::StatusOr<bool> Stream::Handshake() {
  if (done_) return true;
  const int rc = SSL_do_handshake(ssl_);
  if (rc == 1) {
    done_ = true;
    return true;
  }
  if (SSL_get_error(ssl_, rc) == SSL_ERROR_WANT_READ) return false;
  return Error(rc, "handshake");
}

void Stream::FeedCiphertext(const char* data, size_t size) {
  const size_t keep = std::min(size, sizeof(first_) - first_size_);
  std::memcpy(first_ + first_size_, data, keep);
  first_size_ += keep;
  if (size > 0) BIO_write(in_, data, static_cast<int>(size));
}

absl::StatusOr<size_t> Stream::ReadPlaintext(char* out, size_t size) {
  size_t total = 0;
  while (total < size) {
    size_t n = 0;
    const int rc = SSL_read_ex(ssl_, out + total, size - total, &n);
    if (rc == 1) {
      total += n;
      continue;
    }
    if (SSL_get_error(ssl_, rc) == SSL_ERROR_WANT_READ) break;
    if (total > 0) break;  // the error comes again on the next call
    return Error(rc, "read");
  }
  return total;
}

bool Stream::HasBuffered() const {
  return SSL_pending(ssl_) > 0 || BIO_ctrl_pending(in_) > 0;
}

absl::Status Stream::WritePlaintext(const char* data, size_t size) {
  while (size > 0) {
    size_t n = 0;
    const int rc = SSL_write_ex(ssl_, data, size, &n);
    if (rc != 1) return Error(rc, "write");
    data += n;
    size -= n;
  }
  return absl::OkStatus();
}

size_t Stream::PendingCiphertext() const { return BIO_ctrl_pending(out_); }

size_t Stream::TakeCiphertext(char* out, size_t size) {
  const int n = BIO_read(out_, out, static_cast<int>(std::min<size_t>(size, 1u << 30)));
  return n > 0 ? static_cast<size_t>(n) : 0;
}

std::string Stream::PeerSubject() const {
  X509* cert = SSL_get0_peer_certificate(ssl_);
  if (cert == nullptr) return {};
  BIO* bio = BIO_new(BIO_s_mem());
  X509_NAME_print_ex(bio, X509_get_subject_name(cert), 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  long size = BIO_get_mem_data(bio, &data);
  std::string subject(data, static_cast<size_t>(size));
  BIO_free(bio);
  return subject;
}

std::string Stream::PeerCommonName() const {
  X509* cert = SSL_get0_peer_certificate(ssl_);
  if (cert == nullptr) return {};
  char cn[256] = {};
  int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof(cn));
  return n > 0 ? std::string(cn, static_cast<size_t>(n)) : std::string();
}

absl::StatusOr<std::string> Stream::ExportKeyingMaterial(std::string_view label,
                                                         size_t size) const {
  if (!done_) return absl::FailedPreconditionError("TLS handshake not finished");
  std::string out(size, '\0');
  std::string l(label);
  if (SSL_export_keying_material(ssl_, reinterpret_cast<unsigned char*>(out.data()), size,
                                 l.data(), l.size(), nullptr, 0, 0) != 1) {
    return absl::InternalError(DrainErrors("SSL_export_keying_material failed"));
  }
  return out;
}

}  // namespace ringfs::tls
