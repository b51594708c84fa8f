// Seals the node handles the server hands to clients (common/node_handle.h): the MAC is the
// first 16 bytes of HMAC-SHA256 under the handle key (handle_key.h) over the export root's
// f_handle, then handle_type (int32 LE), handle_bytes (uint32 LE) and f_handle[0..handle_bytes).
// The root's handle binds a record to one export: a record sealed for another export of the
// same key does not verify. Immutable after construction; any thread. Each thread keeps one
// keyed HMAC context (for the seal it used last), so sealing allocates nothing and costs about
// a microsecond.
#pragma once

#include <string>

#include "common/node_handle.h"
#include "server/inode_handle.h"

struct evp_mac_st;

namespace ringfs::server {

class HandleSeal {
 public:
  // `key`: the handle key; `root_handle`: the f_handle bytes of the export root.
  HandleSeal(std::string key, std::string root_handle);
  ~HandleSeal();
  HandleSeal(const HandleSeal&) = delete;
  HandleSeal& operator=(const HandleSeal&) = delete;

  // A sealed record for `nodeid`; `handle` null: a node without a handle (handle_bytes 0).
  // REQUIRES: handle->bytes.size() <= wire::kMaxNodeHandleBytes.
  wire::NodeHandleRecord Seal(uint64_t nodeid, const InodeHandle* handle) const;

  // Whether `record`'s MAC is right (constant time) and its handle_bytes within bounds.
  bool Verify(const wire::NodeHandleRecord& record) const;

  // The handle a verified record carries (mount_id 0: the record does not say).
  static InodeHandle HandleOf(const wire::NodeHandleRecord& record);

 private:
  // False when libcrypto failed (then `out` is unusable: Verify fails, nothing is accepted).
  bool Mac(const wire::NodeHandleRecord& record, uint8_t out[wire::kNodeHandleMacBytes]) const;

  const std::string key_;
  const std::string root_handle_;
  const uint64_t serial_;     // tells the thread's cached context which seal it was keyed for
  evp_mac_st* const hmac_;    // EVP_MAC "HMAC", fetched once
};

}  // namespace ringfs::server
