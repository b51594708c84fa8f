#include "frontend/options.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "frontend/queue/queue_config.h"

namespace ringfs::frontend {
namespace {

// Options mount(8) and fstab pass along that mean nothing to ringfs (or are always on).
bool IsGenericMountOption(const std::string& key) {
  static const char* const kGeneric[] = {
      "rw", "defaults", "auto", "noauto", "_netdev", "nofail", "user", "users", "nouser",
      "owner", "group", "exec", "noexec", "suid", "nosuid", "dev", "nodev", "atime",
      "noatime", "relatime", "norelatime", "strictatime", "diratime", "nodiratime",
      "async", "sync", "allow_other", "default_permissions"};
  for (const char* generic : kGeneric) {
    if (key == generic) return true;
  }
  return key.rfind("x-", 0) == 0 || key.rfind("comment=", 0) == 0;
}

absl::StatusOr<std::chrono::nanoseconds> ParseSeconds(const std::string& key,
                                                      const std::string& value) {
  double seconds = 0;
  if (!absl::SimpleAtod(value, &seconds) || !std::isfinite(seconds) || seconds < 0 ||
      seconds > 86400.0 * 365) {
    return absl::InvalidArgumentError(
        absl::StrFormat("option %s: '%s' is not a number of seconds", key, value));
  }
  return std::chrono::nanoseconds(static_cast<int64_t>(seconds * 1e9));
}

absl::Status ApplyOption(const std::string& option, MountOptions* out) {
  if (option.empty()) return absl::OkStatus();
  size_t eq = option.find('=');
  std::string key = option.substr(0, eq);
  std::string value = eq == std::string::npos ? "" : option.substr(eq + 1);
  bool has_value = eq != std::string::npos;
  auto need_value = [&]() -> absl::Status {
    if (!has_value || value.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat("option %s needs a value", key));
    }
    return absl::OkStatus();
  };
  if (key == "transport") {
    if (value == "auto") out->transport = Transport::kAuto;
    else if (value == "uring") out->transport = Transport::kUring;
    else if (value == "classic") out->transport = Transport::kClassic;
    else {
      return absl::InvalidArgumentError(
          absl::StrFormat("transport=%s: expected auto, uring or classic", value));
    }
  } else if (key == "queue_depth") {
    uint32_t depth = 0;
    if (!absl::SimpleAtoi(value, &depth) || depth < 1 || depth > 128) {
      return absl::InvalidArgumentError(
          absl::StrFormat("queue_depth=%s: expected 1..128", value));
    }
    out->queue_depth = depth;
  } else if (key == "initial_depth") {
    uint32_t depth = 0;
    if (!absl::SimpleAtoi(value, &depth) || depth < 1 || depth > 128) {
      return absl::InvalidArgumentError(
          absl::StrFormat("initial_depth=%s: expected 1..queue_depth", value));
    }
    out->initial_depth = depth;
    out->initial_depth_given = true;
  } else if (key == "idle_pages") {
    if (value == "return") out->return_idle_pages = true;
    else if (value == "keep") out->return_idle_pages = false;
    else {
      return absl::InvalidArgumentError(
          absl::StrFormat("idle_pages=%s: expected return or keep", value));
    }
  } else if (key == "ring_queues") {
    if (value == "auto") out->reduced_queues = true;
    else if (value == "all") out->reduced_queues = false;
    else {
      return absl::InvalidArgumentError(
          absl::StrFormat("ring_queues=%s: expected auto or all", value));
    }
  } else if (key == "token_file") {
    if (auto s = need_value(); !s.ok()) return s;
    out->token_file = value;
  } else if (key == "client_name") {
    if (auto s = need_value(); !s.ok()) return s;
    out->client_name = value;
  } else if (key == "tls") {
    out->tls = true;
  } else if (key == "tls_ca" || key == "tls_cert" || key == "tls_key" || key == "tls_name") {
    if (auto s = need_value(); !s.ok()) return s;
    out->tls = true;
    (key == "tls_ca" ? out->tls_ca
     : key == "tls_cert" ? out->tls_cert
     : key == "tls_key" ? out->tls_key
                        : out->tls_name) = value;
  } else if (key == "stats_file") {
    if (auto s = need_value(); !s.ok()) return s;
    out->stats_file = value;
  } else if (key == "writeback_cache") {
    out->writeback_cache = true;
  } else if (key == "no_dir_attrs") {
    out->dir_attrs = false;
  } else if (key == "no_invalidations") {
    out->invalidations = false;
  } else if (key == "no_complete_dirs") {
    out->complete_dirs = false;
  } else if (key == "no_kept_entries") {
    out->kept_entries = false;
  } else if (key == "no_handleless_listings") {
    out->handleless_listings = false;
  } else if (key == "no_write_attrs") {
    out->write_attrs = false;
  } else if (key == "no_kept_listings") {
    out->kept_listings = false;
  } else if (key == "kept_pages") {
    out->kept_pages = true;
  } else if (key == "reset_names") {
    out->reset_names = true;
  } else if (key == "async_unlink") {
    out->async_unlink = true;
  } else if (key == "async_setattr") {
    out->async_setattr = true;
  } else if (key == "async_write") {
    out->async_write = true;
  } else if (key == "sync_release") {
    out->sync_release = true;
  } else if (key == "sync_noop_setattr") {
    out->sync_noop_setattr = true;
  } else if (key == "no_reclaim") {
    out->reclaim = false;
  } else if (key == "entry_timeout" || key == "attr_timeout") {
    auto parsed = ParseSeconds(key, value);
    if (!parsed.ok()) return parsed.status();
    (key == "entry_timeout" ? out->entry_timeout : out->attr_timeout) = *parsed;
  } else if (key == "connect_timeout") {
    auto parsed = ParseSeconds(key, value);
    if (!parsed.ok()) return parsed.status();
    out->connect_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*parsed);
    if (out->connect_timeout.count() < 1) out->connect_timeout = std::chrono::milliseconds(1);
  } else if (key == "timeout") {
    auto parsed = ParseSeconds(key, value);
    if (!parsed.ok()) return parsed.status();
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(*parsed);
    if (ms.count() < 100) {
      return absl::InvalidArgumentError(
          absl::StrFormat("timeout=%s: at least 0.1 s (use `hard` to wait forever)", value));
    }
    out->request_timeout = ms;
    out->timeout_given = true;
  } else if (key == "async_dio") {
    // No value: `async_dio=no` must not quietly give callers that cannot be killed.
    if (has_value) {
      return absl::InvalidArgumentError("async_dio takes no value (leave it out to go without)");
    }
    out->async_dio_on_hard = true;
  } else if (key == "hard") {
    out->hard = true;
  } else if (key == "soft") {
    out->hard = false;
  } else if (key == "log_level") {
    if (value != "debug" && value != "info" && value != "warn" && value != "error") {
      return absl::InvalidArgumentError(
          absl::StrFormat("log_level=%s: expected debug, info, warn or error", value));
    }
    out->log_level = value;
  } else if (key == "control" || key == "control_token_file" || key == "metrics") {
    if (auto s = need_value(); !s.ok()) return s;
    (key == "control" ? out->control
                      : key == "metrics" ? out->metrics : out->control_token_file) = value;
  } else if (queue::IsQueueOptionKey(key)) {
    out->queue_options.emplace_back(key, value);
  } else if (key == "ro") {
    out->read_only = true;
  } else if (IsGenericMountOption(key)) {
    // Accepted for fstab compatibility.
  } else {
    return absl::InvalidArgumentError(absl::StrFormat("unknown mount option '%s'", option));
  }
  return absl::OkStatus();
}

absl::Status ApplyOptionList(const std::string& list, MountOptions* out) {
  bool in_servers = false;
  for (const std::string& option : std::vector<std::string>(absl::StrSplit(list, ','))) {
    // servers=A:1,B:2 shares the comma with the option list: an item with ':' and no '=' right
    // after it is one more server (no option has a ':' without an '=').
    if (in_servers && option.find(':') != std::string::npos &&
        option.find('=') == std::string::npos) {
      out->servers.push_back(option);
      continue;
    }
    in_servers = option.rfind("servers=", 0) == 0;
    if (in_servers) {
      if (option.size() == 8) return absl::InvalidArgumentError("servers= needs HOST:PORT");
      out->servers_given = true;
      out->servers = {option.substr(8)};
      continue;
    }
    if (auto status = ApplyOption(option, out); !status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status SplitSpec(const std::string& spec, MountOptions* out) {
  // SPEC is SERVER:EXPORT where SERVER is HOST:PORT, [V6]:PORT or unix:PATH.
  size_t split = spec.rfind(':');
  if (split == std::string::npos || split == 0 || split + 1 >= spec.size() ||
      spec[split + 1] != '/') {
    return absl::InvalidArgumentError(absl::StrFormat(
        "'%s' is not a ringfs source; expected HOST:PORT:/EXPORT or unix:PATH:/EXPORT", spec));
  }
  out->server = spec.substr(0, split);
  if (!out->servers_given) {
    out->servers.clear();
    for (absl::string_view one : absl::StrSplit(out->server, ',')) {
      if (one.empty()) {
        return absl::InvalidArgumentError(absl::StrFormat("empty server in '%s'", spec));
      }
      out->servers.emplace_back(one);
    }
  }
  out->server = out->servers.front();
  out->export_path = spec.substr(split + 1);
  out->source = spec;
  return absl::OkStatus();
}

}  // namespace

const char* TransportName(Transport transport) {
  switch (transport) {
    case Transport::kAuto: return "auto";
    case Transport::kUring: return "uring";
    case Transport::kClassic: return "classic";
  }
  return "?";
}

std::string Usage() {
  return "usage: ringfs-mount HOST:PORT:/ MOUNTPOINT [-f] [-o OPTION[,OPTION...]]\n"
         "       mount.ringfs HOST:PORT:/ MOUNTPOINT [-sfnv] [-o OPTIONS]\n"
         "options: transport=auto|uring|classic  queue_depth=N (1..128, default 16)\n"
         "         initial_depth=N (ring entries a queue registers at the start, default\n"
         "         queue_depth; fewer grow while callers keep every entry busy, but\n"
         "         requests waiting in the kernel meanwhile wait for the next commit)\n"
         "         ring_queues=auto|all (auto: only the active set's queues when the kernel\n"
         "         offers FUSE_URING_REDUCED_Q)\n"
         "         idle_pages=keep|return (return: pages of large payloads of ring entries\n"
         "         idle for 2 s go back to the kernel, 1 MiB writes ~8% slower; keep, the\n"
         "         default: they stay until the entry serves again)\n"
         "         token_file=PATH  stats_file=PATH  writeback_cache  no_dir_attrs  no_reclaim  "
         "ro\n"
         "         client_name=NAME (default: the host name; the server's clients file lists\n"
         "         it with the secret in token_file=, proven by challenge-response, never sent)\n"
         "         entry_timeout=SECONDS  attr_timeout=SECONDS (default 60; the server pushes\n"
         "         invalidations, so changes through other mounts are seen at once)\n"
         "         no_invalidations (no pushed invalidations; timeouts default to 1)\n"
         "         no_complete_dirs (every LOOKUP to the server; default: a name absent from a\n"
         "         directory this mount made, or the server found empty, is answered here)\n"
         "         no_kept_entries (the kernel's FORGETs go to the server at once; default: the\n"
         "         entries of forgotten nodes are kept to answer their next LOOKUP)\n"
         "         no_handleless_listings (opendir and closedir go to the server; default:\n"
         "         answered here, the server lists a directory by its node at each readdir)\n"
         "         no_write_attrs (the stat after a write goes to the server; default: each\n"
         "         write's answer brings the file's attributes, which answer it here)\n"
         "         no_kept_listings (every opendir lists at the server; default: the kernel\n"
         "         keeps a directory's listing while no change of it was heard of)\n"
         "         kept_pages (keep a file's cached pages across opens while the server's\n"
         "         record at the open shows the file unchanged; off by default: the server\n"
         "         takes a short read lease per open, see README)\n"
         "         reset_names (after a lost connection also drop cached names; detaches\n"
         "         anything mounted inside this mount, in every mount namespace)\n"
         "         async_unlink (answer unlink before the server ran it, 2x faster; a failure\n"
         "         there is only logged, and the name comes back)\n"
         "         async_setattr (answer chmod, chown and utimes of files before the server\n"
         "         ran them; a failure there is only logged)\n"
         "         async_write (answer writes of write-only descriptors before the server ran\n"
         "         them; close and fsync wait for them and report their errors, as on NFS)\n"
         "         sync_release (send a file's release to the server at once; default: with\n"
         "         the next request, within 1 ms)\n"
         "         sync_noop_setattr (send a chown or chmod that changes nothing to the server;\n"
         "         default: answered by the mount, the change time is not moved)\n"
         "         connect_timeout=SECONDS (default 5)  log_level=debug|info|warn|error\n"
         "         timeout=SECONDS (default 60: unanswered requests end with ETIMEDOUT)\n"
         "         hard (wait for the server forever; callers stay interruptible)\n"
         "         async_dio (with hard: parallel direct I/O, 2-3x faster at depth, but\n"
         "         its callers cannot be interrupted or killed while the server is down)\n"
         "         tls (TLS 1.3 to the server)  tls_ca=PATH (default: system CAs)\n"
         "         tls_cert=PATH tls_key=PATH (client certificate)  tls_name=NAME (default:\n"
         "         the source's host; the server certificate must carry it)\n"
         "         servers=HOST:PORT,HOST:PORT... (servers of one export, tried in turn;\n"
         "         also A:1,B:2:/ as the source)\n"
         "control:  control=unix:PATH|HOST:PORT|none  control_token_file=PATH\n"
         "         metrics=HOST:PORT (Prometheus /metrics)\n"
         "queue engine (transport=uring): active=CPULIST  bg_limit=N|unlimited\n"
         "         fg_policy=local|next-core|p2c  bg_policy=local|next-core|p2c\n"
         "         commit=forwarder|origin  thresholds=LOCAL/NUMA/GLOBAL (default 2/3/4)\n";
}

absl::StatusOr<MountOptions> ParseCommandLine(const std::vector<std::string>& args,
                                              bool as_mount_helper) {
  MountOptions out;
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-o") {
      if (i + 1 >= args.size()) return absl::InvalidArgumentError("-o needs an option list");
      if (auto s = ApplyOptionList(args[++i], &out); !s.ok()) return s;
    } else if (arg.rfind("-o", 0) == 0 && arg.size() > 2) {
      if (auto s = ApplyOptionList(arg.substr(2), &out); !s.ok()) return s;
    } else if (arg.size() > 1 && arg[0] == '-') {
      for (char flag : arg.substr(1)) {
        if (flag == 'f') {
          (as_mount_helper ? out.fake : out.foreground) = true;
        } else if (as_mount_helper && (flag == 'n' || flag == 's' || flag == 'v')) {
          // mtab, sloppy and verbose have no meaning here.
        } else {
          return absl::InvalidArgumentError(absl::StrFormat("unknown flag -%c", flag));
        }
      }
    } else {
      positional.push_back(arg);
    }
  }
  if (!out.control.empty() && out.control != "none" && out.control.rfind("unix:", 0) != 0 &&
      out.control_token_file.empty()) {
    return absl::InvalidArgumentError(
        "control on TCP needs control_token_file (the service refuses every call without it)");
  }
  if (out.tls_cert.empty() != out.tls_key.empty()) {
    return absl::InvalidArgumentError("tls_cert= and tls_key= go together");
  }
  if (!out.initial_depth_given) out.initial_depth = out.queue_depth;
  if (out.initial_depth > out.queue_depth) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "initial_depth=%u is above queue_depth=%u", out.initial_depth, out.queue_depth));
  }
  if (out.hard && out.timeout_given) {
    return absl::InvalidArgumentError(
        "hard and timeout= exclude each other: a hard mount waits for the server forever");
  }
  if (positional.size() != 2) {
    return absl::InvalidArgumentError("expected exactly a source and a mountpoint");
  }
  if (auto s = SplitSpec(positional[0], &out); !s.ok()) return s;
  out.mountpoint = positional[1];
  if (out.mountpoint.empty()) return absl::InvalidArgumentError("empty mountpoint");
  if (out.export_path != "/") {
    // The server exports one tree; sub-directory mounts are not supported yet.
    return absl::InvalidArgumentError(
        absl::StrFormat("export '%s': only '/' is supported", out.export_path));
  }
  return out;
}

}  // namespace ringfs::frontend
