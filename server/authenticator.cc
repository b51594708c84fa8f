#include "server/authenticator.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include "absl/strings/str_format.h"
#include "common/auth_proof.h"
#include "common/log.h"
#include "common/wire.h"

namespace ringfs::server {
namespace {

// The rate-limit key: the address without the port (every connection of a source shares it).
std::string SourceKey(const sockaddr_storage& peer) {
  char host[INET6_ADDRSTRLEN] = {};
  if (peer.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&peer)->sin_addr, host, sizeof(host));
  } else if (peer.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&peer)->sin6_addr, host,
              sizeof(host));
  } else {
    return "unix";
  }
  return host;
}

// What every refusal tells the client, whatever the reason: the reason is in the server log
// only, so a guesser learns nothing about which names exist or where they may come from.
constexpr char kRefused[] = "authentication failed (the server log says why)";

}  // namespace

std::string_view Authenticator::FailureName(Failure failure) {
  switch (failure) {
    case Failure::kNone:
      return "none";
    case Failure::kRateLimited:
      return "rate_limited";
    case Failure::kNoSecret:
      return "no_secret";
    case Failure::kUnknownClient:
      return "unknown_client";
    case Failure::kSourceNotAllowed:
      return "source_not_allowed";
    case Failure::kBadProof:
      return "bad_proof";
    case Failure::kNoProof:
      return "no_proof";
  }
  return "unknown";
}

Authenticator::Authenticator(Options options)
    : options_(std::move(options)),
      required_(!options_.clients.empty() || !options_.any_name_secret.empty()),
      limiter_(options_.rate),
      log_throttle_(options_.log) {}

Authenticator::Outcome Authenticator::Fail(Failure failure, const std::string& name,
                                           const std::string& peer_text, std::string message) {
  failures_[static_cast<size_t>(failure)].fetch_add(1, std::memory_order_relaxed);
  uint64_t suppressed = 0;
  if (log_throttle_.Admit(&suppressed)) {
    std::string more =
        suppressed == 0 ? "" : absl::StrFormat(" (%u more refusals not logged)", suppressed);
    RINGFS_LOG_WARN("auth: refused client '%s' from %s: %s [%s]%s", name, peer_text, message,
                    FailureName(failure), more);
  }
  Outcome outcome;
  outcome.failure = failure;
  outcome.client_name = name;
  // A client without a secret is told what to do about it; every other refusal is the same.
  outcome.message = failure == Failure::kNoSecret ? std::move(message) : kRefused;
  return outcome;
}

Authenticator::Outcome Authenticator::Authenticate(HelloChannel& channel,
                                                   const std::string& hello_body,
                                                   const wire::ClientHello& hello,
                                                   const sockaddr_storage& peer,
                                                   const std::string& peer_text,
                                                   std::string_view channel_binding,
                                                   const wire::ServerHello& reply_base) {
  const std::string& name = hello.client_name();
  if (!required_) {
    Outcome open;
    open.client_name = name;
    open.options = options_.defaults;
    return open;
  }
  const std::string source = SourceKey(peer);
  // Before any lookup or crypto: a flood from one source costs a hash-map probe per connection.
  if (!limiter_.TryAcquire(source)) {
    return Fail(Failure::kRateLimited, name, peer_text,
                "too many failed attempts from this source");
  }
  if (hello.client_nonce().size() != auth::kNonceBytes) {
    return Fail(Failure::kNoSecret, name, peer_text,
                "this server requires authentication and the client has no secret (mount "
                "option token_file=, and client_name= as listed in the server's clients file)");
  }
  const ClientEntry* entry = nullptr;
  ClientEntry any;
  for (const ClientEntry& e : options_.clients) {
    if (e.name == name) entry = &e;
  }
  // A name with a '/' could alias another client's state key (ClientStateKey); no name at all
  // cannot.
  if (entry == nullptr && !options_.any_name_secret.empty() &&
      (name.empty() || IsValidClientName(name))) {
    any.name = name;
    any.secret = options_.any_name_secret;
    any.options = options_.defaults;
    entry = &any;
  }
  if (entry == nullptr) {
    return Fail(Failure::kUnknownClient, name, peer_text, "no such client in the clients file");
  }
  if (!entry->AllowsSource(peer)) {
    return Fail(Failure::kSourceNotAllowed, name, peer_text,
                absl::StrFormat("source not in from=%s", entry->FromText()));
  }
  absl::StatusOr<std::string> nonce = auth::DrawNonce();
  if (!nonce.ok())
    return Fail(Failure::kNoProof, name, peer_text, std::string(nonce.status().message()));
  const std::string transcript = auth::Transcript(hello_body, *nonce, channel_binding);
  // Not final: no result and no limits yet, only who answers (wire_format.md section 1.1).
  wire::ServerHello challenge;
  challenge.set_wire_version(reply_base.wire_version());
  challenge.set_server_id(reply_base.server_id());
  challenge.set_instance_id(reply_base.instance_id());
  challenge.mutable_challenge()->set_server_nonce(*nonce);
  challenge.mutable_challenge()->set_server_proof(auth::ServerProof(entry->secret, transcript));
  wire::ClientProof proof;
  if (absl::Status sent = channel.Send(challenge); !sent.ok()) {
    return Fail(Failure::kNoProof, name, peer_text,
                absl::StrFormat("cannot send the challenge: %s", sent.message()));
  }
  if (absl::Status got = channel.Receive(&proof); !got.ok()) {
    // Also what a client that found our proof wrong does: it hangs up.
    return Fail(Failure::kNoProof, name, peer_text,
                absl::StrFormat("no proof from the client: %s", got.message()));
  }
  if (!auth::ProofEquals(proof.client_proof(), auth::ClientProof(entry->secret, transcript))) {
    return Fail(Failure::kBadProof, name, peer_text, "wrong proof (the client's secret differs)");
  }
  limiter_.Refund(source);
  Outcome ok;
  ok.client_name = name;
  ok.options = entry->options;
  return ok;
}

bool Authenticator::HoldRefusal() {
  if (delayed_.fetch_add(1) >= options_.max_delayed) {
    delayed_.fetch_sub(1);
    return false;
  }
  {
    absl::MutexLock lock(&wait_mu_);
    wait_mu_.AwaitWithTimeout(absl::Condition(&cancelled_), options_.failure_delay);
  }
  delayed_.fetch_sub(1);
  return true;
}

void Authenticator::FlushLog() {
  if (uint64_t n = log_throttle_.TakeSuppressed(); n > 0) {
    RINGFS_LOG_WARN("auth: %u more refusals not logged (see ringfs_server_auth_failures_total)",
                    n);
  }
}

void Authenticator::CancelWaits() {
  absl::MutexLock lock(&wait_mu_);
  cancelled_ = true;
}

}  // namespace ringfs::server
