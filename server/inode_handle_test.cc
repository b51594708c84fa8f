// File handle wrappers and the startup probe, including its answer without
// CAP_DAC_READ_SEARCH (checked in a child that drops the capability).
#include "server/inode_handle.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "common/status.h"
#include "server/export_fs.h"
#include "server/test_client.h"

namespace ringfs::server {
namespace {

class InodeHandleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_.Reset(open(dir_.path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(root_.valid());
    auto mount_fd = OpenMountFd(root_.get());
    ASSERT_TRUE(mount_fd.ok()) << mount_fd.status();
    mount_fd_ = *std::move(mount_fd);
  }

  testing::TempDir dir_;
  UniqueFd root_;
  UniqueFd mount_fd_;
};

TEST_F(InodeHandleTest, RoundTripAndStaleAfterDelete) {
  std::ofstream(dir_.Join("f")) << "data";
  auto fd = LookupBeneath(root_.get(), "f");
  ASSERT_TRUE(fd.ok());
  auto handle = HandleOf(fd->get());
  ASSERT_TRUE(handle.ok()) << handle.status();
  EXPECT_FALSE(handle->bytes.empty());
  auto again = HandleOf(fd->get());
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(handle->SameFile(*again));
  auto root_handle = HandleOf(root_.get());
  ASSERT_TRUE(root_handle.ok());
  EXPECT_FALSE(handle->SameFile(*root_handle));
  EXPECT_EQ(handle->mount_id, root_handle->mount_id);

  auto reopened = OpenByHandle(mount_fd_.get(), *handle);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ(StatFd(reopened->get())->st_ino, StatFd(fd->get())->st_ino);
  EXPECT_EQ(fcntl(reopened->get(), F_GETFL) & O_PATH, O_PATH);

  reopened->Reset();
  fd->Reset();
  ASSERT_EQ(unlink(dir_.Join("f").c_str()), 0);
  auto stale = OpenByHandle(mount_fd_.get(), *handle);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(ToErrno(stale.status()), ESTALE);
}

TEST_F(InodeHandleTest, ProbeSucceedsWithCapDacReadSearch) {
  absl::Status probe = ProbeInodeHandles(root_.get());
  EXPECT_TRUE(probe.ok()) << probe;
}

// Without CAP_DAC_READ_SEARCH open_by_handle_at is EPERM: the server must see it in the probe
// (and fall back to one fd per node) instead of failing every Get later.
TEST_F(InodeHandleTest, ProbeWithoutCapDacReadSearchIsEperm) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
    if (syscall(SYS_capget, &header, data) != 0) _exit(10);
    data[CAP_DAC_READ_SEARCH / 32].effective &= ~(1u << (CAP_DAC_READ_SEARCH % 32));
    if (syscall(SYS_capset, &header, data) != 0) _exit(11);
    absl::Status probe = ProbeInodeHandles(root_.get());
    _exit(probe.ok() ? 0 : ToErrno(probe) == EPERM ? 1 : 12);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1) << "10/11: capget/capset failed, 0: probe passed, 12: "
                                       "another errno";
}

}  // namespace
}  // namespace ringfs::server
