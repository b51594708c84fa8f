#include "server/file_generation.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cstring>

namespace ringfs::server {
namespace {

// FNV-1a, then splitmix64's finalizer so that handles differing in a few bytes (they mostly
// differ in the inode number) differ in every bit of the result. Fixed forever: see the header.
class StableHash {
 public:
  void Add(const void* data, size_t size) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < size; ++i) {
      state_ ^= p[i];
      state_ *= 0x100000001b3ull;
    }
  }
  void AddU64(uint64_t value) {
    unsigned char bytes[8];
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(value >> (8 * i));
    Add(bytes, sizeof(bytes));
  }
  // Never 0: the kernel and clients may read 0 as "no generation".
  uint64_t Finish() const {
    uint64_t z = state_;
    z ^= z >> 30;
    z *= 0xbf58476d1ce4e5b9ull;
    z ^= z >> 27;
    z *= 0x94d049bb133111ebull;
    z ^= z >> 31;
    return z == 0 ? 1 : z;
  }

 private:
  uint64_t state_ = 0xcbf29ce484222325ull;
};

// Domain tags keep a handle and an (ino, btime) pair from ever hashing alike by construction.
constexpr uint64_t kFromHandle = 1;
constexpr uint64_t kFromBirthTime = 2;
constexpr uint64_t kFromInodeOnly = 3;

}  // namespace

uint64_t HandleGeneration(const InodeHandle& handle) {
  StableHash hash;
  hash.AddU64(kFromHandle);
  hash.AddU64(static_cast<uint32_t>(handle.type));
  hash.Add(handle.bytes.data(), handle.bytes.size());
  return hash.Finish();
}

uint64_t GenerationOf(int fd, const struct stat& st) {
  if (absl::StatusOr<InodeHandle> handle = HandleOf(fd); handle.ok()) {
    return HandleGeneration(*handle);
  }
  return GenerationWithoutHandle(fd, st);
}

uint64_t GenerationWithoutHandle(int fd, const struct stat& st) {
  StableHash hash;
  struct statx stx {};
  if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_BTIME, &stx) == 0 &&
      (stx.stx_mask & STATX_BTIME) != 0) {
    hash.AddU64(kFromBirthTime);
    hash.AddU64(st.st_ino);
    hash.AddU64(static_cast<uint64_t>(stx.stx_btime.tv_sec));
    hash.AddU64(stx.stx_btime.tv_nsec);
    return hash.Finish();
  }
  hash.AddU64(kFromInodeOnly);
  hash.AddU64(st.st_ino);
  return hash.Finish();
}

}  // namespace ringfs::server
