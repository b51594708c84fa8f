// Conversions from the host's struct stat / statvfs to the FUSE reply structures.
// Pure functions; callable from any thread.
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cstdint>

#include "proto/fuse_abi.h"

namespace ringfs::server {

// Cache lifetimes the client asked for in its handshake (0 there means 1 s).
struct CacheTimes {
  uint64_t entry_ns = 1'000'000'000;
  uint64_t attr_ns = 1'000'000'000;
  // How long the client may remember that a name does not exist (a LOOKUP answered with node
  // id 0 instead of ENOENT). Non-zero only for clients that get invalidations pushed: a create
  // through another client then removes the negative entry (coherence.h).
  uint64_t negative_entry_ns = 0;
  static CacheTimes FromHandshake(uint64_t entry_ns, uint64_t attr_ns);
};

fuse_attr ToFuseAttr(const struct stat& st);
fuse_attr_out ToAttrOut(const struct stat& st, const CacheTimes& times);
// `generation`: the file's (file_generation.h).
fuse_entry_out ToEntryOut(uint64_t nodeid, uint64_t generation, const struct stat& st,
                          const CacheTimes& times);
fuse_kstatfs ToKstatfs(const struct statvfs& st);

}  // namespace ringfs::server
