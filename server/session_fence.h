// Keeps a client's resent requests behind everything its lost connections still run.
// A client that loses a connection resends, on a new one, every request it got no answer to
// (proto/wire_format.md, "Replayed requests"). The server may still run the first copies: a
// WRITE in its io_uring, a frame it received but has not parsed yet, behind a slow write of the
// same worker. A first copy that ends after the replay was answered, and after a later write
// the client made on that answer, writes its older bytes over the newer ones.
// So the new connection names the one it replaces (ClientHello.replaces_session, same server
// instance). The old one is then superseded: its worker runs none of its frames not yet
// started and closes it. The new connection runs nothing until every superseded connection of
// the client has ended, that is until nothing of them runs any more.
// One per ClientState; thread-safe. Lock order: the fence's mutex is held while calling the
// workers' hooks, which only post to a mailbox (their mutex is a leaf).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace ringfs::server {

class SessionFence;

// One session's place in its client's fence, from the handshake until the connection is gone
// (the worker destroys it only once no request of it runs). Dropping it ends the session for
// the fence. Movable.
class SessionTicket {
 public:
  SessionTicket() = default;
  SessionTicket(SessionTicket&& other) noexcept { *this = std::move(other); }
  SessionTicket& operator=(SessionTicket&& other) noexcept;
  ~SessionTicket() { End(); }

  // Set by another thread when a newer connection of the client replaced this one: run none of
  // its frames any more. Relaxed is enough: the worker reads it before each frame, and a frame
  // started before the flag was seen counts as running (the successor waits for it).
  bool superseded() const {
    return superseded_ != nullptr && superseded_->load(std::memory_order_relaxed);
  }
  // The earlier connections this one waits for (taken at the handshake).
  size_t waits() const { return waits_.size(); }

  // The worker, on adopting the connection. `close` (never blocking) is called at most once,
  // when a newer connection replaces this one. Returns false when that happened already.
  bool Attach(std::function<void()> close);
  // The worker, before the connection runs anything: true when it must wait; `wake` (never
  // blocking) is then called once, when the last connection it waits for has ended.
  bool Await(std::function<void()> wake);

  uint64_t session_id() const { return session_id_; }

 private:
  friend class SessionFence;
  void End();

  std::shared_ptr<SessionFence> fence_;
  uint64_t session_id_ = 0;
  std::shared_ptr<std::atomic<bool>> superseded_;
  std::vector<uint64_t> waits_;
};

class SessionFence : public std::enable_shared_from_this<SessionFence> {
 public:
  // A new session of the client, which replaces `replaces` (0: none). A replaced session that
  // is still live is superseded (its close hook is called). A ticket that replaces one (live
  // or not) waits for every superseded session of the client that has not ended, whichever it
  // replaced; one that replaces none waits for nothing.
  SessionTicket Begin(uint64_t session_id, uint64_t replaces);

  // Sessions begun and not ended, and those among them that were superseded.
  size_t live() const;
  size_t superseded() const;
  uint64_t replaced_total() const { return replaced_total_.load(std::memory_order_relaxed); }

 private:
  friend class SessionTicket;
  struct Session {
    std::shared_ptr<std::atomic<bool>> superseded;
    std::function<void()> close;  // set by Attach; cleared once called
  };
  struct Waiter {
    std::vector<uint64_t> waits;  // sessions not ended yet
    std::function<void()> wake;
  };

  bool Attach(uint64_t session_id, std::function<void()> close);
  bool Await(uint64_t session_id, const std::vector<uint64_t>& waits, std::function<void()> wake);
  void End(uint64_t session_id);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Session> live_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> replaced_total_{0};
};

}  // namespace ringfs::server
