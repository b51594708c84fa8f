// Decides the reply to the kernel's FUSE_INIT: protocol minor, feature flags, sizes, and whether
// requests will come over the io_uring ring. Pure function; callable from any thread.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "frontend/options.h"
#include "proto/fuse_abi.h"

namespace ringfs::frontend {

inline constexpr uint32_t kMaxPages = 256;  // 1 MiB requests
inline constexpr uint32_t kMaxWrite = kMaxPages * 4096;
inline constexpr uint16_t kDefaultMaxBackground = 64;

struct InitDecision {
  fuse::InitOut reply{};
  bool use_ring = false;
  // Why the ring is not used, for the one log line of the fallback (empty when it is used or
  // was not asked for).
  std::string ring_unavailable_reason;
  uint32_t minor = 0;
  uint64_t kernel_flags = 0;  // all 64 bits the kernel offered
  uint64_t agreed_flags = 0;  // all 64 bits we answered with
  // The ring needs only the queues we register (FUSE_URING_REDUCED_Q agreed).
  bool reduced_queues = false;
};

// What the mount asks of INIT (from its options and the machine).
struct InitWishes {
  Transport transport = Transport::kAuto;
  bool writeback_cache = false;
  bool uring_module_enabled = true;  // /sys/module/fuse/parameters/enable_uring, for the message
  // Agree to FUSE_URING_REDUCED_Q when the kernel offers it with the ring.
  bool reduced_queues = true;
  // FUSE_ASYNC_DIO: the kernel sends O_DIRECT I/O as background requests, in parallel, and the
  // caller waits for them uninterruptibly (no INTERRUPT for background requests, not even
  // kill -9). A hard mount, which may wait forever, does without it (MountOptions::hard).
  bool async_dio = true;
};

// Fails when the kernel's protocol is too old for the structures ringfs uses, or when
// transport=uring was asked for and the kernel does not offer the ring.
absl::StatusOr<InitDecision> NegotiateInit(const fuse_init_in& in, const InitWishes& wishes);

}  // namespace ringfs::frontend
