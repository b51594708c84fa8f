#include "server/id_space.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdlib>

#include "common/log.h"
#include "common/status.h"

namespace ringfs::server {
namespace {

absl::Status FillRandom(void* data, size_t size) {
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = getrandom(p, size, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, "getrandom");
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// splitmix64's finalizer: every input bit affects every output bit.
uint64_t Mix(uint64_t z) {
  z ^= z >> 30;
  z *= 0xbf58476d1ce4e5b9ull;
  z ^= z >> 27;
  z *= 0x94d049bb133111ebull;
  z ^= z >> 31;
  return z;
}

uint32_t Round(uint32_t half, uint64_t round_key) {
  return static_cast<uint32_t>(Mix(half ^ round_key) >> 32);
}

}  // namespace

IdSpace::Key IdSpace::RandomKey() {
  Key key;
  if (absl::Status status = FillRandom(key.data(), sizeof(key)); !status.ok()) {
    RINGFS_LOG_ERROR("no randomness for table ids: %s", status.ToString());
    std::abort();
  }
  return key;
}

// A balanced Feistel network on the two 32-bit halves: each round is invertible whatever the
// round function, so the whole is a permutation of the 64-bit values.
uint64_t IdSpace::Permute(uint64_t n) const {
  uint32_t left = static_cast<uint32_t>(n >> 32);
  uint32_t right = static_cast<uint32_t>(n);
  for (uint64_t round_key : key_) {
    const uint32_t next = left ^ Round(right, round_key);
    left = right;
    right = next;
  }
  return (uint64_t{left} << 32) | right;
}

uint64_t IdSpace::Unpermute(uint64_t id) const {
  uint32_t left = static_cast<uint32_t>(id >> 32);
  uint32_t right = static_cast<uint32_t>(id);
  for (auto it = key_.rbegin(); it != key_.rend(); ++it) {
    const uint32_t previous = right ^ Round(left, *it);
    right = left;
    left = previous;
  }
  return (uint64_t{left} << 32) | right;
}

absl::StatusOr<uint64_t> DrawInstanceId() {
  uint64_t id = 0;
  while (id == 0) RETURN_IF_ERROR(FillRandom(&id, sizeof(id)));
  return id;
}

}  // namespace ringfs::server
