// What ringfs-mount changes in the server's answer to OPEN and CREATE before the kernel sees it:
// a file opened write-only gets FOPEN_DIRECT_IO, unless the mount caches writes
// (writeback_cache); a file opened read-only gets FOPEN_NOFLUSH.
// Why: without a write cache the kernel writes through its page cache page by page, and a
// write() that starts inside a page it has not read (the second 10 KiB record tar writes, say)
// is cut there: the rest of that page goes to the server as a WRITE of its own. tar sent 2.65
// WRITEs per extracted file for 1.93 write() calls. With FOPEN_DIRECT_IO each write() is one
// WRITE (up to max_write) and nothing is copied into the page cache.
// Why only write-only opens: such a file cannot be read or mapped through that descriptor, so
// nothing that relies on its pages is lost; readers through other descriptors keep their cache,
// and the kernel drops the pages a direct write covers before it sends it (fuse_direct_io). Files
// opened for reading and writing keep the page cache, as before.
// Why FOPEN_NOFLUSH on read-only opens: a FLUSH is what a close waits on for the writes through
// its descriptor (async_write answers writes before the server ran them; FLUSH waits for them).
// Since the kernel keeps sending FLUSH for that, every close of a file opened for reading cost a
// ring round trip for nothing: such a descriptor writes nothing, dirties no page (a shared
// writable mapping needs write access) and holds no lock the server knows of (no
// FUSE_POSIX_LOCKS). The kernel then skips the whole flush of that close, which only ever wrote
// back what other descriptors had dirtied. Opens for writing keep it, whatever their flags now:
// fcntl can clear O_APPEND or O_DIRECT later, never the access mode.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringfs::frontend {

// `op_in`: the request's argument struct (fuse_open_in / fuse_create_in), `body`: the server's
// successful answer (fuse_open_out / fuse_entry_out + fuse_open_out), changed in place. Other
// opcodes, short structs and short bodies are left alone.
void AdjustOpenReply(uint32_t opcode, const void* op_in, size_t op_in_size, char* body,
                     size_t body_size);

// What ringfs-mount changes in an OPEN or CREATE before the server opens the file, when the
// kernel caches writes (writeback_cache): it asks for reading too, and drops O_APPEND. Why:
// with that cache the kernel reads a page before it writes part of it, whatever the
// descriptor's access mode (a write-only fd answered those reads EBADF: `echo >>` failed), and
// it places appended bytes itself at the end it knows and writes pages back at explicit
// offsets; an O_APPEND fd at the server put every written-back page at the file's end again
// (each append copied the bytes before it). libfuse's passthrough examples do the same. A file
// the caller may write but not read then cannot be opened for writing (EACCES). `op_in`: the
// request's fuse_open_in / fuse_create_in, changed in place; other opcodes are left alone.
void AdjustOpenRequestForWriteback(uint32_t opcode, void* op_in, size_t op_in_size);

}  // namespace ringfs::frontend
