#include "frontend/init_negotiation.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace ringfs::frontend {
namespace {
// 7.36 brought FUSE_INIT_EXT/flags2 and the argument-struct sizes ringfs relies on.
constexpr uint32_t kOldestMinor = 36;
}  // namespace

absl::StatusOr<InitDecision> NegotiateInit(const fuse_init_in& in, const InitWishes& wishes) {
  const Transport transport = wishes.transport;
  if (in.major != fuse::kKernelMajor) {
    return absl::FailedPreconditionError(
        absl::StrFormat("kernel speaks FUSE %u.%u; ringfs needs 7.x", in.major, in.minor));
  }
  if (in.minor < kOldestMinor) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "kernel FUSE protocol 7.%u is older than the 7.%u ringfs needs", in.minor, kOldestMinor));
  }
  InitDecision decision;
  decision.minor = std::min(in.minor, fuse::kKernelMinor);
  uint64_t offered = in.flags;
  if (in.flags & FUSE_INIT_EXT) offered |= static_cast<uint64_t>(in.flags2) << 32;
  decision.kernel_flags = offered;

  // HANDLE_KILLPRIV_V2: the server clears setuid/setgid on unprivileged writes and truncates
  // (server/ops_util.h KillSuidSgid). In exchange the kernel marks the superblock SB_NOSEC and
  // stops asking for security.capability before every write: one GETXATTR round trip per write.
  uint64_t wanted = FUSE_ASYNC_READ | FUSE_ATOMIC_O_TRUNC | FUSE_BIG_WRITES |
                    FUSE_AUTO_INVAL_DATA | FUSE_DO_READDIRPLUS | FUSE_READDIRPLUS_AUTO |
                    FUSE_PARALLEL_DIROPS | FUSE_MAX_PAGES | FUSE_CACHE_SYMLINKS |
                    FUSE_INIT_EXT | FUSE_HANDLE_KILLPRIV_V2;
  if (wishes.async_dio) wanted |= FUSE_ASYNC_DIO;
  if (wishes.writeback_cache) wanted |= FUSE_WRITEBACK_CACHE;

  bool ring_offered = (offered & fuse::kInitOverIoUring) != 0;
  if (transport != Transport::kClassic) {
    if (ring_offered) {
      wanted |= fuse::kInitOverIoUring;
      decision.use_ring = true;
      if (wishes.reduced_queues) wanted |= fuse::kInitUringReducedQ;
    } else {
      decision.ring_unavailable_reason =
          wishes.uring_module_enabled
              ? "the kernel did not offer FUSE_OVER_IO_URING in INIT"
              : "/sys/module/fuse/parameters/enable_uring is off (echo 1 > it to enable)";
      if (transport == Transport::kUring) {
        return absl::FailedPreconditionError(
            absl::StrFormat("transport=uring unavailable: %s", decision.ring_unavailable_reason));
      }
    }
  }

  uint64_t agreed = offered & wanted;
  decision.agreed_flags = agreed;
  decision.reduced_queues = (agreed & fuse::kInitUringReducedQ) != 0;
  fuse::InitOut& out = decision.reply;
  out.major = fuse::kKernelMajor;
  out.minor = decision.minor;
  out.max_readahead = in.max_readahead;
  out.flags = static_cast<uint32_t>(agreed);
  out.flags2 = static_cast<uint32_t>(agreed >> 32);
  out.max_background = kDefaultMaxBackground;
  out.congestion_threshold = kDefaultMaxBackground * 3 / 4;
  out.max_write = kMaxWrite;
  out.time_gran = 1;
  out.max_pages = kMaxPages;
  return decision;
}

}  // namespace ringfs::frontend
