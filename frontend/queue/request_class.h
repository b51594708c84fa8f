// Tells background requests (the kernel sent them asynchronously; no task waits on each one)
// from foreground ones, so workers can limit and place them separately. Pure functions; any
// thread may call them. The rules are a table in request_class.cc, one reason per rule.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringfs::frontend::queue {

enum class RequestClass { kForeground, kBackground };

const char* RequestClassName(RequestClass request_class);  // "foreground" / "background"

// What the frontend knows about a request beyond its bytes. The kernel marks some async
// requests in the op struct (writeback WRITE); others (readahead READ, async direct-I/O READ and
// WRITE) carry no mark, so the caller fills these from whatever evidence it has.
struct ClassifierHints {
  bool read_is_background = false;
  bool write_is_background = false;
};

// `op_in` is the opcode's argument struct (the ring entry's op_in, or what follows
// fuse_in_header on /dev/fuse), `op_in_size` its valid length. A struct too short to hold the
// field a rule needs does not match that rule (the dispatcher rejects such requests anyway).
RequestClass ClassifyRequest(uint32_t opcode, const void* op_in, size_t op_in_size,
                             const ClassifierHints& hints = {});

}  // namespace ringfs::frontend::queue
