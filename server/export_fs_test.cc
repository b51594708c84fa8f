// Confinement: nothing a client sends can reach outside the export, and symlinks inside it are
// never followed.
#include "server/export_fs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <fstream>
#include <iterator>

#include "server/executor_fixture.h"

namespace ringfs::server {
namespace {

using testing::Bytes;
using testing::CName;

class ConfinementTest : public testing::ExecutorFixture {
 protected:
  void SetUp() override {
    ExecutorFixture::SetUp();
    ASSERT_EQ(symlink("/etc", dir_.Join("etc_link").c_str()), 0);
    ASSERT_EQ(symlink("../..", dir_.Join("up").c_str()), 0);
    ASSERT_EQ(symlink((outside_.path() + "/target").c_str(), dir_.Join("out_link").c_str()), 0);
    ASSERT_EQ(mkdir(dir_.Join("sub").c_str(), 0755), 0);
    std::ofstream(outside_.Join("secret")) << "secret";
  }

  testing::TempDir outside_;
};

TEST_F(ConfinementTest, SymlinkIsReturnedAsSymlink) {
  testing::ExecResult r = Exec(FUSE_LOOKUP, 1, CName("etc_link"));
  ASSERT_EQ(r.error, 0);
  auto entry = r.As<fuse_entry_out>();
  EXPECT_TRUE(S_ISLNK(entry.attr.mode));
  EXPECT_GE(entry.nodeid, 2u);
  testing::ExecResult link = Exec(FUSE_READLINK, entry.nodeid, "");
  ASSERT_EQ(link.error, 0);
  EXPECT_EQ(link.body, "/etc");
}

TEST_F(ConfinementTest, CannotOpenOrDescendThroughSymlinks) {
  for (const char* name : {"etc_link", "up", "out_link"}) {
    SCOPED_TRACE(name);
    uint64_t node = LookupId(1, name);
    ASSERT_NE(node, 0u);
    fuse_open_in open_in{};
    open_in.flags = O_RDONLY;
    EXPECT_EQ(Exec(FUSE_OPEN, node, Bytes(open_in)).error, ELOOP);
    EXPECT_EQ(Exec(FUSE_OPENDIR, node, Bytes(open_in)).error, ENOTDIR);
    // Using the symlink node as a directory fails instead of resolving through it.
    EXPECT_NE(Exec(FUSE_LOOKUP, node, CName("passwd")).error, 0);
    EXPECT_NE(Exec(FUSE_LOOKUP, node, CName("secret")).error, 0);
    fuse_mkdir_in mkdir_in{0755, 0};
    EXPECT_NE(Exec(FUSE_MKDIR, node, Bytes(mkdir_in) + CName("evil")).error, 0);
  }
  struct stat st {};
  EXPECT_NE(stat("/etc/evil", &st), 0);
}

TEST_F(ConfinementTest, CreateThroughSymlinkDoesNotEscape) {
  fuse_create_in in{};
  in.flags = O_WRONLY | O_CREAT;
  in.mode = S_IFREG | 0644;
  EXPECT_NE(Exec(FUSE_CREATE, 1, Bytes(in) + CName("out_link")).error, 0);
  struct stat st {};
  EXPECT_NE(stat(outside_.Join("target").c_str(), &st), 0) << "created outside the export";
}

TEST_F(ConfinementTest, DotDotRejectedEverywhere) {
  EXPECT_EQ(Exec(FUSE_LOOKUP, 1, CName("..")).error, EINVAL);
  uint64_t sub = LookupId(1, "sub");
  ASSERT_NE(sub, 0u);
  EXPECT_EQ(Exec(FUSE_LOOKUP, sub, CName("..")).error, EINVAL);
  EXPECT_EQ(Exec(FUSE_LOOKUP, sub, CName("../..")).error, EINVAL);
  // The primitive refuses to leave its directory even if a bad name got this far.
  EXPECT_FALSE(LookupBeneath(root_fd_.get(), "..").ok());
  EXPECT_FALSE(OpenBeneath(root_fd_.get(), "etc_link/passwd", O_RDONLY).ok());
  EXPECT_FALSE(OpenBeneath(root_fd_.get(), "up/etc", O_PATH).ok());
  EXPECT_FALSE(OpenBeneath(root_fd_.get(), "/etc/passwd", O_RDONLY).ok());
}

TEST_F(ConfinementTest, ChmodOfSymlinkDoesNotTouchTarget) {
  struct stat before {};
  ASSERT_EQ(stat(outside_.Join("secret").c_str(), &before), 0);
  ASSERT_EQ(symlink(outside_.Join("secret").c_str(), dir_.Join("secret_link").c_str()), 0);
  uint64_t node = LookupId(1, "secret_link");
  ASSERT_NE(node, 0u);
  fuse_setattr_in in{};
  in.valid = FATTR_MODE;
  in.mode = 0777;
  EXPECT_NE(Exec(FUSE_SETATTR, node, Bytes(in)).error, 0);
  in.valid = FATTR_SIZE;
  in.size = 0;
  EXPECT_NE(Exec(FUSE_SETATTR, node, Bytes(in)).error, 0);
  struct stat after {};
  ASSERT_EQ(stat(outside_.Join("secret").c_str(), &after), 0);
  EXPECT_EQ(before.st_mode, after.st_mode);
  EXPECT_EQ(after.st_size, 6);
}

// ChmodFd changes the file behind an O_PATH fd (fchmod refuses those) and never a symlink's
// target.
TEST_F(ConfinementTest, ChmodFdChangesTheFileBehindAPathFd) {
  std::ofstream(dir_.Join("plain")) << "x";
  UniqueFd fd(open(dir_.Join("plain").c_str(), O_PATH | O_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  ASSERT_EQ(ChmodFd(fd.get(), 0604), 0) << strerror(errno);
  struct stat st {};
  ASSERT_EQ(stat(dir_.Join("plain").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0604u);
  UniqueFd dir(open(dir_.Join("sub").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  ASSERT_EQ(ChmodFd(dir.get(), 0711), 0) << strerror(errno);
  ASSERT_EQ(stat(dir_.Join("sub").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0711u);
}

// Under a seccomp profile that predates fchmodat2 the call fails with EPERM (Docker's did):
// ChmodFd must still chmod, through /proc/self/fd. In a child process, which the filter bounds.
TEST_F(ConfinementTest, ChmodFdWorksWhereASeccompProfileRefusesFchmodat2) {
  std::ofstream(dir_.Join("guarded")) << "x";
  UniqueFd fd(open(dir_.Join("guarded").c_str(), O_PATH | O_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    constexpr uint32_t kFchmodat2 = 452;
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kFchmodat2, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog program{static_cast<unsigned short>(std::size(filter)), filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(10);
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) _exit(11);
    if (syscall(kFchmodat2, fd.get(), "", 0600, AT_EMPTY_PATH) != -1 || errno != EPERM) _exit(12);
    _exit(ChmodFd(fd.get(), 0640) == 0 && ChmodFd(fd.get(), 0604) == 0 ? 0 : 13);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10/11: no filter, 12: filter inactive, 13: ChmodFd failed";
  struct stat st {};
  ASSERT_EQ(stat(dir_.Join("guarded").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0604u);
}

TEST_F(ConfinementTest, RenameAcrossSymlinkDirFails) {
  std::ofstream(dir_.Join("f")) << "x";
  uint64_t link = LookupId(1, "etc_link");
  fuse_rename_in in{link};
  EXPECT_NE(Exec(FUSE_RENAME, 1, Bytes(in) + CName("f") + CName("moved")).error, 0);
  struct stat st {};
  EXPECT_EQ(stat(dir_.Join("f").c_str(), &st), 0);
}

}  // namespace
}  // namespace ringfs::server
