// ringfsctl's command line: parsed into a plain value before anything connects, so that usage
// errors (exit code 2) are separate from refusals and unreachable services (exit code 1).
// Pure except ResolveTarget (realpath); any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/rpc/endpoint.h"
#include "proto/admin.pb.h"
#include "proto/control.pb.h"

namespace ringfs::controller {

enum class CtlVerb {
  kQueues,
  kSetActive,
  kBgLimit,
  kPolicy,
  kKernel,
  kInfo,
  kWatch,
  kServerSessions,
  kServerExport,
  kServerClients,
  kServerSetLimit,
  kServerDrain,
};

// The `server ...` verbs talk to ringfs-server's admin service.
inline bool IsServerVerb(CtlVerb verb) {
  return verb == CtlVerb::kServerSessions || verb == CtlVerb::kServerExport ||
         verb == CtlVerb::kServerClients ||
         verb == CtlVerb::kServerSetLimit || verb == CtlVerb::kServerDrain;
}

struct CtlCommand {
  std::string control;     // --control ADDR; wins over `target`
  std::string token_file;  // --token-file F
  // --tls-ca F: TLS to a TCP service, trusting F; --tls-cert/--tls-key: a client certificate.
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  bool json = false;       // --json
  bool help = false;       // --help or -h: print CtlUsage(); nothing else is parsed
  std::string target;      // MOUNTPOINT or ADDR
  CtlVerb verb = CtlVerb::kQueues;

  // The request each verb sends; only the verb's own is filled in.
  control::SetActiveSetRequest set_active;
  control::SetBackgroundLimitRequest bg_limit;
  control::SetPolicyRequest policy;
  // `--thresholds L/N/G` without a retry count keeps the current next_core_retries, which the
  // client reads first.
  bool keep_next_core_retries = false;
  control::SetKernelLimitsRequest kernel;
  control::WatchQueuesRequest watch;

  std::string admin;  // server --admin ADDR
  admin::SetSessionLimitRequest set_session_limit;
  admin::DrainRequest drain;
};

// `args` without argv[0]. The global options (--control, --token-file, --json, --help) may stand
// anywhere: before the target, between it and the command, or among the command's options.
// InvalidArgument says what is wrong (print it with CtlUsage()).
absl::StatusOr<CtlCommand> ParseCtlArgs(const std::vector<std::string>& args);

std::string CtlUsage();

// The endpoint a command talks to: --control/--admin, an ADDR (unix:PATH, HOST:PORT), or a
// mountpoint, which names its default socket /run/ringfs/<escaped>.sock.
absl::StatusOr<rpc::Endpoint> ResolveTarget(const CtlCommand& command);

}  // namespace ringfs::controller
