// The NodeTable contract, for both implementations: PathNodeTable (one fd per node) and
// HandleNodeTable (file handles, a few fds cached; here with room for 2, so nodes really are
// pushed out and reopened). HandleNodeTable's own behaviour is in handle_node_table_test.cc.
#include "server/node_table.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"

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

  // A table of the same kind over the same export, as another server instance would build.
  std::unique_ptr<NodeTable> OtherTable() {
    struct stat st {};
    EXPECT_EQ(fstat(root_.get(), &st), 0);
    UniqueFd table_root(dup(root_.get()));
    if (GetParam() == "path") return std::make_unique<PathNodeTable>(std::move(table_root), st);
    auto table =
        HandleNodeTable::Create(std::move(table_root), st, std::make_shared<NodeFdCache>(2));
    EXPECT_TRUE(table.ok()) << table.status();
    return table.ok() ? *std::move(table) : nullptr;
  }

  EntryIds LookupIds(const std::string& name, NodeTable* table = nullptr) {
    auto fd = LookupBeneath(root_.get(), name);
    EXPECT_TRUE(fd.ok()) << fd.status();
    auto st = StatFd(fd->get());
    EXPECT_TRUE(st.ok());
    auto ids = (table != nullptr ? table : table_.get())->AddLookup(*std::move(fd), *st);
    EXPECT_TRUE(ids.ok());
    return ids.value_or(EntryIds{});
  }
  uint64_t Lookup(const std::string& name) { return LookupIds(name).nodeid; }

  testing::TempDir dir_;
  UniqueFd root_;
  std::unique_ptr<NodeTable> table_;
};

TEST_P(NodeTableTest, LookupAndForgetCounting) {
  uint64_t a = Lookup("a");
  EXPECT_GE(a, 2u);  // 0 and 1 (the root) are never handed out
  EXPECT_TRUE(table_->Contains(a));
  EXPECT_EQ(Lookup("a"), a);
  EXPECT_EQ(Lookup("a"), a);
  EXPECT_EQ(table_->LookupCount(a), 3u);
  table_->Forget(a, 2);
  EXPECT_EQ(table_->LookupCount(a), 1u);
  ASSERT_TRUE(table_->Get(a).ok());
  table_->Forget(a, 1);
  EXPECT_EQ(ToErrno(table_->Get(a).status()), ESTALE);
  EXPECT_FALSE(table_->Contains(a));
  EXPECT_EQ(table_->size(), 1u);  // only the root
}

TEST_P(NodeTableTest, SameInodeSameIdAndIdsNeverReused) {
  uint64_t a = Lookup("a");
  EXPECT_EQ(Lookup("a_link"), a);  // hard link: same (dev, ino)
  uint64_t b = Lookup("b");
  EXPECT_NE(a, b);
  table_->Forget(a, 2);
  uint64_t again = Lookup("a");
  EXPECT_NE(again, a);  // a fresh id, not the forgotten one
  EXPECT_NE(again, b);
  // Many lookups and forgets: an id is never handed out twice.
  absl::flat_hash_set<uint64_t> seen = {a, b, again};
  for (int i = 0; i < 1000; ++i) {
    table_->Forget(again, 1);
    again = Lookup("a");
    ASSERT_TRUE(seen.insert(again).second) << "id " << again << " reused";
  }
}

TEST_P(NodeTableTest, UnknownIdIsEstale) {
  for (uint64_t id : {0ull, 2ull, 3ull, 12345ull, ~0ull}) {
    auto node = table_->Get(id);
    ASSERT_FALSE(node.ok());
    EXPECT_EQ(ToErrno(node.status()), ESTALE) << id;
    EXPECT_FALSE(table_->Contains(id));
    table_->Forget(id, 1);  // ignored
  }
}

// Issue 10: a restarted server numbered nodes 2, 3, ... again, so the kernel's old ids named
// the new files. Ids of one table are unknown to another over the same export (ESTALE).
TEST_P(NodeTableTest, AnotherTablesIdsAreUnknown) {
  std::vector<uint64_t> old_ids;
  for (int i = 0; i < 50; ++i) {
    std::ofstream(dir_.Join("f" + std::to_string(i))) << i;
    old_ids.push_back(Lookup("f" + std::to_string(i)));
  }
  std::unique_ptr<NodeTable> restarted = OtherTable();
  ASSERT_NE(restarted, nullptr);
  for (int i = 0; i < 50; ++i) {
    std::ofstream(dir_.Join("g" + std::to_string(i))) << i;
    LookupIds("g" + std::to_string(i), restarted.get());
  }
  for (uint64_t id : old_ids) {
    EXPECT_EQ(ToErrno(restarted->Get(id).status()), ESTALE) << id;
  }
  EXPECT_TRUE(restarted->Get(1).ok()) << "the root is 1 in every table";
}

// The generation comes from the file: the same in every table (every server instance), and
// different for different files.
TEST_P(NodeTableTest, GenerationComesFromTheFile) {
  const EntryIds a = LookupIds("a");
  const EntryIds b = LookupIds("b");
  EXPECT_NE(a.generation, 0u);
  EXPECT_NE(a.generation, b.generation);
  EXPECT_EQ(LookupIds("a_link").generation, a.generation);
  std::unique_ptr<NodeTable> other = OtherTable();
  ASSERT_NE(other, nullptr);
  const EntryIds again = LookupIds("a", other.get());
  EXPECT_EQ(again.generation, a.generation);
  EXPECT_NE(again.nodeid, a.nodeid);
}

TEST_P(NodeTableTest, RootNeverDropped) {
  struct stat st {};
  ASSERT_EQ(fstat(root_.get(), &st), 0);
  auto ids = table_->AddLookup(UniqueFd(dup(root_.get())), st);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->nodeid, 1u);
  EXPECT_NE(ids->generation, 0u);
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
