#include "server/flags.h"

#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "server/admin_server.h"
#include "server/handle_key.h"
#include "server/server_metrics.h"

namespace ringfs::server {
namespace {

absl::Status Bad(const std::string& message) { return absl::InvalidArgumentError(message); }

absl::StatusOr<uint32_t> ParseCount(std::string_view flag, const std::string& value,
                                    uint32_t max) {
  uint32_t n = 0;
  if (!absl::SimpleAtoi(value, &n) || n == 0 || n > max) {
    return Bad(absl::StrFormat("%s wants a number in 1..%u, got '%s'", flag, max, value));
  }
  return n;
}

absl::StatusOr<LogLevel> ParseLogLevel(const std::string& value) {
  if (value == "debug") return LogLevel::kDebug;
  if (value == "info") return LogLevel::kInfo;
  if (value == "warn" || value == "warning") return LogLevel::kWarning;
  if (value == "error") return LogLevel::kError;
  return Bad(absl::StrFormat("--log-level wants debug|info|warn|error, got '%s'", value));
}

// The CPUs this process may run on (a cpuset or CPUAffinity= narrows them), else online ones.
uint32_t UsableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) {
    return static_cast<uint32_t>(CPU_COUNT(&set));
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<uint32_t>(n) : 1;
}

}  // namespace

std::string_view Usage() {
  return "usage: ringfs-server --export DIR --listen HOST:PORT|unix:PATH [--clients F]\n"
         "                     [--token-file F]\n"
         "                     [--workers N] [--max-inflight N] [--ready-file F]\n"
         "                     [--log-level debug|info|warn|error] [--floor]\n"
         "                     [--admin unix:PATH|HOST:PORT] [--metrics HOST:PORT]\n"
         "                     [--node-fd-cache N] [--reclaim-grace SECONDS]\n"
         "                     [--max-clients N] [--max-sessions-per-client N]\n"
         "                     [--idle-timeout SECONDS] [--max-open-files-per-client N]\n"
         "                     [--handle-key FILE] [--export-options OPTS]\n"
         "                     [--no-manage-gids] [--no-pin-workers]\n"
         "                     [--worker-sched idle|normal]\n"
         "  --clients  clients file: one client per line,\n"
         "               NAME secret=FILE|hex:HEX [options=OPTS] [from=PREFIX,...]\n"
         "             ('#' comments; FILE relative to the clients file; options= over\n"
         "             --export-options; from= e.g. 10.0.0.0/8,::1/128, default any). Clients\n"
         "             prove the secret by challenge-response; it never crosses the wire. The\n"
         "             file and secret files must be mode 0600 (or stricter)\n"
         "  --token-file  one secret any client name may use (with --export-options); with\n"
         "             --clients, for names not listed. Neither: no authentication (warned)\n"
         "                     [--tls-cert FILE --tls-key FILE [--tls-ca FILE]]\n"
         "  --floor    transport floor for benchmarks: READ answers zeros, WRITE discards\n"
         "  --admin    gRPC admin service (ringfsctl server ...); TCP needs --token-file\n"
         "  --metrics  Prometheus /metrics\n"
         "  --node-fd-cache  node fds kept open (default: a quarter of the fd limit)\n"
         "  --reclaim-grace  seconds a client's state (node ids, open files) is kept after its\n"
         "                   last connection ends (default 90; 0 = freed at once)\n"
         "  --max-clients    client states kept; more clients are refused at the handshake\n"
         "                   (default: fd limit / 16)\n"
         "  --max-sessions-per-client  connections of one mount (default 256)\n"
         "  --idle-timeout   close a connection that sent nothing for this long and has\n"
         "                   nothing in flight (default 900; 0 = never)\n"
         "  --max-open-files-per-client  open files + directories of one mount; more opens\n"
         "                   get ENFILE (default: a quarter of the fd limit)\n"
         "  --handle-key     key that seals node handles for reclaim after a restart; created\n"
         "                   (0600) if missing; share it between servers of one export\n"
         "                   (default /var/lib/ringfs/handle.key)\n"
         "  --tls-cert, --tls-key  TLS 1.3 on the data wire and the TCP admin service;\n"
         "                   clients mount with -o tls (and tls_ca=); plaintext clients are "
         "refused\n"
         "  --tls-ca         also require client certificates signed by this CA (mutual TLS)\n"
         "  --export-options what clients may do, as in exports(5): ro|rw,\n"
         "                   root_squash|no_root_squash|all_squash, anonuid=N, anongid=N\n"
         "                   (default rw,root_squash,anonuid=65534,anongid=65534)\n"
         "  --no-manage-gids a caller's groups are only the gid of its request, not the\n"
         "                   supplementary groups this server's user database gives its uid\n"
         "  --no-pin-workers serve a mount on this host like any client (by default, with one\n"
         "                   worker per usable CPU, its connections go to the worker of its\n"
         "                   kernel queue's CPU, pinned there while it serves them)\n"
         "  --worker-sched   idle (default): a pinned worker serving a mount on this host runs\n"
         "                   SCHED_IDLE, as the mount's ring workers do, until other work\n"
         "                   starves it; normal: always SCHED_OTHER\n"
         "  --export-watch   watch the export's filesystem (fanotify, needs CAP_SYS_ADMIN) and\n"
         "                   push changes made on the server directly to the clients\n"
         "                   (experimental, off by default: without it clients see such\n"
         "                   changes when their caches expire, 60 s by default)\n";
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Bad(absl::StrFormat("cannot read token file '%s': %s", path, std::strerror(errno)));
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string token = buffer.str();
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  if (token.empty()) return Bad(absl::StrFormat("token file '%s' is empty", path));
  return token;
}

absl::StatusOr<ServerConfig> ParseFlags(int argc, const char* const* argv) {
  ServerConfig config;
  config.workers = UsableCpus();
  config.pin_workers = true;
  config.handle_key_file = kDefaultHandleKeyFile;
  bool have_export = false, have_listen = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    size_t eq = arg.find('=');
    if (arg.rfind("--", 0) != 0) return Bad(absl::StrFormat("unexpected argument '%s'", arg));
    if (arg == "--no-pin-workers") {
      config.pin_workers = false;
      continue;
    }
    if (arg == "--floor") {
      config.floor = true;
      continue;
    }
    if (arg == "--no-manage-gids") {
      config.manage_gids = false;
      continue;
    }
    if (arg == "--export-watch") {
      config.export_watch = true;
      continue;
    }
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else {
      if (arg == "--help" || arg == "-h") return Bad("help requested");
      if (i + 1 >= argc) return Bad(absl::StrFormat("%s needs a value", arg));
      value = argv[++i];
    }
    if (arg == "--export") {
      config.export_dir = value;
      have_export = true;
    } else if (arg == "--listen") {
      config.listen = value;
      have_listen = true;
    } else if (arg == "--token-file") {
      auto token = ReadTokenFile(value);
      if (!token.ok()) return token.status();
      config.token = *std::move(token);
    } else if (arg == "--clients") {
      if (value.empty()) return Bad("--clients wants a file name");
      config.clients_file = value;
    } else if (arg == "--export-options") {
      auto options = ParseExportOptions(value);
      if (!options.ok()) return Bad(absl::StrFormat("--export-options: %s", options.status().message()));
      config.export_options = *options;
    } else if (arg == "--worker-sched") {
      if (value != "idle" && value != "normal") return Bad("--worker-sched: idle or normal");
      config.worker_sched_idle = value == "idle";
    } else if (arg == "--workers") {
      auto n = ParseCount(arg, value, 1024);
      if (!n.ok()) return n.status();
      config.workers = *n;
    } else if (arg == "--max-inflight") {
      auto n = ParseCount(arg, value, 65536);
      if (!n.ok()) return n.status();
      config.max_inflight = *n;
    } else if (arg == "--node-fd-cache") {
      auto n = ParseCount(arg, value, 1u << 20);
      if (!n.ok()) return n.status();
      config.node_fd_cache = *n;
    } else if (arg == "--reclaim-grace") {
      uint32_t seconds = 0;
      if (!absl::SimpleAtoi(value, &seconds) || seconds > 7 * 24 * 3600) {
        return Bad(absl::StrFormat("--reclaim-grace wants seconds in 0..604800, got '%s'", value));
      }
      config.reclaim_grace_s = seconds;
    } else if (arg == "--idle-timeout") {
      uint32_t seconds = 0;
      if (!absl::SimpleAtoi(value, &seconds) || seconds > 7 * 24 * 3600) {
        return Bad(absl::StrFormat("--idle-timeout wants seconds in 0..604800, got '%s'", value));
      }
      config.idle_timeout_s = seconds;
    } else if (arg == "--max-clients") {
      auto n = ParseCount(arg, value, 1u << 20);
      if (!n.ok()) return n.status();
      config.max_clients = *n;
    } else if (arg == "--max-open-files-per-client") {
      auto n = ParseCount(arg, value, 1u << 20);
      if (!n.ok()) return n.status();
      config.max_open_files_per_client = *n;
    } else if (arg == "--max-sessions-per-client") {
      auto n = ParseCount(arg, value, 65536);
      if (!n.ok()) return n.status();
      config.max_sessions_per_client = *n;
    } else if (arg == "--handle-key") {
      if (value.empty()) return Bad("--handle-key wants a file name");
      config.handle_key_file = value;
      config.handle_key_explicit = true;
    } else if (arg == "--tls-cert" || arg == "--tls-key" || arg == "--tls-ca") {
      if (value.empty()) return Bad(absl::StrFormat("%s wants a file name", arg));
      (arg == "--tls-cert" ? config.tls_cert : arg == "--tls-key" ? config.tls_key : config.tls_ca) =
          value;
    } else if (arg == "--admin") {
      config.admin = value;
    } else if (arg == "--metrics") {
      config.metrics = value;
    } else if (arg == "--ready-file") {
      config.ready_file = value;
    } else if (arg == "--floor") {
      return Bad("--floor takes no value");
    } else if (arg == "--log-level") {
      auto level = ParseLogLevel(value);
      if (!level.ok()) return level.status();
      config.log_level = *level;
    } else {
      return Bad(absl::StrFormat("unknown flag '%s'", arg));
    }
  }
  // After the loop: entries default to --export-options wherever it stands.
  if (!config.clients_file.empty()) {
    auto clients = ReadClientsFile(config.clients_file, config.export_options);
    if (!clients.ok()) return clients.status();
    config.clients = *std::move(clients);
  }
  if (!have_export || config.export_dir.empty()) return Bad("--export DIR is required");
  if (!have_listen || config.listen.empty()) return Bad("--listen ADDR is required");
  if (config.tls_cert.empty() != config.tls_key.empty()) {
    return Bad("--tls-cert and --tls-key go together");
  }
  if (!config.tls_ca.empty() && config.tls_cert.empty()) {
    return Bad("--tls-ca (client certificates) needs --tls-cert and --tls-key");
  }
  // After the loop: --token-file may follow --admin.
  if (!config.admin.empty()) {
    if (absl::Status valid = AdminServer::CheckAddress(config.admin, config.token); !valid.ok()) {
      return valid;
    }
  }
  if (!config.metrics.empty()) {
    if (absl::Status valid = ServerMetrics::CheckAddress(config.metrics); !valid.ok()) return valid;
  }
  struct stat st {};
  if (stat(config.export_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Bad(absl::StrFormat("export '%s' is not a directory", config.export_dir));
  }
  return config;
}

}  // namespace ringfs::server
