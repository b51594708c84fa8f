// The invalidations waiting to be pushed to one client (common/invalidation.h), and the
// sessions that can carry them. A client's sessions live on different workers; any one of them
// may carry an invalidation (node ids are the client's, not the connection's), so the outbox
// wakes one session's worker, which takes everything queued and sends it in one frame.
// Why not send from the thread that made the change: a connection's socket and ring belong to
// its worker thread alone (STYLE.md: one io_uring per thread, owned by it).
// While the client has no session (reconnecting, idle-closed), records wait, up to a bound;
// beyond it the oldest are dropped and counted, and a reset is owed: a session that understands
// reset records (ClientHello.want_cache_resets) gets one reset instead of everything queued, and
// its client drops all it cached; an older client's caches may stay stale until their timeouts
// (proto/wire_format.md, "Cache invalidations"). PushReset owes one directly (the export watch
// lost events).
// Thread-safe. Lock order: the outbox's mutex is a leaf (wakes are called after unlocking).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/invalidation.h"

namespace ringfs::server {

class InvalidationOutbox {
 public:
  // Makes the worker of a session call Take for it soon. Called from any thread, never under
  // the outbox's lock; must not block (it posts to the worker's mailbox).
  using Wake = std::function<void(uint64_t session_id)>;

  explicit InvalidationOutbox(size_t max_pending = 65536) : max_pending_(max_pending) {}

  // The client's name in log lines. Set once, before the outbox is shared.
  void set_owner(std::string owner) { owner_ = std::move(owner); }

  // A session of this client that asked for invalidations. The first one turns the outbox on:
  // until then Push drops everything (the client does not listen).
  // `resets`: the session understands reset records.
  void AddSink(uint64_t session_id, Wake wake, bool resets = false);
  // The session ended. A wake pending for it is passed on to another session.
  void RemoveSink(uint64_t session_id);

  // Queues records for the client and wakes one session unless a wake is already pending.
  void Push(std::vector<wire::Invalidation> records);
  // Changes may have been missed that concern anything the client caches: everything queued is
  // replaced by one reset record (for a session that understands it) and one session is woken.
  void PushReset();

  // Called by the woken session's worker: everything queued, for it to send. A session that
  // can no longer send (closing or gone) passes the wake on with `can_send` false: nothing is
  // taken and another session, if any, is woken. A reset owed comes alone (it covers what was
  // queued) if the session understands it; else the records still queued come, and the reset
  // is forgotten.
  std::vector<wire::Invalidation> Take(uint64_t session_id, bool can_send);

  bool enabled() const;
  size_t pending() const;
  uint64_t dropped() const;
  uint64_t pushed() const;
  uint64_t resets() const;  // reset records taken

 private:
  // The sink to wake next, if a wake should be sent now; marks the wake pending.
  std::optional<std::pair<uint64_t, Wake>> NextWakeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  struct Sink {
    uint64_t session_id;
    Wake wake;
    bool resets;
  };

  const size_t max_pending_;
  std::string owner_;
  mutable absl::Mutex mu_;
  bool enabled_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<wire::Invalidation> pending_ ABSL_GUARDED_BY(mu_);
  std::vector<Sink> sinks_ ABSL_GUARDED_BY(mu_);
  bool reset_owed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t resets_ ABSL_GUARDED_BY(mu_) = 0;
  bool wake_pending_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t woken_ ABSL_GUARDED_BY(mu_) = 0;  // the session of the pending wake
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t pushed_ ABSL_GUARDED_BY(mu_) = 0;
  bool drop_logged_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ringfs::server
