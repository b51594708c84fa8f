// Cache invalidations the server pushes to a client (proto/wire_format.md section 5).
//
// Why: a mount caches entries (name -> node) and attributes in its kernel for its entry/attr
// timeouts. With short timeouts every `stat` goes back to the server; with long ones a change
// made through another mount would stay invisible for that long. The server knows which client
// holds which node (its node tables), so when one client changes a node, a name in a directory
// or a file's data, it tells every other client that holds that node; their ringfs-mount turns
// the records into FUSE_NOTIFY_INVAL_INODE / FUSE_NOTIFY_INVAL_ENTRY for their kernel. Then the
// timeouts can be long while a change is seen elsewhere within milliseconds.
//
// Negotiated by ClientHello.want_invalidations / ServerHello.invalidations.
//
// Frame (server -> client): fuse_out_header{len, error = kNotifyInvalidate, unique = 0}, then
// one or more records, each an InvalidationRecord followed by `namelen` name bytes padded with
// zeros to a multiple of 8. Node ids are the receiving client's own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ringfs::wire {

inline constexpr int32_t kNotifyInvalidate = 0x52480002;  // "RH" 2; kNotifyNodeHandles is 1

enum class InvalidationKind : uint32_t {
  // The node's attributes; with offset >= 0 also its cached data from `offset` for `length`
  // bytes (length 0: to the end). offset -1: attributes only. The same meaning as the kernel's
  // fuse_notify_inval_inode_out.
  kInode = 1,
  // The name `name` in directory `nodeid` (it was created, removed or renamed): the kernel
  // forgets the cached dentry (positive or negative).
  kEntry = 2,
  // Everything: the server lost track of changes that may concern what this client caches (its
  // export watch's event queue overflowed, or more records waited for the client than their
  // bound). The client drops all it cached, as after a lost connection. nodeid 0, offset -1,
  // length 0, no name. Sent only to a client that asked (ClientHello.want_cache_resets).
  kReset = 3,
};

struct InvalidationRecord {
  uint64_t nodeid = 0;
  int64_t offset = -1;
  int64_t length = 0;
  uint32_t kind = 0;     // InvalidationKind
  uint32_t namelen = 0;  // kEntry: 1..255; kInode: 0
};
static_assert(sizeof(InvalidationRecord) == 32, "wire layout");

inline constexpr size_t kMaxInvalidationName = 255;

// One decoded record; `name` is set for kEntry only.
struct Invalidation {
  InvalidationKind kind = InvalidationKind::kInode;
  uint64_t nodeid = 0;
  int64_t offset = -1;
  int64_t length = 0;
  std::string name;

  bool operator==(const Invalidation&) const = default;
};

// Bytes one record takes on the wire.
size_t InvalidationWireBytes(const Invalidation& inv);

// Appends the record to `out` (the frame body; the caller writes the header).
void AppendInvalidation(const Invalidation& inv, std::string& out);

// Parses a whole frame body. False when anything is malformed (unknown kind, name length out
// of range or running past the body, non-zero padding, a name with '/' or NUL, no record);
// `out` is then unspecified. A client closes the connection on a malformed frame.
bool ParseInvalidations(std::span<const char> body, std::vector<Invalidation>* out);

}  // namespace ringfs::wire
