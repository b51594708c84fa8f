// Settings of one ringfs-server process, filled by ParseFlags() and read by Server.
// A plain value; copied into the components at construction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/wire.h"
#include "server/clients_file.h"
#include "server/export_options.h"

namespace ringfs::server {

struct ServerConfig {
  std::string export_dir;          // directory served as node 1
  std::string listen;              // "HOST:PORT" or "unix:PATH"
  std::string token;               // --token-file: any client name, this secret; empty = none
  // --clients: named clients with their secrets, options and sources (clients_file.h). With
  // neither this nor `token` nothing is authenticated.
  std::vector<ClientEntry> clients;
  std::string clients_file;        // where `clients` came from, for logs
  ExportOptions export_options;    // --export-options: what clients may do (export_options.h)
  bool manage_gids = true;         // callers' supplementary groups from NSS (group_cache.h)
  // Push changes made on the export directly (export_watch.h). Off by default: see the
  // known issue in export_watch.h.
  bool export_watch = false;
  uint32_t workers = 1;            // worker threads, each with one io_uring
  bool pin_workers = false;        // place local mounts per CPU (cpu_placement.h); flags: on
  bool worker_sched_idle = true;   // pinned workers serving a local mount (worker_sched.h)
  // Bytes per 200 ms window at which a placed worker leaves its CPU (Worker::Options::
  // bulk_window_bytes); tests lower it.
  uint64_t bulk_window_bytes = 32ull << 20;
  uint32_t max_inflight = wire::kDefaultMaxInflight;  // per-connection cap offered to clients
  std::string ready_file;          // written with the bound address once listening
  bool floor = false;              // transport floor: READ/WRITE answered without file I/O
  std::string admin;               // admin gRPC endpoint "unix:PATH" or "HOST:PORT"; empty = off
  std::string metrics;             // Prometheus /metrics on "HOST:PORT"; empty = off
  uint32_t node_fd_cache = 0;      // node fds kept open; 0 = from RLIMIT_NOFILE (node_fd_cache.h)
  uint32_t reclaim_grace_s = 90;   // a client's state outlives its last session this long
  uint32_t max_clients = 0;        // client states kept; 0 = from RLIMIT_NOFILE (DefaultMaxClients)
  uint32_t max_sessions_per_client = 256;  // connections of one client_id at a time
  uint32_t max_open_files_per_client = 0;  // 0 = from RLIMIT_NOFILE (DefaultMaxOpenFiles...)
  // The key that seals node handles (handle_key.h). Empty: a random key for this process only
  // (what tests use); ParseFlags sets kDefaultHandleKeyFile unless --handle-key is given.
  std::string handle_key_file;
  bool handle_key_explicit = false;  // from --handle-key: must work (no fallback)
  // TLS on the data wire (and the TCP admin service): certificate and key; with a CA, client
  // certificates are required and verified. All empty: plaintext.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
  uint32_t idle_timeout_s = 900;   // close connections silent this long; 0 = never
  LogLevel log_level = LogLevel::kInfo;
};

}  // namespace ringfs::server
