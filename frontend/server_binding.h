// ServerBinding: which server a mount talks to and which server instance holds its state.
//
// A mount may name several servers (servers=A,B,... or a name with several addresses) that
// export one shared filesystem. All connections of the mount go to one server at a time, the
// current one: node ids and fh are per server instance, so connections spread over two servers
// would each need the whole state. A connection attempt that fails moves the mount on to the
// next server, round robin.
//
// The mount's state (the node ids and open files of NodeLedger) lives on one instance, the bound
// one. When a channel reaches another instance (a restart, a failover), exactly one channel —
// the lead — re-establishes the state there (reclaim) while the others wait; when it is done the
// new instance is bound and every channel sends what it held back. A channel still connected to
// an instance that is no longer bound reconnects.
//
// Mount-wide, shared by every channel; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/net.h"

namespace ringfs::frontend {

class ServerBinding {
 public:
  // REQUIRES: `servers` not empty.
  explicit ServerBinding(std::vector<SocketAddress> servers);

  struct Target {
    size_t index = 0;
    SocketAddress address;
  };
  Target Current() const;
  // A connection to `index` could not be made or was refused: try the next server (if `index`
  // is still the current one; another channel may have moved on already).
  void ConnectFailed(size_t index);
  // The pre-flight connection at mount start reached `index`.
  void SetCurrent(size_t index);
  size_t server_count() const { return servers_.size(); }

  enum class Verdict {
    kReady,  // the instance is bound: send; drop FORGETs counted before `epoch`
    kLead,   // reclaim on this instance, then call Finished or Abandoned
    kWait,   // another channel is reclaiming: ask again later
    kStale,  // the mount is bound to another instance now: reconnect
  };
  // A channel is connected to `instance` of server `index`. Only a channel at the current
  // server may bind another instance (so two reachable servers cannot take the mount from each
  // other); one elsewhere is told to reconnect.
  Verdict Arrived(uint64_t instance, size_t index, uint64_t* epoch);
  // The lead's reclaim on `instance` is over; FORGETs before `epoch` are in it. `refused`:
  // objects the instance did not take (0 when nothing needed re-establishing).
  void Finished(uint64_t instance, uint64_t epoch, uint64_t refused = 0, bool counted = false);
  uint64_t reclaims() const;
  uint64_t reclaim_refused() const;
  // The lead lost its connection before the end: another channel may lead.
  void Abandoned(uint64_t instance);
  // The bound instance (0 before the first connection); what channels compare theirs with.
  uint64_t bound() const;

 private:
  const std::vector<SocketAddress> servers_;
  mutable absl::Mutex mu_;
  size_t current_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bound_ ABSL_GUARDED_BY(mu_) = 0;
  bool reclaiming_ ABSL_GUARDED_BY(mu_) = false;  // a lead works on bound_
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t reclaims_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringfs::frontend
