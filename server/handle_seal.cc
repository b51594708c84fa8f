#include "server/handle_seal.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace ringfs::server {
namespace {

void PutLe32(uint8_t* out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(value >> (8 * i));
}

std::atomic<uint64_t> next_serial{1};

// This thread's HMAC context, keyed for the seal with `serial`. Re-initialising a keyed context
// reuses its key schedule: a third of the cost of a one-shot HMAC(), and no allocation.
struct ThreadMac {
  uint64_t serial = 0;
  EVP_MAC_CTX* ctx = nullptr;
  ~ThreadMac() { EVP_MAC_CTX_free(ctx); }
};
thread_local ThreadMac thread_mac;

}  // namespace

HandleSeal::HandleSeal(std::string key, std::string root_handle)
    : key_(std::move(key)),
      root_handle_(std::move(root_handle)),
      serial_(next_serial.fetch_add(1)),
      hmac_(EVP_MAC_fetch(nullptr, OSSL_MAC_NAME_HMAC, nullptr)) {}

HandleSeal::~HandleSeal() { EVP_MAC_free(hmac_); }

bool HandleSeal::Mac(const wire::NodeHandleRecord& record,
                     uint8_t out[wire::kNodeHandleMacBytes]) const {
  if (hmac_ == nullptr) return false;
  ThreadMac& mac = thread_mac;
  if (mac.serial != serial_) {
    EVP_MAC_CTX_free(mac.ctx);
    mac.serial = 0;
    mac.ctx = EVP_MAC_CTX_new(hmac_);
    char digest[] = "SHA256";
    const OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
        OSSL_PARAM_construct_end()};
    if (mac.ctx == nullptr ||
        EVP_MAC_init(mac.ctx, reinterpret_cast<const unsigned char*>(key_.data()), key_.size(),
                     params) != 1) {
      return false;
    }
    mac.serial = serial_;
  } else if (EVP_MAC_init(mac.ctx, nullptr, 0, nullptr) != 1) {
    return false;
  }
  // root || type || bytes || f_handle, in one stack buffer.
  uint8_t message[wire::kMaxNodeHandleBytes * 2 + 8];
  const size_t root = std::min(root_handle_.size(), wire::kMaxNodeHandleBytes);
  const size_t bytes = std::min<size_t>(record.handle_bytes, wire::kMaxNodeHandleBytes);
  std::memcpy(message, root_handle_.data(), root);
  PutLe32(message + root, static_cast<uint32_t>(record.handle_type));
  PutLe32(message + root + 4, record.handle_bytes);
  std::memcpy(message + root + 8, record.f_handle, bytes);
  uint8_t full[EVP_MAX_MD_SIZE];
  size_t full_len = 0;
  if (EVP_MAC_update(mac.ctx, message, root + 8 + bytes) != 1 ||
      EVP_MAC_final(mac.ctx, full, &full_len, sizeof(full)) != 1 ||
      full_len < wire::kNodeHandleMacBytes) {
    return false;
  }
  std::memcpy(out, full, wire::kNodeHandleMacBytes);
  return true;
}

wire::NodeHandleRecord HandleSeal::Seal(uint64_t nodeid, const InodeHandle* handle) const {
  wire::NodeHandleRecord record;
  record.nodeid = nodeid;
  if (handle != nullptr) {
    record.handle_type = handle->type;
    record.handle_bytes = static_cast<uint32_t>(handle->bytes.size());
    std::memcpy(record.f_handle, handle->bytes.data(), handle->bytes.size());
  }
  // On failure the MAC stays zero: such a record never verifies, it only cannot be reclaimed.
  if (!Mac(record, record.mac)) std::memset(record.mac, 0, sizeof(record.mac));
  return record;
}

bool HandleSeal::Verify(const wire::NodeHandleRecord& record) const {
  if (record.handle_bytes > wire::kMaxNodeHandleBytes) return false;
  uint8_t expected[wire::kNodeHandleMacBytes];
  if (!Mac(record, expected)) return false;
  return CRYPTO_memcmp(expected, record.mac, sizeof(expected)) == 0;
}

InodeHandle HandleSeal::HandleOf(const wire::NodeHandleRecord& record) {
  InodeHandle handle;
  handle.type = record.handle_type;
  handle.bytes.assign(reinterpret_cast<const char*>(record.f_handle),
                      std::min<size_t>(record.handle_bytes, wire::kMaxNodeHandleBytes));
  return handle;
}

}  // namespace ringfs::server
