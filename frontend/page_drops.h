// Makes the kernel drop a file's cached pages now, and tells KeptPages when it has: the
// confirmation that lets a later open keep pages again after an open dropped them (see
// frontend/kept_pages.h, "Two opens at once"). The kernel itself drops them only when the
// opener's task runs on with the answer, which another open cannot see.
// How: FUSE_NOTIFY_INVAL_INODE of the whole file, written to /dev/fuse by a thread of its own --
// the kernel locks each page to drop it, and a page under a READ in flight stays locked until
// a reactor thread has handed the kernel that READ's answer. The write also marks the file's
// cached attributes stale (the kernel does both), so the next stat of a file whose pages were
// dropped this way asks the server (the open's record answers the stat right after the open).
// Works with no_invalidations too (KernelNotifier is then not running).
// Not while a READ or WRITE of the file is in flight (KeptPages::DropStarting): the write would
// wait for that request's page locks, holding the lock an unmount needs, for as long as the
// server does not answer. Such a drop is tried again `retry` later. A READ that starts between
// that check and the write (readahead of another reader) can still make the write wait, as a
// pushed invalidation can (KernelNotifier).
// Posts of one file merge while it waits; past `max_queued` files a post is dropped, which
// leaves that file unconfirmed (its opens drop the pages and post again).
// Thread-safe. Stop() after the FUSE connection has ended (writes then fail at once).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"
#include "frontend/kept_pages.h"

namespace ringfs::frontend {

class PageDrops {
 public:
  // Makes the kernel drop the pages of `nodeid`; returns the errno (0: done). A seam for tests;
  // the default writes to the fuse fd.
  using Writer = std::function<int(uint64_t nodeid)>;

  // `fuse_fd`: a /dev/fuse fd of the mount (a clone is fine).
  PageDrops(UniqueFd fuse_fd, KeptPages* kept, size_t max_queued = 1 << 16,
            absl::Duration retry = absl::Milliseconds(5));
  ~PageDrops();
  PageDrops(const PageDrops&) = delete;
  PageDrops& operator=(const PageDrops&) = delete;

  void Start();
  void Stop();
  // Any thread; never blocks.
  void Post(uint64_t nodeid);
  // Waits until everything posted so far is written (tests). False on timeout.
  bool WaitIdle(absl::Duration timeout);
  // Before Start() (tests).
  void set_writer_for_test(Writer writer) { writer_ = std::move(writer); }

  uint64_t written() const;  // drops the kernel did (or held no inode for)
  uint64_t failed() const;   // any other answer, or a post dropped (queue full)
  uint64_t retried() const;  // drops put off while a READ or WRITE of the file was in flight

 private:
  void Loop();

  const UniqueFd fuse_fd_;
  KeptPages* const kept_;
  const size_t max_queued_;
  const absl::Duration retry_;
  Writer writer_;
  std::thread thread_;
  mutable absl::Mutex mu_;
  std::deque<uint64_t> queue_ ABSL_GUARDED_BY(mu_);
  // Put off: (when due, MonotonicNs; node), in the order they are due (one delay for all).
  std::deque<std::pair<uint64_t, uint64_t>> later_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint64_t> queued_ ABSL_GUARDED_BY(mu_);  // in queue_ or later_
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t written_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t failed_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t retried_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringfs::frontend
