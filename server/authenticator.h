// The server side of the data-wire authentication (proto/wire_format.md section 1): which
// clients exist (clients file and/or --token-file), the per-source attempt budget, the
// challenge-response exchange, the held-back refusals and the throttled failure log.
// Authenticate() and HoldRefusal() run on handshake threads, many at once; everything here is
// thread-safe. Owned by the Server; outlives its listener.
#pragma once

#include <sys/socket.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/hello_channel.h"
#include "proto/handshake.pb.h"
#include "server/auth_limits.h"
#include "server/clients_file.h"
#include "server/export_options.h"

namespace ringfs::server {

class Authenticator {
 public:
  // Why an authentication failed; the label of ringfs_server_auth_failures_total.
  enum class Failure : uint8_t {
    kNone = 0,
    kRateLimited,       // the source used its budget: closed without an answer
    kNoSecret,          // the client sent no nonce: it has no secret (or is too old)
    kUnknownClient,     // the name is in no entry
    kSourceNotAllowed,  // the entry's from= does not hold the peer address
    kBadProof,          // the client's proof is wrong: it does not know the secret
    kNoProof,           // the client hung up or sent garbage instead of a proof
  };
  static constexpr size_t kFailureKinds = 7;
  static std::string_view FailureName(Failure failure);

  struct Options {
    std::vector<ClientEntry> clients;  // --clients
    std::string any_name_secret;       // --token-file: any name not listed, this secret
    ExportOptions defaults;            // --export-options
    absl::Duration failure_delay = absl::Seconds(1);  // before a refusal is answered
    uint32_t max_delayed = 64;  // refusals held back at once; beyond, closed unanswered
    AuthRateLimiter::Options rate;
    LogThrottle::Options log;
  };

  struct Outcome {
    Failure failure = Failure::kNone;
    std::string client_name;  // verified when a secret applied, as claimed otherwise
    ExportOptions options;    // of the client's entry
    std::string message;      // for the client's AUTH_FAILED
  };

  explicit Authenticator(Options options);

  // True when some secret is configured (without, everyone gets in as today).
  bool required() const { return required_; }
  const std::vector<ClientEntry>& clients() const { return options_.clients; }
  bool any_name() const { return !options_.any_name_secret.empty(); }
  const ExportOptions& defaults() const { return options_.defaults; }

  // Decides whether the client of `hello` (received as `hello_body` from `peer`) is who it
  // claims, running the challenge exchange on `channel` when a secret applies; `reply_base` holds
  // the fields of the non-final ServerHello (version, ids). `channel_binding` is folded into the
  // transcript (empty on plain TCP). Blocks with the handshake timeout on each step. A failure
  // is logged (throttled) and counted here.
  Outcome Authenticate(HelloChannel& channel, const std::string& hello_body, const wire::ClientHello& hello,
                       const sockaddr_storage& peer, const std::string& peer_text,
                       std::string_view channel_binding, const wire::ServerHello& reply_base);

  // Waits failure_delay before a refusal is answered, so guessing costs a second per try
  // without holding a worker or the accept loop. False (answer nothing, close at once) when
  // max_delayed refusals already wait. Returns early after CancelWaits().
  bool HoldRefusal();
  // Logs how many refusals the throttle held back, once their window is over (a flood that
  // stopped). Called periodically by the server.
  void FlushLog();
  // Ends every HoldRefusal() now and from now on (server stop).
  void CancelWaits();

  uint64_t failures(Failure failure) const {
    return failures_[static_cast<size_t>(failure)].load(std::memory_order_relaxed);
  }

 private:
  Outcome Fail(Failure failure, const std::string& name, const std::string& peer_text,
               std::string message);

  const Options options_;
  const bool required_;
  AuthRateLimiter limiter_;
  LogThrottle log_throttle_;
  std::array<std::atomic<uint64_t>, kFailureKinds> failures_{};
  std::atomic<uint32_t> delayed_{0};
  absl::Mutex wait_mu_;
  bool cancelled_ ABSL_GUARDED_BY(wait_mu_) = false;
};

}  // namespace ringfs::server
