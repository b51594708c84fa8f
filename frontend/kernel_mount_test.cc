// MountsInside: which mounts sit on directories of a ringfs mount (and would be detached if
// their dentry failed revalidation), read from mountinfo text.
#include "frontend/kernel_mount.h"

#include <gtest/gtest.h>
#include <sys/sysmacros.h>

#include <sstream>

namespace ringfs::frontend {
namespace {

// id parent major:minor root mountpoint options - fstype source super-options
constexpr char kBase[] =
    "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
    "40 22 0:50 / /mnt/ringfs rw,nosuid - fuse.ringfs 127.0.0.1:1:/ rw\n";

size_t Count(const std::string& extra) {
  std::istringstream in(std::string(kBase) + extra);
  return CountMountsInside(in, makedev(0, 50));
}

TEST(MountsInsideTest, NothingMountedInsideCountsNothing) {
  EXPECT_EQ(Count(""), 0u);
  EXPECT_EQ(Count("41 22 0:51 / /mnt/ringfs2 rw - fuse.ringfs x rw\n"), 0u);  // beside it
}

TEST(MountsInsideTest, BindMountsOnItsDirectoriesCount) {
  EXPECT_EQ(Count("41 40 8:1 /srv /mnt/ringfs/data/config rw - ext4 /dev/sda1 rw\n"), 1u);
  // On a bind mount of one of its directories, elsewhere: that is one of its dentries too.
  EXPECT_EQ(Count("41 22 0:50 /sub /opt/sub rw - fuse.ringfs x rw\n"
                  "42 41 8:1 /srv /opt/sub/x rw - ext4 /dev/sda1 rw\n"),
            1u);
  // The same file system bound inside itself.
  EXPECT_EQ(Count("41 40 0:50 /a /mnt/ringfs/b rw - fuse.ringfs x rw\n"), 1u);
}

TEST(MountsInsideTest, AMountStackedOnItsRootDoesNotCount) {
  // Its root dentry is never revalidated, so nothing would detach what sits on it.
  EXPECT_EQ(Count("41 40 8:1 /srv /mnt/ringfs rw - ext4 /dev/sda1 rw\n"), 0u);
  // Stacked on a bind mount of a subdirectory: that dentry is an ordinary one.
  EXPECT_EQ(Count("41 22 0:50 /sub /opt/sub rw - fuse.ringfs x rw\n"
                  "42 41 8:1 /srv /opt/sub rw - ext4 /dev/sda1 rw\n"),
            1u);
}

}  // namespace
}  // namespace ringfs::frontend
