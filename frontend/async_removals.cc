#include "frontend/async_removals.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <tuple>

namespace ringfs::frontend {

namespace {

// By ctime, then by the ticket (ctime can be coarser than two changes apart).
bool Older(const fuse_attr& a, uint64_t a_ticket, const fuse_attr& b, uint64_t b_ticket) {
  return std::tie(a.ctime, a.ctimensec, a_ticket) < std::tie(b.ctime, b.ctimensec, b_ticket);
}

}  // namespace

void AsyncRemovals::Learn(uint64_t dir, const fuse_attr_out& attr, uint64_t ticket,
                          uint64_t now_ns) {
  if (!early_) return;  // only early answers use directories' attributes
  absl::MutexLock lock(&mu_);
  LearnLocked(dir, attr, ticket, now_ns);
}

void AsyncRemovals::LearnLocked(uint64_t dir, const fuse_attr_out& attr, uint64_t ticket,
                                uint64_t now_ns) {
  if (ticket <= pruned_floor_) return;
  Dir& d = FindOrAddLocked(dir);
  if (ticket <= d.floor || d.changes > 0) return;
  if (d.learned_ns != 0 && Older(attr.attr, ticket, d.attr.attr, d.ticket)) return;
  d.attr = attr;
  d.ticket = ticket;
  d.learned_ns = now_ns;
}

void AsyncRemovals::LearnFile(uint64_t node, const fuse_attr_out& attr, uint64_t ticket,
                              uint64_t now_ns) {
  if (!files_ || !S_ISREG(attr.attr.mode)) return;
  absl::MutexLock lock(&mu_);
  if (ticket <= files_floor_) return;
  LearnLocked(node, attr, ticket, now_ns);
}

void AsyncRemovals::Wrote(uint64_t node, uint64_t end) {
  if (!files_) return;
  absl::MutexLock lock(&mu_);
  // A GETATTR or LOOKUP sent before the write may have run before it and be answered after it:
  // its size is too small, and given to the kernel it would cut i_size (and its pages).
  const uint64_t now = tickets_.load(std::memory_order_relaxed);
  auto it = dirs_.find(node);
  if (it == dirs_.end()) {
    // Not known yet: a floor for it alone, unless that would prune the directories' attributes
    // (a floor for every file then).
    if (dirs_.size() >= kMaxDirs) {
      files_floor_ = now;
      return;
    }
    it = dirs_.emplace(node, Dir{}).first;
  }
  Dir& d = it->second;
  d.floor = now;
  if (d.learned_ns != 0 && end > d.attr.attr.size) d.attr.attr.size = end;
}

AsyncRemovals::Dir& AsyncRemovals::FindOrAddLocked(uint64_t dir) {
  auto it = dirs_.find(dir);
  if (it != dirs_.end()) return it->second;
  // Not in the map: its floor, if it had one, is below pruned_floor_, which the caller checked.
  if (dirs_.size() >= kMaxDirs) PruneLocked();
  return dirs_[dir];
}

void AsyncRemovals::PruneLocked() {
  // All that owe nothing: the next kMaxDirs directories learned pay for the next scan.
  for (auto it = dirs_.begin(); it != dirs_.end();) {
    const Dir& d = it->second;
    // A SETATTR in flight, or one that may still run, must still be known when it ends.
    if (d.outstanding == 0 && d.deferred_forgets == 0 && d.sync_setattrs == 0 && !d.unsettled) {
      dirs_.erase(it++);
    } else {
      ++it;
    }
  }
  pruned_floor_ = tickets_.load(std::memory_order_relaxed);
}

void AsyncRemovals::UnlearnLocked(Dir& d) {
  d.learned_ns = 0;
  d.floor = tickets_.load(std::memory_order_relaxed);
}

void AsyncRemovals::Forget(uint64_t dir) {
  absl::MutexLock lock(&mu_);
  // Every ticket given so far: a request sent before now may have run before the change.
  Dir& d = FindOrAddLocked(dir);
  UnlearnLocked(d);
}

void AsyncRemovals::SetattrSent(uint64_t node) {
  absl::MutexLock lock(&mu_);
  Dir& d = FindOrAddLocked(node);
  UnlearnLocked(d);
  // Two at once run at the server in either order: neither answer tells what it holds after.
  if (++d.sync_setattrs > 1) d.overlapped = true;
}

void AsyncRemovals::LearnSetattr(uint64_t node, const fuse_attr_out& attr, uint64_t ticket,
                                 uint64_t now_ns) {
  if (!files_ || !S_ISREG(attr.attr.mode)) return;
  absl::MutexLock lock(&mu_);
  auto it = dirs_.find(node);
  if (it == dirs_.end() || ticket <= files_floor_ || ticket <= pruned_floor_) return;
  Dir& d = it->second;
  if (d.sync_setattrs != 1 || d.overlapped || d.unsettled || d.changes > 0 || ticket <= d.floor) {
    return;
  }
  // Taken whatever its change time: a GETATTR sent after the SETATTR may have run before it at
  // the server and carry the same (coarse) ctime. Answers to requests sent before now bring
  // nothing any more.
  d.attr = attr;
  d.ticket = ticket;
  d.learned_ns = now_ns;
  d.floor = tickets_.load(std::memory_order_relaxed);
}

void AsyncRemovals::SetattrEnded(uint64_t node, bool may_still_run) {
  absl::MutexLock lock(&mu_);
  auto it = dirs_.find(node);
  if (it == dirs_.end()) return;
  Dir& d = it->second;
  if (may_still_run) {
    // Ended without its answer after it reached the server: it may run there at any moment.
    d.unsettled = true;
    UnlearnLocked(d);
  }
  if (d.sync_setattrs > 0 && --d.sync_setattrs == 0) d.overlapped = false;
}

void AsyncRemovals::ForgetAll() {
  absl::MutexLock lock(&mu_);
  const uint64_t floor = tickets_.load(std::memory_order_relaxed);
  for (auto& [dir, d] : dirs_) {
    d.learned_ns = 0;
    d.floor = floor;
  }
  pruned_floor_ = floor;  // for directories not in the map too
}

void AsyncRemovals::ForgetFiles() {
  if (!files_) return;
  absl::MutexLock lock(&mu_);
  // BeginSetattr compares it with the ticket the attributes came with; no scan.
  files_floor_ = tickets_.load(std::memory_order_relaxed);
}

uint64_t AsyncRemovals::Begin(uint64_t dir, uint64_t now_ns) {
  if (!unlinks_) return 0;
  absl::MutexLock lock(&mu_);
  auto it = dirs_.find(dir);
  // learned_ns may be a little after now_ns (another worker's clock read): fresh.
  if (it == dirs_.end() || it->second.learned_ns == 0 ||
      it->second.learned_ns + kFreshNs < now_ns || it->second.outstanding >= kMaxPerDir) {
    return 0;
  }
  ++it->second.outstanding;
  const uint64_t seq = StartLocked();
  last_started_.store(seq, std::memory_order_release);
  started_.fetch_add(1, std::memory_order_relaxed);
  return seq;
}

uint64_t AsyncRemovals::StartLocked() {
  const uint64_t seq = ++next_seq_;
  outstanding_.insert(seq);
  PublishLowestLocked();
  return seq;
}

std::optional<AsyncRemovals::EarlySetattr> AsyncRemovals::BeginSetattr(uint64_t node,
                                                                       const fuse_setattr_in& in,
                                                                       uint64_t now_ns,
                                                                       const timespec& now_real) {
  if (!setattrs_ || (in.valid & ~kEarlySetattrValid) != 0) return std::nullopt;
  absl::MutexLock lock(&mu_);
  auto it = dirs_.find(node);
  if (it == dirs_.end()) return std::nullopt;
  Dir& d = it->second;
  fuse_attr& attr = d.attr.attr;
  if (d.learned_ns == 0 || d.learned_ns + kFreshNs < now_ns || !S_ISREG(attr.mode) ||
      d.ticket <= files_floor_ || d.outstanding >= kMaxPerDir) {
    return std::nullopt;
  }
  // The server's own rules decide these: a chown clears setuid/setgid bits, a chmod by a
  // caller outside the group drops setgid.
  if ((attr.mode & (S_ISUID | S_ISGID)) != 0) return std::nullopt;
  if ((in.valid & FATTR_MODE) != 0 && (in.mode & (S_ISUID | S_ISGID)) != 0) return std::nullopt;
  EarlySetattr early;
  early.after = d.changes > 0 ? d.last_change : 0;
  if ((in.valid & FATTR_MODE) != 0) attr.mode = (attr.mode & S_IFMT) | (in.mode & 07777);
  if ((in.valid & FATTR_UID) != 0) attr.uid = in.uid;
  if ((in.valid & FATTR_GID) != 0) attr.gid = in.gid;
  const auto now_sec = static_cast<uint64_t>(now_real.tv_sec);
  const auto now_nsec = static_cast<uint32_t>(now_real.tv_nsec);
  if ((in.valid & FATTR_ATIME_NOW) != 0) {
    attr.atime = now_sec;
    attr.atimensec = now_nsec;
  } else if ((in.valid & FATTR_ATIME) != 0) {
    attr.atime = in.atime;
    attr.atimensec = in.atimensec;
  }
  if ((in.valid & FATTR_MTIME_NOW) != 0) {
    attr.mtime = now_sec;
    attr.mtimensec = now_nsec;
  } else if ((in.valid & FATTR_MTIME) != 0) {
    attr.mtime = in.mtime;
    attr.mtimensec = in.mtimensec;
  }
  // Kept for ordering against the server's answers (Learn compares ctimes); the kernel is
  // given the time of the change.
  early.answer = d.attr;
  early.answer.attr.ctime = now_sec;
  early.answer.attr.ctimensec = now_nsec;
  early.answer.attr_valid = 0;
  early.answer.attr_valid_nsec = 0;
  ++d.outstanding;
  ++d.changes;
  ++d.setattrs;
  early.seq = StartLocked();
  d.last_change = d.last_setattr = early.seq;
  last_change_.store(early.seq, std::memory_order_release);
  setattrs_started_.fetch_add(1, std::memory_order_relaxed);
  return early;
}

std::optional<fuse_attr_out> AsyncRemovals::Unchanged(uint64_t node, const fuse_setattr_in& in,
                                                      uint64_t now_ns) {
  constexpr uint32_t kOwnerAndMode = FATTR_MODE | FATTR_UID | FATTR_GID;
  // A chown carries FATTR_KILL_SUIDGID (a no-op without setuid/setgid bits); FATTR_FH and
  // FATTR_LOCKOWNER only say through which open file.
  constexpr uint32_t kAllowed = kOwnerAndMode | FATTR_FH | FATTR_LOCKOWNER | FATTR_KILL_SUIDGID;
  if (!noop_setattrs_ || (in.valid & ~kAllowed) != 0 || (in.valid & kOwnerAndMode) == 0) {
    return std::nullopt;
  }
  absl::MutexLock lock(&mu_);
  auto it = dirs_.find(node);
  if (it == dirs_.end()) return std::nullopt;
  const Dir& d = it->second;
  const fuse_attr& attr = d.attr.attr;
  if (d.learned_ns == 0 || d.learned_ns + kFreshNs < now_ns || !S_ISREG(attr.mode) ||
      d.ticket <= files_floor_ || d.changes > 0 || d.sync_setattrs > 0 || d.unsettled ||
      (attr.mode & (S_ISUID | S_ISGID)) != 0 || !noop_safe_.load(std::memory_order_relaxed)) {
    return std::nullopt;
  }
  if (((in.valid & FATTR_MODE) != 0 && (in.mode & 07777) != (attr.mode & 07777)) ||
      ((in.valid & FATTR_UID) != 0 && in.uid != attr.uid) ||
      ((in.valid & FATTR_GID) != 0 && in.gid != attr.gid)) {
    return std::nullopt;
  }
  noop_setattrs_answered_.fetch_add(1, std::memory_order_relaxed);
  fuse_attr_out out = d.attr;
  out.attr_valid = 0;
  out.attr_valid_nsec = 0;
  return out;
}

uint64_t AsyncRemovals::EndSetattr(uint64_t seq, uint64_t node, const fuse_attr_out* attr,
                                   uint64_t ticket, uint64_t now_ns) {
  absl::MutexLock lock(&mu_);
  auto it = dirs_.find(node);
  if (it != dirs_.end()) {
    Dir& d = it->second;
    if (d.setattrs > 0) --d.setattrs;
    if (d.changes > 0) --d.changes;
    if (attr == nullptr || ticket <= files_floor_ || ticket <= d.floor) {
      // What the server holds is not known (a failure), or its answer may be older than an
      // unlink, rename, push or a write answered beside it since: nothing is answered from
      // these any more.
      UnlearnLocked(d);
    } else if (d.changes == 0 && d.learned_ns != 0) {
      // The server's own, with every early change of this node in them (each waited for the
      // one before). Its times may differ from those answered (ctime is the server's).
      d.attr = *attr;
      d.ticket = ticket;
      d.learned_ns = now_ns;
    }
  }
  return EndLocked(seq, node);
}

uint64_t AsyncRemovals::NodeGate(uint64_t node) const {
  if ((!setattrs_ && !writes_) ||
      lowest_outstanding_.load(std::memory_order_acquire) == UINT64_MAX) {
    return 0;
  }
  absl::MutexLock lock(&mu_);
  auto it = dirs_.find(node);
  return it == dirs_.end() || it->second.changes == 0 ? 0 : it->second.last_change;
}

std::optional<AsyncRemovals::EarlyWrite> AsyncRemovals::BeginWrite(uint64_t node, uint64_t fh,
                                                                   uint64_t offset, uint32_t size) {
  if (!writes_) return std::nullopt;
  absl::MutexLock lock(&mu_);
  if (write_bytes_ + size > kWriteBudget) return std::nullopt;
  auto file = open_files_.find(fh);
  if (file != open_files_.end() && (file->second.error != 0 || file->second.released)) {
    return std::nullopt;
  }
  Dir& d = FindOrAddLocked(node);
  if (d.outstanding >= kMaxPerDir) return std::nullopt;
  const uint64_t end = offset + size;
  EarlyWrite early;
  // A time set before it must not be overwritten by its mtime, a mode by its setuid/setgid
  // clearing; two writes of the same bytes must land in the order they were answered. Writes
  // side by side (a file written front to back) run at the server in any order.
  if (d.setattrs > 0) early.gate = d.last_setattr;
  if (d.writes > 0 && offset < d.write_hi && end > d.write_lo) {
    early.gate = std::max(early.gate, d.last_write);
  }
  d.write_lo = d.writes > 0 ? std::min(d.write_lo, offset) : offset;
  d.write_hi = d.writes > 0 ? std::max(d.write_hi, end) : end;
  ++d.outstanding;
  ++d.changes;
  ++d.writes;
  early.seq = StartLocked();
  d.last_change = d.last_write = early.seq;
  OpenFile& f = open_files_[fh];
  ++f.writes;
  f.last_write = early.seq;
  last_change_.store(early.seq, std::memory_order_release);
  write_bytes_ += size;
  writes_started_.fetch_add(1, std::memory_order_relaxed);
  // As Wrote: answers to requests sent before now may have run before it.
  d.floor = tickets_.load(std::memory_order_relaxed);
  if (d.learned_ns != 0 && end > d.attr.attr.size) d.attr.attr.size = end;
  return early;
}

uint64_t AsyncRemovals::EndWrite(uint64_t seq, uint64_t node, uint64_t fh, uint32_t size,
                                 int error) {
  absl::MutexLock lock(&mu_);
  write_bytes_ -= std::min<uint64_t>(write_bytes_, size);
  auto it = dirs_.find(node);
  if (it != dirs_.end()) {  // never pruned while outstanding
    Dir& d = it->second;
    if (d.writes > 0) --d.writes;
    if (d.changes > 0) --d.changes;
    // A GETATTR or LOOKUP that ran at the server before the write may be answered after this,
    // with the size from before it.
    d.floor = tickets_.load(std::memory_order_relaxed);
    // The size answered may be more than the server holds.
    if (error != 0) d.learned_ns = 0;
  }
  if (error != 0) writes_failed_.fetch_add(1, std::memory_order_relaxed);
  auto file = open_files_.find(fh);
  if (file != open_files_.end()) {
    OpenFile& f = file->second;
    if (f.writes > 0) --f.writes;
    if (error != 0 && f.error == 0 && !f.released) {
      f.error = error;
      errors_held_.store(++errors_held_locked_, std::memory_order_release);
    }
    if (f.writes == 0 && f.error == 0) open_files_.erase(file);
  }
  return EndLocked(seq, node);
}

uint64_t AsyncRemovals::WriteGate(uint64_t fh) const {
  if (!writes_ || lowest_outstanding_.load(std::memory_order_acquire) == UINT64_MAX) return 0;
  absl::MutexLock lock(&mu_);
  auto it = open_files_.find(fh);
  return it == open_files_.end() || it->second.writes == 0 ? 0 : it->second.last_write;
}

int AsyncRemovals::TakeWriteError(uint64_t fh) {
  if (errors_held_.load(std::memory_order_acquire) == 0) return 0;
  absl::MutexLock lock(&mu_);
  auto it = open_files_.find(fh);
  if (it == open_files_.end() || it->second.error == 0) return 0;
  const int error = it->second.error;
  ClearErrorLocked(fh, /*released=*/false);
  return error;
}

void AsyncRemovals::Released(uint64_t fh) {
  // An open file is only held with writes outstanding or an error: no lock for every close.
  // In this order: EndWrite stores an error before the end of the last write outstanding, so
  // once that end is seen, so is the error.
  if (!writes_) return;
  if (lowest_outstanding_.load(std::memory_order_acquire) == UINT64_MAX &&
      errors_held_.load(std::memory_order_acquire) == 0) {
    return;
  }
  absl::MutexLock lock(&mu_);
  if (open_files_.contains(fh)) ClearErrorLocked(fh, /*released=*/true);
}

void AsyncRemovals::ClearErrorLocked(uint64_t fh, bool released) {
  OpenFile& f = open_files_[fh];
  if (f.error != 0) errors_held_.store(--errors_held_locked_, std::memory_order_release);
  f.error = 0;
  if (f.writes == 0) {
    open_files_.erase(fh);
  } else if (released) {
    f.released = true;  // writes still owed: counted until they end, their errors dropped
  }
}

void AsyncRemovals::WakeAtNextEnd(int fd) {
  absl::MutexLock lock(&mu_);
  wake_.insert(fd);
}

void AsyncRemovals::Unregister(int fd) {
  absl::MutexLock lock(&mu_);
  wake_.erase(fd);
}

uint64_t AsyncRemovals::End(uint64_t seq, uint64_t dir) {
  absl::MutexLock lock(&mu_);
  return EndLocked(seq, dir);
}

uint64_t AsyncRemovals::EndLocked(uint64_t seq, uint64_t dir) {
  outstanding_.erase(seq);
  PublishLowestLocked();
  // Under the lock: Unregister then knows no write to a closed (or reused) fd is under way.
  for (int fd : wake_) {
    const uint64_t one = 1;
    (void)!write(fd, &one, sizeof(one));
  }
  wake_.clear();
  auto it = dirs_.find(dir);
  if (it == dirs_.end()) return 0;
  if (it->second.outstanding > 0) --it->second.outstanding;
  if (it->second.outstanding > 0) return 0;
  const uint64_t forgets = it->second.deferred_forgets;
  it->second.deferred_forgets = 0;
  return forgets;
}

bool AsyncRemovals::DeferForget(uint64_t node, uint64_t nlookup) {
  if (!early_) return false;  // nothing is ever outstanding
  absl::MutexLock lock(&mu_);
  auto it = dirs_.find(node);
  if (it == dirs_.end() || it->second.outstanding == 0) return false;
  it->second.deferred_forgets += nlookup;
  return true;
}

void AsyncRemovals::Failed() { failed_.fetch_add(1, std::memory_order_relaxed); }

std::optional<fuse_attr_out> AsyncRemovals::DirAttrs(uint64_t dir, bool* owed) const {
  if (owed != nullptr) *owed = false;
  if (!early_) return std::nullopt;
  absl::MutexLock lock(&mu_);
  auto it = dirs_.find(dir);
  if (owed != nullptr) *owed = it != dirs_.end() && it->second.outstanding > 0;
  // Forgotten (an invalidation) while unlinks are outstanding: the server is asked, after them.
  // A file with early SETATTRs or WRITEs: the server is asked too (NodeGate holds the GETATTR
  // back).
  if (it == dirs_.end() || it->second.outstanding == 0 || it->second.learned_ns == 0 ||
      it->second.changes > 0) {
    return std::nullopt;
  }
  fuse_attr_out out = it->second.attr;
  out.attr_valid = 0;
  out.attr_valid_nsec = kDirAttrsValidNs;
  return out;
}

size_t AsyncRemovals::outstanding() const {
  absl::MutexLock lock(&mu_);
  return outstanding_.size();
}

size_t AsyncRemovals::directories() const {
  absl::MutexLock lock(&mu_);
  return dirs_.size();
}

void AsyncRemovals::PublishLowestLocked() {
  lowest_outstanding_.store(outstanding_.empty() ? UINT64_MAX : *outstanding_.begin(),
                            std::memory_order_release);
}

void LearnFromReply(AsyncRemovals& async, const fuse_in_header& header, const void* op_in,
                    size_t op_in_size, const char* body, size_t body_size, uint64_t ticket,
                    uint64_t now_ns) {
  switch (header.opcode) {
    case FUSE_SETATTR:
    case FUSE_GETATTR: {
      if (body_size < sizeof(fuse_attr_out)) return;
      fuse_attr_out attr;
      std::memcpy(&attr, body, sizeof(attr));
      if (S_ISDIR(attr.attr.mode) && header.opcode == FUSE_SETATTR) {
        async.Learn(header.nodeid, attr, ticket, now_ns);
      } else if (header.opcode == FUSE_SETATTR) {
        async.LearnSetattr(header.nodeid, attr, ticket, now_ns);
      } else {
        async.LearnFile(header.nodeid, attr, ticket, now_ns);
      }
      return;
    }
    case FUSE_CREATE:
    case FUSE_LOOKUP: {
      if (body_size < sizeof(fuse_entry_out)) return;
      fuse_entry_out entry;
      std::memcpy(&entry, body, sizeof(entry));
      if (entry.nodeid == 0) return;
      fuse_attr_out attr{};
      attr.attr_valid = entry.attr_valid;
      attr.attr_valid_nsec = entry.attr_valid_nsec;
      attr.attr = entry.attr;
      async.LearnFile(entry.nodeid, attr, ticket, now_ns);
      return;
    }
    case FUSE_WRITE: {
      if (op_in_size < sizeof(fuse_write_in) || body_size < sizeof(fuse_write_out)) return;
      fuse_write_in in;
      std::memcpy(&in, op_in, sizeof(in));
      fuse_write_out out;
      std::memcpy(&out, body, sizeof(out));
      async.Wrote(header.nodeid, in.offset + out.size);
      return;
    }
    default:
      return;
  }
}

void ForgetChanged(AsyncRemovals& async, const fuse_in_header& header, const void* op_in,
                   size_t op_in_size) {
  if (header.opcode == FUSE_SETXATTR || header.opcode == FUSE_REMOVEXATTR) {
    async.Forget(header.nodeid);  // directories too: early unlinks answer their GETATTRs
    return;
  }
  if (!async.files()) return;  // the rest only matters to files' attributes
  switch (header.opcode) {
    case FUSE_FALLOCATE:
      async.Forget(header.nodeid);
      return;
    case FUSE_OPEN:
      if (op_in_size >= sizeof(fuse_open_in) &&
          (static_cast<const fuse_open_in*>(op_in)->flags & O_TRUNC) != 0) {
        async.Forget(header.nodeid);
      }
      return;
    case FUSE_COPY_FILE_RANGE:
      if (op_in_size >= sizeof(fuse_copy_file_range_in)) {
        async.Forget(static_cast<const fuse_copy_file_range_in*>(op_in)->nodeid_out);
      }
      return;
    case FUSE_LINK:
      if (op_in_size >= sizeof(fuse_link_in)) {
        async.Forget(static_cast<const fuse_link_in*>(op_in)->oldnodeid);
      }
      return;
    case FUSE_UNLINK:
    case FUSE_RENAME:
    case FUSE_RENAME2:
      async.ForgetFiles();
      return;
    default:
      return;
  }
}

}  // namespace ringfs::frontend
