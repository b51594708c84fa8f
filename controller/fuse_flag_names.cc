#include "controller/fuse_flag_names.h"

#include <linux/fuse.h>

#include "absl/strings/str_cat.h"
#include "proto/fuse_abi.h"

namespace ringfs::controller {
namespace {

struct FlagName {
  uint64_t bit;
  const char* name;
};

// Bits 0..31 are `int` in the header (bit 31 is negative): go through uint32_t.
#define RINGFS_FLAG(name) \
  FlagName { static_cast<uint32_t>(name), #name }
#define RINGFS_FLAG64(name) \
  FlagName { static_cast<uint64_t>(name), #name }

// <linux/fuse.h> of Debian 12 stops at 7.38; the later bits come from proto/fuse_abi.h.
constexpr FlagName kFlagNames[] = {
    RINGFS_FLAG(FUSE_ASYNC_READ),
    RINGFS_FLAG(FUSE_POSIX_LOCKS),
    RINGFS_FLAG(FUSE_FILE_OPS),
    RINGFS_FLAG(FUSE_ATOMIC_O_TRUNC),
    RINGFS_FLAG(FUSE_EXPORT_SUPPORT),
    RINGFS_FLAG(FUSE_BIG_WRITES),
    RINGFS_FLAG(FUSE_DONT_MASK),
    RINGFS_FLAG(FUSE_SPLICE_WRITE),
    RINGFS_FLAG(FUSE_SPLICE_MOVE),
    RINGFS_FLAG(FUSE_SPLICE_READ),
    RINGFS_FLAG(FUSE_FLOCK_LOCKS),
    RINGFS_FLAG(FUSE_HAS_IOCTL_DIR),
    RINGFS_FLAG(FUSE_AUTO_INVAL_DATA),
    RINGFS_FLAG(FUSE_DO_READDIRPLUS),
    RINGFS_FLAG(FUSE_READDIRPLUS_AUTO),
    RINGFS_FLAG(FUSE_ASYNC_DIO),
    RINGFS_FLAG(FUSE_WRITEBACK_CACHE),
    RINGFS_FLAG(FUSE_NO_OPEN_SUPPORT),
    RINGFS_FLAG(FUSE_PARALLEL_DIROPS),
    RINGFS_FLAG(FUSE_HANDLE_KILLPRIV),
    RINGFS_FLAG(FUSE_POSIX_ACL),
    RINGFS_FLAG(FUSE_ABORT_ERROR),
    RINGFS_FLAG(FUSE_MAX_PAGES),
    RINGFS_FLAG(FUSE_CACHE_SYMLINKS),
    RINGFS_FLAG(FUSE_NO_OPENDIR_SUPPORT),
    RINGFS_FLAG(FUSE_EXPLICIT_INVAL_DATA),
    RINGFS_FLAG(FUSE_MAP_ALIGNMENT),
    RINGFS_FLAG(FUSE_SUBMOUNTS),
    RINGFS_FLAG(FUSE_HANDLE_KILLPRIV_V2),
    RINGFS_FLAG(FUSE_SETXATTR_EXT),
    RINGFS_FLAG(FUSE_INIT_EXT),
    RINGFS_FLAG(FUSE_INIT_RESERVED),
    RINGFS_FLAG64(FUSE_SECURITY_CTX),
    RINGFS_FLAG64(FUSE_HAS_INODE_DAX),
    FlagName{1ULL << 34, "FUSE_CREATE_SUPP_GROUP"},
    RINGFS_FLAG64(FUSE_HAS_EXPIRE_ONLY),
    FlagName{fuse::kInitDirectIoAllowMmap, "FUSE_DIRECT_IO_ALLOW_MMAP"},
    FlagName{fuse::kInitPassthrough, "FUSE_PASSTHROUGH"},
    FlagName{fuse::kInitNoExportSupport, "FUSE_NO_EXPORT_SUPPORT"},
    FlagName{fuse::kInitHasResend, "FUSE_HAS_RESEND"},
    FlagName{fuse::kInitAllowIdmap, "FUSE_ALLOW_IDMAP"},
    FlagName{fuse::kInitOverIoUring, "FUSE_OVER_IO_URING"},
    FlagName{fuse::kInitRequestTimeout, "FUSE_REQUEST_TIMEOUT"},
    FlagName{fuse::kInitUringReducedQ, "FUSE_URING_REDUCED_Q"},
};

#undef RINGFS_FLAG
#undef RINGFS_FLAG64

const char* NameOfBit(uint64_t bit) {
  for (const FlagName& flag : kFlagNames) {
    if (flag.bit == bit) return flag.name;
  }
  return nullptr;
}

}  // namespace

std::vector<std::string> FuseFlagNames(uint64_t flags) {
  std::vector<std::string> names;
  for (int i = 0; i < 64; ++i) {
    uint64_t bit = 1ULL << i;
    if ((flags & bit) == 0) continue;
    const char* name = NameOfBit(bit);
    names.push_back(name != nullptr ? std::string(name) : absl::StrCat("bit", i));
  }
  return names;
}

}  // namespace ringfs::controller
