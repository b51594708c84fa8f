// How frontend workers tag io_uring completions: kind in bits 56..63, an argument in bits
// 32..55 (kind-specific), an index in bits 0..31.
#pragma once

#include <cstdint>

namespace ringfs::frontend {

enum class CompletionKind : uint8_t {
  kRingEntry = 1,    // a FUSE ring command finished (index: entry id)
  kDevRead = 2,      // a read of /dev/fuse finished (index: slot)
  kBackend = 3,      // the backend channel's receive (argument: connection generation)
  kHandoff = 4,      // a peer worker passed us an entry (index: entry id, res: HandoffKind)
  kHandoffSent = 5,  // our MSG_RING failed (index: entry id, argument: HandoffKind)
  kWake = 6,         // the mailbox eventfd was written
  kReadsResume = 7,  // a pause of /dev/fuse reads ended (forget gathering, read error)
};

enum class HandoffKind : uint32_t {
  kForward = 0,     // forward this request to the server (or route it on)
  kCommitBack = 1,  // the reply is in the entry: commit it from your ring (commit=origin)
};

inline uint64_t MakeTag(CompletionKind kind, uint32_t index, uint32_t argument = 0) {
  return (static_cast<uint64_t>(kind) << 56) |
         (static_cast<uint64_t>(argument & 0xffffff) << 32) | index;
}
inline CompletionKind TagKind(uint64_t tag) { return static_cast<CompletionKind>(tag >> 56); }
inline uint32_t TagIndex(uint64_t tag) { return static_cast<uint32_t>(tag & 0xffffffffu); }
inline uint32_t TagArgument(uint64_t tag) { return static_cast<uint32_t>(tag >> 32) & 0xffffff; }

}  // namespace ringfs::frontend
