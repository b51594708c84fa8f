#include "common/tls_test_pki.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <memory>

#include "absl/strings/str_format.h"
#include "common/tls_context.h"

namespace ringfs::tls {
namespace {

using Key = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using Cert = std::unique_ptr<X509, decltype(&X509_free)>;

Key NewKey() { return Key(EVP_EC_gen("P-256"), EVP_PKEY_free); }

void AddExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext != nullptr) {
    X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
  }
}

// `issuer`/`issuer_key` null: self-signed.
Cert MakeCert(EVP_PKEY* key, const char* cn, X509* issuer, EVP_PKEY* issuer_key, bool ca,
              const char* san, long serial) {
  Cert cert(X509_new(), X509_free);
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 7 * 24 * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("ringfs test"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn),
                             -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  if (ca) {
    AddExt(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE");
    AddExt(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    AddExt(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE");
    AddExt(cert.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth");
  }
  AddExt(cert.get(), signer, NID_subject_key_identifier, "hash");
  if (issuer != nullptr) AddExt(cert.get(), signer, NID_authority_key_identifier, "keyid");
  if (san != nullptr) AddExt(cert.get(), signer, NID_subject_alt_name, san);
  X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256());
  return cert;
}

absl::Status WritePem(const std::string& path, X509* cert, EVP_PKEY* key) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return absl::InternalError(absl::StrFormat("cannot write '%s'", path));
  bool ok = cert != nullptr ? PEM_write_X509(f, cert) == 1
                            : PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr,
                                                   nullptr) == 1;
  std::fclose(f);
  if (!ok) return absl::InternalError(absl::StrFormat("cannot write '%s': %s", path, DrainErrors()));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TestPki> MakeTestPki(const std::string& dir) {
  TestPki pki{dir + "/ca.pem",          dir + "/other-ca.pem", dir + "/server.pem",
              dir + "/server.key",      dir + "/client.pem",   dir + "/client.key"};
  Key ca_key = NewKey(), other_key = NewKey(), server_key = NewKey(), client_key = NewKey();
  if (!ca_key || !other_key || !server_key || !client_key) {
    return absl::InternalError(DrainErrors("key generation failed"));
  }
  Cert ca = MakeCert(ca_key.get(), "ringfs test CA", nullptr, nullptr, true, nullptr, 1);
  Cert other = MakeCert(other_key.get(), "ringfs other CA", nullptr, nullptr, true, nullptr, 2);
  Cert server = MakeCert(server_key.get(), "localhost", ca.get(), ca_key.get(), false,
                         "DNS:localhost,IP:127.0.0.1,IP:::1", 3);
  Cert client = MakeCert(client_key.get(), "ringfs-test-client", ca.get(), ca_key.get(), false,
                         nullptr, 4);
  for (auto [path, cert, key] : {std::tuple{pki.ca, ca.get(), (EVP_PKEY*)nullptr},
                                 std::tuple{pki.other_ca, other.get(), (EVP_PKEY*)nullptr},
                                 std::tuple{pki.server_cert, server.get(), (EVP_PKEY*)nullptr},
                                 std::tuple{pki.server_key, (X509*)nullptr, server_key.get()},
                                 std::tuple{pki.client_cert, client.get(), (EVP_PKEY*)nullptr},
                                 std::tuple{pki.client_key, (X509*)nullptr, client_key.get()}}) {
    absl::Status s = WritePem(path, cert, key);
    if (!s.ok()) return s;
  }
  return pki;
}

}  // namespace ringfs::tls
