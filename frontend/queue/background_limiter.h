// Admission of one worker's background requests: at most limit() in flight to the backend, the
// rest wait in arrival order. Owned by that worker's thread; not thread-safe. Requests are
// opaque tokens. Foreground requests never pass through it, so they never wait behind these.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"

namespace ringfs::frontend::queue {

class BackgroundLimiter {
 public:
  static constexpr uint32_t kUnlimited = UINT32_MAX;

  BackgroundLimiter() = default;  // unlimited

  // True: the request is admitted (counted in flight), send it now. False: it was queued; it
  // comes back later from OnComplete() or DrainAdmissible().
  bool TryAdmit(uint64_t token);

  // One admitted request has been answered. Returns the next queued token when the limit now
  // allows it; that token is already admitted, send it. REQUIRES: inflight() > 0.
  std::optional<uint64_t> OnComplete();

  // 0 is InvalidArgument; kUnlimited (or anything above any real in-flight count) lifts the
  // limit. Lowering takes nothing back: in-flight requests finish and nothing new is admitted
  // until inflight() < limit(). After raising, call DrainAdmissible() to release waiters.
  [[nodiscard]] absl::Status SetLimit(uint32_t limit);

  // Admits queued tokens in FIFO order while the limit allows and returns them (send them all).
  // Allocates the result: meant for the rare limit change, not the per-request path.
  std::vector<uint64_t> DrainAdmissible();
  // Removes every queued token without admitting it, oldest first: a worker leaving the active
  // set hands its waiting requests to their new owners instead of sending them itself.
  std::vector<uint64_t> TakeQueued();

  uint32_t limit() const { return limit_; }
  uint32_t inflight() const { return inflight_; }
  size_t queued() const { return queued_count_; }
  // Highest inflight() reached by an admission since construction or the last
  // ResetHighWater(). Requests admitted before the reset (say, under a higher limit that was
  // just lowered) do not raise it until something new is admitted next to them, so after
  // SetLimit(L) + ResetHighWater() it never exceeds L.
  uint32_t max_inflight_seen() const { return max_inflight_seen_; }
  void ResetHighWater() { max_inflight_seen_ = 0; }
  uint64_t admitted_total() const { return admitted_total_; }  // all admissions, any path
  uint64_t queued_total() const { return queued_total_; }      // TryAdmit calls that queued

 private:
  bool HasRoom() const { return inflight_ < limit_; }
  void Admit();
  void PushQueued(uint64_t token);
  uint64_t PopQueued();

  uint32_t limit_ = kUnlimited;
  uint32_t inflight_ = 0;
  uint32_t max_inflight_seen_ = 0;
  uint64_t admitted_total_ = 0;
  uint64_t queued_total_ = 0;
  // FIFO as a ring over a power-of-two buffer: it only grows, so a worker in steady state
  // queues and dequeues without allocating (std::deque allocates and frees blocks as it moves).
  std::vector<uint64_t> queue_ring_;
  size_t queue_head_ = 0;
  size_t queued_count_ = 0;
};

}  // namespace ringfs::frontend::queue
