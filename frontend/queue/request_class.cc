#include "frontend/queue/request_class.h"

#include <fcntl.h>

#include <cstring>

#include "proto/fuse_abi.h"

namespace ringfs::frontend::queue {
namespace {

using RuleMatcher = bool (*)(const void* op_in, size_t op_in_size, const ClassifierHints& hints);

struct BackgroundRule {
  uint32_t opcode;
  RuleMatcher matches;
};

bool IsWritebackWrite(const void* op_in, size_t op_in_size, const ClassifierHints& hints) {
  if (hints.write_is_background) return true;
  if (op_in_size < sizeof(fuse_write_in)) return false;
  fuse_write_in write;
  std::memcpy(&write, op_in, sizeof(write));  // op_in may be unaligned
  return (write.write_flags & FUSE_WRITE_CACHE) != 0;
}

bool IsHintedBackgroundRead(const void*, size_t, const ClassifierHints& hints) {
  return hints.read_is_background;
}

bool Always(const void*, size_t, const ClassifierHints&) { return true; }

// Everything not listed here is foreground: some task is blocked in a syscall waiting for it.
constexpr BackgroundRule kBackgroundRules[] = {
    // Writeback of dirty page-cache pages (fuse_writepage/writepages): the kernel sets
    // FUSE_WRITE_CACHE and sends them with fuse_simple_background. Async direct-I/O WRITEs are
    // background too but unmarked, hence the hint.
    {FUSE_WRITE, IsWritebackWrite},
    // Readahead and async direct-I/O READs go out with fuse_simple_background, but read_flags
    // carries no mark of it (only FUSE_READ_LOCKOWNER); the caller decides through the hint.
    {FUSE_READ, IsHintedBackgroundRead},
    // The last close sends RELEASE via fuse_file_put(sync=false) -> fuse_simple_background on
    // every non-fuseblk mount (ringfs is not fuseblk); close(2) has already returned.
    {FUSE_RELEASE, Always},
    // Same path as RELEASE for directories.
    {FUSE_RELEASEDIR, Always},
};

}  // namespace

const char* RequestClassName(RequestClass request_class) {
  return request_class == RequestClass::kBackground ? "background" : "foreground";
}

RequestClass ClassifyRequest(uint32_t opcode, const void* op_in, size_t op_in_size,
                             const ClassifierHints& hints) {
  for (const BackgroundRule& rule : kBackgroundRules) {
    if (rule.opcode == opcode && rule.matches(op_in, op_in_size, hints)) {
      return RequestClass::kBackground;
    }
  }
  return RequestClass::kForeground;
}

RequestClass ClassifyKernelRequest(uint32_t opcode, const void* op_in, size_t op_in_size,
                                   bool async_dio) {
  constexpr uint32_t kPageSize = 4096;
  ClassifierHints hints;
  if (opcode == FUSE_READ && op_in_size >= sizeof(fuse_read_in)) {
    fuse_read_in read;
    std::memcpy(&read, op_in, sizeof(read));
    const bool direct = (read.flags & O_DIRECT) != 0;
    hints.read_is_background = direct ? async_dio : read.size > kPageSize;
  } else if (opcode == FUSE_WRITE && op_in_size >= sizeof(fuse_write_in)) {
    fuse_write_in write;
    std::memcpy(&write, op_in, sizeof(write));
    hints.write_is_background = async_dio && (write.flags & O_DIRECT) != 0;
  }
  return ClassifyRequest(opcode, op_in, op_in_size, hints);
}

}  // namespace ringfs::frontend::queue
