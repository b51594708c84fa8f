// tls::RingTransport on a real io_uring over a socketpair: both ends handshake through the ring,
// megabytes cross in short sends and partial receives, and the end of the stream and a broken
// stream complete the pending receive.
#include "common/tls_ring.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "common/tls_test_pki.h"
#include "gtest/gtest.h"

namespace ringfs::tls {
namespace {

constexpr uint64_t kHandshake = 100, kRecv = 101, kSend = 102;

struct Side {
  explicit Side(io_uring* ring, uint64_t base) : transport(ring), base(base) {}
  RingTransport transport;
  uint64_t base;  // its ciphertext tags are base+0 (recv), +1 (send), +2 (wake)
  std::vector<RingTransport::Completion> done;
  bool Take(uint64_t user_data, int* res) {
    for (size_t i = 0; i < done.size(); ++i) {
      if (done[i].user_data == user_data) {
        *res = done[i].res;
        done.erase(done.begin() + static_cast<long>(i));
        return true;
      }
    }
    return false;
  }
};

class TlsRingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ringfs-tls-ring-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto pki = MakeTestPki(dir_);
    ASSERT_TRUE(pki.ok()) << pki.status();
    ASSERT_EQ(io_uring_queue_init(64, &ring_, 0), 0);
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds_), 0);
    client_ = std::make_unique<Side>(&ring_, 10);
    server_ = std::make_unique<Side>(&ring_, 20);
    auto cctx = Context::ForClient({pki->ca});
    auto sctx = Context::ForServer({pki->server_cert, pki->server_key, ""});
    ASSERT_TRUE(cctx.ok() && sctx.ok());
    auto c = Stream::Client(*cctx, "localhost");
    auto s = Stream::Server(*sctx);
    ASSERT_TRUE(c.ok() && s.ok());
    client_->transport.Attach(fds_[0], *std::move(c), {10, 11, 12});
    server_->transport.Attach(fds_[1], *std::move(s), {20, 21, 22});
  }
  void TearDown() override {
    // Whatever is still posted completes on the shut down sockets before the buffers go.
    shutdown(fds_[0], SHUT_RDWR);
    shutdown(fds_[1], SHUT_RDWR);
    Run([&] { return !client_->transport.busy() && !server_->transport.busy(); });
    close(fds_[0]);
    close(fds_[1]);
    io_uring_queue_exit(&ring_);
    std::system(("rm -rf " + dir_).c_str());
  }

  // Reaps completions until `until` holds (true) or 5 s pass (false).
  bool Run(const std::function<bool()>& until) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!until()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      __kernel_timespec ts{0, 50'000'000};
      io_uring_cqe* cqe = nullptr;
      io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
      while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
        const uint64_t data = cqe->user_data;
        const int res = cqe->res;
        io_uring_cqe_seen(&ring_, cqe);
        Side* side = data >= 20 ? server_.get() : client_.get();
        const uint64_t kind = data - side->base;
        if (kind == 0) side->transport.OnCipherRecv(res);
        if (kind == 1) side->transport.OnCipherSend(res);
        if (kind == 2) side->transport.OnWake();
        side->transport.Drain([side](RingTransport::Completion c) { side->done.push_back(c); });
      }
    }
    return true;
  }
  void Handshake() {
    client_->transport.Handshake(kHandshake);
    server_->transport.Handshake(kHandshake);
    int c = 1, s = 1;
    ASSERT_TRUE(Run([&] {
      return (c != 1 || client_->Take(kHandshake, &c)) && (s != 1 || server_->Take(kHandshake, &s));
    }));
    ASSERT_EQ(c, 0) << client_->transport.last_error();
    ASSERT_EQ(s, 0) << server_->transport.last_error();
  }

  std::string dir_;
  io_uring ring_{};
  int fds_[2] = {-1, -1};
  std::unique_ptr<Side> client_, server_;
};

TEST_F(TlsRingTest, MegabytesInShortSendsAndPartialReceives) {
  Handshake();
  std::string data(3 * 1024 * 1024 + 77, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 131) >> 3);
  std::string got(data.size(), '\0');
  size_t sent = 0, received = 0;
  bool send_posted = false, recv_posted = false;
  ASSERT_TRUE(Run([&] {
    int res = 0;
    if (send_posted && client_->Take(kSend, &res)) {
      EXPECT_GT(res, 0);
      sent += static_cast<size_t>(res);
      send_posted = false;
    }
    if (recv_posted && server_->Take(kRecv, &res)) {
      EXPECT_GT(res, 0) << server_->transport.last_error();
      if (res <= 0) return true;
      received += static_cast<size_t>(res);
      recv_posted = false;
    }
    if (!send_posted && sent < data.size()) {
      // Three pieces, one of them tiny, like a header, its arguments and a payload.
      const size_t left = data.size() - sent;
      const size_t a = std::min<size_t>(40, left), b = std::min<size_t>(17, left - a);
      iovec iov[3] = {{data.data() + sent, a},
                      {data.data() + sent + a, b},
                      {data.data() + sent + a + b, left - a - b}};
      client_->transport.Send(iov, 3, kSend);
      send_posted = true;
    }
    if (!recv_posted && received < got.size()) {
      // Odd-sized reads, so records are split across them.
      server_->transport.Recv(got.data() + received,
                              std::min<size_t>(got.size() - received, 100'003), kRecv);
      recv_posted = true;
    }
    return sent == data.size() && received == got.size();
  }));
  EXPECT_EQ(got, data);
}

TEST_F(TlsRingTest, PeerCloseEndsTheReceive) {
  Handshake();
  char buf[16];
  server_->transport.Recv(buf, sizeof(buf), kRecv);
  shutdown(fds_[0], SHUT_WR);
  int res = 1;
  ASSERT_TRUE(Run([&] { return server_->Take(kRecv, &res); }));
  EXPECT_EQ(res, 0);
}

TEST_F(TlsRingTest, GarbageOnTheWireIsATlsError) {
  Handshake();
  char buf[16];
  server_->transport.Recv(buf, sizeof(buf), kRecv);
  const char junk[64] = "\x17\x03\x03\x00\x30 definitely not a TLS record of this session";
  ASSERT_EQ(write(fds_[0], junk, sizeof(junk)), static_cast<ssize_t>(sizeof(junk)));
  int res = 1;
  ASSERT_TRUE(Run([&] { return server_->Take(kRecv, &res); }));
  EXPECT_EQ(res, -EPROTO);
  EXPECT_FALSE(server_->transport.last_error().empty());
}

}  // namespace
}  // namespace ringfs::tls
