// Who may do what, end to end over a real socket: the in-process Server (its workers act as
// each request's caller, thread_creds.h) and a raw client that claims whatever uid and gid it
// likes in its frames, as a hostile client would. The export is root's, 0755, with a 0600
// root-only file and a 0777 directory.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <fstream>

#include "server/server.h"
#include "server/test_client.h"
#include "server/thread_creds.h"

namespace ringfs::server {
namespace {

using testing::Bytes;
using testing::CName;
using testing::DefaultHello;
using testing::Frame;
using testing::Reply;
using testing::TestClient;

constexpr uint32_t kNobody = 65534;

class SecurityWireTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CanActAsCallers()) GTEST_SKIP() << "needs root";
    ASSERT_EQ(chmod(export_.path().c_str(), 0755), 0);
    std::ofstream(export_.Join("secret")) << "root only";
    ASSERT_EQ(chmod(export_.Join("secret").c_str(), 0600), 0);
    ASSERT_EQ(mkdir(export_.Join("pub").c_str(), 0777), 0);
    ASSERT_EQ(chmod(export_.Join("pub").c_str(), 0777), 0);
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }

  void Start(const std::string& options) {
    ServerConfig config;
    config.export_dir = export_.path();
    config.listen = "127.0.0.1:0";
    config.workers = 1;
    auto parsed = ParseExportOptions(options);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    config.export_options = *parsed;
    server_ = std::make_unique<Server>(config);
    ASSERT_TRUE(server_->Start().ok());
    wire::ServerHello reply;
    auto client = TestClient::Connect(server_->bound_address(), DefaultHello(), &reply);
    ASSERT_TRUE(client.ok()) << client.status();
    ASSERT_EQ(reply.result(), wire::ServerHello::OK);
    client_ = *std::move(client);
  }

  Reply Call(uint32_t opcode, uint64_t nodeid, const std::string& args, uint32_t uid,
             uint32_t gid) {
    auto reply = client_->Call(Frame(opcode, ++unique_, nodeid, args, uid, gid));
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? *reply : Reply{};
  }
  uint64_t Lookup(uint64_t parent, const std::string& name, uint32_t uid = 0) {
    Reply r = Call(FUSE_LOOKUP, parent, CName(name), uid, uid);
    EXPECT_EQ(r.header.error, 0) << name;
    return r.As<fuse_entry_out>().nodeid;
  }
  int Open(uint64_t node, uint32_t flags, uint32_t uid) {
    fuse_open_in in{};
    in.flags = flags;
    return Call(FUSE_OPEN, node, Bytes(in), uid, uid).header.error;
  }
  Reply Create(uint64_t parent, const std::string& name, uint32_t mode, uint32_t uid) {
    fuse_create_in in{};
    in.flags = O_RDWR | O_CREAT | O_EXCL;
    in.mode = S_IFREG | mode;
    return Call(FUSE_CREATE, parent, Bytes(in) + CName(name), uid, uid);
  }
  int Chown(uint64_t node, uint32_t to, uint32_t uid) {
    fuse_setattr_in in{};
    in.valid = FATTR_UID | FATTR_GID;
    in.uid = to;
    in.gid = to;
    return Call(FUSE_SETATTR, node, Bytes(in), uid, uid).header.error;
  }
  int MknodNull(uint64_t parent, const std::string& name, uint32_t uid) {
    fuse_mknod_in in{};
    in.mode = S_IFCHR | 0600;
    in.rdev = makedev(1, 3);
    return Call(FUSE_MKNOD, parent, Bytes(in) + CName(name), uid, uid).header.error;
  }
  struct stat Stat(const std::string& name) {
    struct stat st {};
    EXPECT_EQ(lstat(export_.Join(name).c_str(), &st), 0) << name;
    return st;
  }

  testing::TempDir export_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<TestClient> client_;
  uint64_t unique_ = 0;
};

TEST_F(SecurityWireTest, AClientClaimingNobodyGetsTheExportsRefusals) {
  Start("");
  const uint64_t secret = Lookup(1, "secret", kNobody);
  EXPECT_EQ(Open(secret, O_RDONLY, kNobody), -EACCES);
  EXPECT_EQ(Chown(secret, kNobody, kNobody), -EPERM);
  EXPECT_EQ(Create(1, "planted", 0644, kNobody).header.error, -EACCES) << "root's 0755 directory";
  EXPECT_EQ(Call(FUSE_UNLINK, 1, CName("secret"), kNobody, kNobody).header.error, -EACCES);
  EXPECT_EQ(Stat("secret").st_uid, 0u);
}

TEST_F(SecurityWireTest, RootIsSquashedToNobodyByDefault) {
  Start("");
  const uint64_t secret = Lookup(1, "secret", 0);
  EXPECT_EQ(Open(secret, O_RDONLY, 0), -EACCES);
  EXPECT_EQ(Chown(secret, 0, 0), -EPERM);
  const uint64_t pub = Lookup(1, "pub", 0);
  Reply made = Create(pub, "setuid", 04755, 0);
  ASSERT_EQ(made.header.error, 0);
  struct stat st = Stat("pub/setuid");
  EXPECT_EQ(st.st_uid, kNobody);
  EXPECT_EQ(st.st_gid, kNobody);
  EXPECT_EQ(st.st_mode & 07777, 0755u) << "a squashed root never makes a set-id file";
  fuse_setattr_in chmod_in{};
  chmod_in.valid = FATTR_MODE;
  chmod_in.mode = 06755;
  EXPECT_EQ(Call(FUSE_SETATTR, made.As<fuse_entry_out>().nodeid, Bytes(chmod_in), 0, 0)
                .header.error, 0);
  EXPECT_EQ(Stat("pub/setuid").st_mode & 07777, 0755u);
  EXPECT_EQ(MknodNull(pub, "null", 0), -EPERM);
}

TEST_F(SecurityWireTest, NoRootSquashRestoresRoot) {
  Start("no_root_squash");
  const uint64_t secret = Lookup(1, "secret", 0);
  EXPECT_EQ(Open(secret, O_RDONLY, 0), 0);
  EXPECT_EQ(Chown(secret, 1234, 0), 0);
  EXPECT_EQ(Stat("secret").st_uid, 1234u);
  ASSERT_EQ(MknodNull(1, "null", 0), 0) << "as on the export: root makes device nodes";
  EXPECT_TRUE(S_ISCHR(Stat("null").st_mode));
  EXPECT_EQ(Stat("null").st_rdev, makedev(1, 3));
  EXPECT_EQ(MknodNull(Lookup(1, "pub", 1000), "null2", 1000), -EPERM) << "only root";
  Reply made = Create(1, "setuid", 04755, 0);
  ASSERT_EQ(made.header.error, 0);
  EXPECT_EQ(Stat("setuid").st_mode & 07777, 04755u);
}

TEST_F(SecurityWireTest, AllSquashMapsEveryoneToTheAnonymousIds) {
  Start("all_squash,anonuid=1234,anongid=4321");
  const uint64_t pub = Lookup(1, "pub", 1000);
  ASSERT_EQ(Create(pub, "f", 0644, 1000).header.error, 0);
  EXPECT_EQ(Stat("pub/f").st_uid, 1234u);
  EXPECT_EQ(Stat("pub/f").st_gid, 4321u);
}

TEST_F(SecurityWireTest, ReadOnlyAnswersErofsToEveryChangeAndServesReads) {
  Start("ro,no_root_squash");
  const uint64_t secret = Lookup(1, "secret", 0);
  const uint64_t pub = Lookup(1, "pub", 0);
  EXPECT_EQ(Create(pub, "f", 0644, 0).header.error, -EROFS);
  fuse_mkdir_in mk{0755, 0};
  EXPECT_EQ(Call(FUSE_MKDIR, pub, Bytes(mk) + CName("d"), 0, 0).header.error, -EROFS);
  EXPECT_EQ(Open(secret, O_WRONLY, 0), -EROFS);
  EXPECT_EQ(Open(secret, O_RDONLY | O_TRUNC, 0), -EROFS);
  EXPECT_EQ(Chown(secret, 1, 0), -EROFS);
  EXPECT_EQ(Call(FUSE_UNLINK, 1, CName("secret"), 0, 0).header.error, -EROFS);
  EXPECT_EQ(Call(FUSE_REMOVEXATTR, secret, CName("user.x"), 0, 0).header.error, -EROFS);
  EXPECT_EQ(Call(FUSE_SYMLINK, pub, CName("l") + CName("x"), 0, 0).header.error, -EROFS);
  EXPECT_EQ(MknodNull(pub, "n", 0), -EROFS);
  fuse_access_in access{};
  access.mask = W_OK;
  EXPECT_EQ(Call(FUSE_ACCESS, secret, Bytes(access), 0, 0).header.error, -EROFS);
  // Reads go on.
  fuse_open_in in{};
  in.flags = O_RDONLY;
  Reply opened = Call(FUSE_OPEN, secret, Bytes(in), 0, 0);
  ASSERT_EQ(opened.header.error, 0);
  fuse_read_in read{};
  read.fh = opened.As<fuse_open_out>().fh;
  read.size = 4096;
  Reply data = Call(FUSE_READ, secret, Bytes(read), 0, 0);
  EXPECT_EQ(data.body, "root only");
  EXPECT_EQ(Stat("secret").st_uid, 0u);
}

TEST_F(SecurityWireTest, AccessIsTheExportsAnswerForTheCaller) {
  Start("");
  const uint64_t secret = Lookup(1, "secret", 1000);
  fuse_access_in access{};
  access.mask = R_OK;
  EXPECT_EQ(Call(FUSE_ACCESS, secret, Bytes(access), 1000, 1000).header.error, -EACCES);
  access.mask = X_OK;
  EXPECT_EQ(Call(FUSE_ACCESS, 1, Bytes(access), 1000, 1000).header.error, 0);
}

}  // namespace
}  // namespace ringfs::server
