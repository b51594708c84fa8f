// EmptyWithExactNames: the check behind MKDIR's trailer for the new directory, which lets a
// client answer lookups in it (common/dir_attrs.h).
#include "server/dir_attrs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

namespace ringfs::server {
namespace {

TEST(EmptyWithExactNamesTest, OnlyADirectoryWithNothingButDotAndDotDot) {
  char tmpl[] = "/tmp/ringfs-dir-attrs-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  auto empty = [&] {
    int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    bool result = EmptyWithExactNames(fd);
    close(fd);
    return result;
  };
  EXPECT_TRUE(empty());
  ASSERT_EQ(mkdir((dir + "/sub").c_str(), 0755), 0);
  EXPECT_FALSE(empty());
  ASSERT_EQ(rmdir((dir + "/sub").c_str()), 0);
  EXPECT_TRUE(empty());
  // Many entries, beyond one getdents buffer; the last one alone still counts.
  for (int i = 0; i < 100; ++i) {
    int fd = open((dir + "/a-long-name-to-fill-the-buffer-" + std::to_string(i)).c_str(),
                  O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    close(fd);
  }
  EXPECT_FALSE(empty());
  for (int i = 0; i < 99; ++i) {
    unlink((dir + "/a-long-name-to-fill-the-buffer-" + std::to_string(i)).c_str());
  }
  EXPECT_FALSE(empty());
  unlink((dir + "/a-long-name-to-fill-the-buffer-99").c_str());
  EXPECT_TRUE(empty());
  EXPECT_FALSE(EmptyWithExactNames(-1));  // cannot tell: not empty
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace ringfs::server
