// The generation a FUSE entry carries (fuse_entry_out.generation): together with the node id it
// must name one file for the file system's whole life, so a file whose inode number was reused
// shows a new generation. It is derived from the file itself, never from server state, so one
// file has the same generation across server restarts and across the servers of one export.
// The functions below define that value on the wire: changing them changes every file's
// generation as clients see it. Stateless; callable from any thread.
#pragma once

#include <sys/stat.h>

#include <cstdint>

#include "server/inode_handle.h"

namespace ringfs::server {

// A non-zero 64-bit hash of the kernel file handle (type and bytes). Handles include the inode's
// own generation, so a reused inode number gives another value.
uint64_t HandleGeneration(const InodeHandle& handle);

// The generation of the file behind `fd` (O_PATH included) with stat `st`: HandleGeneration of
// its handle when the filesystem gives one (name_to_handle_at needs no capability, so this also
// holds where handles cannot be reopened), else GenerationWithoutHandle.
uint64_t GenerationOf(int fd, const struct stat& st);

// For a file without a handle: a non-zero hash of the inode number and birth time (statx btime),
// the closest thing to a generation such a filesystem exposes; where there is no birth time
// either, of the inode number alone (then a reused number cannot be told apart, as with no
// generation at all).
uint64_t GenerationWithoutHandle(int fd, const struct stat& st);

}  // namespace ringfs::server
