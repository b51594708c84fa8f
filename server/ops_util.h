// Helpers shared by the op executors (ops_*.cc): node/handle lookup with the right errno, entry
// replies, and giving new files to the caller. Internal to the executor; any worker thread.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/executor.h"

namespace ringfs::server {

// ESTALE if unknown. A known node whose file is gone from the namespace (ESTALE from the table)
// but still open through one of the client's handles is served from that handle's fd.
absl::StatusOr<NodeRef> GetNode(const OpContext& ctx, uint64_t nodeid);
absl::StatusOr<HandleRef> GetHandle(const OpContext& ctx, uint64_t fh);  // ESTALE if unknown
// A handle of the request's directory opened for this request alone and in no table (a
// handle-less listing's FSYNCDIR), as the server: syncing checks no permission, as on the
// descriptor the caller holds (FSYNCDIR does not switch to the caller: Executor::Admit).
absl::StatusOr<HandleRef> DirHandleFor(const OpContext& ctx);

// ctx.client->nodes->AddLookup, and on a connection with node handles, a sealed record for the
// caller's notification when the node is new to the client (common/node_handle.h).
absl::StatusOr<EntryIds> AddNode(const OpContext& ctx, UniqueFd fd, const struct stat& st);

// Opens `node` for I/O as OPEN (`flags`: the open(2) flags) or OPENDIR (`directory`; `flags`
// unused) do: regular files only for OPEN (EISDIR, ELOOP, ENXIO otherwise: FIFOs, sockets and
// devices are opened by the kernel itself, and opening a FIFO here could block the worker),
// directories only for OPENDIR (ENOTDIR).
absl::StatusOr<UniqueFd> OpenNode(const Node& node, bool directory, int flags);

// Looks `name` up under `parent_fd`, adds one lookup to its node and writes fuse_entry_out.
absl::Status ReplyEntry(const OpContext& ctx, int parent_fd, std::string_view name,
                        ReplyBody& body);

// The file `name` under `dir_fd` names now, if any, when other clients listen (ctx.others_listen):
// a request about to remove or replace it records it in ctx.changed_files once it succeeded.
std::optional<InodeKey> FileToBeReplaced(const OpContext& ctx, int dir_fd, std::string_view name);
// Records that the file `key` changed: its attributes (`data_from` < 0), or its data from
// `data_from` on and its attributes.
void NoteChangedFile(const OpContext& ctx, const InodeKey& key, int64_t data_from = -1);

// OPEN's check of a node's type (see OpenNode); also for CREATE's existing files.
absl::Status CheckOpenable(const Node& node);

// The mode a create or chmod asks for, as the caller may have it: an anonymous (squashed)
// caller never gets set-user-ID or set-group-ID bits. The kernel drops what else the caller may
// not set (it runs as the caller, thread_creds.h).
mode_t RequestedMode(const OpContext& ctx, mode_t mode);

// What a write or truncate by a caller without CAP_FSETID does on a local filesystem: clears
// set-user-ID, and set-group-ID when the file is group-executable. The kernel asks for it with
// FUSE_WRITE_KILL_SUIDGID / FUSE_OPEN_KILL_SUIDGID / FATTR_KILL_SUIDGID (FUSE_HANDLE_KILLPRIV_V2);
// the server may write with its own credentials, which the host never strips, and the caller
// need not own the file (it runs with the server's credentials, ServerCredsScope). File capabilities need nothing
// here: the host removes them on any write. `fd` is any fd of the file, O_PATH included.
absl::Status KillSuidSgid(int fd);

}  // namespace ringfs::server
