#include "controller/ringfsctl_args.h"

#include <limits.h>
#include <stdlib.h>

#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "controller/control_endpoint.h"
#include "frontend/queue/queue_config.h"

namespace ringfs::controller {
namespace {

absl::Status Usage(const std::string& what) { return absl::InvalidArgumentError(what); }

// Splits "--name=value" / "--name value" style options out of `words` (from `start`), leaving
// positional words behind. `with_value` lists the options that take a value; flags take none.
struct Options {
  std::map<std::string, std::string> values;
  std::vector<std::string> positional;
};

absl::StatusOr<Options> SplitOptions(const std::vector<std::string>& words, size_t start,
                                     const std::vector<std::string>& with_value,
                                     const std::string& command) {
  Options out;
  for (size_t i = start; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (word.size() < 3 || word.rfind("--", 0) != 0) {
      out.positional.push_back(word);
      continue;
    }
    std::string name = word.substr(2), value;
    bool inline_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    bool known = false;
    for (const std::string& option : with_value) known |= option == name;
    if (!known) return Usage(absl::StrCat(command, ": unknown option --", name));
    if (!inline_value) {
      if (i + 1 >= words.size())
        return Usage(absl::StrCat(command, ": --", name, " needs a value"));
      value = words[++i];
    }
    out.values[name] = value;
  }
  return out;
}

absl::StatusOr<uint64_t> ParseUint(const std::string& text, const std::string& what,
                                   uint64_t max = UINT64_MAX) {
  uint64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value > max) {
    return Usage(absl::StrCat(what, ": '", text, "' is not a whole number",
                              max == UINT64_MAX ? "" : absl::StrCat(" up to ", max)));
  }
  return value;
}

// "1s", "200ms", "1.5s"; a bare number is seconds.
absl::StatusOr<absl::Duration> ParseInterval(const std::string& text, const std::string& what) {
  absl::Duration duration;
  double seconds = 0;
  if (absl::SimpleAtod(text, &seconds)) {
    duration = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(text, &duration)) {
    return Usage(absl::StrCat(what, ": '", text, "' is not a duration such as 1s or 200ms"));
  }
  if (duration <= absl::ZeroDuration()) return Usage(absl::StrCat(what, " must be positive"));
  return duration;
}

absl::Status NoPositional(const Options& options, const std::string& command) {
  if (!options.positional.empty()) {
    return Usage(absl::StrCat(command, ": unexpected argument '", options.positional.front(), "'"));
  }
  return absl::OkStatus();
}

absl::Status ParsePolicyArgs(const Options& options, CtlCommand& command) {
  RETURN_IF_ERROR(NoPositional(options, "policy"));
  for (const auto& [name, value] : options.values) {
    if (name == "foreground") {
      command.policy.set_foreground(value);
    } else if (name == "background") {
      command.policy.set_background(value);
    } else if (name == "commit") {
      command.policy.set_commit_locality(value);
    } else if (name == "thresholds") {
      std::vector<std::string> parts = absl::StrSplit(value, '/');
      if (parts.size() != 3 && parts.size() != 4) {
        return Usage(
            absl::StrCat("policy --thresholds: expected LOCAL/NUMA/GLOBAL[/RETRIES], "
                         "e.g. 2/3/4, not '",
                         value, "'"));
      }
      uint64_t v[4] = {};
      for (size_t i = 0; i < parts.size(); ++i) {
        ASSIGN_OR_RETURN(v[i], ParseUint(parts[i], "policy --thresholds", UINT32_MAX));
      }
      control::Thresholds* t = command.policy.mutable_thresholds();
      t->set_local(v[0]);
      t->set_numa(v[1]);
      t->set_global(v[2]);
      t->set_next_core_retries(v[3]);
      command.keep_next_core_retries = parts.size() == 3;
    }
  }
  return absl::OkStatus();
}

// Every command with those of its own options that take a value. The global options are
// picked out of the whole line before the command parses the rest, so they must not take a
// command option's value for one of theirs (`policy --foreground --json` sets the foreground
// policy "--json"), and no command option may be named like a global one.
struct CommandSpec {
  const char* name;
  std::vector<std::string> options_with_value;
};

const std::vector<CommandSpec>& Commands() {
  static const auto* commands = new std::vector<CommandSpec>{
      {"queues", {}},
      {"set-active", {}},
      {"bg-limit", {"queue"}},
      {"policy", {"foreground", "background", "thresholds", "commit"}},
      {"kernel", {"max-background", "congestion-threshold"}},
      {"info", {}},
      {"watch", {"interval", "count"}},
      // Its --token-file is the global option: the admin service's token.
      {"server", {"admin", "timeout"}},
  };
  return *commands;
}

bool IsCommand(const std::string& word) {
  for (const CommandSpec& command : Commands()) {
    if (word == command.name) return true;
  }
  return false;
}

const std::vector<std::string>& OptionsWithValue(const std::string& command) {
  for (const CommandSpec& spec : Commands()) {
    if (command == spec.name) return spec.options_with_value;
  }
  static const auto* none = new std::vector<std::string>;
  return *none;
}

bool IsCommandOptionWithValue(const std::string& name) {
  for (const CommandSpec& command : Commands()) {
    for (const std::string& option : command.options_with_value) {
      if (name == option) return true;
    }
  }
  return false;
}

bool IsOption(const std::string& word) { return word.size() >= 3 && word.rfind("--", 0) == 0; }

// Takes the global options (--control, --token-file, --json, --help) out of `args` wherever they
// stand, before or after the command, and returns the other words in their order.
absl::StatusOr<std::vector<std::string>> TakeGlobalOptions(const std::vector<std::string>& args,
                                                           CtlCommand& command) {
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "-h") {
      command.help = true;
      continue;
    }
    if (!IsOption(word)) {
      rest.push_back(word);
      continue;
    }
    std::string name = word, value;
    bool has_inline = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_inline = true;
    }
    if (name == "--json" || name == "--help") {
      if (has_inline) return Usage(absl::StrCat(name, " takes no value"));
      (name == "--json" ? command.json : command.help) = true;
      continue;
    }
    if (name == "--control" || name == "--token-file" || name == "--tls-ca" ||
        name == "--tls-cert" || name == "--tls-key") {
      if (!has_inline) {
        if (i + 1 >= args.size()) return Usage(absl::StrCat(name, " needs a value"));
        value = args[++i];
      }
      (name == "--control"      ? command.control
       : name == "--token-file" ? command.token_file
       : name == "--tls-ca"     ? command.tls_ca
       : name == "--tls-cert"   ? command.tls_cert
                                : command.tls_key) = value;
      continue;
    }
    // A command's option: its value, the next word, stays with it.
    rest.push_back(word);
    if (!has_inline && IsCommandOptionWithValue(name.substr(2)) && i + 1 < args.size()) {
      rest.push_back(args[++i]);
    }
  }
  return rest;
}

absl::Status ParseServerArgs(const std::vector<std::string>& words, size_t start,
                             CtlCommand& command) {
  ASSIGN_OR_RETURN(Options options,
                   SplitOptions(words, start, OptionsWithValue("server"), "server"));
  if (options.values.count("admin") == 0) return Usage("server: --admin ADDR is required");
  command.admin = options.values["admin"];
  if (options.positional.empty()) {
    return Usage("server: expected sessions, clients, export, set-limit SESSION N, or drain");
  }
  const std::string& sub = options.positional[0];
  size_t extra = options.positional.size() - 1;
  if (sub != "drain" && options.values.count("timeout")) {
    return Usage("server: --timeout belongs to drain");
  }
  if (sub == "sessions" || sub == "export" || sub == "clients") {
    if (extra != 0) return Usage(absl::StrCat("server ", sub, " takes no arguments"));
    command.verb = sub == "sessions" ? CtlVerb::kServerSessions
                   : sub == "clients" ? CtlVerb::kServerClients
                                      : CtlVerb::kServerExport;
  } else if (sub == "set-limit") {
    if (extra != 2) return Usage("server set-limit: expected SESSION N");
    ASSIGN_OR_RETURN(uint64_t session,
                     ParseUint(options.positional[1], "server set-limit SESSION"));
    ASSIGN_OR_RETURN(uint64_t limit,
                     ParseUint(options.positional[2], "server set-limit N", UINT32_MAX));
    command.set_session_limit.set_session_id(session);
    command.set_session_limit.set_max_inflight(limit);
    command.verb = CtlVerb::kServerSetLimit;
  } else if (sub == "drain") {
    if (extra != 0) return Usage("server drain takes no arguments besides --timeout");
    absl::Duration timeout = absl::Seconds(5);
    if (options.values.count("timeout")) {
      ASSIGN_OR_RETURN(timeout, ParseInterval(options.values["timeout"], "server drain --timeout"));
    }
    command.drain.set_timeout_ms(
        static_cast<uint32_t>(std::min<int64_t>(absl::ToInt64Milliseconds(timeout), UINT32_MAX)));
    command.verb = CtlVerb::kServerDrain;
  } else {
    return Usage(absl::StrCat("server: unknown command '", sub, "'"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CtlCommand> ParseCtlArgs(const std::vector<std::string>& all_args) {
  CtlCommand command;
  ASSIGN_OR_RETURN(const std::vector<std::string> args, TakeGlobalOptions(all_args, command));
  if (command.help) return command;
  size_t i = 0;
  // MOUNTPOINT-or-ADDR, unless --control names the service or the command is `server`.
  if (i < args.size() &&
      !(IsCommand(args[i]) && (!command.control.empty() || args[i] == "server"))) {
    command.target = args[i++];
  }
  // A command's own options follow it; before it only the global ones may stand.
  for (size_t j = 0; j <= i && j < args.size(); ++j) {
    if (IsOption(args[j])) {
      return Usage(absl::StrCat("unknown option ", args[j].substr(0, args[j].find('='))));
    }
  }
  if (i >= args.size()) return Usage("no command given");
  if (command.control.empty() && command.target.empty() && args[i] != "server") {
    return Usage("name a MOUNTPOINT or ADDR (or use --control ADDR)");
  }
  const std::string verb = args[i++];

  if (verb == "server") {
    RETURN_IF_ERROR(ParseServerArgs(args, i, command));
    return command;
  }
  if (verb == "queues" || verb == "info") {
    ASSIGN_OR_RETURN(Options options, SplitOptions(args, i, OptionsWithValue(verb), verb));
    RETURN_IF_ERROR(NoPositional(options, verb));
    command.verb = verb == "queues" ? CtlVerb::kQueues : CtlVerb::kInfo;
  } else if (verb == "set-active") {
    ASSIGN_OR_RETURN(Options options, SplitOptions(args, i, OptionsWithValue(verb), verb));
    if (options.positional.size() != 1)
      return Usage("set-active: expected one CPU list, e.g. 0,2-3");
    absl::StatusOr<std::vector<int>> cpus = frontend::queue::ParseCpuSet(options.positional[0]);
    if (!cpus.ok()) return Usage(absl::StrCat("set-active: ", cpus.status().message()));
    for (int cpu : *cpus) command.set_active.add_cpus(cpu);
    command.verb = CtlVerb::kSetActive;
  } else if (verb == "bg-limit") {
    ASSIGN_OR_RETURN(Options options, SplitOptions(args, i, OptionsWithValue(verb), verb));
    if (options.positional.size() != 1)
      return Usage("bg-limit: expected one limit L or 'unlimited'");
    if (options.values.count("queue")) {
      ASSIGN_OR_RETURN(uint64_t queue,
                       ParseUint(options.values["queue"], "bg-limit --queue", UINT32_MAX));
      command.bg_limit.set_cpu(queue);
    }
    if (options.positional[0] == "unlimited") {
      command.bg_limit.set_unlimited(true);
    } else {
      ASSIGN_OR_RETURN(uint64_t limit, ParseUint(options.positional[0], "bg-limit L"));
      command.bg_limit.set_limit(limit);  // 0 goes to the service, which says why it is wrong
    }
    command.verb = CtlVerb::kBgLimit;
  } else if (verb == "policy") {
    ASSIGN_OR_RETURN(Options options, SplitOptions(args, i, OptionsWithValue(verb), verb));
    RETURN_IF_ERROR(ParsePolicyArgs(options, command));
    command.verb = CtlVerb::kPolicy;
  } else if (verb == "kernel") {
    ASSIGN_OR_RETURN(Options options, SplitOptions(args, i, OptionsWithValue(verb), verb));
    RETURN_IF_ERROR(NoPositional(options, verb));
    if (options.values.count("max-background")) {
      ASSIGN_OR_RETURN(uint64_t v, ParseUint(options.values["max-background"],
                                             "kernel --max-background", UINT32_MAX));
      command.kernel.set_max_background(v);
    }
    if (options.values.count("congestion-threshold")) {
      ASSIGN_OR_RETURN(uint64_t v, ParseUint(options.values["congestion-threshold"],
                                             "kernel --congestion-threshold", UINT32_MAX));
      command.kernel.set_congestion_threshold(v);
    }
    command.verb = CtlVerb::kKernel;
  } else if (verb == "watch") {
    ASSIGN_OR_RETURN(Options options, SplitOptions(args, i, OptionsWithValue(verb), verb));
    RETURN_IF_ERROR(NoPositional(options, verb));
    absl::Duration interval = absl::Seconds(1);
    if (options.values.count("interval")) {
      ASSIGN_OR_RETURN(interval, ParseInterval(options.values["interval"], "watch --interval"));
    }
    command.watch.set_interval_ms(
        static_cast<uint32_t>(std::min<int64_t>(absl::ToInt64Milliseconds(interval), UINT32_MAX)));
    if (options.values.count("count")) {
      ASSIGN_OR_RETURN(uint64_t count,
                       ParseUint(options.values["count"], "watch --count", UINT32_MAX));
      command.watch.set_count(count);
    }
    command.verb = CtlVerb::kWatch;
  } else {
    return Usage(absl::StrCat("unknown command '", verb, "'"));
  }
  return command;
}

absl::StatusOr<rpc::Endpoint> ResolveTarget(const CtlCommand& command) {
  if (IsServerVerb(command.verb)) return rpc::ParseAddress(command.admin);
  if (!command.control.empty()) return rpc::ParseAddress(command.control);
  const std::string& target = command.target;
  if (target.rfind("unix:", 0) == 0) return rpc::ParseAddress(target);
  if (target.front() != '/' && target.front() != '.' && target.find(':') != std::string::npos) {
    return rpc::ParseAddress(target);
  }
  // A mountpoint: resolved like ringfs-mount resolves it before naming its socket, except that
  // the mountpoint itself is never looked up: that would ask the FUSE daemon, and ringfsctl
  // must work when the mount is stuck. Only its parent directory is resolved.
  std::string path = target;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  size_t slash = path.rfind('/');
  std::string parent = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (path == "/") return rpc::Endpoint{rpc::Endpoint::Kind::kUnix, DefaultSocketPath("/")};
  if (base == "." || base == "..") {
    parent = path;  // nothing lexical to keep: resolve the whole path
    base.clear();
  }
  char resolved[PATH_MAX];
  if (realpath(parent.c_str(), resolved) == nullptr) {
    return ErrnoError(errno, absl::StrCat("mountpoint ", target));
  }
  std::string mountpoint = resolved;
  if (!base.empty()) mountpoint += (mountpoint == "/" ? "" : "/") + base;
  return rpc::Endpoint{rpc::Endpoint::Kind::kUnix, DefaultSocketPath(mountpoint)};
}

std::string CtlUsage() {
  return R"(usage: ringfsctl [--control ADDR] [--token-file F] [--json] MOUNTPOINT|ADDR COMMAND
  ADDR is unix:PATH or HOST:PORT; a MOUNTPOINT names its socket /run/ringfs/<escaped>.sock.
  The global options (--control, --token-file, --tls-ca, --tls-cert, --tls-key, --json,
  --help) may also follow the command.
  On TCP the token file's content is sent as "authorization: Bearer <token>".
  --tls-ca F: TLS to a TCP service started with --tls-cert (tls_cert= for a mount), trusting
  CA F; --tls-cert/--tls-key: the client certificate a service with --tls-ca requires.
commands:
  queues                                  per-queue owners, states, counters and the settings
  set-active CPUS                         e.g. 0,2-3: the CPUs whose workers do backend work
  bg-limit [--queue N] L|unlimited        background requests in flight per worker (N: one)
  policy [--foreground P] [--background P] [--thresholds L/N/G[/R]] [--commit forwarder|origin]
                                          P: local|next-core|p2c; without options: show
  kernel [--max-background N] [--congestion-threshold N]   the kernel's knobs (fusectl)
  info                                    server, transport, FUSE version and flags, uptime
  watch [--interval 1s] [--count N]       live per-queue table (with --json: one object/line)
  server --admin ADDR [--token-file F] sessions|clients|export|set-limit SESSION N|drain
         [--timeout 5s]                   the admin service of ringfs-server; clients: the
                                          clients file's names, options, sources and sessions
--json prints protobuf JSON (proto field names). Exit codes: 0 ok, 1 refused or unreachable,
2 usage.
)";
}

}  // namespace ringfs::controller
