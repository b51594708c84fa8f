// The handle key file: created 0600 with random bytes when missing, read back unchanged, and
// refused when others could read it or it is not a plain file of enough bytes.
#include "server/handle_key.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "common/status.h"
#include "server/test_client.h"

namespace ringfs::server {
namespace {

TEST(HandleKeyTest, MissingFileIsCreatedPrivateAndReadBackUnchanged) {
  testing::TempDir dir;
  const std::string path = dir.Join("handle.key");
  auto created = LoadOrCreateHandleKey(path);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->size(), kHandleKeyBytes);
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  auto again = LoadOrCreateHandleKey(path);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *created);
  EXPECT_NE(*created, std::string(kHandleKeyBytes, '\0'));
}

TEST(HandleKeyTest, KeyReadableByOthersIsRefused) {
  testing::TempDir dir;
  const std::string path = dir.Join("handle.key");
  std::ofstream(path) << std::string(64, 'x');
  ASSERT_EQ(chmod(path.c_str(), 0640), 0);
  auto key = LoadOrCreateHandleKey(path);
  ASSERT_FALSE(key.ok());
  EXPECT_NE(key.status().message().find("chmod 600"), std::string::npos) << key.status();
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
  EXPECT_TRUE(LoadOrCreateHandleKey(path).ok());
}

TEST(HandleKeyTest, ShortKeyDirectoryAndSymlinkAreRefused) {
  testing::TempDir dir;
  const std::string short_key = dir.Join("short");
  std::ofstream(short_key) << "too short";
  ASSERT_EQ(chmod(short_key.c_str(), 0600), 0);
  EXPECT_FALSE(LoadOrCreateHandleKey(short_key).ok());
  ASSERT_EQ(mkdir(dir.Join("dir").c_str(), 0700), 0);
  EXPECT_FALSE(LoadOrCreateHandleKey(dir.Join("dir")).ok());
  ASSERT_EQ(symlink(short_key.c_str(), dir.Join("link").c_str()), 0);
  EXPECT_FALSE(LoadOrCreateHandleKey(dir.Join("link")).ok());
}

TEST(HandleKeyTest, ExplicitPathInMissingDirectoryFailsAndNoPathIsRandom) {
  testing::TempDir dir;
  EXPECT_FALSE(HandleKeyForServer(dir.Join("no/such/dir/key"), /*explicit_path=*/true).ok());
  auto a = HandleKeyForServer("", false);
  auto b = HandleKeyForServer("", false);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), kHandleKeyBytes);
  EXPECT_NE(*a, *b);
}

}  // namespace
}  // namespace ringfs::server

namespace ringfs::server {
namespace {

// Servers of one export started together: all end up with the one key that was published.
TEST(HandleKeyTest, ConcurrentCreatorsAgreeOnOneKey) {
  testing::TempDir dir;
  const std::string path = dir.Join("handle.key");
  std::vector<std::string> keys(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < keys.size(); ++i) {
    threads.emplace_back([&, i] {
      auto key = LoadOrCreateHandleKey(path);
      EXPECT_TRUE(key.ok()) << key.status();
      if (key.ok()) keys[i] = *key;
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& key : keys) EXPECT_EQ(key, keys[0]);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            1) << "no temporary file left behind";
}

}  // namespace
}  // namespace ringfs::server
