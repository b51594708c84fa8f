// Sealed node handles and reclaim: the wire records that let a client re-establish, on a new
// server instance (a restart, or another server of the same export), the node ids and open file
// handles its kernel still holds (proto/wire_format.md section 3, "Reclaim").
//
// Why: node ids and fh are per server instance (server/id_space.h), so after a restart every id
// the kernel holds is ESTALE and every open descriptor is dead. The server therefore tells the
// client, once per node it hands out, the node's kernel file handle (name_to_handle_at), sealed
// with a MAC under a key that survives restarts. After reconnecting to another instance the
// client sends the records back ("adopt these ids for these handles", "reopen these fh") before
// it releases its parked requests. The MAC keeps a client from opening arbitrary files of the
// server's filesystem by forging handles (the classic NFS handle escape).
//
// Negotiated by ClientHello.want_node_handles / ServerHello.node_handles; without it none of the
// frames below are ever sent.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringfs::wire {

// MAX_HANDLE_SZ of the kernel (include/linux/exportfs.h): the largest f_handle payload.
inline constexpr size_t kMaxNodeHandleBytes = 128;
inline constexpr size_t kNodeHandleMacBytes = 16;

// A sealed node handle, as the server hands it out. `handle_bytes` == 0: the node has no handle
// (the root, a node on another mount inside the export, a filesystem without handles); it
// cannot be reclaimed. `mac` = first 16 bytes of HMAC-SHA256 under the server's handle key over
// (export root's handle, handle_type, handle_bytes, f_handle[0..handle_bytes)).
struct NodeHandleRecord {
  uint64_t nodeid = 0;
  int32_t handle_type = 0;
  uint32_t handle_bytes = 0;
  uint8_t f_handle[kMaxNodeHandleBytes] = {};
  uint8_t mac[kNodeHandleMacBytes] = {};
};
static_assert(sizeof(NodeHandleRecord) == 160, "wire layout");

// Server -> client notification frame: fuse_out_header{len, error = kNotifyNodeHandles,
// unique = 0} followed by 1..N NodeHandleRecord. Sent on the connection of a reply that hands
// out a node id new to the client's node table (LOOKUP, CREATE, MKNOD, MKDIR, SYMLINK, LINK and
// each READDIRPLUS entry), before that reply, so the client knows the handle by the time the
// kernel can use the id. A positive `error` with unique 0 is never a reply.
inline constexpr int32_t kNotifyNodeHandles = 0x52480001;  // "RH" 1

// Client -> server private opcodes (outside the FUSE range, below CUSE_INIT = 4096).
// Both run only on a connection that negotiated node handles, else they get ENOSYS.
inline constexpr uint32_t kOpReclaimNodes = 4000;
inline constexpr uint32_t kOpReopenHandles = 4001;

// Body of both opcodes after fuse_in_header: a ReclaimBatch, then `count` records.
struct ReclaimBatch {
  uint32_t count = 0;
  uint32_t padding = 0;
};
static_assert(sizeof(ReclaimBatch) == 8, "wire layout");

// kOpReclaimNodes: make `handle.nodeid` name the object of `handle` in this client's node table,
// with `nlookup` lookups (set, not added: a replayed batch is harmless). Refused per record with
// ESTALE when the MAC is wrong, the object is gone, lies outside the export, or the id is
// already used for another object or could be handed out by this instance.
struct ReclaimNodeRecord {
  uint64_t nlookup = 0;
  NodeHandleRecord handle;
};
static_assert(sizeof(ReclaimNodeRecord) == 168, "wire layout");

// kOpReopenHandles: open node `nodeid` (reclaimed before, or the root) again with `flags`
// (O_CREAT, O_EXCL, O_TRUNC and O_NOCTTY are ignored) and register it under the old `fh`.
// `directory` != 0: as OPENDIR, else as OPEN. Refused per record like the nodes.
struct ReopenRecord {
  uint64_t fh = 0;
  uint64_t nodeid = 0;
  uint32_t flags = 0;
  uint32_t directory = 0;
};
static_assert(sizeof(ReopenRecord) == 24, "wire layout");

// The success reply of both opcodes: fuse_out_header{error = 0} then one int32_t per record in
// request order, 0 or -errno. The frame-level error is set only when the whole batch is
// malformed (EINVAL) or the connection did not negotiate node handles (ENOSYS).

// Most records one batch frame may carry so the frame stays under kMaxFrameBytes.
inline constexpr uint32_t kMaxReclaimNodesPerFrame = 4096;   // 4096 * 168 = 672 KiB
inline constexpr uint32_t kMaxReopenPerFrame = 16384;        // 16384 * 24 = 384 KiB

}  // namespace ringfs::wire
