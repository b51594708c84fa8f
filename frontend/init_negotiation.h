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

// Fails when the kernel's protocol is too old for the structures ringfs uses, or when
// transport=uring was asked for and the kernel does not offer the ring.
// `reduced_queues`: agree to FUSE_URING_REDUCED_Q when the kernel offers it with the ring.
absl::StatusOr<InitDecision> NegotiateInit(const fuse_init_in& in, Transport transport,
                                           bool writeback_cache, bool uring_module_enabled,
                                           bool reduced_queues = true);

}  // namespace ringfs::frontend
