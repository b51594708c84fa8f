#include "server/listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/hello_channel.h"
#include "common/log.h"
#include "common/rpc/endpoint.h"
#include "common/status.h"
#include "common/wire.h"
#include "server/cpu_placement.h"

namespace ringfs::server {
namespace {

std::string FormatAddress(const sockaddr_storage& storage) {
  char host[INET6_ADDRSTRLEN] = {};
  if (storage.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&storage);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    return absl::StrFormat("%s:%u", host, ntohs(in->sin_port));
  }
  if (storage.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    return absl::StrFormat("[%s]:%u", host, ntohs(in6->sin6_port));
  }
  return "unix";
}

// Longest export name a refusal repeats (PATH_MAX).
constexpr size_t kMaxEchoedExportName = 4096;

}  // namespace

Listener::Listener(Options options, ClientRegistry* registry, Handoff handoff)
    : options_(std::move(options)), registry_(registry), handoff_(std::move(handoff)) {}

Listener::~Listener() { Stop(); }

wire::ServerHello Listener::Validate(const wire::ClientHello& hello, const Options& options,
                                     uint64_t session_id) {
  wire::ServerHello reply;
  reply.set_wire_version(wire::kWireVersion);
  reply.set_server_id(options.server_id);
  reply.set_instance_id(options.instance_id);
  auto refuse = [&](wire::ServerHello::Result result, std::string message) {
    reply.set_result(result);
    reply.set_message(std::move(message));
    return reply;
  };
  if (hello.wire_version() != wire::kWireVersion) {
    return refuse(wire::ServerHello::VERSION_MISMATCH,
                  absl::StrFormat("server speaks wire version %u, client %u", wire::kWireVersion,
                                  hello.wire_version()));
  }
  if (!hello.export_name().empty() && hello.export_name() != "/") {
    // A long name is not echoed: near the 64 KiB handshake limit the refusal itself would not
    // fit, and the client would get no answer at all.
    if (hello.export_name().size() > kMaxEchoedExportName) {
      return refuse(wire::ServerHello::NO_SUCH_EXPORT,
                    absl::StrFormat("no export of %u bytes (this server exports only '/')",
                                    hello.export_name().size()));
    }
    return refuse(wire::ServerHello::NO_SUCH_EXPORT,
                  absl::StrFormat("no export '%s' (this server exports only '/')",
                                  hello.export_name()));
  }
  if (hello.max_inflight() == 0 || hello.max_frame_bytes() == 0) {
    return refuse(wire::ServerHello::BAD_REQUEST, "max_inflight and max_frame_bytes must be > 0");
  }
  // The frame limit must at least allow a header and a minimal request.
  uint32_t max_frame = std::min(hello.max_frame_bytes(), wire::kMaxFrameBytes);
  if (max_frame < 4096) {
    return refuse(wire::ServerHello::BAD_REQUEST, "max_frame_bytes below 4096");
  }
  reply.set_result(wire::ServerHello::OK);
  reply.set_max_inflight(std::min(hello.max_inflight(), options.max_inflight));
  reply.set_max_frame_bytes(max_frame);
  reply.set_session_id(session_id);
  return reply;
}

absl::Status Listener::Start() {
  ASSIGN_OR_RETURN(SocketAddress address, ParseSocketAddress(options_.listen));
  ASSIGN_OR_RETURN(listen_fd_, ListenOn(address));
  if (address.is_unix) {
    unix_path_ = options_.listen.substr(5);
    bound_address_ = options_.listen;
  } else {
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    if (getsockname(listen_fd_.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
      return ErrnoError(errno, "getsockname");
    }
    bound_address_ = FormatAddress(bound);
  }
  stop_event_.Reset(eventfd(0, EFD_CLOEXEC));
  if (!stop_event_.valid()) return ErrnoError(errno, "eventfd");
  started_ = true;
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  return absl::OkStatus();
}

void Listener::StopAccepting() {
  if (!started_) return;
  // The accept thread closes the listening socket when it sees the event.
  uint64_t one = 1;
  if (write(stop_event_.get(), &one, sizeof(one)) < 0) {
    RINGFS_LOG_ERROR("listener: cannot signal stop: %s", std::strerror(errno));
  }
}

void Listener::Stop() {
  if (!started_) return;
  started_ = false;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& h : handshakes_) {
      if (h->fd >= 0) shutdown(h->fd, SHUT_RDWR);
    }
  }
  uint64_t one = 1;
  if (write(stop_event_.get(), &one, sizeof(one)) < 0) {
    RINGFS_LOG_ERROR("listener: cannot signal stop: %s", std::strerror(errno));
  }
  accept_thread_.join();
  ReapHandshakes(/*all=*/true);
  listen_fd_.Reset();
  if (!unix_path_.empty()) unlink(unix_path_.c_str());
}

void Listener::AcceptLoop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_.get(), POLLIN, 0}, {stop_event_.get(), POLLIN, 0}};
    int n = poll(fds, 2, 1000);
    if (n < 0 && errno != EINTR) {
      RINGFS_LOG_ERROR("listener: poll: %s", std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) {
      listen_fd_.Reset();  // refuse new connections from now on
      RINGFS_LOG_INFO("listener: no longer accepting connections on %s", bound_address_);
      return;
    }
    ReapHandshakes(/*all=*/false);
    if (n <= 0 || (fds[0].revents & POLLIN) == 0) continue;
    sockaddr_storage peer{};
    socklen_t len = sizeof(peer);
    int fd = accept4(listen_fd_.get(), reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
        RINGFS_LOG_WARN("listener: accept: %s", std::strerror(errno));
      }
      continue;
    }
    std::string peer_text = unix_path_.empty() ? FormatAddress(peer) : bound_address_;
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      close(fd);
      return;
    }
    auto handshake = std::make_unique<Handshake>();
    Handshake* h = handshake.get();
    h->fd = fd;
    handshakes_.push_back(std::move(handshake));
    h->thread = std::thread(
        [this, h, fd, peer_text, peer] { RunHandshake(h, UniqueFd(fd), peer_text, peer); });
  }
}

void Listener::RunHandshake(Handshake* handshake, UniqueFd fd, std::string peer,
                            sockaddr_storage peer_address) {
  uint64_t session_id = next_session_.fetch_add(1);
  // Marks the handshake finished before `fd` closes, so Stop() never shuts down a reused fd.
  auto finish = [&] {
    absl::MutexLock lock(&mu_);
    handshake->fd = -1;
    handshake->done.store(true);
  };
  // With TLS the TLS handshake comes first, within the same deadline (wire_format.md §1).
  absl::StatusOr<HelloChannel> channel =
      options_.tls != nullptr ? HelloChannel::ServerTls(fd.get(), options_.tls)
                              : HelloChannel(fd.get());
  if (!channel.ok()) {
    RINGFS_LOG_WARN("TLS handshake with %s failed: %s", peer, channel.status().message());
    finish();
    return;
  }
  const std::string subject =
      channel->stream() != nullptr ? channel->stream()->PeerSubject() : std::string();
  wire::ClientHello hello;
  std::string hello_body;  // the exact bytes: the authentication proofs cover them
  absl::Status received = channel->ReceiveBody(&hello_body);
  if (received.ok() && !hello.ParseFromString(hello_body)) {
    received = absl::InvalidArgumentError("malformed handshake message");
  }
  if (!received.ok()) {
    RINGFS_LOG_WARN("handshake from %s failed: %s", peer, received.message());
    finish();
    return;
  }
  wire::ServerHello reply = Validate(hello, options_, session_id);
  reply.set_dir_attrs(hello.want_dir_attrs());
  Authenticator::Outcome auth;
  auth.client_name = hello.client_name();
  auth.options = options_.export_options;
  if (reply.result() == wire::ServerHello::OK && options_.auth != nullptr) {
    absl::StatusOr<std::string> binding = ChannelBinding(channel->stream());
    if (!binding.ok()) {
      RINGFS_LOG_WARN("handshake from %s failed: %s", peer, binding.status().message());
      finish();
      return;
    }
    auth = options_.auth->Authenticate(*channel, hello_body, hello, peer_address, peer, *binding,
                                       reply);
    const bool failed = auth.failure != Authenticator::Failure::kNone;
    // Rate limited: closed at once, without crypto or delay. No proof: the client hung up.
    const bool unanswered = auth.failure == Authenticator::Failure::kRateLimited ||
                            auth.failure == Authenticator::Failure::kNoProof;
    if (unanswered || (failed && !options_.auth->HoldRefusal())) {
      finish();  // logged by the authenticator
      return;
    }
    if (failed) {
      reply.set_result(wire::ServerHello::AUTH_FAILED);
      reply.set_message(auth.message);
    }
  }
  ClientRegistry::Lease client;
  SessionTicket ticket;  // dropped on every way out but the handoff: the session then ended
  if (reply.result() == wire::ServerHello::OK) {
    auto lease = registry_->Attach(ClientStateKey(auth.client_name, hello.client_id()));
    if (lease.ok()) {
      client = *std::move(lease);
      // Before the ServerHello: once the client knows this session's id, a connection that
      // replaces it must find it here. Only the instance that gave the old connection its id
      // can know it.
      const uint64_t replaces =
          hello.replaces_instance() == options_.instance_id ? hello.replaces_session() : 0;
      ticket = client->fence->Begin(session_id, replaces);
      if (replaces != 0) {
        RINGFS_LOG_INFO("session %u of client '%s' replaces session %u (%s)", session_id,
                        hello.client_id(), replaces,
                        ticket.waits() > 0
                            ? absl::StrFormat("starts once %u replaced connection%s ended",
                                              ticket.waits(), ticket.waits() == 1 ? "" : "s")
                            : "it had ended; starts at once");
      }
    } else {
      // The handshake has no result for "over a limit"; BAD_REQUEST with the reason
      // (proto/wire_format.md §1).
      reply.set_result(wire::ServerHello::BAD_REQUEST);
      reply.set_message(absl::StrFormat("cannot serve this client now: %s", lease.status().message()));
    }
  }
  // Only where the client's table keeps nodes by handle (not PathNodeTable) and a key seals them.
  reply.set_node_handles(hello.want_node_handles() && client.get() != nullptr &&
                         client->seal != nullptr);
  reply.set_invalidations(hello.want_invalidations() && client.get() != nullptr);
  reply.set_callers_as_themselves(client.get() != nullptr &&
                                  auth.options.squash == ExportOptions::Squash::kNone &&
                                  !auth.options.read_only);
  reply.set_cache_resets(hello.want_cache_resets() && reply.invalidations());
  reply.set_empty_dir_hints(hello.want_empty_dir_hints() && reply.dir_attrs() &&
                            reply.invalidations());
  reply.set_listing_attrs(hello.want_listing_attrs() && reply.dir_attrs());
  reply.set_write_attrs(hello.want_write_attrs() && reply.dir_attrs());
  reply.set_open_attrs(hello.want_open_attrs() && reply.dir_attrs());
  // Every client's handle table keeps bit 63 clear and fh 0 lists by node: nothing to set up.
  reply.set_handleless_listings(hello.want_handleless_listings());
  absl::Status sent = channel->Send(reply);
  if (reply.result() != wire::ServerHello::OK) {
    // Authentication failures were logged (throttled) by the authenticator.
    if (reply.result() != wire::ServerHello::AUTH_FAILED) {
      RINGFS_LOG_WARN("refused client %s from %s: %s", hello.client_id(), peer, reply.message());
    }
    finish();
    return;
  }
  if (!sent.ok()) {
    RINGFS_LOG_WARN("handshake reply to %s failed: %s", peer, sent.message());
    finish();
    return;
  }
  TuneDataSocket(fd.get(), !unix_path_.empty());
  const bool same_host = ClientIsLocal(fd.get(), hello.host_id());
  RINGFS_LOG_INFO(
      "accepted client '%s' (name '%s', %s) queue %u from %s%s as session %u "
      "(inflight %u, frame %u)%s",
      hello.client_id(), auth.client_name, FormatExportOptions(auth.options), hello.queue(), peer,
      same_host ? " (this host)" : "", session_id, reply.max_inflight(), reply.max_frame_bytes(),
      options_.tls == nullptr ? ""
      : subject.empty()       ? " over TLS"
                              : absl::StrFormat(" over TLS, certificate %s", subject));
  ConnectionSetup setup;
  setup.fd = std::move(fd);
  setup.peer = std::move(peer);
  setup.session_id = session_id;
  setup.queue = hello.queue();
  setup.same_host = same_host;
  setup.connected_unix_ns = absl::ToUnixNanos(absl::Now());
  setup.ticket = std::move(ticket);
  setup.client = std::move(client);
  setup.max_inflight = reply.max_inflight();
  setup.max_frame_bytes = reply.max_frame_bytes();
  setup.times = CacheTimes::FromHandshake(hello.entry_timeout_ns(), hello.attr_timeout_ns());
  setup.dir_attrs = reply.dir_attrs();
  setup.node_handles = reply.node_handles();
  setup.invalidations = reply.invalidations();
  setup.cache_resets = reply.cache_resets();
  setup.empty_dir_hints = reply.empty_dir_hints();
  setup.listing_attrs = reply.listing_attrs();
  setup.write_attrs = reply.write_attrs();
  setup.open_attrs = reply.open_attrs();
  if (setup.invalidations) setup.times.negative_entry_ns = setup.times.entry_ns;
  setup.client_name = auth.client_name;
  setup.export_options = auth.options;
  setup.tls = channel->TakeStream();
  setup.peer_subject = subject;
  {
    // Hand over under the lock so Stop() never shuts down an fd a worker already owns.
    absl::MutexLock lock(&mu_);
    handshake->fd = -1;
    handshake->done.store(true);
    if (!stopping_) handoff_(std::move(setup));
  }
}

void Listener::ReapHandshakes(bool all) {
  std::list<std::unique_ptr<Handshake>> finished;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = handshakes_.begin(); it != handshakes_.end();) {
      if (all || (*it)->done.load()) {
        finished.push_back(std::move(*it));
        it = handshakes_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& h : finished) h->thread.join();
}

}  // namespace ringfs::server
