#include "server/node_table.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "common/status.h"
#include "server/export_fs.h"
#include "server/test_client.h"

namespace ringfs::server {
namespace {

class NodeTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.Join("a")) << "a";
    std::ofstream(dir_.Join("b")) << "b";
    ASSERT_EQ(link(dir_.Join("a").c_str(), dir_.Join("a_link").c_str()), 0);
    root_.Reset(open(dir_.path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(root_.valid());
    struct stat st {};
    ASSERT_EQ(fstat(root_.get(), &st), 0);
    UniqueFd table_root(dup(root_.get()));
    table_ = std::make_unique<PathNodeTable>(std::move(table_root), st);
  }

  uint64_t Lookup(const std::string& name) {
    auto fd = LookupBeneath(root_.get(), name);
    EXPECT_TRUE(fd.ok()) << fd.status();
    auto st = StatFd(fd->get());
    EXPECT_TRUE(st.ok());
    auto id = table_->AddLookup(*std::move(fd), *st);
    EXPECT_TRUE(id.ok());
    return *id;
  }

  testing::TempDir dir_;
  UniqueFd root_;
  std::unique_ptr<PathNodeTable> table_;
};

TEST_F(NodeTableTest, LookupAndForgetCounting) {
  uint64_t a = Lookup("a");
  EXPECT_EQ(a, 2u);
  EXPECT_EQ(Lookup("a"), a);
  EXPECT_EQ(Lookup("a"), a);
  EXPECT_EQ(table_->LookupCount(a), 3u);
  table_->Forget(a, 2);
  EXPECT_EQ(table_->LookupCount(a), 1u);
  ASSERT_TRUE(table_->Get(a).ok());
  table_->Forget(a, 1);
  EXPECT_FALSE(table_->Get(a).ok());
  EXPECT_EQ(table_->size(), 1u);  // only the root
}

TEST_F(NodeTableTest, SameInodeSameIdAndIdsNeverReused) {
  uint64_t a = Lookup("a");
  EXPECT_EQ(Lookup("a_link"), a);  // hard link: same (dev, ino)
  uint64_t b = Lookup("b");
  EXPECT_NE(a, b);
  table_->Forget(a, 2);
  uint64_t again = Lookup("a");
  EXPECT_GT(again, b);  // a fresh id, not the forgotten one
}

TEST_F(NodeTableTest, UnknownIdIsEnoent) {
  auto node = table_->Get(12345);
  ASSERT_FALSE(node.ok());
  EXPECT_EQ(ToErrno(node.status()), ENOENT);
  table_->Forget(12345, 1);  // ignored
}

TEST_F(NodeTableTest, RootNeverDropped) {
  struct stat st {};
  ASSERT_EQ(fstat(root_.get(), &st), 0);
  auto id = table_->AddLookup(UniqueFd(dup(root_.get())), st);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, 1u);
  table_->Forget(1, 1000);
  auto root = table_->Get(1);
  ASSERT_TRUE(root.ok());
  EXPECT_EQ((*root)->type, static_cast<mode_t>(S_IFDIR));
}

TEST_F(NodeTableTest, NodeStaysUsableAfterConcurrentForget) {
  uint64_t a = Lookup("a");
  auto node = table_->Get(a);
  ASSERT_TRUE(node.ok());
  table_->Forget(a, 1);
  EXPECT_FALSE(table_->Get(a).ok());
  auto st = StatFd((*node)->fd.get());  // the executor's reference keeps the fd open
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_TRUE(S_ISREG(st->st_mode));
}

}  // namespace
}  // namespace ringfs::server
