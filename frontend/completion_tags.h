// How frontend workers tag io_uring completions: kind in bits 56..63, the rest is the kind's.
#pragma once

#include <cstdint>

namespace ringfs::frontend {

enum class CompletionKind : uint8_t {
  kRingEntry = 1,   // a FUSE ring entry: REGISTER or COMMIT_AND_FETCH finished (low bits: index)
  kDevRead = 2,     // a read of /dev/fuse finished (low bits: slot)
  kBackend = 3,     // the backend channel's receive
};

inline uint64_t MakeTag(CompletionKind kind, uint32_t index) {
  return (static_cast<uint64_t>(kind) << 56) | index;
}
inline CompletionKind TagKind(uint64_t tag) { return static_cast<CompletionKind>(tag >> 56); }
inline uint32_t TagIndex(uint64_t tag) { return static_cast<uint32_t>(tag & 0xffffffffu); }

}  // namespace ringfs::frontend
