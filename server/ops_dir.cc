// Directory operations: OPENDIR, READDIR, READDIRPLUS (RELEASEDIR and FSYNCDIR share the file
// code). A directory handle reads a snapshot of the directory when a READDIR starts at offset 0;
// entry i has cookie i + 1 ("off" of a dirent = where the next READDIR continues).
// A READDIR with fh 0 is a handle-less listing (wire_format.md, "Handle-less listings"): the
// directory is opened for it under the caller's credentials, read from the export's own cookie
// (getdents' d_off, which lseek takes back) and closed; its dirents carry those cookies.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "common/status.h"
#include "server/executor.h"
#include "server/export_fs.h"
#include "server/ops_util.h"

namespace ringfs::server {
namespace {

struct LinuxDirent64 {
  uint64_t d_ino;
  int64_t d_off;
  uint16_t d_reclen;
  uint8_t d_type;
  char d_name[];
};

absl::Status LoadSnapshot(int dir_fd, DirSnapshot& snapshot) {
  snapshot.entries.clear();
  snapshot.loaded = false;
  if (lseek(dir_fd, 0, SEEK_SET) < 0) return ErrnoError(errno, "rewind directory");
  alignas(8) char buffer[32 * 1024];
  for (;;) {
    long n = syscall(SYS_getdents64, dir_fd, buffer, sizeof(buffer));
    if (n < 0) return ErrnoError(errno, "getdents64");
    if (n == 0) break;
    for (long pos = 0; pos < n;) {
      auto* d = reinterpret_cast<LinuxDirent64*>(buffer + pos);
      snapshot.entries.push_back(DirEntry{d->d_name, d->d_ino, d->d_type});
      pos += d->d_reclen;
    }
  }
  snapshot.loaded = true;
  return absl::OkStatus();
}

bool IsDotOrDotDot(const std::string& name) { return name == "." || name == ".."; }

// Writes the dirent part (header + name + zero padding) at `out`.
void PutDirent(char* out, const DirEntry& e, uint64_t cookie) {
  fuse_dirent d{};
  d.ino = e.ino;
  d.off = cookie;
  d.namelen = static_cast<uint32_t>(e.name.size());
  d.type = e.type;
  std::memcpy(out, &d, FUSE_NAME_OFFSET);
  std::memcpy(out + FUSE_NAME_OFFSET, e.name.data(), e.name.size());
  size_t padded = FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET + e.name.size());
  std::memset(out + FUSE_NAME_OFFSET + e.name.size(), 0,
              padded - FUSE_NAME_OFFSET - e.name.size());
}

// The entry_out of one READDIRPLUS entry: looked up like LOOKUP (one more lookup on the node).
// "." and "..", and entries that vanished since the snapshot, get nodeid 0, which the kernel
// takes as "no attributes for this one". `dir_dev`: the directory's st_dev, null if unknown.
fuse_entry_out PlusEntry(const OpContext& ctx, int dir_fd, const dev_t* dir_dev,
                         const DirEntry& e) {
  fuse_entry_out out{};
  if (IsDotOrDotDot(e.name)) return out;
  // An entry whose file this table holds open (the client knows it: rm -rf's and ls -l's second
  // look, a listing after the kernel forgot what the mount kept) is counted from one stat by
  // name: held, its inode number cannot belong to another file (NodeTable::HeldNode). A name
  // that now stands for another file (renamed over, or a mount point) takes the full way.
  if (dir_dev != nullptr) {
    if (NodeRef held = ctx.client->nodes->HeldNode({*dir_dev, e.ino})) {
      struct stat st {};
      if (fstatat(dir_fd, NameBuffer(e.name).c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return out;
      if (st.st_dev == held->dev && st.st_ino == held->ino) {
        if (std::optional<EntryIds> ids = ctx.client->nodes->AddLookupOf(*held)) {
          return ToEntryOut(ids->nodeid, ids->generation, st, ctx.times);
        }
      }
    }
  }
  auto fd = LookupBeneath(dir_fd, e.name);
  if (!fd.ok()) return out;
  auto st = StatFd(fd->get());
  if (!st.ok()) return out;
  auto ids = AddNode(ctx, *std::move(fd), *st);
  if (!ids.ok()) return out;
  return ToEntryOut(ids->nodeid, ids->generation, *st, ctx.times);
}

// Fills a READDIR/READDIRPLUS body with entries until the next would not fit.
class ListingFill {
 public:
  ListingFill(const OpContext& ctx, int dir_fd, bool plus, size_t limit, ReplyBody& body)
      : ctx_(ctx), dir_fd_(dir_fd), plus_(plus), limit_(limit), body_(body) {
    // The listed fd's own st_dev, from one fstat per answer: no look-up of the directory's node.
    struct stat st {};
    if (plus_ && fstat(dir_fd_, &st) == 0) {
      dir_dev_ = st.st_dev;
      dir_dev_known_ = true;
    }
  }
  ~ListingFill() { body_.set_size(used_); }

  // The bytes `e` takes in a READDIR (`plus`: READDIRPLUS) answer.
  static size_t RecordBytes(bool plus, const DirEntry& e) {
    return FUSE_DIRENT_ALIGN((plus ? FUSE_NAME_OFFSET_DIRENTPLUS : FUSE_NAME_OFFSET) +
                             e.name.size());
  }

  // Appends `e`, after which a READDIR continues at `cookie`; false when it does not fit.
  bool Add(const DirEntry& e, uint64_t cookie) {
    const size_t len = RecordBytes(plus_, e);
    if (used_ + len > limit_) return false;  // checked before the lookup, so none is ever lost
    if (!plus_) {
      PutDirent(body_.data() + used_, e, cookie);
    } else {
      fuse_entry_out entry = PlusEntry(ctx_, dir_fd_, dir_dev_known_ ? &dir_dev_ : nullptr, e);
      std::memcpy(body_.data() + used_, &entry, sizeof(entry));
      PutDirent(body_.data() + used_ + sizeof(entry), e, cookie);
    }
    used_ += len;
    return true;
  }

 private:
  const OpContext& ctx_;
  const int dir_fd_;
  const bool plus_;
  const size_t limit_;
  ReplyBody& body_;
  dev_t dir_dev_ = 0;
  bool dir_dev_known_ = false;
  size_t used_ = 0;
};

// A handle-less listing: `node`'s entries from the export's cookie `a.offset` (0: the start).
absl::Status ListByNode(const OpContext& ctx, const ReaddirArgs& a, ReplyBody& body) {
  ASSIGN_OR_RETURN(NodeRef node, GetNode(ctx, ctx.nodeid));
  // Opened as OPENDIR would have: a caller without read permission gets EACCES here.
  ASSIGN_OR_RETURN(UniqueFd fd, OpenNode(*node, /*directory=*/true, 0));
  if (a.offset > static_cast<uint64_t>(INT64_MAX) ||
      lseek(fd.get(), static_cast<off_t>(a.offset), SEEK_SET) < 0) {
    // Not a cookie this export's directory gave out (getdents would say the same).
    return ErrnoError(a.offset > static_cast<uint64_t>(INT64_MAX) ? EINVAL : errno,
                      "seek directory to a listing cookie");
  }
  const size_t limit = std::min<size_t>(a.size, body.capacity());
  // The answer's entries are read first, looked up (READDIRPLUS) only once every getdents64 has
  // succeeded: an error after a lookup would leave it counted where the kernel never saw it.
  // What is read past the answer's end is read again by the next READDIR, from the cookie of
  // the last entry sent, so read about what fits: a getdents64 record is a few bytes smaller
  // than a READDIR one, and a READDIRPLUS one is 128 bytes larger (its entry_out), three times
  // the size for names of ~40 bytes. At least a page, far more than the longest record.
  alignas(8) char buffer[32 * 1024];
  const size_t want =
      std::clamp<size_t>(a.plus ? limit / 3 : limit + limit / 8, 4096, sizeof(buffer));
  std::vector<std::pair<DirEntry, uint64_t>> entries;  // with their cookies
  size_t bytes = 0;
  for (bool full = false; !full;) {
    const long n = syscall(SYS_getdents64, fd.get(), buffer, want);
    if (n < 0) return ErrnoError(errno, "getdents64");
    if (n == 0) break;
    for (long pos = 0; pos < n && !full;) {
      const auto* d = reinterpret_cast<const LinuxDirent64*>(buffer + pos);
      DirEntry e{d->d_name, d->d_ino, d->d_type};
      bytes += ListingFill::RecordBytes(a.plus, e);
      full = bytes > limit;
      if (!full) entries.emplace_back(std::move(e), static_cast<uint64_t>(d->d_off));
      pos += d->d_reclen;
    }
  }
  ListingFill fill(ctx, fd.get(), a.plus, limit, body);
  for (const auto& [e, cookie] : entries) fill.Add(e, cookie);
  return absl::OkStatus();
}

}  // namespace

absl::Status Executor::Run(const OpContext& ctx, const OpendirArgs&, ReplyBody& body) const {
  ASSIGN_OR_RETURN(NodeRef node, GetNode(ctx, ctx.nodeid));
  RETURN_IF_ERROR(ctx.client->handles.CheckRoom());
  ASSIGN_OR_RETURN(UniqueFd fd, OpenNode(*node, /*directory=*/true, 0));
  fuse_open_out out{};
  out.fh = ctx.client->handles.Add(std::make_shared<Handle>(std::move(fd), node->id, true));
  body.Put(out);
  return absl::OkStatus();
}

absl::Status Executor::Run(const OpContext& ctx, const ReaddirArgs& a, ReplyBody& body) const {
  if (a.fh == 0) return ListByNode(ctx, a, body);  // no handle is ever 0 (HandleTable)
  ASSIGN_OR_RETURN(HandleRef handle, GetHandle(ctx, a.fh));
  if (!handle->is_dir) return ErrnoError(ENOTDIR, "readdir on a file handle");
  absl::MutexLock lock(&handle->mu);
  DirSnapshot& snapshot = handle->dir;
  if (a.offset == 0 || !snapshot.loaded) RETURN_IF_ERROR(LoadSnapshot(handle->fd.get(), snapshot));
  ListingFill fill(ctx, handle->fd.get(), a.plus, std::min<size_t>(a.size, body.capacity()), body);
  for (uint64_t i = a.offset; i < snapshot.entries.size(); ++i) {
    if (!fill.Add(snapshot.entries[i], /*cookie=*/i + 1)) break;
  }
  return absl::OkStatus();
}

}  // namespace ringfs::server
