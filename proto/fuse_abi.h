// The FUSE kernel ABI as ringfs speaks it: protocol 7.45 (Linux 6.18).
// Debian 12's <linux/fuse.h> (linux-libc-dev 6.1) stops at 7.38; this header adds what came after
// that ringfs relies on (FUSE-over-io_uring, COPY_FILE_RANGE_64, STATX, the 7.43 init_out layout).
// The layouts are checked by fuse_abi_test.cc; wire frames between frontend and server use them too.
#pragma once

#include <linux/fuse.h>

#include <cstddef>
#include <cstdint>

namespace ringfs::fuse {

inline constexpr uint32_t kKernelMajor = 7;
// Highest minor we implement; the kernel and we agree on min(kernel, ours).
inline constexpr uint32_t kKernelMinor = 45;
inline constexpr uint64_t kRootNodeId = FUSE_ROOT_ID;

// init flags beyond the 7.38 header (bits 32..63 travel in flags2).
inline constexpr uint64_t kInitDirectIoAllowMmap = 1ULL << 36;
inline constexpr uint64_t kInitPassthrough = 1ULL << 37;
inline constexpr uint64_t kInitNoExportSupport = 1ULL << 38;
inline constexpr uint64_t kInitHasResend = 1ULL << 39;
inline constexpr uint64_t kInitAllowIdmap = 1ULL << 40;
inline constexpr uint64_t kInitOverIoUring = 1ULL << 41;
inline constexpr uint64_t kInitRequestTimeout = 1ULL << 42;
// From the reduced-queues series (FUSE_URING_REDUCED_Q, posted 2025-2026, not in mainline as of
// Linux 6.18): the ring is ready with fewer queues than possible CPUs. The bit is unassigned in
// mainline and other proposals have claimed it too (kernel-fuse-uring.md §1).
inline constexpr uint64_t kInitUringReducedQ = 1ULL << 43;

// Opcodes newer than the 7.38 header.
inline constexpr uint32_t kOpStatx = 52;
inline constexpr uint32_t kOpCopyFileRange64 = 53;

// fuse_init_out as of 7.43: the tail of the 7.38 `unused` array became named fields.
struct InitOut {
  uint32_t major;
  uint32_t minor;
  uint32_t max_readahead;
  uint32_t flags;
  uint16_t max_background;
  uint16_t congestion_threshold;
  uint32_t max_write;
  uint32_t time_gran;
  uint16_t max_pages;
  uint16_t map_alignment;
  uint32_t flags2;
  uint32_t max_stack_depth;
  uint16_t request_timeout;
  uint16_t unused[11];
};
static_assert(sizeof(InitOut) == 64);
static_assert(sizeof(InitOut) == sizeof(fuse_init_out));

struct CopyFileRangeOut {  // reply of COPY_FILE_RANGE_64 (7.45)
  uint64_t bytes_copied;
};

// ---- FUSE-over-io_uring (7.42) ----
inline constexpr size_t kUringInOutHeaderSize = 128;
inline constexpr size_t kUringOpInOutSize = 128;

enum UringCmd : uint32_t {
  kUringCmdInvalid = 0,
  kUringCmdRegister = 1,
  kUringCmdCommitAndFetch = 2,
};

struct UringEntInOut {
  uint64_t flags;
  // The kernel puts the request's unique here; the commit names it again.
  uint64_t commit_id;
  // Bytes of payload: written by the kernel for requests, by the daemon for replies.
  uint32_t payload_sz;
  uint32_t padding;
  uint64_t reserved;
};
static_assert(sizeof(UringEntInOut) == 32);

// The header buffer of a ring entry (iov[0] at REGISTER).
struct UringReqHeader {
  char in_out[kUringInOutHeaderSize];  // fuse_in_header in, fuse_out_header back
  char op_in[kUringOpInOutSize];       // the opcode's fixed-size argument struct
  UringEntInOut ring_ent_in_out;
};
static_assert(sizeof(UringReqHeader) == 288);
static_assert(offsetof(UringReqHeader, ring_ent_in_out) == 256);

// Lives in the 80-byte command area of a 128-byte SQE.
struct UringCmdReq {
  uint64_t flags;
  uint64_t commit_id;
  uint16_t qid;
  uint8_t padding[6];
};
static_assert(sizeof(UringCmdReq) == 24);

// Minimum payload buffer the kernel accepts: max(8192, max_write, max_pages * 4096).
inline constexpr size_t kMinReadBuffer = 8192;

}  // namespace ringfs::fuse
