// Runs decoded requests against the export for one client. Metadata operations run
// synchronously in the calling worker thread (they are short syscalls on the worker's core;
// the protocol allows replies in any order). READ, WRITE above 128 KiB, FSYNC and FSYNCDIR are
// returned as an AsyncIo that the worker submits to its io_uring; CompleteIo() then builds their
// reply. Smaller writes are a pwrite in the worker (see kInlineWriteBytes in ops_file.cc).
// Stateless apart from the client state passed in; any worker thread may call it.
// In floor mode (benchmarks) READ and WRITE are answered at once without file I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "common/node_handle.h"
#include "server/attr.h"
#include "server/client_registry.h"
#include "server/coherence.h"
#include "server/export_options.h"
#include "server/group_cache.h"
#include "server/handle_seal.h"
#include "server/request.h"

namespace ringfs::server {

// The node-handle notifications of one request on a connection that negotiated them
// (common/node_handle.h): the executor appends a sealed record for every node an entry reply
// creates in the client's table; the worker sends them in one kNotifyNodeHandles frame before
// the reply. Owned by the worker and cleared per request, so its capacity is reused.
struct NodeHandleNotes {
  const HandleSeal* seal = nullptr;  // REQUIRES: set
  std::vector<wire::NodeHandleRecord> records;
};

// Who asks, for which client, with which cache lifetimes.
struct OpContext {
  ClientState* client = nullptr;
  // What the session's client may do. Set by the worker for every request: the request then
  // runs as the caller (squashed as the options say) and `ro` answers EROFS to every change.
  // Null (executor unit tests of op semantics): runs as the server itself, nothing refused.
  const ExportOptions* export_options = nullptr;
  // Set when the connection negotiated node handles (and the client's table keeps them); null
  // otherwise: no notifications, and the reclaim opcodes get ENOSYS.
  NodeHandleNotes* node_handles = nullptr;
  uint64_t nodeid = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint32_t pid = 0;
  CacheTimes times;
  // Set by Execute: the caller was squashed to the anonymous identity, which never gets set-id
  // bits (RequestedMode).
  mutable bool anonymous = false;
  // Set by the worker when another client listens for changes (coherence.h): only then do
  // executors look for the files a request changes without naming them by node id.
  bool others_listen = false;
  // Those files, found by the executor while it runs the request: the file an UNLINK, RMDIR or
  // RENAME removed or replaced (its link count and ctime changed, and another client may hold
  // it by another name or an open descriptor), an existing file a CREATE truncated (its size
  // and data). The worker pushes them to the other clients with the request's own changes.
  mutable std::vector<Coherence::KeyedChange> changed_files;
};

// The body of a success reply, written in place into the reply buffer (after the out header).
class ReplyBody {
 public:
  ReplyBody(char* data, size_t capacity) : data_(data), capacity_(capacity) {}
  char* data() const { return data_; }
  size_t capacity() const { return capacity_; }
  size_t size() const { return size_; }
  void set_size(size_t n) { size_ = n; }
  // Appends a struct; REQUIRES: it fits (callers size replies from Request::reply_capacity).
  template <typename T>
  void Put(const T& value) {
    std::memcpy(data_ + size_, &value, sizeof(T));
    size_ += sizeof(T);
  }
  bool Fits(size_t n) const { return size_ + n <= capacity_; }
  // Lets a trailer follow a body filled to capacity; REQUIRES: `n` more bytes behind data().
  void Grow(size_t n) { capacity_ += n; }

 private:
  char* data_;
  size_t capacity_;
  size_t size_ = 0;
};

// File I/O for the worker's io_uring. `handle` keeps the fd open until the I/O completes.
struct AsyncIo {
  enum class Kind { kRead, kWrite, kFsync };
  Kind kind = Kind::kRead;
  HandleRef handle;
  uint64_t offset = 0;
  uint32_t length = 0;
  const char* write_data = nullptr;  // into the request frame; the worker keeps the frame alive
  int write_rw_flags = 0;            // RWF_DSYNC / RWF_SYNC: the write must be durable
  bool datasync = false;
};

struct Outcome {
  absl::Status status;        // not OK: answer with ToErrno(status)
  std::optional<AsyncIo> io;  // set: answer when the I/O completes
};

class Executor {
 public:
  struct Options {
    // Transport floor: READ answers zeros up to the file's size and WRITE reports the full
    // size written, both without touching the file, so a benchmark shows what FUSE and the
    // network cost without storage. Every other request runs as usual.
    bool floor = false;
    // Run each request with the caller's credentials (thread_creds.h): false when the process
    // cannot (not root), and then every request runs as the server's own user.
    bool act_as_callers = false;
    // The callers' supplementary groups (--manage-gids); null: only the gid of the request.
    GroupCache* groups = nullptr;
  };

  Executor() = default;
  explicit Executor(Options options) : options_(options) {}

  // Executes `request`. For requests without a reply the outcome is ignored.
  Outcome Execute(const OpContext& ctx, const Request& request, ReplyBody& body) const;

  // Fills the reply of a finished AsyncIo; `result` is the io_uring completion result.
  static absl::Status CompleteIo(const AsyncIo& io, int result, ReplyBody& body);

 private:
  // What the request may do before it runs: EROFS for a change on a read-only export; then the
  // calling thread takes the caller's identity (for the requests whose permissions the
  // export's kernel must check).
  absl::Status Admit(const OpContext& ctx, const Request& request) const;

  // Entries (ops_entry.cc).
  absl::Status Run(const OpContext& ctx, const LookupArgs& a, ReplyBody& body) const;
  absl::Status Run(const OpContext& ctx, const ForgetArgs& a, ReplyBody& body) const;
  absl::Status Run(const OpContext& ctx, const BatchForgetArgs& a, ReplyBody& body) const;
  absl::Status Run(const OpContext& ctx, const SymlinkArgs& a, ReplyBody& body) const;
  absl::Status Run(const OpContext& ctx, const MknodArgs& a, ReplyBody& body) const;
  absl::Status Run(const OpContext& ctx, const MkdirArgs& a, ReplyBody& body) const;
  absl::Status Run(const OpContext& ctx, const UnlinkArgs& a, ReplyBody& body) const;
  absl::Status Run(const OpContext& ctx, const RmdirArgs& a, ReplyBody& body) const;
  absl::Status Run(const OpContext& ctx, const RenameArgs& a, ReplyBody& body) const;
  absl::Status Run(const OpContext& ctx, const LinkArgs& a, ReplyBody& body) const;
  // Attributes (ops_attr.cc).
  absl::Status Run(const OpContext& ctx, const GetattrArgs& a, ReplyBody& body) const;
  absl::Status Run(const OpContext& ctx, const SetattrArgs& a, ReplyBody& body) const;
  absl::Status Run(const OpContext& ctx, const ReadlinkArgs& a, ReplyBody& body) const;
  absl::Status Run(const OpContext& ctx, const StatfsArgs& a, ReplyBody& body) const;
  absl::Status Run(const OpContext& ctx, const AccessArgs& a, ReplyBody& body) const;
  absl::Status Run(const OpContext& ctx, const SetxattrArgs& a, ReplyBody& body) const;
  absl::Status Run(const OpContext& ctx, const GetxattrArgs& a, ReplyBody& body) const;
  absl::Status Run(const OpContext& ctx, const ListxattrArgs& a, ReplyBody& body) const;
  absl::Status Run(const OpContext& ctx, const RemovexattrArgs& a, ReplyBody& body) const;
  // Files (ops_file.cc).
  absl::Status Run(const OpContext& ctx, const OpenArgs& a, ReplyBody& body) const;
  absl::Status Run(const OpContext& ctx, const CreateArgs& a, ReplyBody& body) const;
  Outcome Run(const OpContext& ctx, const ReadArgs& a, ReplyBody& body) const;
  Outcome Run(const OpContext& ctx, const WriteArgs& a, ReplyBody& body) const;
  Outcome Run(const OpContext& ctx, const FsyncArgs& a, ReplyBody& body) const;
  absl::Status Run(const OpContext& ctx, const ReleaseArgs& a, ReplyBody& body) const;
  absl::Status Run(const OpContext& ctx, const FlushArgs& a, ReplyBody& body) const;
  absl::Status Run(const OpContext& ctx, const InterruptArgs& a, ReplyBody& body) const;
  absl::Status Run(const OpContext& ctx, const FallocateArgs& a, ReplyBody& body) const;
  absl::Status Run(const OpContext& ctx, const LseekArgs& a, ReplyBody& body) const;
  absl::Status Run(const OpContext& ctx, const CopyFileRangeArgs& a, ReplyBody& body) const;
  // Directories (ops_dir.cc).
  absl::Status Run(const OpContext& ctx, const OpendirArgs& a, ReplyBody& body) const;
  absl::Status Run(const OpContext& ctx, const ReaddirArgs& a, ReplyBody& body) const;
  // Reclaim after a reconnect (ops_reclaim.cc).
  absl::Status Run(const OpContext& ctx, const ReclaimNodesArgs& a, ReplyBody& body) const;
  absl::Status Run(const OpContext& ctx, const ReopenHandlesArgs& a, ReplyBody& body) const;

  Options options_;
};

}  // namespace ringfs::server
