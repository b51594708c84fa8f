#include "server/attr.h"

namespace ringfs::server {
namespace {
constexpr uint64_t kNsPerSec = 1'000'000'000;
}  // namespace

CacheTimes CacheTimes::FromHandshake(uint64_t entry_ns, uint64_t attr_ns) {
  CacheTimes times;
  if (entry_ns != 0) times.entry_ns = entry_ns;
  if (attr_ns != 0) times.attr_ns = attr_ns;
  return times;
}

fuse_attr ToFuseAttr(const struct stat& st) {
  fuse_attr attr{};
  attr.ino = st.st_ino;
  attr.size = static_cast<uint64_t>(st.st_size);
  attr.blocks = static_cast<uint64_t>(st.st_blocks);
  attr.atime = static_cast<uint64_t>(st.st_atim.tv_sec);
  attr.mtime = static_cast<uint64_t>(st.st_mtim.tv_sec);
  attr.ctime = static_cast<uint64_t>(st.st_ctim.tv_sec);
  attr.atimensec = static_cast<uint32_t>(st.st_atim.tv_nsec);
  attr.mtimensec = static_cast<uint32_t>(st.st_mtim.tv_nsec);
  attr.ctimensec = static_cast<uint32_t>(st.st_ctim.tv_nsec);
  attr.mode = st.st_mode;
  attr.nlink = static_cast<uint32_t>(st.st_nlink);
  attr.uid = st.st_uid;
  attr.gid = st.st_gid;
  attr.rdev = static_cast<uint32_t>(st.st_rdev);
  attr.blksize = static_cast<uint32_t>(st.st_blksize);
  attr.flags = 0;
  return attr;
}

fuse_attr_out ToAttrOut(const struct stat& st, const CacheTimes& times) {
  fuse_attr_out out{};
  out.attr_valid = times.attr_ns / kNsPerSec;
  out.attr_valid_nsec = static_cast<uint32_t>(times.attr_ns % kNsPerSec);
  out.attr = ToFuseAttr(st);
  return out;
}

fuse_entry_out ToEntryOut(uint64_t nodeid, uint64_t generation, const struct stat& st,
                          const CacheTimes& times) {
  fuse_entry_out out{};
  out.nodeid = nodeid;
  out.generation = generation;
  out.entry_valid = times.entry_ns / kNsPerSec;
  out.entry_valid_nsec = static_cast<uint32_t>(times.entry_ns % kNsPerSec);
  out.attr_valid = times.attr_ns / kNsPerSec;
  out.attr_valid_nsec = static_cast<uint32_t>(times.attr_ns % kNsPerSec);
  out.attr = ToFuseAttr(st);
  return out;
}

fuse_kstatfs ToKstatfs(const struct statvfs& st) {
  fuse_kstatfs out{};
  out.blocks = st.f_blocks;
  out.bfree = st.f_bfree;
  out.bavail = st.f_bavail;
  out.files = st.f_files;
  out.ffree = st.f_ffree;
  out.bsize = static_cast<uint32_t>(st.f_bsize);
  out.namelen = static_cast<uint32_t>(st.f_namemax);
  out.frsize = static_cast<uint32_t>(st.f_frsize);
  return out;
}

}  // namespace ringfs::server
