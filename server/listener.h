// Accepts data connections, runs the handshake (each on a short-lived thread with the wire's
// 5 s deadline, so a slow peer never holds up others), validates version, export and limits,
// has the Authenticator check who the client is (server/authenticator.h), and hands accepted connections to the workers through `handoff`.
// Start()/StopAccepting()/Stop() from one controlling thread at a time (the Server serialises
// them); `handoff` is called from handshake threads.
#pragma once

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/net.h"
#include "common/tls_context.h"
#include "common/wire.h"
#include "common/unique_fd.h"
#include "proto/handshake.pb.h"
#include "server/authenticator.h"
#include "server/client_registry.h"
#include "server/export_options.h"
#include "server/worker.h"

namespace ringfs::server {

class Listener {
 public:
  struct Options {
    std::string listen;  // "HOST:PORT" (port 0 = any free port) or "unix:PATH"
    // Who may connect and with which options; null: everyone, with export_options.
    std::shared_ptr<Authenticator> auth;
    uint32_t max_inflight = wire::kDefaultMaxInflight;
    std::string server_id;
    uint64_t instance_id = 0;  // ServerHello.instance_id (id_space.h DrawInstanceId)
    ExportOptions export_options;  // of every session when `auth` is null
    std::shared_ptr<tls::Context> tls;  // null: plaintext (--tls-cert)
  };
  using Handoff = std::function<void(ConnectionSetup)>;

  // `registry` must outlive the listener.
  Listener(Options options, ClientRegistry* registry, Handoff handoff);
  ~Listener();

  // Binds and starts accepting. After it returns OK, bound_address() is valid.
  absl::Status Start();
  // Closes the listening socket (new connections are refused); handshakes in progress go on.
  // Idempotent; a no-op before Start().
  void StopAccepting();
  // Stops accepting, aborts handshakes in progress and joins every thread. Idempotent.
  void Stop();

  // The actual address, e.g. "127.0.0.1:40123" or "unix:/run/x.sock".
  const std::string& bound_address() const { return bound_address_; }

  // The reply to a ClientHello (pure; exposed for tests). `session_id` goes into an OK reply.
  static wire::ServerHello Validate(const wire::ClientHello& hello, const Options& options,
                                    uint64_t session_id);

 private:
  struct Handshake {
    std::thread thread;
    std::atomic<bool> done{false};
    int fd = -1;  // for shutdown() at Stop; owned by the thread
  };

  void AcceptLoop();
  void RunHandshake(Handshake* handshake, UniqueFd fd, std::string peer,
                    sockaddr_storage peer_address);
  void ReapHandshakes(bool all);

  const Options options_;
  ClientRegistry* const registry_;
  const Handoff handoff_;
  UniqueFd listen_fd_;
  UniqueFd stop_event_;
  std::string bound_address_;
  std::string unix_path_;
  std::thread accept_thread_;
  std::atomic<uint64_t> next_session_{1};
  bool started_ = false;

  absl::Mutex mu_;
  std::list<std::unique_ptr<Handshake>> handshakes_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ringfs::server
