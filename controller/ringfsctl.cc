// ringfsctl: the command-line client of a mount's control service (proto/control.proto) and of
// ringfs-server's admin service (proto/admin.proto). Parses the command line (ringfsctl_args),
// makes one call (or one stream for watch), prints a table or protobuf JSON.
// Exit codes: 0 ok, 1 refused by the service or unreachable, 2 usage.
#include <google/protobuf/util/json_util.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/rpc/endpoint.h"
#include "common/rpc/grpc_tls.h"
#include "controller/ringfsctl_args.h"
#include "proto/admin.grpc.pb.h"
#include "proto/control.grpc.pb.h"

namespace ringfs::controller {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
constexpr auto kConnectTimeout = std::chrono::seconds(5);
// Changes return once every worker switched; the engine gives up after 10 s.
constexpr auto kCallTimeout = std::chrono::seconds(30);

std::string ToJson(const google::protobuf::Message& message, bool pretty) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = pretty;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::string LimitText(uint64_t limit) { return limit == 0 ? "unlimited" : absl::StrCat(limit); }

void PrintSettings(const control::QueueSettings& s) {
  std::vector<std::string> limits;
  for (const auto& [cpu, limit] : s.background_limit_by_cpu()) {
    limits.push_back(absl::StrCat(cpu, "=", LimitText(limit)));
  }
  std::sort(limits.begin(), limits.end());
  printf("active CPUs: %s\n", absl::StrJoin(s.active_cpus(), ",").c_str());
  printf(
      "policy: foreground %s, background %s, commit %s, thresholds %u/%u/%u (next-core "
      "retries %u)\n",
      s.foreground_policy().c_str(), s.background_policy().c_str(), s.commit_locality().c_str(),
      s.thresholds().local(), s.thresholds().numa(), s.thresholds().global(),
      s.thresholds().next_core_retries());
  printf("background limit: %s%s%s\n", LimitText(s.default_background_limit()).c_str(),
         limits.empty() ? "" : ", per CPU: ", absl::StrJoin(limits, " ").c_str());
}

// 20480 -> "20K", 3145728 -> "3.0M": resident memory in a narrow column.
std::string BytesText(uint64_t bytes) {
  if (bytes < 1024 * 1024) return absl::StrFormat("%uK", (bytes + 1023) / 1024);
  return absl::StrFormat("%.1fM", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

// `previous` (may be null) turns forwarded_total into a rate for watch.
void PrintQueueTable(const control::QueueState& state, const control::QueueState* previous) {
  bool rates = previous != nullptr && previous->queues_size() == state.queues_size() &&
               state.timestamp_unix_ns() > previous->timestamp_unix_ns();
  double seconds = rates ? (state.timestamp_unix_ns() - previous->timestamp_unix_ns()) * 1e-9 : 0;
  // ENTRIES/RING_MEM: the queue's own entries (wherever held) and their resident memory; HELD:
  // the entries the worker on this CPU holds now (of any queue).
  printf("%3s %5s %4s %-8s %7s %8s %5s %8s %7s %7s %9s %10s %10s %9s %9s %8s %8s %6s%s\n",
         "QID", "OWNER", "NODE", "WORKER", "ENTRIES", "RING_MEM", "HELD", "INFLIGHT", "BG_INFL",
         "BG_WAIT", "BG_LIMIT", "RECEIVED", "FORWARDED", "FG", "BG", "HAND_IN", "HAND_OUT",
         "FAILURES", rates ? "   FWD/S" : "");
  for (int i = 0; i < state.queues_size(); ++i) {
    const control::QueueInfo& q = state.queues(i);
    std::string rate;
    if (rates) {
      uint64_t before = previous->queues(i).forwarded_total();
      rate = absl::StrFormat(" %8.0f",
                             q.forwarded_total() >= before
                                 ? static_cast<double>(q.forwarded_total() - before) / seconds
                                 : 0.0);
    }
    std::string worker = absl::StrCat(q.active() ? "*" : " ", q.worker_state());
    printf("%3u %5u %4u %-8s %7u %8s %5u %8lu %7lu %7lu %9s %10lu %10lu %9lu %9lu %8lu %8lu %6lu%s\n",
           q.qid(), q.owner_cpu(), q.numa_node(), worker.c_str(), q.ring_entries(),
           BytesText(q.ring_memory_bytes()).c_str(), q.entries_held(), q.inflight(),
           q.background_inflight(), q.background_queued(), LimitText(q.background_limit()).c_str(),
           q.received_total(), q.forwarded_total(), q.forwarded_foreground(),
           q.forwarded_background(), q.handoffs_in(), q.handoffs_out(), q.failures(), rate.c_str());
  }
  printf("(* = in the active set)\n");
}

void PrintQueueState(const control::QueueState& state) {
  PrintSettings(state.settings());
  printf("\n");
  PrintQueueTable(state, nullptr);
}

void PrintKernel(const control::KernelLimits& k) {
  printf("FUSE connection %u: max_background %u, congestion_threshold %u, waiting %u\n",
         k.connection(), k.max_background(), k.congestion_threshold(), k.waiting());
}

void PrintInfo(const control::MountInfo& m) {
  printf("source:       %s\n", m.source().c_str());
  printf("mountpoint:   %s\n", m.mountpoint().c_str());
  printf("server:       %s\n", m.server().c_str());
  printf("transport:    %s\n", m.transport().c_str());
  printf("FUSE:         %u.%u, queue depth %u\n", m.fuse_major(), m.fuse_minor(), m.queue_depth());
  if (!m.ring_queues().empty()) {
    printf("ring queues:  %s, each starting with %u entries (growing to %u while busy)\n",
           m.ring_queues() == "reduced"
               ? "reduced to the active set (kernel FUSE_URING_REDUCED_Q)"
               : "one per possible CPU (the kernel needs them all)",
           m.initial_depth(), m.queue_depth());
  }
  printf("flags:        0x%lx %s\n", m.fuse_flags(),
         absl::StrJoin(m.fuse_flag_names(), " ").c_str());
  printf("uptime:       %.1f s\n", m.uptime_seconds());
  printf("client id:    %s\n", m.client_id().c_str());
}

void PrintSession(const admin::SessionInfo& s) {
  // "?": a server older than these fields.
  const std::string host = !s.has_this_host() ? "?" : s.this_host() ? "this" : "other";
  const std::string worker = s.has_worker() ? std::to_string(s.worker()) : "?";
  printf("%8lu %-40s %-22s %-5s %5u %6s %8lu %8u %10lu %12lu %12lu\n", s.session_id(),
         s.client_id().c_str(), s.peer().c_str(), host.c_str(), s.queue(), worker.c_str(),
         s.inflight(), s.max_inflight(), s.requests_total(), s.bytes_received(), s.bytes_sent());
}

void PrintSessionHeader() {
  printf("%8s %-40s %-22s %-5s %5s %6s %8s %8s %10s %12s %12s\n", "SESSION", "CLIENT", "PEER",
         "HOST", "QUEUE", "WORKER", "INFLIGHT", "MAX", "REQUESTS", "BYTES_IN", "BYTES_OUT");
}

// 0 when something accepts a connection on the Unix socket at `path`, else the errno.
int ProbeUnixSocket(const std::string& path) {
  sockaddr_un address{};
  if (path.size() >= sizeof(address.sun_path)) return ENAMETOOLONG;
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  int err =
      connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0 ? 0 : errno;
  close(fd);
  return err;
}

class Client {
 public:
  Client(const CtlCommand& command, rpc::Endpoint endpoint, std::string token)
      : command_(command), endpoint_(std::move(endpoint)), token_(std::move(token)) {}

  // Exit code 1 with a clear message when nothing answers there.
  int Connect() {
    if (endpoint_.kind == rpc::Endpoint::Kind::kUnix &&
        access(endpoint_.address.c_str(), F_OK) != 0) {
      fprintf(stderr, "ringfsctl: no control socket at %s%s\n", endpoint_.address.c_str(),
              command_.target.empty() || command_.target.rfind("unix:", 0) == 0
                  ? ""
                  : " (is it a ringfs mount with the control service on?)");
      return kExitFailed;
    }
    if (endpoint_.kind == rpc::Endpoint::Kind::kUnix) {
      // gRPC would only retry until the deadline; say at once why nothing answers.
      if (int err = ProbeUnixSocket(endpoint_.address); err != 0) {
        fprintf(stderr, "ringfsctl: cannot connect to %s: %s%s\n", endpoint_.address.c_str(),
                strerror(err),
                err == EACCES         ? " (the control socket is root's, mode 0600)"
                : err == ECONNREFUSED ? " (nothing serves it: did the mount end?)"
                                      : "");
        return kExitFailed;
      }
    }
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
        rpc::ChannelCredentialsFor(endpoint_,
                                   {command_.tls_cert, command_.tls_key, command_.tls_ca});
    if (!credentials.ok()) {
      fprintf(stderr, "ringfsctl: %s\n", std::string(credentials.status().message()).c_str());
      return kExitUsage;
    }
    channel_ = grpc::CreateChannel(endpoint_.GrpcAddress(), *credentials);
    if (!channel_->WaitForConnected(std::chrono::system_clock::now() + kConnectTimeout)) {
      // A TLS service and a plaintext client (or the reverse) only ever time out here.
      const bool tcp = endpoint_.kind == rpc::Endpoint::Kind::kTcp;
      fprintf(stderr, "ringfsctl: cannot reach %s within %ld s%s\n", endpoint_.ToString().c_str(),
              static_cast<long>(kConnectTimeout.count()),
              !tcp                     ? ""
              : command_.tls_ca.empty() ? " (a service started with TLS needs --tls-ca)"
                                        : " (is it serving TLS, with a certificate --tls-ca trusts?)");
      return kExitFailed;
    }
    return kExitOk;
  }

  void Prepare(grpc::ClientContext& context, bool streaming = false) const {
    if (!streaming) context.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
    if (!token_.empty()) context.AddMetadata("authorization", rpc::BearerValue(token_));
  }

  int Failed(const grpc::Status& status) const {
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      fprintf(stderr, "ringfsctl: cannot reach %s: %s\n", endpoint_.ToString().c_str(),
              status.error_message().c_str());
    } else {
      fprintf(stderr, "ringfsctl: refused (%s): %s\n", CodeName(status.error_code()),
              status.error_message().c_str());
    }
    return kExitFailed;
  }

  template <typename Message, typename Print>
  int Show(const grpc::Status& status, const Message& reply, Print print) const {
    if (!status.ok()) return Failed(status);
    if (command_.json) {
      printf("%s\n", ToJson(reply, true).c_str());
    } else {
      print(reply);
    }
    return kExitOk;
  }

  int RunControl() {
    auto stub = control::QueueControl::NewStub(channel_);
    grpc::ClientContext context;
    Prepare(context, command_.verb == CtlVerb::kWatch);
    control::QueueState state;
    switch (command_.verb) {
      case CtlVerb::kQueues:
        return Show(stub->ListQueues(&context, {}, &state), state, PrintQueueState);
      case CtlVerb::kSetActive:
        return Show(stub->SetActiveSet(&context, command_.set_active, &state), state,
                    PrintQueueState);
      case CtlVerb::kBgLimit:
        return Show(stub->SetBackgroundLimit(&context, command_.bg_limit, &state), state,
                    PrintQueueState);
      case CtlVerb::kPolicy:
        return SetPolicy(*stub, context);
      case CtlVerb::kKernel: {
        control::KernelLimits limits;
        grpc::Status status =
            command_.kernel.has_max_background() || command_.kernel.has_congestion_threshold()
                ? stub->SetKernelLimits(&context, command_.kernel, &limits)
                : stub->GetKernelLimits(&context, {}, &limits);
        return Show(status, limits, PrintKernel);
      }
      case CtlVerb::kInfo: {
        control::MountInfo info;
        return Show(stub->GetMountInfo(&context, {}, &info), info, PrintInfo);
      }
      case CtlVerb::kWatch:
        return Watch(*stub, context);
      default:
        return kExitUsage;
    }
  }

  int SetPolicy(control::QueueControl::Stub& stub, grpc::ClientContext& context) {
    control::SetPolicyRequest request = command_.policy;
    control::QueueState state;
    bool change = request.has_foreground() || request.has_background() ||
                  request.has_thresholds() || request.has_commit_locality();
    if (!change || command_.keep_next_core_retries) {
      grpc::ClientContext list_context;
      Prepare(list_context);
      grpc::Status status = stub.ListQueues(&list_context, {}, &state);
      if (!status.ok() || !change) {
        return Show(status, state.settings(), PrintSettings);
      }
      request.mutable_thresholds()->set_next_core_retries(
          state.settings().thresholds().next_core_retries());
    }
    return Show(stub.SetPolicy(&context, request, &state), state, PrintQueueState);
  }

  int Watch(control::QueueControl::Stub& stub, grpc::ClientContext& context) {
    auto reader = stub.WatchQueues(&context, command_.watch);
    control::QueueState state, previous;
    bool have_previous = false;
    bool redraw = isatty(STDOUT_FILENO);
    while (reader->Read(&state)) {
      if (command_.json) {
        printf("%s\n", ToJson(state, false).c_str());
      } else {
        if (redraw) printf("\033[H\033[2J");
        printf("%s  every %u ms\n",
               absl::FormatTime("%H:%M:%S", absl::FromUnixNanos(state.timestamp_unix_ns()),
                                absl::LocalTimeZone())
                   .c_str(),
               command_.watch.interval_ms());
        PrintSettings(state.settings());
        PrintQueueTable(state, have_previous ? &previous : nullptr);
        if (!redraw) printf("\n");
      }
      fflush(stdout);
      previous = state;
      have_previous = true;
    }
    grpc::Status status = reader->Finish();
    return status.ok() ? kExitOk : Failed(status);
  }

  int RunAdmin() {
    auto stub = admin::ServerAdmin::NewStub(channel_);
    grpc::ClientContext context;
    Prepare(context);
    switch (command_.verb) {
      case CtlVerb::kServerSessions: {
        admin::ListSessionsResponse reply;
        return Show(stub->ListSessions(&context, {}, &reply), reply,
                    [](const admin::ListSessionsResponse& r) {
                      PrintSessionHeader();
                      for (const auto& s : r.sessions()) PrintSession(s);
                    });
      }
      case CtlVerb::kServerClients: {
        admin::ListClientsResponse reply;
        return Show(stub->ListClients(&context, {}, &reply), reply,
                    [](const admin::ListClientsResponse& r) {
                      if (!r.authentication_required()) {
                        printf("no authentication: any client, under any name\n");
                      }
                      for (const auto& c : r.clients()) {
                        printf("client %s  options %s  from %s  sessions %d\n",
                               c.name().empty() ? "(any name)" : c.name().c_str(),
                               c.export_options().c_str(), c.allowed_sources().c_str(),
                               c.sessions_size());
                        if (c.sessions_size() == 0) continue;
                        PrintSessionHeader();
                        for (const auto& s : c.sessions()) PrintSession(s);
                      }
                    });
      }
      case CtlVerb::kServerExport: {
        admin::ExportInfo reply;
        return Show(stub->GetExport(&context, {}, &reply), reply, [](const admin::ExportInfo& e) {
          printf(
              "export:    %s\nserver id: %s\nclients:   %lu\nsessions:  %lu\n"
              "draining:  %s\nfloor mode: %s\n",
              e.path().c_str(), e.server_id().c_str(), e.clients(), e.sessions(),
              e.draining() ? "yes" : "no", e.floor_mode() ? "yes" : "no");
        });
      }
      case CtlVerb::kServerSetLimit: {
        admin::SessionInfo reply;
        return Show(stub->SetSessionLimit(&context, command_.set_session_limit, &reply), reply,
                    [](const admin::SessionInfo& s) {
                      PrintSessionHeader();
                      PrintSession(s);
                    });
      }
      case CtlVerb::kServerDrain: {
        // The server may take the whole timeout; allow for it on top of the usual deadline.
        grpc::ClientContext drain_context;
        drain_context.set_deadline(std::chrono::system_clock::now() + kCallTimeout +
                                   std::chrono::milliseconds(command_.drain.timeout_ms()));
        if (!token_.empty()) drain_context.AddMetadata("authorization", rpc::BearerValue(token_));
        admin::DrainResponse reply;
        return Show(stub->Drain(&drain_context, command_.drain, &reply), reply,
                    [](const admin::DrainResponse& d) {
                      printf("drain %s, %lu requests still in flight\n",
                             d.complete() ? "complete" : "incomplete", d.remaining_inflight());
                    });
      }
      default:
        return kExitUsage;
    }
  }

 private:
  static const char* CodeName(grpc::StatusCode code) {
    switch (code) {
      case grpc::StatusCode::INVALID_ARGUMENT:
        return "INVALID_ARGUMENT";
      case grpc::StatusCode::FAILED_PRECONDITION:
        return "FAILED_PRECONDITION";
      case grpc::StatusCode::UNAUTHENTICATED:
        return "UNAUTHENTICATED";
      case grpc::StatusCode::PERMISSION_DENIED:
        return "PERMISSION_DENIED";
      case grpc::StatusCode::NOT_FOUND:
        return "NOT_FOUND";
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        return "DEADLINE_EXCEEDED";
      case grpc::StatusCode::UNIMPLEMENTED:
        return "UNIMPLEMENTED";
      case grpc::StatusCode::INTERNAL:
        return "INTERNAL";
      default:
        return "error";
    }
  }

  const CtlCommand& command_;
  const rpc::Endpoint endpoint_;
  const std::string token_;
  std::shared_ptr<grpc::Channel> channel_;
};

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<CtlCommand> command = ParseCtlArgs(args);
  if (!command.ok()) {
    fprintf(stderr, "ringfsctl: %s\n%s", std::string(command.status().message()).c_str(),
            CtlUsage().c_str());
    return kExitUsage;
  }
  if (command->help) {
    printf("%s", CtlUsage().c_str());
    return kExitOk;
  }
  absl::StatusOr<rpc::Endpoint> endpoint = ResolveTarget(*command);
  if (!endpoint.ok()) {
    fprintf(stderr, "ringfsctl: %s\n", std::string(endpoint.status().message()).c_str());
    return endpoint.status().code() == absl::StatusCode::kInvalidArgument ? kExitUsage
                                                                          : kExitFailed;
  }
  std::string token;
  if (!command->token_file.empty()) {
    absl::StatusOr<std::string> read = rpc::ReadTokenFile(command->token_file);
    if (!read.ok()) {
      fprintf(stderr, "ringfsctl: %s\n", std::string(read.status().message()).c_str());
      return kExitUsage;
    }
    token = *read;
  }
  Client client(*command, *endpoint, token);
  if (int code = client.Connect(); code != kExitOk) return code;
  return IsServerVerb(command->verb) ? client.RunAdmin() : client.RunControl();
}

}  // namespace
}  // namespace ringfs::controller

int main(int argc, char** argv) { return ringfs::controller::Main(argc, argv); }
