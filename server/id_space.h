// IdSpace hands out the ids one table gives to a client (node ids, fh) so that they never alias
// across server instances. The n-th id is a keyed permutation of n over all 64-bit values (a
// Feistel network), under a key each IdSpace draws at random: within one space ids are distinct
// forever (a permutation of a counter), and two spaces (a restarted server, another server of
// the export, another client's table) give unrelated sequences, so an id from one is unknown to
// the other except with probability about n·m/2^64. Ids are not secrets: the permutation is for
// spreading, not for unguessability.
// Not thread-safe: the owning table calls it under its own lock. Also here: the random instance
// id a server announces in its ServerHello.
#pragma once

#include <array>
#include <cstdint>

#include "absl/status/statusor.h"

namespace ringfs::server {

class IdSpace {
 public:
  static constexpr int kRounds = 6;
  using Key = std::array<uint64_t, kRounds>;

  // A key from getrandom(2). Aborts if the kernel gives no randomness: ids that might repeat
  // another instance's are worse than no server (Server::Start checks getrandom works first).
  static Key RandomKey();

  // Ids below `first_id` are never handed out (0 and FUSE_ROOT_ID for nodes, 0 for fh).
  IdSpace(Key key, uint64_t first_id) : key_(key), first_id_(first_id) {}
  explicit IdSpace(uint64_t first_id) : IdSpace(RandomKey(), first_id) {}

  // The next id of the sequence that is not reserved and for which `taken(id)` is false. The
  // owner passes "already in my table", so an entry inserted under an id chosen elsewhere (a
  // later "adopt" of an id from an older instance) is skipped, never handed out twice.
  template <typename Taken>
  uint64_t Next(const Taken& taken) {
    for (;;) {
      const uint64_t id = Permute(counter_++);
      if (id >= first_id_ && !taken(id)) return id;
    }
  }

  // Whether the sequence has reached `id` (handed it out, or skipped it as reserved or taken).
  // An id from outside may be inserted only while this is false: then this space has never
  // handed it out and will skip it while it is in the table.
  bool Passed(uint64_t id) const { return Unpermute(id) < counter_; }

  // The permutation and its inverse (exposed for tests).
  uint64_t Permute(uint64_t n) const;
  uint64_t Unpermute(uint64_t id) const;

 private:
  Key key_;
  uint64_t first_id_;
  uint64_t counter_ = 0;
};

// A random non-zero 64-bit id for this server process (ServerHello.instance_id): a client
// compares it across reconnects to tell whether it reached the same instance.
absl::StatusOr<uint64_t> DrawInstanceId();

}  // namespace ringfs::server
