// The replies a client got, or is about to get, for its non-idempotent requests, keyed by the
// request's `unique`, so that a request the frontend resends after a reconnect (same client_id,
// same unique) is answered with the bytes of its first execution instead of running twice
// (a second CREATE would say EEXIST, a second UNLINK ENOENT, and an entry reply would count a
// second lookup the kernel never learns of). See proto/wire_format.md, "Replayed requests".
// One per ClientState, for the life of the state. Thread-safe: the connections of one client
// are served by several workers, so a replay may arrive while the first execution still runs
// on another worker.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace ringfs::server {

class ReplyCache {
 public:
  struct Options {
    // Finished replies kept; the oldest go first. The frontend resends at most what one
    // connection had in flight (the negotiated max_inflight, 256 by default), so this is
    // several connections' worth of namespace operations.
    size_t max_entries = 4096;
    // Bytes of finished replies plus kEntryOverhead per entry.
    size_t max_bytes = 2 << 20;
  };
  // What one entry costs besides its reply bytes (map slot, order queue, string header).
  static constexpr size_t kEntryOverhead = 96;

  // Whether replies of `opcode` are cached: the requests whose second execution would answer
  // or do something else than the first (CREATE, MKNOD, MKDIR, SYMLINK, LINK, UNLINK, RMDIR,
  // RENAME, RENAME2).
  static bool Caches(uint32_t opcode);

  // What the caller must do with a request.
  enum class Decision {
    kExecute,          // run it, then Finish() or Abandon() with the same unique
    kExecuteUncached,  // run it and do not call Finish(): the unique is in use by another request
    kReplay,           // answer with *reply, do not run it
  };

  ReplyCache() : ReplyCache(Options{}) {}
  explicit ReplyCache(Options options) : options_(options) {}
  ReplyCache(const ReplyCache&) = delete;
  ReplyCache& operator=(const ReplyCache&) = delete;

  // Claims `unique` for a request whose content hashes to `fingerprint` (Fingerprint()). When
  // the same request already finished, copies its reply into *reply and returns kReplay; when
  // it is still running on another thread, waits for it first (it is one synchronous
  // filesystem call on another worker: never a wait on this thread's own work).
  Decision Begin(uint64_t unique, uint64_t fingerprint, std::string* reply);
  // Records the complete reply frame (out header included) of a kExecute request.
  void Finish(uint64_t unique, std::span<const char> reply);
  // Releases a kExecute claim without a reply (none was produced); a waiting replay executes.
  void Abandon(uint64_t unique);

  // A hash of what identifies a request besides its unique: opcode, node id and arguments. A
  // unique reused with other content (another mount that was given the same client_id) is then
  // never answered with this one's reply.
  static uint64_t Fingerprint(uint32_t opcode, uint64_t nodeid, std::span<const char> args);

  size_t size() const;
  size_t bytes() const;  // accounted bytes of finished entries
  uint64_t replays() const;

 private:
  struct Entry {
    uint64_t fingerprint = 0;
    bool done = false;
    std::string reply;
  };

  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  absl::CondVar finished_;  // signalled by Finish/Abandon
  absl::flat_hash_map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  // Finished uniques, oldest first (a unique finishes once, so appears at most once).
  std::deque<uint64_t> order_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t replays_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringfs::server
