// Watches the export's filesystem for changes made by anything but this server (a process on
// the storage node, a backup restore, another NFS/SMB server of the same directory) and pushes
// the invalidations they imply to the clients holding the changed nodes (Coherence::
// PublishKeyed). Without it such changes are seen only when the clients' cache lifetimes
// (60 s by default) expire.
// How: fanotify with a filesystem mark (FAN_MARK_FILESYSTEM, needs CAP_SYS_ADMIN) reporting
// directory handles and names (FAN_REPORT_DFID_NAME | FAN_REPORT_FID): create, delete, move
// (entries in a directory), modify and attrib (a node). Events caused by this process are
// skipped: client requests already publish their own changes. Each handle is resolved to
// (st_dev, st_ino) with open_by_handle_at + fstat, the key node tables use.
// The mark covers the whole filesystem, so a busy filesystem around a small export costs one
// handle resolution per event (two syscalls).
// Off by default (--export-watch turns it on). With it on, it_squash's supplementary-group test
// used to fail (about 1 run in 7 here) with a transient EACCES decided by the client kernel: the
// entry event of the team directory's creation pushed an INVAL_INODE of the export's root while
// the member's first walk was refreshing the mount root's attributes, the kernel dropped that
// GETATTR reply and checked against the root inode's initial mode (rootmode=40000, no permission
// bits). ringfs-mount now primes the root's attributes at mount (MountSession::ProbeMount); the
// same drop on a directory whose cached attributes deny remains (README, "Invalidations and
// permission checks").
// One thread of its own (blocking reads; it owns no io_uring). Start once, Stop once.
#pragma once

#include <fcntl.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/unique_fd.h"
#include "server/coherence.h"

namespace ringfs::server {

class ExportWatch {
 public:
  // REQUIRES: `coherence` outlives the watch.
  ExportWatch(std::string export_dir, const Coherence* coherence);
  ~ExportWatch();
  ExportWatch(const ExportWatch&) = delete;
  ExportWatch& operator=(const ExportWatch&) = delete;

  // Fails (the caller logs it and runs without the watch) when fanotify is unavailable or the
  // process lacks CAP_SYS_ADMIN.
  absl::Status Start();
  void Stop();

  uint64_t events() const { return events_.load(std::memory_order_relaxed); }
  uint64_t published() const { return published_.load(std::memory_order_relaxed); }
  uint64_t overflows() const { return overflows_.load(std::memory_order_relaxed); }

 private:
  void Loop();
  // Decodes one read's worth of events and publishes what they changed.
  void Handle(std::span<const char> events);
  // The file a handle of an event names, as node tables key it; nullopt when it is gone.
  // Remembered per handle (a handle names one file for its whole life; a reused inode number
  // comes with another generation, so at worst a stale entry causes one needless
  // invalidation): a writer appending to one file makes a stream of events for one handle.
  std::optional<InodeKey> Resolve(const struct file_handle* handle);

  const std::string export_dir_;
  const Coherence* const coherence_;
  UniqueFd fanotify_;
  UniqueFd mount_fd_;  // the export directory, for open_by_handle_at
  UniqueFd stop_;      // eventfd
  std::thread thread_;
  absl::flat_hash_map<std::string, InodeKey> resolved_;  // the watch thread's only
  std::atomic<uint64_t> events_{0};
  std::atomic<uint64_t> published_{0};
  std::atomic<uint64_t> overflows_{0};
};

}  // namespace ringfs::server
