// The NodeTable contract, for both implementations: PathNodeTable (one fd per node) and
// HandleNodeTable (file handles, a few fds cached; here with room for 2, so nodes really are
// pushed out and reopened). HandleNodeTable's own behaviour is in handle_node_table_test.cc.
#include "server/node_table.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "common/status.h"
#include "server/export_fs.h"
#include "server/handle_node_table.h"
#include "server/test_client.h"

namespace ringfs::server {
namespace {

class NodeTableTest : public ::testing::TestWithParam<std::string> {
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
    if (GetParam() == "path") {
      table_ = std::make_unique<PathNodeTable>(std::move(table_root), st);
    } else {
      auto table =
          HandleNodeTable::Create(std::move(table_root), st, std::make_shared<NodeFdCache>(2));
      ASSERT_TRUE(table.ok()) << table.status();
      table_ = *std::move(table);
    }
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
  std::unique_ptr<NodeTable> table_;
};

TEST_P(NodeTableTest, LookupAndForgetCounting) {
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

TEST_P(NodeTableTest, SameInodeSameIdAndIdsNeverReused) {
  uint64_t a = Lookup("a");
  EXPECT_EQ(Lookup("a_link"), a);  // hard link: same (dev, ino)
  uint64_t b = Lookup("b");
  EXPECT_NE(a, b);
  table_->Forget(a, 2);
  uint64_t again = Lookup("a");
  EXPECT_GT(again, b);  // a fresh id, not the forgotten one
}

TEST_P(NodeTableTest, UnknownIdIsEnoent) {
  auto node = table_->Get(12345);
  ASSERT_FALSE(node.ok());
  EXPECT_EQ(ToErrno(node.status()), ENOENT);
  table_->Forget(12345, 1);  // ignored
}

TEST_P(NodeTableTest, RootNeverDropped) {
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

TEST_P(NodeTableTest, NodeStaysUsableAfterConcurrentForget) {
  uint64_t a = Lookup("a");
  auto node = table_->Get(a);
  ASSERT_TRUE(node.ok());
  table_->Forget(a, 1);
  EXPECT_FALSE(table_->Get(a).ok());
  auto st = StatFd((*node)->fd.get());  // the executor's reference keeps the fd open
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_TRUE(S_ISREG(st->st_mode));
}

TEST_P(NodeTableTest, GetGivesTheFileOfTheNode) {
  const uint64_t a = Lookup("a");
  const uint64_t b = Lookup("b");
  struct stat want_a {}, want_b {};
  ASSERT_EQ(lstat(dir_.Join("a").c_str(), &want_a), 0);
  ASSERT_EQ(lstat(dir_.Join("b").c_str(), &want_b), 0);
  for (int round = 0; round < 3; ++round) {
    for (auto [id, want] : {std::pair{a, want_a}, std::pair{b, want_b}}) {
      auto node = table_->Get(id);
      ASSERT_TRUE(node.ok()) << node.status();
      EXPECT_EQ((*node)->id, id);
      EXPECT_EQ((*node)->ino, want.st_ino);
      auto st = StatFd((*node)->fd.get());
      ASSERT_TRUE(st.ok());
      EXPECT_EQ(st->st_ino, want.st_ino);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tables, NodeTableTest, ::testing::Values("path", "handles"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ringfs::server
