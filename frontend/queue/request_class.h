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

// The classification ringfs-mount uses, for the features it negotiates (FUSE_ASYNC_READ, and
// FUSE_ASYNC_DIO when `async_dio`): fills the hints from the request itself.
//  - A READ or WRITE on a file opened O_DIRECT is background with `async_dio`: the kernel then
//    submits every direct-I/O chunk through fuse_async_req_send -> fuse_simple_background, also
//    for synchronous callers (they wait on the fuse_io_priv, not on the request). Without it (a
//    hard mount) they are ordinary requests their caller waits in.
//  - A buffered READ larger than one page is background: readahead (fuse_readahead ->
//    fuse_send_readpages with async_read) is the only buffered path that asks for more than a
//    page; a synchronous fuse_read_folio miss asks for exactly one page.
// Checked on this kernel: with max_background=1 the daemon never sees more requests of this
// class at once than the kernel's limit allows (1 plus one per queue) — see the README.
RequestClass ClassifyKernelRequest(uint32_t opcode, const void* op_in, size_t op_in_size,
                                   bool async_dio);

}  // namespace ringfs::frontend::queue
