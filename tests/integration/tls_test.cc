// TLS 1.3 on the data wire, through real processes on loopback: a mount over TLS reads and
// writes and reconnects (TLS again) after kill -9 + restart of the server; every mismatch
// (plaintext against TLS either way, wrong CA, wrong name, missing client certificate) fails
// the mount quickly with a message that says why; and a recording proxy between mount and
// server shows that the bytes on the wire carry neither file data nor names, while the same
// session without TLS does (which proves the proxy records).

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "common/tls_test_pki.h"
#include "tests/harness/recording_proxy.h"
#include "tests/harness/ringfs_test.h"

namespace ringfs::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Bytes that occur nowhere by chance: a counter spelled out in a fixed frame.
std::string Pattern(size_t size) {
  std::string out;
  for (size_t i = 0; out.size() < size; ++i) out += "<ringfs-tls-pattern-" + std::to_string(i) + ">";
  out.resize(size);
  return out;
}

// Daemons log after they answer: give the line a moment to appear.
bool LogSays(const std::string& path, const std::string& what) {
  for (int i = 0; i < 50; ++i) {
    if (Slurp(path).find(what) != std::string::npos) return true;
    usleep(100 * 1000);
  }
  return false;
}

class TlsTest : public RingfsTestBase {
 protected:
  void SetUp() override {
    RingfsTestBase::SetUp();
    if (IsSkipped()) return;
    ASSERT_TRUE(NewEnv());
    const std::string dir = env_->base() + "/pki";
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    auto pki = tls::MakeTestPki(dir);
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = *pki;
  }
  ServerOptions TlsServer(bool mutual = false) const {
    ServerOptions o;
    o.extra_args = {"--tls-cert", pki_.server_cert, "--tls-key", pki_.server_key};
    if (mutual) o.extra_args.insert(o.extra_args.end(), {"--tls-ca", pki_.ca});
    return o;
  }
  MountOptions TlsMount(const std::string& transport = "uring") const {
    MountOptions o;
    o.transport = transport;
    o.extra = {"tls", "tls_ca=" + pki_.ca};
    return o;
  }
  // The mount must fail within a few seconds, and its log must say `why`.
  void ExpectRefused(const MountOptions& options, const std::string& why) {
    auto start = steady_clock::now();
    auto status =
        env_->MountExpectingFailure(options, env_->server_address(), milliseconds(20000));
    auto took = std::chrono::duration_cast<milliseconds>(steady_clock::now() - start);
    ASSERT_TRUE(status.has_value()) << "the mount hung\n" << env_->DescribeLogs();
    EXPECT_NE(*status, 0);
    EXPECT_LT(took.count(), 8000) << "refused, but slowly";
    EXPECT_TRUE(LogSays(env_->mount_log(), why))
        << "want '" << why << "' in:\n" << Slurp(env_->mount_log());
  }

  std::string Mnt(const std::string& rel) const { return env_->Mnt(rel); }
  std::string Exp(const std::string& rel) const { return env_->Exp(rel); }

  tls::TestPki pki_;
  std::string ctl_output_;
};

class TlsDataTest : public TlsTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(TlsDataTest, WritesReadsBackAndReconnectsAfterKill9) {
  ASSERT_TRUE(env_->StartServer(TlsServer()));
  ASSERT_TRUE(env_->Mount(TlsMount(GetParam())));
  ASSERT_TRUE(env_->WaitMountServing());
  const std::string data = Pattern(5 * 1024 * 1024 + 123);
  ASSERT_EQ(WriteFile(Mnt("big"), data), 0);
  EXPECT_EQ(Slurp(Exp("big")), data);
  EXPECT_EQ(ReadFile(Mnt("big")), data);

  ASSERT_TRUE(env_->KillServer());
  ASSERT_TRUE(env_->RestartServer(TlsServer()));
  // Reads after the restart go through new connections, each with a new TLS handshake.
  const std::string second = Pattern(1024 * 1024).substr(7) + "tail";
  ASSERT_EQ(WriteFile(Mnt("second"), second), 0) << env_->DescribeLogs();
  EXPECT_EQ(ReadFile(Mnt("second")), second);
  EXPECT_EQ(ReadFile(Mnt("big")), data);
  const std::string server_log = Slurp(env_->server_log());
  EXPECT_NE(server_log.find("over TLS"), std::string::npos) << server_log;
  EXPECT_EQ(server_log.find("TLS handshake with"), std::string::npos) << server_log;
  ASSERT_TRUE(env_->Unmount());
}

INSTANTIATE_TEST_SUITE_P(Transports, TlsDataTest, ::testing::Values("uring", "classic"),
                         [](const auto& info) { return info.param; });

TEST_F(TlsTest, MutualTlsMountNamesTheClient) {
  ASSERT_TRUE(env_->StartServer(TlsServer(/*mutual=*/true)));
  MountOptions o = TlsMount();
  o.extra.push_back("tls_cert=" + pki_.client_cert);
  o.extra.push_back("tls_key=" + pki_.client_key);
  ASSERT_TRUE(env_->Mount(o));
  ASSERT_EQ(WriteFile(Mnt("f"), "mutual"), 0);
  EXPECT_EQ(ReadFile(Mnt("f")), "mutual");
  ASSERT_TRUE(env_->Unmount());
  const std::string log = Slurp(env_->server_log());
  EXPECT_NE(log.find("certificate CN=ringfs-test-client"), std::string::npos) << log;
}

TEST_F(TlsTest, PlaintextMountOfTlsServerRefused) {
  ASSERT_TRUE(env_->StartServer(TlsServer()));
  MountOptions o;
  ExpectRefused(o, "this server requires TLS");
  EXPECT_TRUE(LogSays(env_->server_log(), "plaintext ringfs wire"));
}

TEST_F(TlsTest, TlsMountOfPlaintextServerRefused) {
  ASSERT_TRUE(env_->StartServer());
  ExpectRefused(TlsMount(), "a peer without TLS does that");
  EXPECT_TRUE(LogSays(env_->server_log(), "TLS is off here"));
}

TEST_F(TlsTest, WrongCaRefused) {
  ASSERT_TRUE(env_->StartServer(TlsServer()));
  MountOptions o = TlsMount();
  o.extra = {"tls", "tls_ca=" + pki_.other_ca};
  ExpectRefused(o, "certificate verify failed");
}

TEST_F(TlsTest, WrongNameRefused) {
  ASSERT_TRUE(env_->StartServer(TlsServer()));
  MountOptions o = TlsMount();
  o.extra.push_back("tls_name=files.example");
  ExpectRefused(o, "hostname mismatch");
}

TEST_F(TlsTest, MissingClientCertificateRefused) {
  ASSERT_TRUE(env_->StartServer(TlsServer(/*mutual=*/true)));
  ExpectRefused(TlsMount(), "certificate required");
  EXPECT_TRUE(LogSays(env_->server_log(), "did not return a certificate"));
}

// The admin service over TCP with --tls-cert: ringfsctl reaches it with the CA, not without.
TEST_F(TlsTest, AdminServiceOverTls) {
  const std::string token = env_->base() + "/admin.token";
  ASSERT_EQ(WriteFile(token, "admin-secret\n", 0600), 0);
  ServerOptions o = TlsServer();
  o.token_file = token;
  o.extra_args.insert(o.extra_args.end(), {"--admin", "127.0.0.1:0"});
  ASSERT_TRUE(env_->StartServer(o));
  ASSERT_TRUE(LogSays(env_->server_log(), "(TLS, token required)"));
  const std::string log = Slurp(env_->server_log());
  const size_t at = log.find("admin service on ") + strlen("admin service on ");
  const std::string admin = log.substr(at, log.find(' ', at) - at);
  auto ctl = [&](const std::string& tls) {
    const std::string out = env_->base() + "/ctl.out";
    std::string cmd = std::string(RINGFS_BIN_DIR) + "/ringfsctl server --admin " + admin +
                      " --token-file " + token + " " + tls + " export > " + out + " 2>&1";
    int rc = std::system(cmd.c_str());
    ctl_output_ = Slurp(out);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  };
  EXPECT_EQ(ctl("--tls-ca " + pki_.ca), 0) << ctl_output_;
  EXPECT_NE(ctl(""), 0) << ctl_output_;
  EXPECT_NE(ctl("--tls-ca " + pki_.other_ca), 0) << ctl_output_;
}

// A mount's TCP control service with tls_cert=/tls_key=: ringfsctl reaches it with the CA only.
TEST_F(TlsTest, ControlServiceOverTls) {
  const std::string token = env_->base() + "/control.token";
  ASSERT_EQ(WriteFile(token, "control-secret\n", 0600), 0);
  ASSERT_TRUE(env_->StartServer(TlsServer()));
  MountOptions o = TlsMount();
  o.extra.insert(o.extra.end(), {"tls_cert=" + pki_.server_cert, "tls_key=" + pki_.server_key,
                                 "control=127.0.0.1:0", "control_token_file=" + token});
  ASSERT_TRUE(env_->Mount(o));
  ASSERT_TRUE(LogSays(env_->mount_log(), "(TLS, token required)")) << Slurp(env_->mount_log());
  const std::string log = Slurp(env_->mount_log());
  const size_t at = log.find("control service on ") + strlen("control service on ");
  const std::string control = log.substr(at, log.find(' ', at) - at);
  auto ctl = [&](const std::string& tls) {
    const std::string out = env_->base() + "/ctl.out";
    std::string cmd = std::string(RINGFS_BIN_DIR) + "/ringfsctl --control " + control +
                      " --token-file " + token + " " + tls + " info > " + out + " 2>&1";
    int rc = std::system(cmd.c_str());
    ctl_output_ = Slurp(out);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  };
  EXPECT_EQ(ctl("--tls-ca " + pki_.ca), 0) << ctl_output_;
  EXPECT_NE(ctl(""), 0) << ctl_output_;
  EXPECT_NE(ctl_output_.find("--tls-ca"), std::string::npos) << ctl_output_;
  ASSERT_TRUE(env_->Unmount());
}

// Writes a known pattern and reads a 0600 file through a recording proxy.
class TlsCaptureTest : public TlsTest {
 protected:
  std::string RunSession(bool tls) {
    const ServerOptions server = tls ? TlsServer() : ServerOptions{};
    EXPECT_TRUE(env_->StartServer(server));
    RecordingProxy proxy(env_->server_address());
    std::string error;
    EXPECT_TRUE(proxy.Start(&error)) << error;
    secret_ = "0600 secret " + Pattern(200000).substr(11);
    EXPECT_EQ(WriteFile(Exp("private"), secret_, 0600), 0);
    EXPECT_EQ(::chmod(Exp("private").c_str(), 0600), 0);
    MountOptions o = tls ? TlsMount() : MountOptions{};
    EXPECT_TRUE(env_->Mount(o, proxy.address())) << env_->DescribeLogs();
    written_ = "written " + Pattern(3 * 1024 * 1024).substr(3);
    EXPECT_EQ(WriteFile(Mnt("pattern"), written_), 0);
    EXPECT_EQ(ReadFile(Mnt("private")), secret_);
    EXPECT_TRUE(env_->Unmount());
    EXPECT_GT(proxy.connections(), 0u);
    proxy.Stop();
    return proxy.captured();
  }
  // Any 48-byte window from the middle of `what`.
  static bool Contains(const std::string& capture, const std::string& what) {
    return capture.find(what.substr(what.size() / 2, 48)) != std::string::npos;
  }
  std::string secret_, written_;
};

TEST_F(TlsCaptureTest, TlsSessionShowsNoDataOnTheWire) {
  const std::string capture = RunSession(/*tls=*/true);
  EXPECT_GT(capture.size(), written_.size());  // it all went through the proxy
  EXPECT_FALSE(Contains(capture, written_));
  EXPECT_FALSE(Contains(capture, secret_));
  EXPECT_EQ(capture.find("pattern"), std::string::npos);  // nor the file names
  EXPECT_EQ(capture.find("private"), std::string::npos);
}

TEST_F(TlsCaptureTest, PlaintextSessionShowsDataOnTheWire) {
  const std::string capture = RunSession(/*tls=*/false);
  EXPECT_TRUE(Contains(capture, written_));
  EXPECT_TRUE(Contains(capture, secret_));
}

}  // namespace
}  // namespace ringfs::testing
