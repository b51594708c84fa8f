// What keeps password guessing slow and the log readable: a token bucket of authentication
// attempts per source address, and a throttle on the log lines of failed attempts.
// Thread-safe (handshake threads share them); each has a clock seam for unit tests.
// Lock order: both mutexes are leaves.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ringfs::server {

class AuthRateLimiter {
 public:
  struct Options {
    double burst = 10;          // attempts a source may make at once
    double per_second = 1;      // attempts it earns back per second
    size_t max_sources = 4096;  // tracked at once; full buckets are forgotten first
    std::function<absl::Time()> now = [] { return absl::Now(); };
  };
  explicit AuthRateLimiter(Options options) : options_(std::move(options)) {}

  // Takes one attempt from `source` (an address without port); false when its bucket is empty
  // (or too many sources are tracked), and the connection should be closed without more work.
  bool TryAcquire(const std::string& source);
  // Gives back the attempt of a source that authenticated: only failures use the budget, so a
  // mount opening one connection per queue is never limited.
  void Refund(const std::string& source);

 private:
  struct Bucket {
    double tokens = 0;
    absl::Time updated;
  };
  void Refill(Bucket* bucket, absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);
};

// Lets through at most `lines` log lines per `window`; what it holds back is counted and
// summarised ("N more ... suppressed") with the next line that passes.
class LogThrottle {
 public:
  struct Options {
    uint32_t lines = 20;
    absl::Duration window = absl::Seconds(10);
    std::function<absl::Time()> now = [] { return absl::Now(); };
  };
  explicit LogThrottle(Options options) : options_(std::move(options)) {}

  // True when the caller should log its line; `*suppressed` is then the count of lines held
  // back since the last one that passed (to be mentioned once).
  bool Admit(uint64_t* suppressed);
  // Once the window of the last admitted line is over: the lines held back since (and resets
  // the count), so a flood that stopped is still summarised. 0 otherwise.
  uint64_t TakeSuppressed();

 private:
  const Options options_;
  absl::Mutex mu_;
  absl::Time window_start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  uint32_t in_window_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t suppressed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringfs::server
