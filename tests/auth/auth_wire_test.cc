// Authentication end to end over real TCP on loopback: the in-process ringfs-server with a
// clients file, the real client handshake (frontend ConnectToServer) and a raw client that can
// do what an attacker does (wrong proofs, unknown names, other source addresses, floods).
// Also a fake server that does not know the secret, and a recording proxy that shows the secret
// never crosses the wire. Needs 127.0.0.2 on lo (Linux routes all of 127/8 there).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "common/auth_proof.h"
#include "common/hello_channel.h"
#include "common/tls_context.h"
#include "common/tls_test_pki.h"
#include "common/net.h"
#include "common/wire.h"
#include "frontend/backend_channel.h"
#include "proto/fuse_abi.h"
#include "server/server.h"
#include "server/test_client.h"

namespace ringfs {
namespace {

using server::testing::Bytes;
using server::testing::CName;
using server::testing::DefaultHello;
using server::testing::Frame;
using server::testing::TempDir;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr char kAlphaSecret[] = "alpha-Secret-7f3c9e1b";
constexpr char kBetaSecret[] = "beta-Secret-d41d8cd9";
constexpr char kLocalSecret[] = "local-Secret-0a1b2c3d";

uint16_t PortOf(const std::string& address) {
  uint32_t port = 0;
  EXPECT_TRUE(absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port));
  return static_cast<uint16_t>(port);
}

// Connects from `source` (a loopback address) to 127.0.0.1:`port`.
UniqueFd ConnectFrom(const char* source, uint16_t port) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source, &from.sin_addr);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0) return UniqueFd();
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) return UniqueFd();
  return fd;
}

// One handshake as a raw client: hello with a nonce, and when challenged a proof made with
// `secret` (whatever the server's proof says: an attacker does not care).
struct Attempt {
  enum Result { kOk, kAuthFailed, kOtherRefusal, kClosedUnanswered, kNoConnection };
  Result result = kNoConnection;
  bool challenged = false;
  milliseconds elapsed{0};
  std::string message;
  UniqueFd fd;  // kOk: the session
};

Attempt TryAuth(uint16_t port, const char* source, const std::string& name,
                const std::string& secret, const std::string& client_id = "raw-client") {
  Attempt attempt;
  const auto start = Clock::now();
  UniqueFd fd = ConnectFrom(source, port);
  if (!fd.valid()) return attempt;
  wire::ClientHello hello = DefaultHello(client_id);
  hello.set_client_name(name);
  hello.set_client_nonce(*auth::DrawNonce());
  std::string frame = *wire::EncodeHandshake(hello);
  wire::ServerHello reply;
  auto finish = [&](Attempt::Result result) {
    attempt.result = result;
    attempt.elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    attempt.message = reply.message();
    if (result == Attempt::kOk) attempt.fd = std::move(fd);
    return std::move(attempt);
  };
  if (!SendAll(fd.get(), frame.data(), frame.size(), milliseconds(5000)).ok() ||
      !wire::ReceiveHandshake(fd.get(), &reply, milliseconds(8000)).ok()) {
    return finish(Attempt::kClosedUnanswered);
  }
  if (reply.has_challenge()) {
    attempt.challenged = true;
    std::string transcript =
        auth::Transcript(frame.substr(8), reply.challenge().server_nonce(), "");
    wire::ClientProof proof;
    proof.set_client_proof(auth::ClientProof(secret, transcript));
    reply.Clear();
    if (!wire::SendHandshake(fd.get(), proof).ok() ||
        !wire::ReceiveHandshake(fd.get(), &reply, milliseconds(8000)).ok()) {
      return finish(Attempt::kClosedUnanswered);
    }
  }
  if (reply.result() == wire::ServerHello::OK) return finish(Attempt::kOk);
  if (reply.result() == wire::ServerHello::AUTH_FAILED) return finish(Attempt::kAuthFailed);
  return finish(Attempt::kOtherRefusal);
}

server::testing::Reply Call(int fd, const std::string& frame) {
  server::testing::Reply reply;
  EXPECT_TRUE(SendAll(fd, frame.data(), frame.size(), milliseconds(5000)).ok());
  EXPECT_TRUE(ReceiveAll(fd, &reply.header, sizeof(reply.header), milliseconds(5000)).ok());
  reply.body.resize(reply.header.len - sizeof(reply.header));
  EXPECT_TRUE(ReceiveAll(fd, reply.body.data(), reply.body.size(), milliseconds(5000)).ok());
  return reply;
}

class AuthWireTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string alpha_key = dir_.Join("alpha.key");
    std::ofstream(alpha_key) << kAlphaSecret << "\n";
    chmod(alpha_key.c_str(), 0600);
    const std::string clients = dir_.Join("clients");
    std::ofstream(clients) << "# test clients\n"
                           << "alpha secret=alpha.key options=rw,root_squash\n"
                           << "beta secret=hex:" << absl::BytesToHexString(kBetaSecret)
                           << " options=ro,all_squash,anonuid=4321\n"
                           << "local secret=hex:" << absl::BytesToHexString(kLocalSecret)
                           << " from=127.0.0.2/32\n";
    chmod(clients.c_str(), 0600);
    auto entries = server::ReadClientsFile(clients, server::ExportOptions{});
    ASSERT_TRUE(entries.ok()) << entries.status();
    entries_ = *entries;
    StartServer("");
  }
  // With `token`: also any other name with that secret (--token-file).
  void StartServer(const std::string& token) {
    if (server_) server_->Stop();
    server::ServerConfig config;
    config.token = token;
    config.export_dir = export_.path();
    // Callers act as themselves and alpha's root is squashed: the export is open to all, since
    // these tests are about who connects, not about permissions (security_wire_test).
    ::chmod(export_.path().c_str(), 0777);
    config.listen = "127.0.0.1:0";
    config.workers = 2;
    config.clients = entries_;
    config.tls_cert = tls_cert_;
    config.tls_key = tls_key_;
    server_ = std::make_unique<server::Server>(config);
    ASSERT_TRUE(server_->Start().ok());
    address_ = server_->bound_address();
    port_ = PortOf(address_);
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }

  frontend::BackendConfig ClientConfig(const std::string& address, const std::string& name,
                                       const std::string& secret) {
    frontend::BackendConfig config;
    config.address = *ParseSocketAddress(address);
    config.client_id = "mount-1";
    config.client_name = name;
    config.token = secret;
    config.max_inflight = 8;
    config.connect_timeout = milliseconds(3000);
    return config;
  }
  uint64_t Failures(server::Authenticator::Failure failure) const {
    return server_->authenticator()->failures(failure);
  }

  TempDir dir_;
  TempDir export_;
  std::vector<server::ClientEntry> entries_;
  std::string tls_cert_, tls_key_;  // set: the server speaks TLS
  std::unique_ptr<server::Server> server_;
  std::string address_;
  uint16_t port_ = 0;
};

TEST_F(AuthWireTest, RightSecretAccepted) {
  auto session = frontend::ConnectToServer(ClientConfig(address_, "alpha", kAlphaSecret));
  ASSERT_TRUE(session.ok()) << session.status();
  auto beta = frontend::ConnectToServer(ClientConfig(address_, "beta", kBetaSecret));
  ASSERT_TRUE(beta.ok()) << beta.status();
  // The admin listing shows each session under its client with the client's options (once the
  // workers have taken the sessions up).
  admin::ListClientsResponse clients;
  for (auto deadline = Clock::now() + std::chrono::seconds(5); Clock::now() < deadline;) {
    clients = server_->ListClients();
    int sessions = 0;
    for (const admin::ClientInfo& c : clients.clients()) sessions += c.sessions_size();
    if (sessions == 2) break;
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_TRUE(clients.authentication_required());
  ASSERT_EQ(clients.clients_size(), 3);
  for (const admin::ClientInfo& c : clients.clients()) {
    if (c.name() == "alpha") {
      ASSERT_EQ(c.sessions_size(), 1);
      EXPECT_EQ(c.sessions(0).client_id(), "mount-1");
      EXPECT_EQ(c.sessions(0).client_name(), "alpha");
      EXPECT_NE(c.export_options().find("rw"), std::string::npos) << c.export_options();
    } else if (c.name() == "beta") {
      ASSERT_EQ(c.sessions_size(), 1);
      EXPECT_NE(c.sessions(0).export_options().find("ro"), std::string::npos);
      EXPECT_NE(c.sessions(0).export_options().find("all_squash"), std::string::npos);
      EXPECT_NE(c.sessions(0).export_options().find("anonuid=4321"), std::string::npos);
    } else {
      EXPECT_EQ(c.name(), "local");
      EXPECT_EQ(c.allowed_sources(), "127.0.0.2/32");
      EXPECT_EQ(c.sessions_size(), 0);
    }
  }
}

TEST_F(AuthWireTest, WrongSecretRefusedAfterTheDelay) {
  Attempt wrong = TryAuth(port_, "127.0.0.1", "alpha", "not-the-secret");
  EXPECT_TRUE(wrong.challenged);
  EXPECT_EQ(wrong.result, Attempt::kAuthFailed) << wrong.message;
  EXPECT_GE(wrong.elapsed, milliseconds(900)) << "refusals are held back about a second";
  EXPECT_LT(wrong.elapsed, milliseconds(3000));
  EXPECT_EQ(wrong.message.find("proof"), std::string::npos)
      << "the client is not told why: " << wrong.message;
  EXPECT_EQ(Failures(server::Authenticator::Failure::kBadProof), 1u);
  // The real client sees the server's proof does not match its (wrong) secret and hangs up.
  auto session = frontend::ConnectToServer(ClientConfig(address_, "alpha", "not-the-secret"));
  EXPECT_EQ(session.status().code(), absl::StatusCode::kPermissionDenied) << session.status();
  // A client without a secret is told what is missing.
  session = frontend::ConnectToServer(ClientConfig(address_, "alpha", ""));
  EXPECT_EQ(session.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(session.status().message().find("token_file"), std::string::npos) << session.status();
  Attempt right = TryAuth(port_, "127.0.0.1", "alpha", kAlphaSecret);
  EXPECT_EQ(right.result, Attempt::kOk) << right.message;
  EXPECT_LT(right.elapsed, milliseconds(900));
}

TEST_F(AuthWireTest, UnknownClientRefused) {
  Attempt unknown = TryAuth(port_, "127.0.0.1", "mallory", kAlphaSecret);
  EXPECT_FALSE(unknown.challenged) << "no proof is made for a name that is not listed";
  EXPECT_EQ(unknown.result, Attempt::kAuthFailed);
  EXPECT_GE(unknown.elapsed, milliseconds(900));
  EXPECT_EQ(Failures(server::Authenticator::Failure::kUnknownClient), 1u);
  // Alpha's secret under beta's name is no good either.
  Attempt swapped = TryAuth(port_, "127.0.0.1", "beta", kAlphaSecret);
  EXPECT_EQ(swapped.result, Attempt::kAuthFailed);
}

TEST_F(AuthWireTest, SourceOutsideFromRefused) {
  Attempt outside = TryAuth(port_, "127.0.0.1", "local", kLocalSecret);
  EXPECT_FALSE(outside.challenged);
  EXPECT_EQ(outside.result, Attempt::kAuthFailed);
  EXPECT_EQ(Failures(server::Authenticator::Failure::kSourceNotAllowed), 1u);
  Attempt inside = TryAuth(port_, "127.0.0.2", "local", kLocalSecret);
  EXPECT_EQ(inside.result, Attempt::kOk) << inside.message;
}

// A server that does not know the secret answers the hello with a made-up proof. The real
// client must hang up without sending anything more: no proof it could replay or test guesses
// against.
TEST_F(AuthWireTest, FakeServerGetsNothingUsable) {
  auto listen = ListenOn(*ParseSocketAddress("127.0.0.1:0"));
  ASSERT_TRUE(listen.ok());
  sockaddr_in bound{};
  socklen_t len = sizeof(bound);
  getsockname(listen->get(), reinterpret_cast<sockaddr*>(&bound), &len);
  std::string hello_body;
  std::atomic<long> after_challenge{-1};
  std::thread fake([&] {
    pollfd p{listen->get(), POLLIN, 0};
    if (poll(&p, 1, 10000) != 1) return;
    UniqueFd conn(accept(listen->get(), nullptr, nullptr));
    if (!wire::ReceiveHandshakeBody(conn.get(), &hello_body).ok()) return;
    wire::ServerHello challenge;
    challenge.mutable_challenge()->set_server_nonce(*auth::DrawNonce());
    challenge.mutable_challenge()->set_server_proof(std::string(32, '\x5a'));
    if (!wire::SendHandshake(conn.get(), challenge).ok()) return;
    long total = 0;
    char buf[4096];
    for (;;) {
      pollfd q{conn.get(), POLLIN, 0};
      if (poll(&q, 1, 5000) != 1) break;
      ssize_t n = recv(conn.get(), buf, sizeof(buf), 0);
      if (n <= 0) break;
      total += n;
    }
    after_challenge = total;
  });
  auto session = frontend::ConnectToServer(
      ClientConfig("127.0.0.1:" + std::to_string(ntohs(bound.sin_port)), "alpha", kAlphaSecret));
  fake.join();
  EXPECT_EQ(session.status().code(), absl::StatusCode::kPermissionDenied) << session.status();
  EXPECT_NE(session.status().message().find("does not know our secret"), std::string::npos);
  EXPECT_EQ(after_challenge.load(), 0) << "the client sent bytes after a wrong server proof";
  wire::ClientHello hello;
  ASSERT_TRUE(hello.ParseFromString(hello_body));
  EXPECT_EQ(hello.client_name(), "alpha");
  EXPECT_EQ(hello.client_nonce().size(), auth::kNonceBytes);
  EXPECT_EQ(hello_body.find(kAlphaSecret), std::string::npos);
}

// 50 rapid wrong attempts from 127.0.0.1: the first (burst) ones are answered after the delay,
// the rest are closed at once without crypto. Meanwhile a right client from 127.0.0.2 gets in.
TEST_F(AuthWireTest, FloodFromOneSourceIsRateLimited) {
  constexpr int kAttempts = 50;
  std::vector<Attempt> attempts(kAttempts);
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int i = 0; i < kAttempts; ++i) {
    threads.emplace_back([&, i] { attempts[i] = TryAuth(port_, "127.0.0.1", "alpha", "guess"); });
  }
  Attempt other = TryAuth(port_, "127.0.0.2", "alpha", kAlphaSecret, "other-mount");
  for (auto& t : threads) t.join();
  const auto flood_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  int refused = 0, closed = 0;
  std::vector<int64_t> closed_ms, refused_ms;
  for (const Attempt& a : attempts) {
    if (a.result == Attempt::kAuthFailed) {
      ++refused;
      refused_ms.push_back(a.elapsed.count());
    }
    if (a.result == Attempt::kClosedUnanswered) {
      ++closed;
      closed_ms.push_back(a.elapsed.count());
    }
  }
  std::sort(closed_ms.begin(), closed_ms.end());
  std::sort(refused_ms.begin(), refused_ms.end());
  EXPECT_EQ(refused + closed, kAttempts);
  EXPECT_LE(refused, 12) << "burst of 10, plus what refilled while the flood ran";
  EXPECT_GE(closed, kAttempts - 12);
  // Closed at once: no delay, so (even on a loaded machine, where accepting 50 connections
  // takes a while) the typical closed attempt ends well before the held-back refusals.
  ASSERT_FALSE(closed_ms.empty());
  ASSERT_FALSE(refused_ms.empty());
  EXPECT_LT(closed_ms[closed_ms.size() / 2], 500) << "median of the closed attempts";
  EXPECT_GE(refused_ms.front(), 900) << "every answered refusal waited about a second";
  EXPECT_EQ(Failures(server::Authenticator::Failure::kRateLimited), static_cast<uint64_t>(closed));
  EXPECT_EQ(other.result, Attempt::kOk) << "another source is not limited: " << other.message;
  EXPECT_LT(other.elapsed, milliseconds(900));
  RecordProperty("answered_refusals", refused);
  RecordProperty("closed_unanswered", closed);
  RecordProperty("flood_ms", static_cast<int>(flood_ms.count()));
  printf(
      "flood: %d answered refusals (%lld..%lld ms), %d closed unanswered (%lld..%lld ms, "
      "median %lld), %lld ms in all; other source in %lld ms\n",
      refused, static_cast<long long>(refused_ms.front()),
      static_cast<long long>(refused_ms.back()), closed, static_cast<long long>(closed_ms.front()),
      static_cast<long long>(closed_ms.back()),
      static_cast<long long>(closed_ms[closed_ms.size() / 2]),
      static_cast<long long>(flood_ms.count()), static_cast<long long>(other.elapsed.count()));
}

// Two clients that pick the same client_id get separate states: beta cannot use a node id that
// alpha was handed (ESTALE), nor sees alpha's open files.
TEST_F(AuthWireTest, SameClientIdDifferentNamesAreSeparate) {
  Attempt alpha = TryAuth(port_, "127.0.0.1", "alpha", kAlphaSecret, "shared-id");
  Attempt beta = TryAuth(port_, "127.0.0.1", "beta", kBetaSecret, "shared-id");
  ASSERT_EQ(alpha.result, Attempt::kOk);
  ASSERT_EQ(beta.result, Attempt::kOk);
  fuse_create_in create{};
  create.flags = O_RDWR | O_CREAT;
  create.mode = S_IFREG | 0644;
  auto r = Call(alpha.fd.get(), Frame(FUSE_CREATE, 1, 1, Bytes(create) + CName("mine"), 0, 0));
  ASSERT_EQ(r.header.error, 0);
  auto entry = r.As<fuse_entry_out>();
  fuse_open_out open;
  std::memcpy(&open, r.body.data() + sizeof(fuse_entry_out), sizeof(open));
  fuse_getattr_in getattr{};
  EXPECT_EQ(Call(alpha.fd.get(), Frame(FUSE_GETATTR, 2, entry.nodeid, Bytes(getattr))).header.error,
            0);
  EXPECT_EQ(Call(beta.fd.get(), Frame(FUSE_GETATTR, 2, entry.nodeid, Bytes(getattr))).header.error,
            -ESTALE);
  fuse_read_in read{};
  read.fh = open.fh;
  read.size = 10;
  EXPECT_EQ(Call(beta.fd.get(), Frame(FUSE_READ, 3, entry.nodeid, Bytes(read))).header.error,
            -ESTALE);
  EXPECT_EQ(server_->registry()->sessions(server::ClientStateKey("alpha", "shared-id")), 1u);
  EXPECT_EQ(server_->registry()->sessions(server::ClientStateKey("beta", "shared-id")), 1u);
}

// --token-file beside a clients file: unlisted names use the shared secret, listed names only
// their own, and no name may smuggle a '/' into the state key ("alpha/x" + "y" would be alpha's
// "x/y").
TEST_F(AuthWireTest, TokenFileCoversUnlistedNamesOnly) {
  StartServer("shared-token-secret");
  EXPECT_EQ(TryAuth(port_, "127.0.0.1", "some-host", "shared-token-secret").result, Attempt::kOk);
  EXPECT_EQ(TryAuth(port_, "127.0.0.1", "", "shared-token-secret").result, Attempt::kOk);
  EXPECT_EQ(TryAuth(port_, "127.0.0.1", "alpha", "shared-token-secret").result,
            Attempt::kAuthFailed);
  EXPECT_EQ(TryAuth(port_, "127.0.0.1", "alpha", kAlphaSecret).result, Attempt::kOk);
  Attempt slash = TryAuth(port_, "127.0.0.1", "alpha/x", "shared-token-secret", "y");
  EXPECT_FALSE(slash.challenged);
  EXPECT_EQ(slash.result, Attempt::kAuthFailed);
}

// Bytes both ways between two sockets, recorded, until either side closes.
class RecordingProxy {
 public:
  explicit RecordingProxy(uint16_t upstream) : upstream_(upstream) {
    listen_ = *ListenOn(*ParseSocketAddress("127.0.0.1:0"));
    sockaddr_in bound{};
    socklen_t len = sizeof(bound);
    getsockname(listen_.get(), reinterpret_cast<sockaddr*>(&bound), &len);
    port_ = ntohs(bound.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~RecordingProxy() {
    stop_ = true;
    thread_.join();
  }
  uint16_t port() const { return port_; }
  std::string Captured() {
    std::lock_guard<std::mutex> lock(mu_);
    return captured_;
  }

 private:
  void Run() {
    pollfd p{listen_.get(), POLLIN, 0};
    while (!stop_ && poll(&p, 1, 100) == 0) {
    }
    if (stop_) return;
    UniqueFd client(accept(listen_.get(), nullptr, nullptr));
    UniqueFd server = ConnectFrom("127.0.0.1", upstream_);
    char buf[65536];
    while (!stop_) {
      pollfd fds[2] = {{client.get(), POLLIN, 0}, {server.get(), POLLIN, 0}};
      if (poll(fds, 2, 100) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (fds[i].revents == 0) continue;
        int from = i == 0 ? client.get() : server.get();
        int to = i == 0 ? server.get() : client.get();
        ssize_t n = recv(from, buf, sizeof(buf), 0);
        if (n <= 0) return;
        {
          std::lock_guard<std::mutex> lock(mu_);
          captured_.append(buf, n);
        }
        if (!SendAll(to, buf, n, milliseconds(5000)).ok()) return;
      }
    }
  }

  uint16_t upstream_;
  uint16_t port_ = 0;
  UniqueFd listen_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string captured_;
  std::thread thread_;
};

TEST_F(AuthWireTest, SecretNeverCrossesTheWire) {
  RecordingProxy proxy(port_);
  auto session = frontend::ConnectToServer(
      ClientConfig("127.0.0.1:" + std::to_string(proxy.port()), "alpha", kAlphaSecret));
  ASSERT_TRUE(session.ok()) << session.status();
  const int fd = session->fd.get();
  fuse_create_in create{};
  create.flags = O_RDWR | O_CREAT;
  create.mode = S_IFREG | 0644;
  auto r = Call(fd, Frame(FUSE_CREATE, 1, 1, Bytes(create) + CName("file"), 0, 0));
  ASSERT_EQ(r.header.error, 0);
  auto entry = r.As<fuse_entry_out>();
  fuse_open_out open;
  std::memcpy(&open, r.body.data() + sizeof(fuse_entry_out), sizeof(open));
  const std::string data = "payload through the proxy";
  fuse_write_in write{};
  write.fh = open.fh;
  write.size = data.size();
  r = Call(fd, Frame(FUSE_WRITE, 2, entry.nodeid, Bytes(write) + data));
  ASSERT_EQ(r.header.error, 0);
  fuse_read_in read{};
  read.fh = open.fh;
  read.size = 100;
  r = Call(fd, Frame(FUSE_READ, 3, entry.nodeid, Bytes(read)));
  ASSERT_EQ(r.header.error, 0);
  EXPECT_EQ(r.body, data);
  session->fd.Reset();
  const std::string captured = proxy.Captured();
  ASSERT_NE(captured.find(data), std::string::npos) << "the proxy saw the session";
  EXPECT_NE(captured.find("alpha"), std::string::npos);
  EXPECT_EQ(captured.find(kAlphaSecret), std::string::npos);
  EXPECT_EQ(captured.find(absl::BytesToHexString(kAlphaSecret)), std::string::npos);
  std::string upper_hex = absl::BytesToHexString(kAlphaSecret);
  for (char& c : upper_hex) c = static_cast<char>(toupper(c));
  EXPECT_EQ(captured.find(upper_hex), std::string::npos);
  // Nor any 8-byte piece of it.
  const std::string secret = kAlphaSecret;
  for (size_t i = 0; i + 8 <= secret.size(); ++i) {
    EXPECT_EQ(captured.find(secret.substr(i, 8)), std::string::npos) << i;
  }
}

// Mutual: a client that has a secret never talks to a server that cannot prove it knows it.
TEST_F(AuthWireTest, AClientWithASecretRefusesAServerThatAsksForNone) {
  entries_.clear();
  StartServer("");
  auto session = frontend::ConnectToServer(ClientConfig(address_, "alpha", kAlphaSecret));
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), absl::StatusCode::kPermissionDenied) << session.status();
  auto plain = frontend::ConnectToServer(ClientConfig(address_, "alpha", ""));
  EXPECT_TRUE(plain.ok()) << plain.status();
}

// Over TLS both proofs cover keying material exported from the TLS session. A relay that
// terminates the client's TLS and opens its own to the server (a man in the middle holding a
// certificate the client trusts) passes the exchange along unchanged, and the client refuses
// the server's proof: it was made for the other TLS session. Without TLS the same relay works,
// which is why the README says to use TLS on networks you do not control.
class RelayTest : public AuthWireTest {
 protected:
  void SetUp() override {
    AuthWireTest::SetUp();
    auto pki = tls::MakeTestPki(dir_.path());
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = *pki;
  }
  // Relays one connection: ClientHello, the challenge and the proof, then the final answer.
  // Returns what it saw the client do after the challenge ("proof" or the error).
  std::string RunRelay(bool tls, int listen_fd) {
    sockaddr_storage peer{};
    socklen_t len = sizeof(peer);
    UniqueFd client(accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC));
    if (!client.valid()) return "accept failed";
    auto upstream_fd = ConnectTo(*ParseSocketAddress(address_), milliseconds(3000));
    if (!upstream_fd.ok()) return "connect failed";
    auto server_ctx = tls::Context::ForServer({pki_.server_cert, pki_.server_key, ""});
    auto client_ctx = tls::Context::ForClient({pki_.ca, "", ""});
    absl::StatusOr<HelloChannel> down =
        tls ? HelloChannel::ServerTls(client.get(), *server_ctx) : HelloChannel(client.get());
    absl::StatusOr<HelloChannel> up = tls ? HelloChannel::ClientTls(upstream_fd->get(),
                                                                    *client_ctx, "localhost")
                                          : HelloChannel(upstream_fd->get());
    if (!down.ok() || !up.ok()) return "TLS set-up failed";
    wire::ClientHello hello;
    wire::ServerHello challenge, final_reply;
    wire::ClientProof proof;
    if (!down->Receive(&hello).ok() || !up->Send(hello).ok()) return "hello relay failed";
    if (!up->Receive(&challenge).ok() || !down->Send(challenge).ok()) return "challenge relay";
    if (absl::Status got = down->Receive(&proof); !got.ok()) return std::string(got.message());
    if (!up->Send(proof).ok() || !up->Receive(&final_reply).ok() ||
        !down->Send(final_reply).ok()) {
      return "final relay failed";
    }
    return "proof";
  }
  tls::TestPki pki_;
};

TEST_F(RelayTest, ARelayBetweenTwoTlsSessionsGetsNoProof) {
  for (bool tls : {false, true}) {
    tls_cert_ = tls ? pki_.server_cert : "";
    tls_key_ = tls ? pki_.server_key : "";
    StartServer("");
    UniqueFd listener(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(listen(listener.get(), 4), 0);
    socklen_t len = sizeof(addr);
    ASSERT_EQ(getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
    std::string relay_saw;
    std::thread relay([&] { relay_saw = RunRelay(tls, listener.get()); });
    frontend::BackendConfig config =
        ClientConfig("127.0.0.1:" + std::to_string(ntohs(addr.sin_port)), "alpha", kAlphaSecret);
    if (tls) {
      auto ctx = tls::Context::ForClient({pki_.ca, "", ""});
      ASSERT_TRUE(ctx.ok()) << ctx.status();
      config.tls = *ctx;
      config.tls_name = "localhost";
    }
    auto session = frontend::ConnectToServer(config);
    relay.join();
    if (tls) {
      EXPECT_FALSE(session.ok()) << "a relayed TLS handshake must not authenticate";
      EXPECT_NE(relay_saw, "proof") << "the client gave the relay a proof";
      // The relay hanging up reaches the server after relay.join(): its thread counts the
      // refusal a moment later.
      const auto deadline = std::chrono::steady_clock::now() + milliseconds(5000);
      while (Failures(server::Authenticator::Failure::kNoProof) == 0 &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(milliseconds(5));
      }
      EXPECT_EQ(Failures(server::Authenticator::Failure::kNoProof), 1u);
    } else {
      EXPECT_TRUE(session.ok()) << session.status() << " (relay: " << relay_saw << ")";
      EXPECT_EQ(relay_saw, "proof");
    }
  }
}

}  // namespace
}  // namespace ringfs
