// Command-line and mount-option parsing for ringfs-mount / mount.ringfs.
// Pure functions; the result is a plain value owned by the caller.
#pragma once

#include <chrono>
#include <optional>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace ringfs::frontend {

enum class Transport { kAuto, kUring, kClassic };

const char* TransportName(Transport transport);

// Why 60 s: with invalidations pushed, a change made through another ringfs mount is seen at
// once whatever the timeout; the timeout bounds only how long a change made on the server's
// filesystem directly (not through ringfs) stays unseen, which NFS bounds the same way
// (acregmax/acdirmax = 60 s). It must stay below the server's --idle-timeout (900 s): a client
// whose connections the server closed for idleness hears no invalidation until it sends again.
inline constexpr std::chrono::seconds kCoherentCacheTimeout{60};
inline constexpr std::chrono::seconds kUncoherentCacheTimeout{1};

struct MountOptions {
  std::string server;      // HOST:PORT or unix:PATH: the first of `servers`
  // Every server of the export, in order of preference: the source's comma-separated list
  // (A:1,B:2:/EXPORT, as CephFS lists monitors) or servers=A:1,B:2 (which replaces it).
  std::vector<std::string> servers;
  bool servers_given = false;
  std::string export_path;  // the part after the last ':' ("/")
  std::string source;       // the spec as given, shown in /proc/mounts
  std::string mountpoint;   // absolute, as given
  bool foreground = false;
  bool fake = false;  // mount(8) -f: parse and check, mount nothing
  bool read_only = false;
  Transport transport = Transport::kAuto;
  uint32_t queue_depth = 16;  // most ring entries (or /dev/fuse slots) per queue
  // Ring entries each queue registers at the start; default (unset): queue_depth. Fewer, and a
  // queue grows toward queue_depth while its callers keep all its entries busy
  // (frontend/ring_worker.cc MaybeGrow), but the kernel never hands requests already waiting in a
  // queue to an entry registered later: they wait for that queue's next commit (README, "Ring
  // memory"). Registered entries cost no resident memory until they first serve (ring_memory.h).
  uint32_t initial_depth = 16;
  bool initial_depth_given = false;
  // ring_queues=all: register every possible CPU's queue even when the kernel offers reduced
  // queues (FUSE_URING_REDUCED_Q); auto (default): use them when offered.
  bool reduced_queues = true;
  // idle_pages=return: ring workers return the large-payload pages of entries idle in the kernel
  // (DEFER_TASKRUN rings, ~8% slower 1 MiB writes); keep (default): plain rings, and the pages
  // stay resident until the entry serves again (README, "Ring memory").
  bool return_idle_pages = false;
  // The secret proven to the server (never sent; frontend/client_auth.h), and the name it is
  // listed under in the server's clients file (default: the host name).
  std::string token_file;
  std::string client_name;
  // TLS 1.3 to the server (`tls`; implied by any tls_*= option): the CA that signed its
  // certificate (default: the system's trust store), a client certificate for servers that
  // require one, and the name its certificate must carry (default: the host of the source).
  bool tls = false;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_name;
  std::string stats_file;
  bool writeback_cache = false;
  // Ask the server for post-operation directory attributes (common/dir_attrs.h).
  bool dir_attrs = true;
  // Re-establish node ids and open files on a new server instance (common/node_handle.h);
  // no_reclaim: they answer ESTALE after a server restart.
  bool reclaim = true;
  // Ask the server to push cache invalidations (common/invalidation.h); no_invalidations: not.
  bool invalidations = true;
  // Answer LOOKUPs of names absent from directories this mount created or the server found empty
  // (frontend/complete_dirs.h) itself; no_complete_dirs: every LOOKUP goes to the server. Only
  // with invalidations.
  bool complete_dirs = true;
  // Keep the entries of nodes the kernel forgets (frontend/kept_entries.h), withholding their
  // FORGETs; no_kept_entries: every FORGET goes to the server. Only with complete_dirs.
  bool kept_entries = true;
  // Answer OPENDIR and RELEASEDIR here and list directories by node at the server (handle-less
  // listings, frontend/forwarder.h); no_handleless_listings: every directory is opened there.
  bool handleless_listings = true;
  // Ask the server for each WRITE's file after the write (write attrs), to answer the stat that
  // follows; no_write_attrs: every such stat goes to the server. Only with dir attrs.
  bool write_attrs = true;
  // Let the kernel keep a directory's listing across opens while it is current
  // (frontend/kept_listings.h); no_kept_listings: every opendir lists at the server again. Only
  // with complete_dirs and handle-less listings.
  bool kept_listings = true;
  // kept_pages: let the kernel keep a file's pages across opens while the server's record of
  // the file at the open shows it unchanged (frontend/kept_pages.h). Off by default: the
  // server's write-open test takes a read lease on the storage node, which makes other writers
  // there wait or fail with EAGAIN for its microseconds (README). Only with dir attrs.
  bool kept_pages = false;
  // reset_names: when invalidations may have been lost, also mark every cached name stale
  // (FUSE_NOTIFY_INC_EPOCH; KernelNotifier::ResetKernelCaches). Off by default: the kernel then
  // detaches anything mounted on a directory of this mount, in every mount namespace.
  bool reset_names = false;
  // async_unlink: answer an UNLINK before the server has run it (frontend/async_removals.h);
  // a failure there is then only logged and counted. Off by default, as CephFS's nowsync.
  bool async_unlink = false;
  // async_setattr: answer a chmod, chown or utimes of a regular file before the server has run
  // it (AsyncRemovals::BeginSetattr); a failure there is then only logged and counted. Off by
  // default (CephFS buffers such changes only under an exclusive capability).
  bool async_setattr = false;
  // async_write: answer a WRITE through a write-only descriptor before the server has run it
  // (AsyncRemovals::BeginWrite); the close (FLUSH) and fsync of the file wait for it and report
  // its error, as NFS does. Off by default.
  bool async_write = false;
  // sync_release: the RELEASE of a file's last close goes to the server at once. Default: it is
  // answered by the mount (the kernel never waits for it) and goes with the next request, or
  // within 1 ms (BackendConfig::detach_releases).
  bool sync_release = false;
  // sync_noop_setattr: a chown or chmod that sets the owner, group or mode a file already has is
  // sent to the server. Default: answered by the mount when it knows the file's attributes
  // (AsyncRemovals::Unchanged; needs invalidations and dir_attrs).
  bool sync_noop_setattr = false;
  // How long the kernel trusts entries and attributes. Unset: kCoherentCacheTimeout when the
  // server pushes invalidations, kUncoherentCacheTimeout with no_invalidations.
  std::optional<std::chrono::nanoseconds> entry_timeout;
  std::optional<std::chrono::nanoseconds> attr_timeout;
  std::chrono::milliseconds connect_timeout{5000};
  // timeout=S: a request the server has not answered S seconds after it reached ringfs-mount
  // ends with ETIMEDOUT (NFS `soft,timeo=`); `hard`: never (NFS `hard`). See README.
  std::chrono::milliseconds request_timeout{60000};
  bool timeout_given = false;
  bool hard = false;
  // FUSE_ASYNC_DIO, always on a soft mount. A hard mount does without it unless `async_dio` is
  // given: async direct I/O is 2-3x faster at depth, but its callers wait uninterruptibly, kill -9
  // included, and a hard mount may wait for the server forever (README, "hard").
  bool async_dio_on_hard = false;
  std::string log_level = "info";
  // Control plane: "" = the default Unix socket /run/ringfs/<escaped mountpoint>.sock,
  // "none" = no control service, else unix:PATH or HOST:PORT (TCP needs control_token_file).
  std::string control;
  std::string control_token_file;
  std::string metrics;  // HOST:PORT serving /metrics; empty = no metrics endpoint
  // Queue-engine settings (active=, bg_limit=, fg_policy=, bg_policy=, commit=, thresholds=),
  // applied in order to the default QueueConfig once the CPU topology is known.
  std::vector<std::pair<std::string, std::string>> queue_options;
};

// Parses `ringfs-mount SPEC MOUNTPOINT [-f] [-o OPTS]`; when `as_mount_helper` (invoked as
// mount.ringfs) it follows mount(8)'s helper convention instead: `-f` fakes, `-n -s -v` are
// accepted, and the process always daemonizes.
absl::StatusOr<MountOptions> ParseCommandLine(const std::vector<std::string>& args,
                                              bool as_mount_helper);

std::string Usage();

}  // namespace ringfs::frontend
