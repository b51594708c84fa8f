// The channel against a scripted server on loopback: replies in any order, large bodies that
// take the direct-receive path, and every kind of invalid reply.
#include "frontend/backend_channel.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/str_format.h"
#include "common/auth_proof.h"
#include "common/dir_attrs.h"
#include "common/host_id.h"
#include "common/node_handle.h"
#include "common/wire.h"
#include "proto/fuse_abi.h"

namespace ringfs::frontend {
namespace {

using std::chrono::milliseconds;

// Accepts one connection at a time, answers the handshake, then runs `script` on the socket.
class ScriptedServer {
 public:
  explicit ScriptedServer(std::function<void(int fd)> script, std::string token = "")
      : script_(std::move(script)), token_(std::move(token)) {
    auto address = ParseSocketAddress("127.0.0.1:0");
    listener_ = std::move(*ListenOn(*address));
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&bound), &len);
    address_ = *address;
    address_.storage = bound;
    address_.length = len;
    thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptedServer() {
    shutdown(listener_.get(), SHUT_RDWR);
    thread_.join();
  }
  const SocketAddress& address() const { return address_; }
  // Connections that got a challenge and hung up instead of proving the secret.
  int refused_unanswered() const { return refused_unanswered_.load(); }

 private:
  void Serve() {
    for (;;) {
      UniqueFd conn(accept(listener_.get(), nullptr, nullptr));
      if (!conn.valid()) return;
      std::string body;
      wire::ClientHello hello;
      if (!wire::ReceiveHandshakeBody(conn.get(), &body).ok() || !hello.ParseFromString(body)) {
        continue;
      }
      wire::ServerHello reply;
      reply.set_result(token_.empty() ? wire::ServerHello::OK : wire::ServerHello::AUTH_FAILED);
      if (!token_.empty() && hello.client_nonce().size() == auth::kNonceBytes) {
        // The challenge round of wire_format.md section 1, with the scripted server's secret.
        wire::ServerHello challenge;
        std::string nonce = *auth::DrawNonce();
        std::string transcript = auth::Transcript(body, nonce, "");
        challenge.mutable_challenge()->set_server_nonce(nonce);
        challenge.mutable_challenge()->set_server_proof(auth::ServerProof(token_, transcript));
        wire::ClientProof proof;
        if (!wire::SendHandshake(conn.get(), challenge).ok() ||
            !wire::ReceiveHandshake(conn.get(), &proof).ok()) {
          ++refused_unanswered_;
          continue;
        }
        if (auth::ProofEquals(proof.client_proof(), auth::ClientProof(token_, transcript))) {
          reply.set_result(wire::ServerHello::OK);
        }
      }
      reply.set_message("scripted");
      reply.set_max_inflight(hello.max_inflight());
      reply.set_max_frame_bytes(hello.max_frame_bytes());
      reply.set_dir_attrs(hello.want_dir_attrs());
      reply.set_invalidations(hello.want_invalidations());
      reply.set_empty_dir_hints(hello.want_empty_dir_hints());
      reply.set_write_attrs(hello.want_dir_attrs() && hello.want_write_attrs());
      reply.set_open_attrs(hello.want_dir_attrs() && hello.want_open_attrs());
      // Every connection reaches a new instance (as if the server restarted in between), unless
      // the test says the server lives on.
      reply.set_instance_id(same_instance_ ? 1000 : ++instances_);
      reply.set_node_handles(hello.want_node_handles());
      if (!wire::SendHandshake(conn.get(), reply).ok()) continue;
      if (reply.result() == wire::ServerHello::OK) script_(conn.get());
    }
  }

 public:
  std::atomic<bool> same_instance_{false};

 private:
  std::function<void(int)> script_;
  std::string token_;
  std::atomic<int> refused_unanswered_{0};
  uint64_t instances_ = 0;
  UniqueFd listener_;
  SocketAddress address_;
  std::thread thread_;
};

fuse_in_header ReadRequest(int fd, std::vector<char>* rest = nullptr) {
  fuse_in_header in{};
  if (!ReceiveAll(fd, &in, sizeof(in), milliseconds(5000)).ok()) return {};
  std::vector<char> body(in.len - sizeof(in));
  if (!body.empty()) (void)ReceiveAll(fd, body.data(), body.size(), milliseconds(5000));
  if (rest) *rest = std::move(body);
  return in;
}

void WriteReply(int fd, uint64_t unique, int error, const std::string& body) {
  fuse_out_header out{static_cast<uint32_t>(sizeof(out) + body.size()), error, unique};
  std::string frame(reinterpret_cast<const char*>(&out), sizeof(out));
  frame += body;
  ASSERT_TRUE(SendAll(fd, frame.data(), frame.size(), milliseconds(5000)).ok());
}

struct Answer {
  fuse_out_header header;
  size_t body_size;
  ReplyOrigin origin;
};

class Harness : public ReplySink {
 public:
  explicit Harness(const SocketAddress& address, std::string token = "",
                   DirAttrCache* dir_attrs = nullptr, milliseconds timeout = milliseconds(3000),
                   InterruptBoard* interrupts = nullptr, NodeLedger* ledger = nullptr,
                   ServerBinding* binding = nullptr, KernelNotifier* notifier = nullptr,
                   CompleteDirs* dirs = nullptr, AsyncRemovals* async = nullptr,
                   std::chrono::nanoseconds batch_wait = BackendConfig{}.detached_batch_wait,
                   bool detach_releases = false, KeptPages* kept_pages = nullptr,
                   PageDrops* page_drops = nullptr) {
    io_uring_queue_init(64, &ring_, 0);
    BackendConfig config;
    config.address = address;
    config.client_id = "test";
    config.token = std::move(token);
    config.max_inflight = 8;
    config.connect_timeout = milliseconds(2000);
    config.request_timeout = timeout;
    config.dir_attrs = dir_attrs;
    config.interrupts = interrupts;
    config.ledger = ledger;
    config.binding = binding;
    config.notifier = notifier;
    config.dirs = dirs;
    config.async = async;
    config.detached_batch_wait = batch_wait;
    config.detach_releases = detach_releases;
    config.kept_pages = kept_pages;
    config.page_drops = page_drops;
    channel_ = std::make_unique<BackendChannel>(config, &ring_, 3, this);
    channel_->Start();
  }
  ~Harness() override {
    channel_.reset();
    io_uring_queue_exit(&ring_);
  }
  void OnReply(uint32_t slot, const fuse_out_header& header, size_t body_size,
               ReplyOrigin origin) override {
    answers_[slot] = {header, body_size, origin};
  }
  // Submits a request whose reply may have [min, max] body bytes, into buffer `slot`.
  // With `reply_over_payload` the reply lands where the payload is, as on the ring transport.
  void Send(uint32_t slot, uint32_t opcode, uint64_t unique, size_t min, size_t max,
            std::string payload = "", bool reply_over_payload = false, uint64_t nodeid = 1,
            uint64_t gate = 0) {
    fuse_in_header in{};
    in.opcode = opcode;
    in.unique = unique;
    in.nodeid = nodeid;
    buffers_[slot].assign(2 << 20, 0);
    size_t payload_size = payload.size();
    payloads_[slot] = std::move(payload);
    if (reply_over_payload) payloads_[slot].resize(2 << 20);
    char* body = reply_over_payload ? payloads_[slot].data() : buffers_[slot].data();
    PendingReply reply{slot, opcode, body, size_t{2} << 20, min, max, gate};
    iovec part{payloads_[slot].data(), payload_size};
    channel_->Submit(reply, in, &part, 1, MonotonicNs());
  }
  // A WRITE of 4 bytes to `nodeid` whose answer may bring the file's record (write attrs), as
  // Forwarder::Forward sends it.
  void SendWrite(uint32_t slot, uint64_t unique, uint64_t nodeid, DirAttrCache& cache) {
    fuse_in_header in{};
    in.opcode = FUSE_WRITE;
    in.unique = unique;
    in.nodeid = nodeid;
    buffers_[slot].assign(4096, 0);
    fuse_write_in write{};
    write.size = 4;
    payloads_[slot] = std::string(reinterpret_cast<const char*>(&write), sizeof(write)) + "data";
    PendingReply reply{slot,
                       FUSE_WRITE,
                       buffers_[slot].data(),
                       4096,
                       sizeof(fuse_write_out),
                       sizeof(fuse_write_out)};
    reply.record_ticket = cache.Ticket();
    reply.record_reads = cache.Reads(nodeid);
    reply.write_record = true;
    iovec part{payloads_[slot].data(), payloads_[slot].size()};
    channel_->Submit(reply, in, &part, 1, MonotonicNs());
  }
  // A read-only OPEN of `nodeid` whose answer may bring the file's record (open attrs), as
  // Forwarder::Forward sends it with kept pages.
  void SendOpen(uint32_t slot, uint64_t unique, uint64_t nodeid, DirAttrCache& cache) {
    fuse_in_header in{};
    in.opcode = FUSE_OPEN;
    in.unique = unique;
    in.nodeid = nodeid;
    buffers_[slot].assign(4096, 0);
    payloads_[slot].assign(sizeof(fuse_open_in), '\0');
    PendingReply reply{slot,          FUSE_OPEN,           buffers_[slot].data(), 4096,
                       sizeof(fuse_open_out), sizeof(fuse_open_out)};
    reply.record_ticket = cache.Ticket();
    reply.record_reads = cache.Reads(nodeid);
    iovec part{payloads_[slot].data(), payloads_[slot].size()};
    channel_->Submit(reply, in, &part, 1, MonotonicNs());
  }
  // A change of `nodeid` whose request is `op_in` (zeroed), sent as Forwarder::Forward sends
  // it: what it made stale among write records goes again when it ends.
  void SendChange(uint32_t slot, uint32_t opcode, uint64_t unique, uint64_t nodeid,
                  size_t op_in_size, RecordsVoided voided) {
    fuse_in_header in{};
    in.opcode = opcode;
    in.unique = unique;
    in.nodeid = nodeid;
    buffers_[slot].assign(4096, 0);
    payloads_[slot].assign(op_in_size, '\0');
    fuse::ReplyBounds bounds = fuse::SuccessReplyBounds(opcode, nullptr, 0);
    PendingReply reply{slot, opcode, buffers_[slot].data(), 4096, bounds.min, bounds.max};
    reply.voided = voided;
    iovec part{payloads_[slot].data(), payloads_[slot].size()};
    channel_->Submit(reply, in, &part, 1, MonotonicNs());
  }
  // An UNLINK of `name` in `dir` answered early (AsyncRemovals `seq`): the channel owns it.
  // `voided`: what the forwarder decided it makes stale among write records (RecordSending).
  void SendDetached(uint64_t unique, const std::string& name, uint64_t dir, uint64_t seq,
                    const RecordsVoided& voided = {}) {
    fuse_in_header in{};
    in.opcode = FUSE_UNLINK;
    in.unique = unique;
    in.nodeid = dir;
    std::string payload = name + std::string(1, '\0');
    iovec part{payload.data(), payload.size()};
    ASSERT_TRUE(channel_->CanDetach());
    channel_->SubmitDetached(in, &part, 1, MonotonicNs(), seq, 0, 0, voided);
  }
  // A file's RELEASE of `fh` answered early (Forwarder, detach_releases): the channel owns it.
  void SendDetachedRelease(uint64_t unique, uint64_t nodeid, uint64_t fh) {
    fuse_in_header in{};
    in.opcode = FUSE_RELEASE;
    in.unique = unique;
    in.nodeid = nodeid;
    fuse_release_in release{};
    release.fh = fh;
    iovec part{&release, sizeof(release)};
    ASSERT_TRUE(channel_->CanDetach());
    channel_->SubmitDetached(in, &part, 1, MonotonicNs(), 0, 0, 0, {});
  }
  // Runs completions until `done()` (or a generous deadline).
  void RunUntil(const std::function<bool()>& done,
                std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      io_uring_submit(&ring_);
      io_uring_cqe* cqe = nullptr;
      __kernel_timespec timeout{0, 20'000'000};
      if (io_uring_wait_cqe_timeout(&ring_, &cqe, &timeout) != 0) continue;
      uint64_t data = cqe->user_data;
      int res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      channel_->OnCompletion(data, res);
      channel_->Deliver();
    }
  }
  void WaitConnected() {
    RunUntil([this] { return channel_->connected(); });
    ASSERT_TRUE(channel_->connected());
  }
  void WaitForAnswers(size_t count, milliseconds limit = milliseconds(10000)) {
    RunUntil([&] { return answers_.size() >= count; }, limit);
  }
  BackendChannel& channel() { return *channel_; }
  std::map<uint32_t, Answer> answers_;
  std::map<uint32_t, std::vector<char>> buffers_;
  std::map<uint32_t, std::string> payloads_;

 private:
  io_uring ring_{};
  std::unique_ptr<BackendChannel> channel_;
};

TEST(BackendChannelTest, RepliesInAnyOrderReachTheirBuffers) {
  ScriptedServer server([](int fd) {
    fuse_in_header a = ReadRequest(fd), b = ReadRequest(fd), c = ReadRequest(fd);
    WriteReply(fd, c.unique, 0, std::string(128, 'c'));
    WriteReply(fd, a.unique, -ENOENT, "");
    WriteReply(fd, b.unique, 0, std::string(128, 'b'));
    ReadRequest(fd);  // hold the connection until the client goes
  });
  Harness h(server.address());
  h.Send(0, FUSE_LOOKUP, 10, 128, 128);
  h.Send(1, FUSE_LOOKUP, 11, 128, 128);
  h.Send(2, FUSE_LOOKUP, 12, 128, 128);
  h.WaitForAnswers(3);
  ASSERT_EQ(h.answers_.size(), 3u);
  EXPECT_EQ(h.answers_[0].header.error, -ENOENT);
  EXPECT_EQ(h.answers_[1].header.error, 0);
  EXPECT_EQ(h.answers_[1].body_size, 128u);
  EXPECT_EQ(h.buffers_[1][0], 'b');
  EXPECT_EQ(h.buffers_[2][127], 'c');
  EXPECT_EQ(h.channel().inflight(), 0u);
}

TEST(BackendChannelTest, LargeBodiesArriveIntact) {
  std::string big(1 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + 3);
  ScriptedServer server([&big](int fd) {
    fuse_in_header a = ReadRequest(fd), b = ReadRequest(fd);
    WriteReply(fd, a.unique, 0, big);
    WriteReply(fd, b.unique, 0, big.substr(0, 300000));
    ReadRequest(fd);
  });
  Harness h(server.address());
  h.Send(0, FUSE_READ, 1, 0, 1 << 20);
  h.Send(1, FUSE_READ, 2, 0, 1 << 20);
  h.WaitForAnswers(2);
  ASSERT_EQ(h.answers_[0].body_size, big.size());
  EXPECT_EQ(std::memcmp(h.buffers_[0].data(), big.data(), big.size()), 0);
  ASSERT_EQ(h.answers_[1].body_size, 300000u);
  EXPECT_EQ(std::memcmp(h.buffers_[1].data(), big.data(), 300000), 0);
}

TEST(BackendChannelTest, InvalidReplyFailsThatRequestAndTheOthersAreSentAgain) {
  std::atomic<int> connections{0};
  ScriptedServer server([&connections](int fd) {
    if (++connections == 1) {
      fuse_in_header a = ReadRequest(fd);
      ReadRequest(fd);
      WriteReply(fd, a.unique, 0, std::string(4096 + 1, 'x'));  // more than was asked for
      ReadRequest(fd);
      return;
    }
    fuse_in_header b = ReadRequest(fd);  // the second request, sent again
    WriteReply(fd, b.unique, 0, std::string(10, 'y'));
    ReadRequest(fd);
  });
  Harness h(server.address());
  h.Send(0, FUSE_READ, 1, 0, 4096);
  h.Send(1, FUSE_READ, 2, 0, 4096);
  h.WaitForAnswers(2);
  EXPECT_EQ(h.answers_[0].header.error, -EIO);
  EXPECT_EQ(h.answers_[0].origin, ReplyOrigin::kInvalidReply);
  EXPECT_EQ(h.answers_[1].header.error, 0);
  EXPECT_EQ(h.answers_[1].origin, ReplyOrigin::kServer);
  EXPECT_EQ(h.answers_[1].body_size, 10u);
  EXPECT_EQ(h.channel().reconnects(), 1u);
}

TEST(BackendChannelTest, InvalidRepliesAreRefused) {
  struct Case {
    const char* name;
    std::function<void(int fd, uint64_t unique)> reply;
    int expected;  // a reply that names no request of ours cannot fail one: it times out
  };
  std::vector<Case> cases = {
      {"unknown unique", [](int fd, uint64_t u) { WriteReply(fd, u + 1000, 0, std::string(128, 0)); },
       -ETIMEDOUT},
      {"positive error", [](int fd, uint64_t u) { WriteReply(fd, u, 5, ""); }, -EIO},
      {"error below -511", [](int fd, uint64_t u) { WriteReply(fd, u, -600, ""); }, -EIO},
      {"error with body", [](int fd, uint64_t u) { WriteReply(fd, u, -EIO, "abc"); }, -EIO},
      {"short entry", [](int fd, uint64_t u) { WriteReply(fd, u, 0, std::string(100, 0)); }, -EIO},
      {"length below header", [](int fd, uint64_t u) {
         fuse_out_header out{8, 0, u};
         (void)SendAll(fd, &out, sizeof(out), milliseconds(1000));
       }, -ETIMEDOUT},
  };
  for (const Case& c : cases) {
    ScriptedServer server([&c](int fd) {
      fuse_in_header a = ReadRequest(fd);
      if (a.unique == 0) return;
      c.reply(fd, a.unique);
      ReadRequest(fd);
    });
    Harness h(server.address(), "", nullptr, milliseconds(700));
    h.Send(0, FUSE_LOOKUP, 77, 128, 128);
    h.WaitForAnswers(1);
    ASSERT_EQ(h.answers_.size(), 1u) << c.name;
    EXPECT_EQ(h.answers_[0].header.error, c.expected) << c.name;
    EXPECT_EQ(h.answers_[0].header.unique, 77u) << c.name;
  }
}

TEST(BackendChannelTest, ServerDeathResendsOnReconnect) {
  std::atomic<int> connections{0};
  ScriptedServer server([&connections](int fd) {
    int n = ++connections;
    fuse_in_header a = ReadRequest(fd);
    if (n == 1) return;  // closes with the request unanswered
    WriteReply(fd, a.unique, 0, std::string(128, 'z'));
    ReadRequest(fd);
  });
  Harness h(server.address());
  h.Send(0, FUSE_LOOKUP, 1, 128, 128);
  h.WaitForAnswers(1);
  EXPECT_EQ(h.answers_[0].header.error, 0);
  EXPECT_EQ(h.buffers_[0][0], 'z');
  EXPECT_EQ(h.channel().reconnects(), 1u);
}

TEST(BackendChannelTest, RepliesCutMidwayAreResentWhileTheRequestIsIntact) {
  // Each connection dies while sending part of one reply. The READ's reply lands outside its
  // request bytes and a small LOOKUP reply is not copied until whole, so both are sent again;
  // the GETXATTR, whose large reply shares its buffer with its name (as on the ring), ends with
  // EIO once part of the value has overwritten the name.
  std::atomic<int> connections{0};
  std::string big(1 << 20, 'r');
  ScriptedServer server([&](int fd) {
    int n = ++connections;
    std::map<uint32_t, uint64_t> by_op;
    for (int i = 0; i < (n <= 2 ? 3 : 2); ++i) {
      fuse_in_header in = ReadRequest(fd);
      by_op[in.opcode] = in.unique;
    }
    auto partial = [fd](uint64_t unique, size_t body, size_t send) {
      fuse_out_header out{static_cast<uint32_t>(sizeof(out) + body), 0, unique};
      std::string bytes(send, 'p');
      (void)SendAll(fd, &out, sizeof(out), milliseconds(1000));
      (void)SendAll(fd, bytes.data(), bytes.size(), milliseconds(1000));
    };
    if (n == 1) return partial(by_op[FUSE_READ], big.size(), big.size() / 2);
    if (n == 2) return partial(by_op[FUSE_GETXATTR], 200 * 1024, 100 * 1024);
    if (n == 3) return partial(by_op[FUSE_LOOKUP], 128, 60);
    WriteReply(fd, by_op[FUSE_LOOKUP], 0, std::string(128, 'L'));
    WriteReply(fd, by_op[FUSE_READ], 0, big);
    ReadRequest(fd);
  });
  Harness h(server.address());
  h.Send(0, FUSE_READ, 1, 0, 1 << 20);
  h.Send(1, FUSE_LOOKUP, 2, 128, 128, "name", /*reply_over_payload=*/true);
  h.Send(2, FUSE_GETXATTR, 3, 0, 1 << 20, "user.x", /*reply_over_payload=*/true);
  h.WaitForAnswers(3, milliseconds(15000));
  ASSERT_EQ(h.answers_.size(), 3u);
  EXPECT_EQ(h.answers_[0].header.error, 0);
  EXPECT_EQ(h.answers_[0].body_size, big.size());
  EXPECT_EQ(h.buffers_[0][big.size() - 1], 'r');
  EXPECT_EQ(h.answers_[1].header.error, 0);
  EXPECT_EQ(h.payloads_[1][0], 'L');
  EXPECT_EQ(h.answers_[2].header.error, -EIO);
  EXPECT_EQ(h.answers_[2].origin, ReplyOrigin::kConnectionLost);
  EXPECT_EQ(connections.load(), 4);
}

TEST(BackendChannelTest, SilentServerEndsRequestsAtTheDeadlineAndLateRepliesAreDropped) {
  std::atomic<bool> release{false};
  ScriptedServer server([&release](int fd) {
    fuse_in_header a = ReadRequest(fd);
    while (!release) std::this_thread::sleep_for(milliseconds(10));
    WriteReply(fd, a.unique, 0, std::string(128, 'l'));  // late: must be dropped
    fuse_in_header b = ReadRequest(fd);
    WriteReply(fd, b.unique, 0, std::string(128, 'b'));
    ReadRequest(fd);
  });
  Harness h(server.address(), "", nullptr, milliseconds(500));
  auto start = std::chrono::steady_clock::now();
  h.Send(0, FUSE_LOOKUP, 1, 128, 128);
  h.WaitForAnswers(1);
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(h.answers_[0].header.error, -ETIMEDOUT);
  EXPECT_EQ(h.answers_[0].origin, ReplyOrigin::kTimeout);
  EXPECT_GE(took, milliseconds(450));
  EXPECT_LT(took, milliseconds(1500));
  EXPECT_EQ(h.buffers_[0][0], 0) << "the late reply must not land in a returned buffer";
  release = true;
  h.Send(1, FUSE_LOOKUP, 2, 128, 128);
  h.WaitForAnswers(2);
  EXPECT_EQ(h.answers_[1].header.error, 0);
  EXPECT_EQ(h.buffers_[1][0], 'b');
  EXPECT_EQ(h.buffers_[0][0], 0);
  EXPECT_EQ(h.channel().timeouts(), 1u);
  EXPECT_EQ(h.channel().reconnects(), 0u) << "a dropped reply keeps the stream in sync";
}

TEST(BackendChannelTest, InterruptAnswersEintrAndTheLateReplyIsDropped) {
  std::atomic<bool> release{false};
  ScriptedServer server([&release](int fd) {
    fuse_in_header a = ReadRequest(fd);
    while (!release) std::this_thread::sleep_for(milliseconds(10));
    WriteReply(fd, a.unique, 0, std::string(128, 'l'));
    fuse_in_header b = ReadRequest(fd);
    WriteReply(fd, b.unique, 0, std::string(128, 'b'));
    ReadRequest(fd);
  });
  InterruptBoard board;
  Harness h(server.address(), "", nullptr, milliseconds(0), &board);
  h.Send(0, FUSE_LOOKUP, 41, 128, 128);
  h.RunUntil([] { return false; }, milliseconds(300));
  EXPECT_TRUE(h.answers_.empty()) << "hard: nothing ends by itself";
  board.Post(41, MonotonicNs());
  auto start = std::chrono::steady_clock::now();
  h.WaitForAnswers(1);
  EXPECT_EQ(h.answers_[0].header.error, -EINTR);
  EXPECT_EQ(h.answers_[0].origin, ReplyOrigin::kInterrupted);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(500));
  release = true;
  h.Send(1, FUSE_LOOKUP, 42, 128, 128);
  h.WaitForAnswers(2);
  EXPECT_EQ(h.answers_[1].header.error, 0);
  EXPECT_EQ(h.buffers_[0][0], 0);
  EXPECT_TRUE(board.empty());
}

TEST(BackendChannelTest, InterruptBeforeSubmitNeverReachesTheServer) {
  std::atomic<int> requests{0};
  ScriptedServer server([&requests](int fd) {
    while (ReadRequest(fd).unique != 0) ++requests;
  });
  InterruptBoard board;
  Harness h(server.address(), "", nullptr, milliseconds(0), &board);
  board.Post(5, MonotonicNs());
  h.Send(0, FUSE_LOOKUP, 5, 128, 128);
  h.WaitForAnswers(1);
  EXPECT_EQ(h.answers_[0].header.error, -EINTR);
  h.RunUntil([] { return false; }, milliseconds(200));
  EXPECT_EQ(requests.load(), 0);
}

TEST(BackendChannelTest, HardWaitsForAServerThatComesBack) {
  // Nothing listens at first; a server appears on the same port later.
  auto probe = ParseSocketAddress("127.0.0.1:0");
  UniqueFd reserve = std::move(*ListenOn(*probe));
  sockaddr_in bound{};
  socklen_t len = sizeof(bound);
  getsockname(reserve.get(), reinterpret_cast<sockaddr*>(&bound), &len);
  int port = ntohs(bound.sin_port);
  reserve.Reset();
  auto address = ParseSocketAddress("127.0.0.1:" + std::to_string(port));
  auto h = std::make_unique<Harness>(*address, "", nullptr, milliseconds(0));
  h->Send(0, FUSE_LOOKUP, 9, 128, 128);
  h->RunUntil([] { return false; }, milliseconds(800));
  ASSERT_TRUE(h->answers_.empty());
  UniqueFd listener = std::move(*ListenOn(*address));
  std::thread server([&listener] {
    UniqueFd conn(accept(listener.get(), nullptr, nullptr));
    wire::ClientHello hello;
    ASSERT_TRUE(wire::ReceiveHandshake(conn.get(), &hello).ok());
    wire::ServerHello reply;
    reply.set_result(wire::ServerHello::OK);
    reply.set_max_inflight(hello.max_inflight());
    ASSERT_TRUE(wire::SendHandshake(conn.get(), reply).ok());
    fuse_in_header a = ReadRequest(conn.get());
    WriteReply(conn.get(), a.unique, 0, std::string(128, 'h'));
    ReadRequest(conn.get());
  });
  h->WaitForAnswers(1, milliseconds(8000));
  EXPECT_EQ(h->answers_[0].header.error, 0);
  EXPECT_EQ(h->buffers_[0][0], 'h');
  h.reset();  // closes the connection so the server thread ends
  server.join();
}

TEST(BackendChannelTest, NeverMoreInFlightThanTheServerAccepts) {
  // The server accepts 2 in flight; 8 requests with 256 KiB payloads all get answered and the
  // server never sees a third before answering.
  std::atomic<int> max_seen{0};
  UniqueFd listener = std::move(*ListenOn(*ParseSocketAddress("127.0.0.1:0")));
  sockaddr_in bound{};
  socklen_t len = sizeof(bound);
  getsockname(listener.get(), reinterpret_cast<sockaddr*>(&bound), &len);
  auto address = ParseSocketAddress("127.0.0.1:" + std::to_string(ntohs(bound.sin_port)));
  std::thread server([&] {
    UniqueFd conn(accept(listener.get(), nullptr, nullptr));
    wire::ClientHello hello;
    ASSERT_TRUE(wire::ReceiveHandshake(conn.get(), &hello).ok());
    wire::ServerHello reply;
    reply.set_result(wire::ServerHello::OK);
    reply.set_max_inflight(2);
    ASSERT_TRUE(wire::SendHandshake(conn.get(), reply).ok());
    int outstanding = 0;
    std::vector<uint64_t> held;
    for (int answered = 0; answered < 8;) {
      // Read while allowed; answer the oldest when two are outstanding or all have arrived.
      if (outstanding < 2 && answered + outstanding < 8) {
        std::vector<char> body;
        fuse_in_header in = ReadRequest(conn.get(), &body);
        ASSERT_EQ(body.size(), 256u * 1024);
        held.push_back(in.unique);
        max_seen = std::max(max_seen.load(), ++outstanding);
        // A third frame must not be in the socket yet.
        if (outstanding == 2) {
          std::this_thread::sleep_for(milliseconds(30));
          char peek;
          EXPECT_EQ(recv(conn.get(), &peek, 1, MSG_PEEK | MSG_DONTWAIT), -1);
        }
        continue;
      }
      WriteReply(conn.get(), held.front(), 0, std::string(8, 'w'));
      held.erase(held.begin());
      --outstanding;
      ++answered;
    }
    ReadRequest(conn.get());
  });
  auto h = std::make_unique<Harness>(*address);
  // 2 MiB of frames against a server that reads only 512 KiB before answering: Submit only
  // queues (a blocking send here would never return, and the test would hit its timeout).
  for (uint32_t i = 0; i < 8; ++i) {
    h->Send(i, FUSE_WRITE, 100 + i, 8, 8, std::string(256 * 1024, 'd'));
  }
  h->WaitForAnswers(8);
  ASSERT_EQ(h->answers_.size(), 8u);
  for (auto& [slot, answer] : h->answers_) EXPECT_EQ(answer.header.error, 0) << slot;
  EXPECT_LE(max_seen.load(), 2);
  h.reset();
  server.join();
}

// The hello names this host (a digest of its boot id): the server serves a mount of its own host on
// the CPU of the mount's queue, and a proxy's loopback address does not fool it
// (server/cpu_placement.h).
TEST(BackendChannelTest, TheHelloCarriesThisHostsId) {
  BackendConfig config;
  config.queue = 1;
  const wire::ClientHello hello = MakeClientHello(config);
  EXPECT_EQ(hello.host_id().size(), 32u);
  EXPECT_EQ(hello.host_id(), ThisHostId());
  EXPECT_EQ(hello.queue(), 1u);
}

TEST(BackendChannelTest, WrongTokenIsRefusedClearly) {
  ScriptedServer server([](int) {}, "secret");
  BackendConfig config;
  config.address = server.address();
  config.token = "guess";
  config.max_inflight = 4;
  // The server's proof does not match our secret: we hang up before proving anything.
  auto session = ConnectToServer(config);
  EXPECT_EQ(session.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(session.status().message().find("token_file="), absl::string_view::npos)
      << session.status();
  // Without a secret the server refuses with AUTH_FAILED.
  config.token.clear();
  session = ConnectToServer(config);
  EXPECT_EQ(session.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(session.status().message().find("AUTH_FAILED"), absl::string_view::npos);
  config.token = "secret";
  session = ConnectToServer(config);
  EXPECT_TRUE(session.ok()) << session.status();
}

// The ring-driven connect (kHelloSend/kHelloRecv, then kProofSend/kProofRecv) proves the
// secret and carries requests.
TEST(BackendChannelTest, RingConnectAnswersTheChallenge) {
  ScriptedServer server([](int fd) {
    fuse_in_header a = ReadRequest(fd);
    WriteReply(fd, a.unique, 0, std::string(128, 'a'));
    ReadRequest(fd);
  }, "ring-secret");
  Harness h(server.address(), "ring-secret");
  h.Send(0, FUSE_LOOKUP, 10, 128, 128);
  h.WaitForAnswers(1);
  ASSERT_EQ(h.answers_.size(), 1u);
  EXPECT_EQ(h.answers_[0].header.error, 0);
  EXPECT_EQ(h.buffers_[0][0], 'a');
  EXPECT_EQ(server.refused_unanswered(), 0);
}

// A ring channel whose secret differs never gets up: it hangs up at the server's proof (the
// scripted server sees no proof) and keeps retrying with backoff; the request times out.
TEST(BackendChannelTest, RingConnectRefusesAServerWithoutTheSecret) {
  ScriptedServer server([](int fd) { ReadRequest(fd); }, "server-secret");
  Harness h(server.address(), "client-secret", nullptr, milliseconds(1500));
  h.Send(0, FUSE_LOOKUP, 10, 128, 128);
  h.WaitForAnswers(1);
  ASSERT_EQ(h.answers_.size(), 1u);
  EXPECT_EQ(h.answers_[0].header.error, -ETIMEDOUT);
  EXPECT_FALSE(h.channel().connected());
  EXPECT_GE(server.refused_unanswered(), 1);
}

TEST(BackendChannelTest, UnreachableServerFailsFast) {
  auto address = ParseSocketAddress("127.0.0.1:1");
  BackendConfig config;
  config.address = *address;
  config.connect_timeout = milliseconds(1000);
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(ConnectToServer(config).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// A record (DirAttrTrailer) of node `nodeid` with change time `ctime`, as the server appends it.
std::string Trailer(uint64_t nodeid, uint64_t ctime, uint32_t mode = S_IFDIR | 0755,
                    uint64_t size = 0) {
  wire::DirAttrTrailer trailer;
  trailer.nodeid = nodeid;
  trailer.attr.attr_valid = 5;
  trailer.attr.attr.ino = nodeid;
  trailer.attr.attr.ctime = ctime;
  trailer.attr.attr.mode = mode;
  trailer.attr.attr.size = size;
  return std::string(reinterpret_cast<const char*>(&trailer), sizeof(trailer));
}

std::string Written(uint64_t nodeid, uint64_t ctime, uint64_t size) {
  fuse_write_out out{};
  out.size = 4;
  return std::string(reinterpret_cast<const char*>(&out), sizeof(out)) +
         Trailer(nodeid, ctime, S_IFREG | 0644, size);
}

std::string Opened(uint64_t nodeid, uint64_t ctime) {
  fuse_open_out out{};
  out.fh = 9;
  return std::string(reinterpret_cast<const char*>(&out), sizeof(out)) +
         Trailer(nodeid, ctime, S_IFREG | 0644, 10);
}

// Open attrs (kept pages): an OPEN's record decides whether the kernel keeps the file's pages
// (FOPEN_KEEP_CACHE in the answer); a drop of pages the kernel may hold goes to PageDrops for
// confirmation, and until then nothing is kept. The record answers the stat after an open that
// kept pages or whose drop is confirmed (the kernel will ask); any other open removes an older
// record of the file.
TEST(BackendChannelTest, AnOpensRecordKeepsPagesAndAnswersTheStatAfterIt) {
  ScriptedServer server([](int fd) {
    for (uint64_t ctime : {100, 100, 200, 200}) {
      WriteReply(fd, ReadRequest(fd).unique, 0, Opened(7, ctime));
    }
    ReadRequest(fd);
  });
  DirAttrCache cache;
  KeptPages kept;
  std::atomic<int> drops_written{0};
  PageDrops drops(UniqueFd(), &kept);
  drops.set_writer_for_test([&](uint64_t nodeid) {
    EXPECT_EQ(nodeid, 7u);
    drops_written.fetch_add(1);
    return 0;
  });
  drops.Start();
  Harness h(server.address(), "", &cache, milliseconds(3000), nullptr, nullptr, nullptr, nullptr,
            nullptr, nullptr, BackendConfig{}.detached_batch_wait, false, &kept, &drops);
  h.WaitConnected();
  auto open_keeps = [&](uint32_t slot) {
    h.SendOpen(slot, slot + 1, 7, cache);
    h.WaitForAnswers(slot + 1);
    EXPECT_EQ(h.answers_[slot].header.error, 0);
    EXPECT_EQ(h.answers_[slot].body_size, sizeof(fuse_open_out)) << "the record is not the kernel's";
    fuse_open_out out;
    std::memcpy(&out, h.buffers_[slot].data(), sizeof(out));
    EXPECT_EQ(out.fh, 9u);
    return (out.open_flags & FOPEN_KEEP_CACHE) != 0;
  };
  fuse_attr_out older{};
  older.attr_valid = 5;
  older.attr.ino = 7;
  older.attr.ctime = 50;
  cache.OfferWrite(7, older, cache.Ticket(), cache.Reads(7), MonotonicNs());
  EXPECT_FALSE(open_keeps(0)) << "the first open drops and sets the baseline";
  EXPECT_FALSE(cache.Take(7, MonotonicNs()).has_value())
      << "an older record answers for the file this open found";
  kept.IoSent(7, /*write=*/false);  // its pages were read, long ago
  kept.IoEnded(7, MonotonicNs() - 10'000'000'000);
  EXPECT_TRUE(open_keeps(1));
  EXPECT_EQ(kept.kept(), 1u);
  std::optional<fuse_attr_out> attr = cache.Take(7, MonotonicNs());
  ASSERT_TRUE(attr.has_value()) << "the record of an open that kept the pages answers the stat";
  EXPECT_EQ(attr->attr.ctime, 100u);
  EXPECT_FALSE(open_keeps(2)) << "changed: dropped";
  attr = cache.Take(7, MonotonicNs());
  ASSERT_TRUE(attr.has_value()) << "the page drop will void the kernel's attributes";
  EXPECT_EQ(attr->attr.ctime, 200u);
  ASSERT_TRUE(drops.WaitIdle(absl::Seconds(10)));
  EXPECT_EQ(drops_written.load(), 1) << "the kernel made to drop the old pages";
  EXPECT_TRUE(open_keeps(3)) << "confirmed";
}

// A write's record answers the stat after it (write attrs). A write that ends without a record
// from the server (it failed there, or its answer never came: the deadline, an interrupt) may
// still have changed the file: the record of the write before it must not answer either.
TEST(BackendChannelTest, AWriteEndedWithoutItsRecordDropsTheRecordOfTheOneBefore) {
  std::atomic<bool> release{false};
  ScriptedServer server([&release](int fd) {
    WriteReply(fd, ReadRequest(fd).unique, 0, Written(7, 100, 4));
    WriteReply(fd, ReadRequest(fd).unique, -ENOSPC, "");
    fuse_in_header silent = ReadRequest(fd);
    while (!release) std::this_thread::sleep_for(milliseconds(10));
    WriteReply(fd, silent.unique, 0, Written(7, 300, 12));  // late: dropped
    ReadRequest(fd);
  });
  DirAttrCache cache;
  Harness h(server.address(), "", &cache, milliseconds(500));
  h.WaitConnected();
  h.SendWrite(0, 1, 7, cache);
  h.WaitForAnswers(1);
  ASSERT_EQ(h.answers_[0].header.error, 0);
  EXPECT_EQ(h.answers_[0].body_size, sizeof(fuse_write_out)) << "the record is not the kernel's";
  std::optional<fuse_attr_out> attr = cache.Take(7, MonotonicNs());
  ASSERT_TRUE(attr.has_value()) << "a write's own record answers";
  EXPECT_EQ(attr->attr.size, 4u);

  auto kept_after = [&](uint32_t slot, uint64_t unique) {
    fuse_attr_out older{};
    older.attr_valid = 5;
    older.attr.ino = 7;
    older.attr.ctime = 150;
    older.attr.size = 4;
    cache.OfferWrite(7, older, cache.Ticket(), cache.Reads(7), MonotonicNs());
    h.SendWrite(slot, unique, 7, cache);
    h.WaitForAnswers(slot + 1);
    return cache.Take(7, MonotonicNs()).has_value();
  };
  EXPECT_FALSE(kept_after(1, 2)) << "a failed write";
  EXPECT_EQ(h.answers_[1].header.error, -ENOSPC);
  EXPECT_FALSE(kept_after(2, 3)) << "a write that ran out of time";
  EXPECT_EQ(h.answers_[2].origin, ReplyOrigin::kTimeout);
  release = true;
}

// Requests on different connections (or writeback, without the inode lock) run at the server
// in any order: a WRITE sent after a change may be stat'ed before the change runs. So the
// change voids write records again when it ends, and a change whose end was not the server's
// answer voids every record until its late answer is read.
TEST(BackendChannelTest, AChangeThatEndsAfterAWritesRecordVoidsIt) {
  std::atomic<int> release{0};
  ScriptedServer server([&release](int fd) {
    const fuse_in_header fallocate = ReadRequest(fd);
    WriteReply(fd, ReadRequest(fd).unique, 0, Written(7, 100, 4));  // ran first, stat'ed
    while (release < 1) std::this_thread::sleep_for(milliseconds(10));
    WriteReply(fd, fallocate.unique, 0, "");
    const fuse_in_header setattr = ReadRequest(fd);  // answered after its deadline
    WriteReply(fd, ReadRequest(fd).unique, 0, Written(7, 200, 8));
    while (release < 2) std::this_thread::sleep_for(milliseconds(10));
    WriteReply(fd, setattr.unique, 0, std::string(sizeof(fuse_attr_out), '\0'));
    WriteReply(fd, ReadRequest(fd).unique, 0, Written(7, 300, 12));
    WriteReply(fd, ReadRequest(fd).unique, 0, Written(7, 400, 16));
    ReadRequest(fd);
  });
  DirAttrCache cache;
  Harness h(server.address(), "", &cache, milliseconds(500));
  h.WaitConnected();

  h.SendChange(0, FUSE_FALLOCATE, 1, 7, sizeof(fuse_fallocate_in), {.dropped = 7});
  h.SendWrite(1, 2, 7, cache);
  h.WaitForAnswers(1);
  ASSERT_EQ(h.answers_.count(1), 1u);
  EXPECT_EQ(cache.size(), 1u) << "the write's record, taken after the change was sent";
  release = 1;
  h.WaitForAnswers(2);
  EXPECT_EQ(h.answers_[0].origin, ReplyOrigin::kServer);
  EXPECT_FALSE(cache.Take(7, MonotonicNs()).has_value())
      << "the change ran after the write's stat: the record hides it";

  h.SendChange(2, FUSE_SETATTR, 3, 7, sizeof(fuse_setattr_in), {.dropped = 7});
  h.WaitForAnswers(3);
  EXPECT_EQ(h.answers_[2].origin, ReplyOrigin::kTimeout);
  h.SendWrite(3, 4, 7, cache);
  h.WaitForAnswers(4);
  EXPECT_EQ(h.answers_[3].header.error, 0);
  EXPECT_FALSE(cache.Take(7, MonotonicNs()).has_value())
      << "the abandoned change may still run at the server";
  release = 2;
  // Sent before the late answer was read (and answered after it: one connection is FIFO).
  h.SendWrite(4, 5, 7, cache);
  h.WaitForAnswers(5);
  EXPECT_FALSE(cache.Take(7, MonotonicNs()).has_value()) << "sent while still unsettled";
  h.SendWrite(5, 6, 7, cache);
  h.WaitForAnswers(6);
  std::optional<fuse_attr_out> attr = cache.Take(7, MonotonicNs());
  ASSERT_TRUE(attr.has_value()) << "settled: records answer again";
  EXPECT_EQ(attr->attr.size, 16u);
}

TEST(BackendChannelTest, DirAttrTrailersAreStrippedAndCached) {
  ScriptedServer server([](int fd) {
    fuse_in_header unlink = ReadRequest(fd), create = ReadRequest(fd), rename = ReadRequest(fd);
    WriteReply(fd, unlink.unique, 0, Trailer(7, 100));
    WriteReply(fd, create.unique, 0, std::string(sizeof(fuse_entry_out) + sizeof(fuse_open_out),
                                                 'e') + Trailer(8, 200));
    WriteReply(fd, rename.unique, 0, Trailer(9, 300) + Trailer(10, 400));
    ReadRequest(fd);
  });
  DirAttrCache cache;
  Harness h(server.address(), "", &cache);
  const size_t create_size = sizeof(fuse_entry_out) + sizeof(fuse_open_out);
  h.Send(0, FUSE_UNLINK, 1, 0, 0);
  h.Send(1, FUSE_CREATE, 2, create_size, create_size);
  h.Send(2, FUSE_RENAME, 3, 0, 0);
  h.WaitForAnswers(3);
  ASSERT_EQ(h.answers_.size(), 3u);
  for (auto& [slot, answer] : h.answers_) EXPECT_EQ(answer.header.error, 0) << slot;
  // The kernel sees the plain replies only.
  EXPECT_EQ(h.answers_[0].body_size, 0u);
  EXPECT_EQ(h.answers_[0].header.len, sizeof(fuse_out_header));
  EXPECT_EQ(h.answers_[1].body_size, create_size);
  EXPECT_EQ(h.answers_[2].body_size, 0u);
  const uint64_t now = MonotonicNs();
  for (uint64_t nodeid : {7, 8, 9, 10}) {
    std::optional<fuse_attr_out> attr = cache.Take(nodeid, now);
    ASSERT_TRUE(attr.has_value()) << nodeid;
    EXPECT_EQ(attr->attr.ino, nodeid);
  }
}

// A MKDIR makes its directory known complete only when the server's answer carries the new
// directory's own trailer (the server found it empty, common/dir_attrs.h); a reconnect forgets.
TEST(BackendChannelTest, OnlyAMkdirTheServerFoundEmptyMakesADirectoryComplete) {
  ScriptedServer server([](int fd) {
    auto entry = [](uint64_t nodeid) {
      fuse_entry_out out{};
      out.nodeid = nodeid;
      out.attr.mode = S_IFDIR | 0755;
      return std::string(reinterpret_cast<const char*>(&out), sizeof(out));
    };
    fuse_in_header empty = ReadRequest(fd), full = ReadRequest(fd), old = ReadRequest(fd);
    WriteReply(fd, empty.unique, 0, entry(20) + Trailer(1, 1) + Trailer(20, 1));
    WriteReply(fd, full.unique, 0, entry(21) + Trailer(1, 2));  // not empty, or an old server
    WriteReply(fd, old.unique, 0, entry(22) + Trailer(1, 3) + Trailer(5, 3));  // another node's
    ReadRequest(fd);
  });
  int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(null_fd, 0);
  KernelNotifier notifier{UniqueFd(null_fd), nullptr, nullptr};
  DirAttrCache cache;
  CompleteDirs dirs(60'000'000'000);
  Harness h(server.address(), "", &cache, milliseconds(3000), nullptr, nullptr, nullptr,
            &notifier, &dirs);
  for (uint32_t slot = 0; slot < 3; ++slot) {
    h.Send(slot, FUSE_MKDIR, slot + 1, sizeof(fuse_entry_out), sizeof(fuse_entry_out));
  }
  h.WaitForAnswers(3);
  for (auto& [slot, answer] : h.answers_) {
    EXPECT_EQ(answer.header.error, 0) << slot;
    EXPECT_EQ(answer.body_size, sizeof(fuse_entry_out)) << slot;  // the kernel sees no trailer
  }
  const uint64_t now = MonotonicNs();
  EXPECT_GT(dirs.KnownAbsent(20, "x", now), 0u);
  EXPECT_EQ(dirs.KnownAbsent(21, "x", now), 0u);
  EXPECT_EQ(dirs.KnownAbsent(22, "x", now), 0u);
  EXPECT_EQ(dirs.dirs(), 1u);
}

// A LOOKUP that found no entry may carry its directory's trailer: the server found that
// directory empty. It counts only for a negative entry, for the directory looked in, and when
// no name-space change of this mount was unsettled meanwhile.
TEST(BackendChannelTest, ANegativeLookupInADirectoryTheServerFoundEmptyMakesItComplete) {
  std::atomic<bool> create_answered{false};
  ScriptedServer server([&](int fd) {
    fuse_entry_out negative{};
    const std::string none(reinterpret_cast<const char*>(&negative), sizeof(negative));
    fuse_entry_out found{};
    found.nodeid = 40;
    const std::string some(reinterpret_cast<const char*>(&found), sizeof(found));
    fuse_in_header empty = ReadRequest(fd), other = ReadRequest(fd), positive = ReadRequest(fd);
    WriteReply(fd, empty.unique, 0, none + Trailer(30, 1));
    WriteReply(fd, other.unique, 0, none + Trailer(5, 1));       // another node's: ignored
    WriteReply(fd, positive.unique, 0, some + Trailer(32, 1));   // an entry was found
    // A CREATE in 33 is held; a LOOKUP in 34 sent meanwhile finds 34 empty: its word does not
    // count (the CREATE might have been in 34 on another connection, not yet run).
    fuse_in_header create = ReadRequest(fd), during = ReadRequest(fd);
    WriteReply(fd, during.unique, 0, none + Trailer(34, 1));
    WriteReply(fd, create.unique, 0, some);
    create_answered = true;
    fuse_in_header after = ReadRequest(fd);
    WriteReply(fd, after.unique, 0, none + Trailer(35, 1));
    ReadRequest(fd);
  });
  int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(null_fd, 0);
  KernelNotifier notifier{UniqueFd(null_fd), nullptr, nullptr};
  DirAttrCache cache;
  CompleteDirs dirs(60'000'000'000);
  Harness h(server.address(), "", &cache, milliseconds(3000), nullptr, nullptr, nullptr,
            &notifier, &dirs);
  const size_t entry = sizeof(fuse_entry_out);
  h.WaitConnected();
  h.Send(0, FUSE_LOOKUP, 1, entry, entry, std::string("a\0", 2), false, 30);
  h.Send(1, FUSE_LOOKUP, 2, entry, entry, std::string("a\0", 2), false, 31);
  h.Send(2, FUSE_LOOKUP, 3, entry, entry, std::string("a\0", 2), false, 32);
  h.WaitForAnswers(3);
  for (auto& [slot, answer] : h.answers_) {
    EXPECT_EQ(answer.header.error, 0) << slot;
    EXPECT_EQ(answer.body_size, entry) << slot;  // the kernel sees no trailer
  }
  uint64_t now = MonotonicNs();
  EXPECT_GT(dirs.KnownAbsent(30, "x", now), 0u);
  EXPECT_EQ(dirs.KnownAbsent(31, "x", now), 0u);
  EXPECT_EQ(dirs.KnownAbsent(32, "x", now), 0u);

  h.Send(3, FUSE_CREATE, 4, entry, entry + sizeof(fuse_open_out), std::string("b\0", 2), false,
         33);
  h.RunUntil([&] { return dirs.unsettled() == 1; });
  EXPECT_EQ(dirs.unsettled(), 1u);
  h.Send(4, FUSE_LOOKUP, 5, entry, entry, std::string("a\0", 2), false, 34);
  h.WaitForAnswers(5);
  EXPECT_EQ(dirs.unsettled(), 0u);
  h.Send(5, FUSE_LOOKUP, 6, entry, entry, std::string("a\0", 2), false, 35);
  h.WaitForAnswers(6);
  now = MonotonicNs();
  EXPECT_EQ(dirs.KnownAbsent(34, "x", now), 0u);
  EXPECT_GT(dirs.KnownAbsent(35, "x", now), 0u);
  EXPECT_EQ(dirs.dirs(), 2u);
}

TEST(BackendChannelTest, TrailersAreInvalidWhereTheyDoNotBelong) {
  // A LOOKUP reply never carries trailers, and without negotiation no reply does: both are a
  // misbehaving server.
  ScriptedServer server([](int fd) {
    fuse_in_header lookup = ReadRequest(fd);
    WriteReply(fd, lookup.unique, 0, std::string(sizeof(fuse_entry_out), 'e') + Trailer(7, 1));
    ReadRequest(fd);
  });
  DirAttrCache cache;
  Harness with_cache(server.address(), "", &cache);
  with_cache.Send(0, FUSE_LOOKUP, 1, sizeof(fuse_entry_out), sizeof(fuse_entry_out));
  with_cache.WaitForAnswers(1);
  EXPECT_EQ(with_cache.answers_[0].header.error, -EIO);
  EXPECT_EQ(cache.size(), 0u);
}

TEST(BackendChannelTest, UnnegotiatedTrailerIsInvalid) {
  ScriptedServer server([](int fd) {
    fuse_in_header unlink = ReadRequest(fd);
    WriteReply(fd, unlink.unique, 0, Trailer(7, 1));
    ReadRequest(fd);
  });
  Harness h(server.address());
  h.Send(0, FUSE_UNLINK, 1, 0, 0);
  h.WaitForAnswers(1);
  EXPECT_EQ(h.answers_[0].header.error, -EIO);
}

}  // namespace
}  // namespace ringfs::frontend

namespace ringfs::frontend {
namespace {

std::string Bytes(const void* data, size_t size) {
  return std::string(static_cast<const char*>(data), size);
}

// The first instance hands out node 77 (with its handle) and fh 555, then dies with a WRITE
// unanswered. The channel must re-establish both on the second instance before it sends the
// WRITE again.
TEST(BackendChannelTest, NewInstanceGetsNodesAndOpenFilesBeforeTheHeldRequests) {
  std::atomic<int> connection{0};
  std::vector<std::string> second_frames;  // opcode:detail of what instance 2 received
  std::mutex mu;
  ScriptedServer server([&](int fd) {
    if (connection++ == 0) {
      fuse_in_header lookup = ReadRequest(fd);
      wire::NodeHandleRecord handle;
      handle.nodeid = 77;
      handle.handle_type = 1;
      handle.handle_bytes = 8;
      std::memcpy(handle.f_handle, "handle77", 8);
      handle.mac[0] = 0xab;
      fuse_out_header notify{static_cast<uint32_t>(sizeof(notify) + sizeof(handle)),
                             wire::kNotifyNodeHandles, 0};
      std::string frame = Bytes(&notify, sizeof(notify)) + Bytes(&handle, sizeof(handle));
      ASSERT_TRUE(SendAll(fd, frame.data(), frame.size(), milliseconds(5000)).ok());
      fuse_entry_out entry{};
      entry.nodeid = 77;
      WriteReply(fd, lookup.unique, 0, Bytes(&entry, sizeof(entry)));
      fuse_in_header open = ReadRequest(fd);
      fuse_open_out opened{};
      opened.fh = 555;
      WriteReply(fd, open.unique, 0, Bytes(&opened, sizeof(opened)));
      ReadRequest(fd);  // the WRITE: never answered, the instance "dies"
      return;
    }
    for (;;) {
      std::vector<char> args;
      fuse_in_header in = ReadRequest(fd, &args);
      if (in.len == 0) return;
      std::lock_guard<std::mutex> lock(mu);
      if (in.opcode == wire::kOpReclaimNodes) {
        wire::ReclaimBatch batch;
        std::memcpy(&batch, args.data(), sizeof(batch));
        wire::ReclaimNodeRecord record;
        std::memcpy(&record, args.data() + sizeof(batch), sizeof(record));
        second_frames.push_back(absl::StrFormat(
            "reclaim:%u:%u:%u:%s:%x", batch.count, record.handle.nodeid, record.nlookup,
            std::string(reinterpret_cast<char*>(record.handle.f_handle), 8),
            record.handle.mac[0]));
        int32_t ok = 0;
        WriteReply(fd, in.unique, 0, Bytes(&ok, sizeof(ok)));
      } else if (in.opcode == wire::kOpReopenHandles) {
        wire::ReclaimBatch batch;
        std::memcpy(&batch, args.data(), sizeof(batch));
        wire::ReopenRecord record;
        std::memcpy(&record, args.data() + sizeof(batch), sizeof(record));
        second_frames.push_back(absl::StrFormat("reopen:%u:%u:%u:%o:%u", batch.count, record.fh,
                                                record.nodeid, record.flags, record.directory));
        int32_t ok = 0;
        WriteReply(fd, in.unique, 0, Bytes(&ok, sizeof(ok)));
      } else {
        second_frames.push_back(absl::StrFormat("%u:%u", in.opcode, in.unique));
        if (in.opcode == FUSE_WRITE) {
          fuse_write_out out{};
          out.size = 4;
          WriteReply(fd, in.unique, 0, Bytes(&out, sizeof(out)));
        }
      }
    }
  });
  NodeLedger ledger;
  ServerBinding binding({server.address()});
  Harness h(server.address(), "", nullptr, milliseconds(0), nullptr, &ledger, &binding);
  h.Send(0, FUSE_LOOKUP, 10, sizeof(fuse_entry_out), sizeof(fuse_entry_out), "name");
  h.WaitForAnswers(1);
  fuse_open_in open_in{};
  open_in.flags = O_RDWR | O_APPEND;
  h.Send(1, FUSE_OPEN, 12, sizeof(fuse_open_out), sizeof(fuse_open_out),
         Bytes(&open_in, sizeof(open_in)), false, 77);
  h.WaitForAnswers(2);
  EXPECT_EQ(ledger.nodes(), 1u);
  EXPECT_EQ(ledger.open_files(), 1u);
  fuse_write_in write_in{};
  write_in.fh = 555;
  write_in.size = 4;
  h.Send(2, FUSE_WRITE, 16, sizeof(fuse_write_out), sizeof(fuse_write_out),
         Bytes(&write_in, sizeof(write_in)) + "data", false, 77);
  h.WaitForAnswers(3, milliseconds(15000));
  ASSERT_EQ(h.answers_.size(), 3u);
  EXPECT_EQ(h.answers_[2].header.error, 0);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(second_frames.size(), 3u);
  EXPECT_EQ(second_frames[0], "reclaim:1:77:1:handle77:ab");
  EXPECT_EQ(second_frames[1], absl::StrFormat("reopen:1:555:77:%o:0", O_RDWR | O_APPEND));
  EXPECT_EQ(second_frames[2], absl::StrFormat("%u:16", FUSE_WRITE));
  EXPECT_EQ(binding.bound(), 2u);
  EXPECT_EQ(h.channel().reclaims(), 1u);
}

}  // namespace
}  // namespace ringfs::frontend

namespace ringfs::frontend {
namespace {

// A LOOKUP and an OPEN end at their deadline; their late success replies gave the client a
// lookup and an open handle the kernel never got: the channel gives them back (FORGET, RELEASE)
// and drops the reply to its own RELEASE without tearing the connection down.
TEST(BackendChannelTest, LateRepliesThatReachNoOneAreGivenBack) {
  std::vector<std::string> seen;
  std::mutex mu;
  ScriptedServer server([&](int fd) {
    fuse_in_header lookup = ReadRequest(fd), open = ReadRequest(fd);
    std::this_thread::sleep_for(milliseconds(600));
    fuse_entry_out entry{};
    entry.nodeid = 42;
    WriteReply(fd, lookup.unique, 0, Bytes(&entry, sizeof(entry)));
    fuse_open_out opened{};
    opened.fh = 9;
    WriteReply(fd, open.unique, 0, Bytes(&opened, sizeof(opened)));
    for (int i = 0; i < 2; ++i) {
      std::vector<char> args;
      fuse_in_header in = ReadRequest(fd, &args);
      std::lock_guard<std::mutex> lock(mu);
      if (in.opcode == FUSE_FORGET) {
        fuse_forget_in forget;
        std::memcpy(&forget, args.data(), sizeof(forget));
        // The real server refuses unique 0 and closes the connection (DecodeRequest).
        EXPECT_NE(in.unique, 0u);
        seen.push_back(absl::StrFormat("forget:%u:%u", in.nodeid, forget.nlookup));
      } else if (in.opcode == FUSE_RELEASE) {
        fuse_release_in release;
        std::memcpy(&release, args.data(), sizeof(release));
        seen.push_back(absl::StrFormat("release:%u", release.fh));
        WriteReply(fd, in.unique, 0, "");
      }
    }
    ReadRequest(fd);
  });
  Harness h(server.address(), "", nullptr, milliseconds(200));
  h.Send(0, FUSE_LOOKUP, 10, sizeof(fuse_entry_out), sizeof(fuse_entry_out), "name");
  fuse_open_in open_in{};
  h.Send(1, FUSE_OPEN, 12, sizeof(fuse_open_out), sizeof(fuse_open_out),
         Bytes(&open_in, sizeof(open_in)), false, 5);
  h.WaitForAnswers(2);
  ASSERT_EQ(h.answers_[0].header.error, -ETIMEDOUT);
  h.RunUntil([&] {
    std::lock_guard<std::mutex> lock(mu);
    return seen.size() == 2;
  });
  h.RunUntil([] { return false; }, milliseconds(300));  // the RELEASE's reply comes and goes
  std::lock_guard<std::mutex> lock(mu);
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::string>{"forget:42:1", "release:9"}));
  EXPECT_TRUE(h.channel().connected());
  EXPECT_EQ(h.channel().reconnects(), 0u);
}

TEST(BackendChannelTest, TlsServerNameIsTheSourceHostUnlessGiven) {
  BackendConfig config;
  config.address.text = "files.example:7700";
  EXPECT_EQ(TlsServerName(config), "files.example");
  config.address.text = "files.example:7700 (10.0.0.5:7700)";  // after resolution
  EXPECT_EQ(TlsServerName(config), "files.example");
  config.address.text = "[::1]:7700";
  EXPECT_EQ(TlsServerName(config), "::1");
  config.address.text = "10.0.0.5:7700";
  EXPECT_EQ(TlsServerName(config), "10.0.0.5");
  config.tls_name = "other.example";
  EXPECT_EQ(TlsServerName(config), "other.example");
}

}  // namespace
}  // namespace ringfs::frontend

namespace ringfs::frontend {
namespace {

// An UNLINK and an RMDIR reach an instance that dies without answering; the new instance finds
// no such names (the old one may have removed them, and its reply cache is gone): they are
// answered success. A MKDIR in the same position that finds its name keeps EEXIST, and an
// UNLINK sent only to the new instance keeps its ENOENT.
TEST(BackendChannelTest, RemovalsReplayedOnANewInstanceThatFindNoNameSucceed) {
  std::atomic<int> connection{0};
  ScriptedServer server([&](int fd) {
    if (connection++ == 0) {
      for (int i = 0; i < 3; ++i) ReadRequest(fd);  // UNLINK, RMDIR, MKDIR: never answered
      return;                                       // the instance "dies"
    }
    for (;;) {
      fuse_in_header in = ReadRequest(fd);
      if (in.len == 0) return;
      WriteReply(fd, in.unique, in.opcode == FUSE_MKDIR ? -EEXIST : -ENOENT, "");
    }
  });
  Harness h(server.address());
  h.Send(0, FUSE_UNLINK, 10, 0, 0, std::string("a\0", 2));
  h.Send(1, FUSE_RMDIR, 12, 0, 0, std::string("d\0", 2));
  h.Send(2, FUSE_MKDIR, 14, sizeof(fuse_entry_out), sizeof(fuse_entry_out),
         std::string(sizeof(fuse_mkdir_in), '\0') + std::string("m\0", 2));
  h.WaitForAnswers(3, milliseconds(15000));
  h.Send(3, FUSE_UNLINK, 16, 0, 0, std::string("b\0", 2));
  h.WaitForAnswers(4);
  ASSERT_EQ(h.answers_.size(), 4u);
  EXPECT_EQ(h.answers_[0].header.error, 0);        // UNLINK, replayed
  EXPECT_EQ(h.answers_[1].header.error, 0);        // RMDIR, replayed
  EXPECT_EQ(h.answers_[2].header.error, -EEXIST);  // MKDIR, replayed
  EXPECT_EQ(h.answers_[3].header.error, -ENOENT);  // UNLINK, sent once
  EXPECT_EQ(h.channel().replayed_removals(), 2u);
}

}  // namespace
}  // namespace ringfs::frontend

namespace ringfs::frontend {
namespace {

// When a reconnect resets the kernel's caches (BackendChannel::Install): not after the server
// closed a connection we had left quiet (its idle close) and we came back at once; after it
// closed one right after our request (as it does on a frame it refuses: what it had queued for
// us is lost); and after any reconnect to a new instance.
TEST(BackendChannelTest, TheKernelsCachesAreResetUnlessTheServerClosedAQuietConnection) {
  std::atomic<int> connection{0};
  std::atomic<bool> close_now{false};
  ScriptedServer server([&](int fd) {
    const int n = connection++;
    if (n == 1) {
      ReadRequest(fd);  // closed at once, unanswered
      return;
    }
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 20) == 0) {
        if (close_now.exchange(false)) return;  // an idle close
        continue;
      }
      fuse_in_header in = ReadRequest(fd);
      if (in.len == 0) return;
      WriteReply(fd, in.unique, 0, std::string(sizeof(fuse_attr_out), '\0'));
    }
  });
  server.same_instance_ = true;
  int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(null_fd, 0);
  KernelNotifier notifier{UniqueFd(null_fd), nullptr, nullptr};
  notifier.set_writer_for_test([](const wire::Invalidation&) { return 0; });
  notifier.Start();
  Harness h(server.address(), "", nullptr, milliseconds(5000), nullptr, nullptr, nullptr,
            &notifier);
  auto resets = [&] {
    EXPECT_TRUE(notifier.WaitIdle(absl::Seconds(5)));
    return notifier.counters().resets;
  };
  auto pump = [&](milliseconds how_long) { h.RunUntil([] { return false; }, how_long); };

  h.Send(0, FUSE_GETATTR, 10, sizeof(fuse_attr_out), sizeof(fuse_attr_out));
  h.WaitForAnswers(1);
  pump(milliseconds(1200));  // quiet for longer than kQuietBeforeCleanCloseNs
  close_now = true;
  pump(milliseconds(600));   // closed, and back on connection 1
  EXPECT_EQ(connection.load(), 2);
  EXPECT_EQ(resets(), 0u) << "an idle close lost nothing";

  h.Send(1, FUSE_GETATTR, 12, sizeof(fuse_attr_out), sizeof(fuse_attr_out));
  h.WaitForAnswers(2);  // connection 1 closes on it; it is answered on connection 2
  EXPECT_EQ(h.answers_[1].header.error, 0);
  EXPECT_EQ(resets(), 1u) << "a close right after our request may have lost queued pushes";

  server.same_instance_ = false;
  pump(milliseconds(1200));
  close_now = true;
  pump(milliseconds(600));  // an idle close, but the next connection is a new instance
  EXPECT_EQ(connection.load(), 4);
  EXPECT_EQ(resets(), 2u) << "a new instance knows nothing of what the kernel caches";
}

}  // namespace
}  // namespace ringfs::frontend

namespace ringfs::frontend {
namespace {

fuse_attr_out DirAttrOf(uint64_t dir) {
  fuse_attr_out attr{};
  attr.attr_valid = 60;
  attr.attr.ino = dir;
  attr.attr.mode = 040755;
  return attr;
}

// Whether anything arrives on `fd` within `ms`.
bool ArrivesWithin(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, ms) > 0;
}

// A channel with early unlinks on (its own AsyncRemovals and post-op cache), connected, and
// directory 7's attributes just learned.
struct AsyncHarness {
  explicit AsyncHarness(const SocketAddress& address, milliseconds timeout = milliseconds(3000),
                        InterruptBoard* interrupts = nullptr,
                        std::chrono::nanoseconds batch_wait = BackendConfig{}.detached_batch_wait)
      : h(address, "", &cache, timeout, interrupts, nullptr, nullptr, nullptr, nullptr, &async,
          batch_wait) {
    h.WaitConnected();
    async.Learn(7, DirAttrOf(7), async.Ticket(), MonotonicNs());
  }
  DirAttrCache cache;
  AsyncRemovals async;
  Harness h;
};

// An unlink answered early goes to the server (its bytes copied: the caller's are gone), and a
// request that came after it, gated on it, reaches the server only once it was answered.
TEST(BackendChannelTest, WhatFollowsAnEarlyUnlinkWaitsForItsAnswer) {
  std::atomic<bool> overtaken{false};
  std::string name_seen;
  ScriptedServer server([&](int fd) {
    std::vector<char> rest;
    fuse_in_header unlink = ReadRequest(fd, &rest);
    name_seen.assign(rest.begin(), rest.end());
    if (ArrivesWithin(fd, 300)) overtaken = true;
    WriteReply(fd, unlink.unique, 0, Trailer(7, 100));
    fuse_in_header lookup = ReadRequest(fd);
    WriteReply(fd, lookup.unique, -ENOENT, "");
    ReadRequest(fd);
  });
  AsyncHarness ah(server.address());
  Harness& h = ah.h;
  AsyncRemovals& async = ah.async;
  const uint64_t seq = async.Begin(7, MonotonicNs());
  ASSERT_GT(seq, 0u);
  h.SendDetached(20, "gone", 7, seq);
  h.Send(0, FUSE_LOOKUP, 22, sizeof(fuse_entry_out), sizeof(fuse_entry_out),
         std::string("gone\0", 5), false, 7, async.Gate());
  h.WaitForAnswers(1);
  ASSERT_EQ(h.answers_.size(), 1u) << "the unlink's own answer never reaches the sink";
  EXPECT_EQ(h.answers_[0].header.error, -ENOENT);
  EXPECT_FALSE(overtaken) << "the LOOKUP reached the server before the UNLINK was answered";
  EXPECT_EQ(name_seen, std::string("gone\0", 5));
  EXPECT_EQ(async.outstanding(), 0u);
  EXPECT_EQ(async.failed(), 0u);
  EXPECT_EQ(h.channel().detached(), 0u);
  // Its post-op attributes were learned like any other's.
  EXPECT_EQ(async.Begin(7, MonotonicNs()) > 0, true);
}

// A server that answers every request and lists the opcodes in the order they arrived.
class AnsweringServer {
 public:
  AnsweringServer()
      : server_([this](int fd) {
          for (;;) {
            fuse_in_header in = ReadRequest(fd);
            if (in.unique == 0) return;
            {
              std::lock_guard<std::mutex> lock(mu_);
              opcodes_.push_back(in.opcode);
            }
            WriteReply(fd, in.unique, in.opcode == FUSE_UNLINK ? 0 : -ENOENT,
                       in.opcode == FUSE_UNLINK ? Trailer(7, 100) : "");
          }
        }) {}
  const SocketAddress& address() const { return server_.address(); }
  std::vector<uint32_t> opcodes() {
    std::lock_guard<std::mutex> lock(mu_);
    return opcodes_;
  }

 private:
  std::mutex mu_;
  std::vector<uint32_t> opcodes_;
  ScriptedServer server_;  // last: its thread uses the members above
};

// Early unlinks wait for their batch: the next other request takes them along. A batch that
// starts while the wait of the one before is still running (that one was cut short by another
// request) gathers too; it used to go one unlink per send until that wait ended.
TEST(BackendChannelTest, EarlyUnlinksGatherAgainAfterABatchWasCutShort) {
  AnsweringServer server;
  AsyncHarness ah(server.address(), milliseconds(3000), nullptr, std::chrono::seconds(30));
  Harness& h = ah.h;
  AsyncRemovals& async = ah.async;
  h.SendDetached(20, "a", 7, async.Begin(7, MonotonicNs()));
  h.RunUntil([] { return false; }, milliseconds(200));
  EXPECT_TRUE(server.opcodes().empty()) << "a lone early unlink went before its batch ended";
  h.Send(0, FUSE_LOOKUP, 21, sizeof(fuse_entry_out), sizeof(fuse_entry_out), std::string("x\0", 2),
         false, 7);
  h.WaitForAnswers(1);
  h.RunUntil([&] { return async.outstanding() == 0; });
  EXPECT_EQ(server.opcodes(), (std::vector<uint32_t>{FUSE_UNLINK, FUSE_LOOKUP}));

  async.Learn(7, DirAttrOf(7), async.Ticket(), MonotonicNs());  // fresh for the next Begins
  const uint64_t b = async.Begin(7, MonotonicNs());
  const uint64_t c = async.Begin(7, MonotonicNs());
  ASSERT_GT(b, 0u);
  ASSERT_GT(c, 0u);
  h.SendDetached(22, "b", 7, b);
  h.SendDetached(23, "c", 7, c);
  h.RunUntil([] { return false; }, milliseconds(200));
  EXPECT_EQ(server.opcodes().size(), 2u) << "the second batch went out before its end";
  h.Send(1, FUSE_LOOKUP, 24, sizeof(fuse_entry_out), sizeof(fuse_entry_out), std::string("x\0", 2),
         false, 7);
  h.WaitForAnswers(2);
  h.RunUntil([&] { return async.outstanding() == 0; });
  EXPECT_EQ(server.opcodes(), (std::vector<uint32_t>{FUSE_UNLINK, FUSE_LOOKUP, FUSE_UNLINK,
                                                     FUSE_UNLINK, FUSE_LOOKUP}));
  EXPECT_EQ(async.failed(), 0u);
  EXPECT_EQ(h.channel().detached(), 0u);
}

// With no other request, a batch goes when its wait ends.
TEST(BackendChannelTest, AGatheredBatchGoesWhenItsWaitEnds) {
  AnsweringServer server;
  AsyncHarness ah(server.address(), milliseconds(3000), nullptr, milliseconds(300));
  Harness& h = ah.h;
  AsyncRemovals& async = ah.async;
  h.SendDetached(20, "a", 7, async.Begin(7, MonotonicNs()));
  h.SendDetached(21, "b", 7, async.Begin(7, MonotonicNs()));
  h.RunUntil([] { return false; }, milliseconds(100));
  EXPECT_TRUE(server.opcodes().empty()) << "the batch went before its wait ended";
  h.RunUntil([&] { return async.outstanding() == 0; });
  EXPECT_EQ(server.opcodes(), (std::vector<uint32_t>{FUSE_UNLINK, FUSE_UNLINK}));
  EXPECT_EQ(h.channel().detached(), 0u);
}

// A connection lost before the server answered: the early unlink is sent again. Its failure
// there is counted; ENOENT (the name is gone, as asked) is not a failure.
TEST(BackendChannelTest, EarlyUnlinksAreSentAgainAndTheirFailuresCounted) {
  std::atomic<int> connection{0};
  ScriptedServer server([&](int fd) {
    if (connection++ == 0) {
      ReadRequest(fd);
      ReadRequest(fd);  // never answered: the connection ends
      return;
    }
    for (;;) {
      std::vector<char> rest;
      fuse_in_header in = ReadRequest(fd, &rest);
      if (in.len == 0) return;
      const bool locked = std::string(rest.data()) == "locked";
      WriteReply(fd, in.unique, locked ? -EPERM : -ENOENT, "");
    }
  });
  AsyncHarness ah(server.address(), milliseconds(5000));
  Harness& h = ah.h;
  AsyncRemovals& async = ah.async;
  h.SendDetached(30, "locked", 7, async.Begin(7, MonotonicNs()));
  h.SendDetached(32, "elsewhere", 7, async.Begin(7, MonotonicNs()));
  h.RunUntil([&] { return h.channel().detached() == 0; }, milliseconds(15000));
  EXPECT_EQ(h.channel().detached(), 0u);
  EXPECT_GE(connection.load(), 2);
  EXPECT_EQ(async.outstanding(), 0u);
  EXPECT_EQ(async.failed(), 1u);
  EXPECT_TRUE(h.answers_.empty());
}

// An early unlink voids write records again when it ends. A WRITE does not wait for early
// unlinks (IndependentOfUnlinks): one stat'ed at the server before the unlink ran, and answered
// after it, would answer the next stat with the old link count.
TEST(BackendChannelTest, AnEarlyUnlinkVoidsWriteRecordsAgainWhenItEnds) {
  ScriptedServer server([](int fd) {
    const fuse_in_header unlink = ReadRequest(fd);
    const fuse_in_header write = ReadRequest(fd);  // run first: its record has nlink 1
    WriteReply(fd, unlink.unique, 0, Trailer(7, 100));
    WriteReply(fd, write.unique, 0, Written(9, 100, 4));
    ReadRequest(fd);
  });
  AsyncHarness ah(server.address());
  Harness& h = ah.h;
  const RecordsVoided unlink{.names = true};
  ah.cache.Apply(unlink);  // as the forwarder does when it sends it (RecordSending)
  h.SendDetached(30, "f", 7, ah.async.Begin(7, MonotonicNs()), unlink);
  h.SendWrite(0, 31, 9, ah.cache);
  h.WaitForAnswers(1);
  ASSERT_EQ(h.answers_.count(0), 1u);
  EXPECT_EQ(h.answers_[0].header.error, 0);
  EXPECT_FALSE(ah.cache.Take(9, MonotonicNs()).has_value())
      << "the write was stat'ed before the unlink ran";
}

// A request gated on an unlink another channel (another queue, another connection) carries is
// sent when that one is answered: the other channel wakes it through its eventfd.
TEST(BackendChannelTest, AnUnlinkAnsweredOnOneChannelReleasesWhatWaitsOnAnother) {
  std::atomic<bool> release{false};
  std::atomic<bool> lookup_seen{false};
  ScriptedServer unlinks([&](int fd) {
    fuse_in_header unlink = ReadRequest(fd);
    while (!release) std::this_thread::sleep_for(milliseconds(10));
    WriteReply(fd, unlink.unique, 0, Trailer(7, 100));
    ReadRequest(fd);
  });
  ScriptedServer lookups([&](int fd) {
    fuse_in_header lookup = ReadRequest(fd);
    lookup_seen = lookup.opcode == FUSE_LOOKUP;
    WriteReply(fd, lookup.unique, -ENOENT, "");
    ReadRequest(fd);
  });
  AsyncRemovals async;
  DirAttrCache cache;
  Harness a(unlinks.address(), "", &cache, milliseconds(5000), nullptr, nullptr, nullptr, nullptr,
            nullptr, &async);
  Harness b(lookups.address(), "", &cache, milliseconds(5000), nullptr, nullptr, nullptr, nullptr,
            nullptr, &async);
  a.WaitConnected();
  b.WaitConnected();
  async.Learn(7, DirAttrOf(7), async.Ticket(), MonotonicNs());
  a.SendDetached(70, "gone", 7, async.Begin(7, MonotonicNs()));
  b.Send(0, FUSE_LOOKUP, 72, sizeof(fuse_entry_out), sizeof(fuse_entry_out),
         std::string("gone\0", 5), false, 7, async.Gate());
  b.RunUntil([] { return false; }, milliseconds(300));
  EXPECT_FALSE(lookup_seen) << "sent before the unlink was answered";
  release = true;
  a.RunUntil([&] { return a.channel().detached() == 0; });
  b.WaitForAnswers(1);
  EXPECT_TRUE(lookup_seen);
  EXPECT_EQ(b.answers_[0].header.error, -ENOENT);
  EXPECT_GE(b.channel().gate_wakes(), 1u);
}

// A directory's attributes come from its SETATTR's answer too, and go with an xattr change's
// answer (an ACL may change the mode; that answer carries no attributes).
TEST(BackendChannelTest, ADirectorysAttributesComeWithItsSetattrAndGoWithAnXattrChange) {
  ScriptedServer server([&](int fd) {
    fuse_in_header setattr = ReadRequest(fd);
    fuse_attr_out attr = DirAttrOf(7);
    attr.attr.ctime = 50;
    WriteReply(fd, setattr.unique, 0, std::string(reinterpret_cast<const char*>(&attr),
                                                  sizeof(attr)));
    fuse_in_header setxattr = ReadRequest(fd);
    WriteReply(fd, setxattr.unique, 0, "");
    ReadRequest(fd);
  });
  AsyncRemovals async;
  DirAttrCache cache;
  Harness h(server.address(), "", &cache, milliseconds(3000), nullptr, nullptr, nullptr, nullptr,
            nullptr, &async);
  h.WaitConnected();
  h.Send(0, FUSE_SETATTR, 80, sizeof(fuse_attr_out), sizeof(fuse_attr_out),
         std::string(sizeof(fuse_setattr_in), '\0'), false, 7);
  h.WaitForAnswers(1);
  const uint64_t seq = async.Begin(7, MonotonicNs());
  EXPECT_GT(seq, 0u) << "the SETATTR's answer was not learned";
  ASSERT_TRUE(async.DirAttrs(7));
  EXPECT_EQ(async.DirAttrs(7)->attr.ctime, 50u);
  (void)async.End(seq, 7);
  h.Send(1, FUSE_SETXATTR, 82, 0, 0,
         std::string(sizeof(fuse_setxattr_in), '\0') + std::string("user.a\0v", 8), false, 7);
  h.WaitForAnswers(2);
  EXPECT_EQ(async.Begin(7, MonotonicNs()), 0u) << "still answered from before the xattr change";
}

// An early unlink has no deadline (ending it would let what follows it run while the server
// may still run it): what waits for it times out instead, and it runs when the server answers.
TEST(BackendChannelTest, AnEarlyUnlinkOutlivesTheDeadlineOfWhatWaitsForIt) {
  std::atomic<bool> release{false};
  ScriptedServer server([&](int fd) {
    fuse_in_header unlink = ReadRequest(fd);
    while (!release) std::this_thread::sleep_for(milliseconds(10));
    WriteReply(fd, unlink.unique, 0, Trailer(7, 100));
    ReadRequest(fd);
  });
  AsyncHarness ah(server.address(), milliseconds(300));
  Harness& h = ah.h;
  AsyncRemovals& async = ah.async;
  h.SendDetached(40, "slow", 7, async.Begin(7, MonotonicNs()));
  h.Send(0, FUSE_LOOKUP, 42, sizeof(fuse_entry_out), sizeof(fuse_entry_out),
         std::string("slow\0", 5), false, 7, async.Gate());
  h.WaitForAnswers(1);
  ASSERT_EQ(h.answers_.size(), 1u);
  EXPECT_EQ(h.answers_[0].header.error, -ETIMEDOUT);
  EXPECT_EQ(h.channel().detached(), 1u);
  EXPECT_EQ(async.outstanding(), 1u);
  release = true;
  h.RunUntil([&] { return h.channel().detached() == 0; });
  EXPECT_EQ(h.channel().detached(), 0u);
  EXPECT_EQ(async.failed(), 0u);
  EXPECT_EQ(async.Gate(), 0u);
}

// The kernel may send an INTERRUPT for an UNLINK just as the mount answers it early: the
// unlink, answered success, still runs.
TEST(BackendChannelTest, AnInterruptThatCrossedTheEarlyAnswerDoesNotCancelTheUnlink) {
  std::atomic<bool> seen{false};
  ScriptedServer server([&](int fd) {
    fuse_in_header unlink = ReadRequest(fd);
    seen = unlink.opcode == FUSE_UNLINK;
    std::this_thread::sleep_for(milliseconds(300));  // ticks pass meanwhile
    WriteReply(fd, unlink.unique, 0, Trailer(7, 100));
    ReadRequest(fd);
  });
  InterruptBoard interrupts;
  AsyncHarness ah(server.address(), milliseconds(3000), &interrupts);
  Harness& h = ah.h;
  AsyncRemovals& async = ah.async;
  h.SendDetached(50, "x", 7, async.Begin(7, MonotonicNs()));
  interrupts.Post(50, MonotonicNs());
  h.RunUntil([&] { return h.channel().detached() == 0; });
  EXPECT_TRUE(seen);
  EXPECT_EQ(h.channel().detached(), 0u);
  EXPECT_EQ(async.failed(), 0u) << "the interrupt cancelled an unlink answered success";
  EXPECT_EQ(h.channel().interrupts(), 0u);
}

// A FORGET of the directory held while its unlinks were owed (AsyncRemovals::DeferForget) goes
// to the server after the last one was answered.
TEST(BackendChannelTest, AForgetHeldForADirectoryFollowsItsUnlinks) {
  std::atomic<uint32_t> second_opcode{0};
  std::atomic<uint64_t> forgot{0}, forgot_node{0};
  ScriptedServer server([&](int fd) {
    fuse_in_header unlink = ReadRequest(fd);
    WriteReply(fd, unlink.unique, 0, Trailer(7, 100));
    std::vector<char> rest;
    fuse_in_header next = ReadRequest(fd, &rest);
    if (next.opcode == FUSE_FORGET && rest.size() >= sizeof(fuse_forget_in)) {
      fuse_forget_in in;
      std::memcpy(&in, rest.data(), sizeof(in));
      forgot_node = next.nodeid;
      forgot = in.nlookup;
      EXPECT_NE(next.unique, 0u);
    }
    second_opcode = next.opcode;
    ReadRequest(fd);
  });
  AsyncHarness ah(server.address());
  Harness& h = ah.h;
  AsyncRemovals& async = ah.async;
  h.SendDetached(60, "x", 7, async.Begin(7, MonotonicNs()));
  ASSERT_TRUE(async.DeferForget(7, 3));
  h.RunUntil([&] { return second_opcode.load() != 0; });
  EXPECT_EQ(second_opcode.load(), static_cast<uint32_t>(FUSE_FORGET));
  EXPECT_EQ(forgot_node.load(), 7u);
  EXPECT_EQ(forgot.load(), 3u);
}

// A RELEASE answered early (no async option: detach_releases alone) waits for the next request
// and goes ahead of it, so a create loop's close costs the server no wake-up of its own. Its
// answer reaches no one.
TEST(BackendChannelTest, AReleaseAnsweredEarlyGoesAheadOfTheNextRequest) {
  AnsweringServer server;
  Harness h(server.address(), "", nullptr, milliseconds(3000), nullptr, nullptr, nullptr, nullptr,
            nullptr, nullptr, std::chrono::seconds(30), /*detach_releases=*/true);
  h.WaitConnected();
  h.SendDetachedRelease(20, 9, 77);
  h.RunUntil([] { return false; }, milliseconds(200));
  EXPECT_TRUE(server.opcodes().empty()) << "a lone RELEASE went before its batch ended";
  h.Send(0, FUSE_LOOKUP, 21, sizeof(fuse_entry_out), sizeof(fuse_entry_out), std::string("x\0", 2),
         false, 7);
  h.WaitForAnswers(1);
  h.RunUntil([&] { return h.channel().detached() == 0; });
  EXPECT_EQ(server.opcodes(), (std::vector<uint32_t>{FUSE_RELEASE, FUSE_LOOKUP}));
  EXPECT_EQ(h.answers_.size(), 1u) << "the RELEASE's answer reached the sink";
  EXPECT_EQ(h.answers_[0].header.error, -ENOENT);
  EXPECT_EQ(h.channel().detached(), 0u);
}

// A connection lost before the server answered a RELEASE answered early: it is sent again.
TEST(BackendChannelTest, AReleaseAnsweredEarlyIsSentAgainAfterALostConnection) {
  std::atomic<int> connection{0};
  std::atomic<int> releases{0};
  ScriptedServer server([&](int fd) {
    if (connection++ == 0) {
      if (ReadRequest(fd).opcode == FUSE_RELEASE) ++releases;
      return;  // never answered: the connection ends
    }
    for (;;) {
      std::vector<char> rest;
      fuse_in_header in = ReadRequest(fd, &rest);
      if (in.len == 0) return;
      fuse_release_in release{};
      std::memcpy(&release, rest.data(), std::min(rest.size(), sizeof(release)));
      if (in.opcode == FUSE_RELEASE && release.fh == 77) ++releases;
      WriteReply(fd, in.unique, 0, "");
    }
  });
  server.same_instance_ = true;
  Harness h(server.address(), "", nullptr, milliseconds(3000), nullptr, nullptr, nullptr, nullptr,
            nullptr, nullptr, milliseconds(1), /*detach_releases=*/true);
  h.WaitConnected();
  h.SendDetachedRelease(20, 9, 77);
  h.RunUntil([&] { return h.channel().detached() == 0; }, milliseconds(15000));
  EXPECT_EQ(h.channel().detached(), 0u);
  EXPECT_GE(connection.load(), 2);
  EXPECT_EQ(releases.load(), 2);
  EXPECT_TRUE(h.answers_.empty());
}

// The mount's end waits for a RELEASE answered early while its server is reached, up to a
// second, and not at all when none is: only the server's handle hangs on it, and the server
// drops a gone client's files. A stopped server must not keep ringfs-mount 30 s after umount.
TEST(BackendChannelTest, TheMountsEndWaitsBrieflyForEarlyReleasesAndOnlyWhileTheServerIsReached) {
  std::atomic<int> connection{0};
  auto server = std::make_unique<ScriptedServer>([&](int fd) {
    ++connection;
    ReadRequest(fd);  // the RELEASE, never answered
    (void)ArrivesWithin(fd, 3000);
  });
  Harness h(server->address(), "", nullptr, milliseconds(3000), nullptr, nullptr, nullptr, nullptr,
            nullptr, nullptr, milliseconds(1), /*detach_releases=*/true);
  h.WaitConnected();
  h.SendDetachedRelease(20, 9, 77);
  h.RunUntil([&] { return connection.load() >= 1; });
  uint64_t deadline = 0;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(h.channel().KeepForDetached(&deadline)) << "connected: the RELEASE is waited for";
  h.RunUntil([&] { return !h.channel().KeepForDetached(&deadline); }, milliseconds(5000));
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(h.channel().connected());
  EXPECT_GE(waited, milliseconds(900));
  EXPECT_LE(waited, milliseconds(3000)) << "waited as for early unlinks (30 s)";
  EXPECT_FALSE(h.channel().KeepForDetached(&deadline));

  uint64_t again = 0;
  server.reset();  // the connection ends, and no server listens any more
  h.RunUntil([&] { return !h.channel().connected(); });
  ASSERT_FALSE(h.channel().connected());
  EXPECT_FALSE(h.channel().KeepForDetached(&again)) << "no server: the worker may go at once";
  EXPECT_EQ(h.channel().detached(), 1u);
}

}  // namespace
}  // namespace ringfs::frontend
