// The channel against a scripted server on loopback: replies in any order, large bodies that
// take the direct-receive path, and every kind of invalid reply.
#include "frontend/backend_channel.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstring>
#include <functional>
#include <map>
#include <thread>

#include "common/dir_attrs.h"
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

 private:
  void Serve() {
    for (;;) {
      UniqueFd conn(accept(listener_.get(), nullptr, nullptr));
      if (!conn.valid()) return;
      wire::ClientHello hello;
      if (!wire::ReceiveHandshake(conn.get(), &hello).ok()) continue;
      wire::ServerHello reply;
      reply.set_result(hello.token() == token_ ? wire::ServerHello::OK
                                               : wire::ServerHello::AUTH_FAILED);
      reply.set_message("scripted");
      reply.set_max_inflight(hello.max_inflight());
      reply.set_max_frame_bytes(hello.max_frame_bytes());
      reply.set_dir_attrs(hello.want_dir_attrs());
      if (!wire::SendHandshake(conn.get(), reply).ok()) continue;
      if (reply.result() == wire::ServerHello::OK) script_(conn.get());
    }
  }

  std::function<void(int)> script_;
  std::string token_;
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
};

class Harness : public ReplySink {
 public:
  explicit Harness(const SocketAddress& address, std::string token = "",
                   DirAttrCache* dir_attrs = nullptr) {
    io_uring_queue_init(64, &ring_, 0);
    BackendConfig config;
    config.address = address;
    config.client_id = "test";
    config.token = std::move(token);
    config.max_inflight = 8;
    config.connect_timeout = milliseconds(2000);
    config.dir_attrs = dir_attrs;
    channel_ = std::make_unique<BackendChannel>(config, &ring_, 3, this);
  }
  ~Harness() override {
    channel_.reset();
    io_uring_queue_exit(&ring_);
  }
  void OnReply(uint32_t slot, const fuse_out_header& header, size_t body_size) override {
    answers_[slot] = {header, body_size};
  }
  // Sends a request whose reply may have [min, max] body bytes, into buffer `slot`.
  absl::Status Send(uint32_t slot, uint32_t opcode, uint64_t unique, size_t min, size_t max) {
    fuse_in_header in{};
    in.len = sizeof(in);
    in.opcode = opcode;
    in.unique = unique;
    in.nodeid = 1;
    buffers_[slot].assign(2 << 20, 0);
    PendingReply reply{slot, opcode, buffers_[slot].data(), buffers_[slot].size(), min, max};
    iovec iov{&in, sizeof(in)};
    return channel_->Send(unique, &reply, &iov, 1);
  }
  // Runs completions until `count` answers arrived (or a generous deadline).
  void WaitForAnswers(size_t count) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (answers_.size() < count && std::chrono::steady_clock::now() < deadline) {
      io_uring_submit(&ring_);
      io_uring_cqe* cqe = nullptr;
      __kernel_timespec timeout{0, 100'000'000};
      if (io_uring_wait_cqe_timeout(&ring_, &cqe, &timeout) != 0) continue;
      uint64_t data = cqe->user_data;
      int res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      channel_->OnCompletion(data, res);
    }
  }
  BackendChannel& channel() { return *channel_; }
  std::map<uint32_t, Answer> answers_;
  std::map<uint32_t, std::vector<char>> buffers_;

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
  ASSERT_TRUE(h.channel().Connect().ok());
  ASSERT_TRUE(h.Send(0, FUSE_LOOKUP, 10, 128, 128).ok());
  ASSERT_TRUE(h.Send(1, FUSE_LOOKUP, 11, 128, 128).ok());
  ASSERT_TRUE(h.Send(2, FUSE_LOOKUP, 12, 128, 128).ok());
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
  ASSERT_TRUE(h.channel().Connect().ok());
  ASSERT_TRUE(h.Send(0, FUSE_READ, 1, 0, 1 << 20).ok());
  ASSERT_TRUE(h.Send(1, FUSE_READ, 2, 0, 1 << 20).ok());
  h.WaitForAnswers(2);
  ASSERT_EQ(h.answers_[0].body_size, big.size());
  EXPECT_EQ(std::memcmp(h.buffers_[0].data(), big.data(), big.size()), 0);
  ASSERT_EQ(h.answers_[1].body_size, 300000u);
  EXPECT_EQ(std::memcmp(h.buffers_[1].data(), big.data(), 300000), 0);
}

TEST(BackendChannelTest, OversizedReplyFailsEverythingInFlightWithEio) {
  ScriptedServer server([](int fd) {
    fuse_in_header a = ReadRequest(fd);
    ReadRequest(fd);
    WriteReply(fd, a.unique, 0, std::string(4096 + 1, 'x'));  // more than was asked for
    ReadRequest(fd);
  });
  Harness h(server.address());
  ASSERT_TRUE(h.channel().Connect().ok());
  ASSERT_TRUE(h.Send(0, FUSE_READ, 1, 0, 4096).ok());
  ASSERT_TRUE(h.Send(1, FUSE_READ, 2, 0, 4096).ok());
  h.WaitForAnswers(2);
  EXPECT_EQ(h.answers_[0].header.error, -EIO);
  EXPECT_EQ(h.answers_[1].header.error, -EIO);
  EXPECT_FALSE(h.channel().connected());
}

TEST(BackendChannelTest, InvalidRepliesAreRefused) {
  struct Case {
    const char* name;
    std::function<void(int fd, uint64_t unique)> reply;
  };
  std::vector<Case> cases = {
      {"unknown unique", [](int fd, uint64_t u) { WriteReply(fd, u + 1000, 0, std::string(128, 0)); }},
      {"positive error", [](int fd, uint64_t u) { WriteReply(fd, u, 5, ""); }},
      {"error below -511", [](int fd, uint64_t u) { WriteReply(fd, u, -600, ""); }},
      {"error with body", [](int fd, uint64_t u) { WriteReply(fd, u, -EIO, "abc"); }},
      {"short entry", [](int fd, uint64_t u) { WriteReply(fd, u, 0, std::string(100, 0)); }},
      {"length below header", [](int fd, uint64_t u) {
         fuse_out_header out{8, 0, u};
         (void)SendAll(fd, &out, sizeof(out), milliseconds(1000));
       }},
  };
  for (const Case& c : cases) {
    ScriptedServer server([&c](int fd) {
      fuse_in_header a = ReadRequest(fd);
      c.reply(fd, a.unique);
      ReadRequest(fd);
    });
    Harness h(server.address());
    ASSERT_TRUE(h.channel().Connect().ok());
    ASSERT_TRUE(h.Send(0, FUSE_LOOKUP, 77, 128, 128).ok());
    h.WaitForAnswers(1);
    ASSERT_EQ(h.answers_.size(), 1u) << c.name;
    EXPECT_EQ(h.answers_[0].header.error, -EIO) << c.name;
    EXPECT_EQ(h.answers_[0].header.unique, 77u) << c.name;
  }
}

TEST(BackendChannelTest, ServerDeathAnswersEioAndTheNextSendReconnects) {
  std::atomic<int> connections{0};
  ScriptedServer server([&connections](int fd) {
    int n = ++connections;
    fuse_in_header a = ReadRequest(fd);
    if (n == 1) return;  // closes with the request unanswered
    WriteReply(fd, a.unique, 0, std::string(128, 'z'));
    ReadRequest(fd);
  });
  Harness h(server.address());
  ASSERT_TRUE(h.channel().Connect().ok());
  ASSERT_TRUE(h.Send(0, FUSE_LOOKUP, 1, 128, 128).ok());
  h.WaitForAnswers(1);
  EXPECT_EQ(h.answers_[0].header.error, -EIO);
  ASSERT_TRUE(h.Send(1, FUSE_LOOKUP, 2, 128, 128).ok());
  h.WaitForAnswers(2);
  EXPECT_EQ(h.answers_[1].header.error, 0);
  EXPECT_EQ(h.channel().reconnects(), 1u);
}

TEST(BackendChannelTest, WrongTokenIsRefusedClearly) {
  ScriptedServer server([](int) {}, "secret");
  BackendConfig config;
  config.address = server.address();
  config.token = "guess";
  config.max_inflight = 4;
  auto fd = ConnectToServer(config);
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(fd.status().message().find("AUTH_FAILED"), absl::string_view::npos);
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

std::string Trailer(uint64_t nodeid, uint64_t ctime) {
  wire::DirAttrTrailer trailer;
  trailer.nodeid = nodeid;
  trailer.attr.attr_valid = 5;
  trailer.attr.attr.ino = nodeid;
  trailer.attr.attr.ctime = ctime;
  trailer.attr.attr.mode = S_IFDIR | 0755;
  return std::string(reinterpret_cast<const char*>(&trailer), sizeof(trailer));
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
  ASSERT_TRUE(h.channel().Connect().ok());
  const size_t create_size = sizeof(fuse_entry_out) + sizeof(fuse_open_out);
  ASSERT_TRUE(h.Send(0, FUSE_UNLINK, 1, 0, 0).ok());
  ASSERT_TRUE(h.Send(1, FUSE_CREATE, 2, create_size, create_size).ok());
  ASSERT_TRUE(h.Send(2, FUSE_RENAME, 3, 0, 0).ok());
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
  ASSERT_TRUE(with_cache.channel().Connect().ok());
  ASSERT_TRUE(
      with_cache.Send(0, FUSE_LOOKUP, 1, sizeof(fuse_entry_out), sizeof(fuse_entry_out)).ok());
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
  ASSERT_TRUE(h.channel().Connect().ok());
  ASSERT_TRUE(h.Send(0, FUSE_UNLINK, 1, 0, 0).ok());
  h.WaitForAnswers(1);
  EXPECT_EQ(h.answers_[0].header.error, -EIO);
}

}  // namespace
}  // namespace ringfs::frontend
