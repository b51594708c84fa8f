#include "common/auth_proof.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdint>

namespace ringfs::auth {
namespace {

constexpr std::string_view kTranscriptLabel{"ringfs auth v1\0", 15};
constexpr std::string_view kServerLabel = "ringfs server proof";
constexpr std::string_view kClientLabel = "ringfs client proof";

void AddPrefixed(EVP_MD_CTX* ctx, std::string_view bytes) {
  const uint32_t n = static_cast<uint32_t>(bytes.size());
  const unsigned char len[4] = {static_cast<unsigned char>(n), static_cast<unsigned char>(n >> 8),
                                static_cast<unsigned char>(n >> 16),
                                static_cast<unsigned char>(n >> 24)};
  EVP_DigestUpdate(ctx, len, sizeof(len));
  EVP_DigestUpdate(ctx, bytes.data(), bytes.size());
}

std::string Hmac(std::string_view secret, std::string_view label, std::string_view transcript) {
  std::string message(label);
  message.append(transcript);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int out_len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), out, &out_len);
  return std::string(reinterpret_cast<const char*>(out), out_len);
}

}  // namespace

absl::StatusOr<std::string> DrawNonce() {
  std::string nonce(kNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), kNonceBytes) != 1) {
    return absl::InternalError("no random bytes for an authentication nonce");
  }
  return nonce;
}

std::string Transcript(std::string_view client_hello_body, std::string_view server_nonce,
                       std::string_view channel_binding) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  EVP_DigestUpdate(ctx, kTranscriptLabel.data(), kTranscriptLabel.size());
  AddPrefixed(ctx, client_hello_body);
  AddPrefixed(ctx, server_nonce);
  AddPrefixed(ctx, channel_binding);
  std::string digest(kTranscriptBytes, '\0');
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, reinterpret_cast<unsigned char*>(digest.data()), &len);
  EVP_MD_CTX_free(ctx);
  return digest;
}

std::string ServerProof(std::string_view secret, std::string_view transcript) {
  return Hmac(secret, kServerLabel, transcript);
}

std::string ClientProof(std::string_view secret, std::string_view transcript) {
  return Hmac(secret, kClientLabel, transcript);
}

bool ProofEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace ringfs::auth
