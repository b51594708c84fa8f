// HandleNodeTable: bounded fds with many nodes, reopening by handle, ESTALE for deleted files,
// pinned nodes, and fds that stay valid in an executor's hands while the cache moves on.
#include "server/handle_node_table.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "proto/fuse_abi.h"
#include "server/export_fs.h"
#include "server/test_client.h"

namespace ringfs::server {
namespace {

// Open fds of this process.
int OpenFdCount() {
  int count = 0;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++count;
  }
  closedir(dir);
  return count - 1;  // the directory stream itself
}

class HandleNodeTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_.Reset(open(dir_.path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(root_.valid());
    MakeTable(16);
  }

  void MakeTable(size_t capacity) {
    table_.reset();
    cache_ = std::make_shared<NodeFdCache>(capacity);
    struct stat st {};
    ASSERT_EQ(fstat(root_.get(), &st), 0);
    auto table = HandleNodeTable::Create(UniqueFd(dup(root_.get())), st, cache_);
    ASSERT_TRUE(table.ok()) << table.status();
    table_ = *std::move(table);
  }

  void Touch(const std::string& name, const std::string& content = "") {
    std::ofstream(dir_.Join(name)) << content;
  }

  // LOOKUP of `name` under `parent_fd` (default: the export root); zeros on failure.
  EntryIds LookupIds(const std::string& name, int parent_fd = -1) {
    auto fd = LookupBeneath(parent_fd < 0 ? root_.get() : parent_fd, name);
    EXPECT_TRUE(fd.ok()) << name << ": " << fd.status();
    if (!fd.ok()) return EntryIds{};
    auto st = StatFd(fd->get());
    EXPECT_TRUE(st.ok());
    auto ids = table_->AddLookup(*std::move(fd), *st);
    EXPECT_TRUE(ids.ok()) << ids.status();
    return ids.value_or(EntryIds{});
  }
  uint64_t Lookup(const std::string& name, int parent_fd = -1) {
    return LookupIds(name, parent_fd).nodeid;
  }

  // Fills the cache with other nodes so that none of the earlier ones keeps its fd.
  void PushOutEverything() {
    for (size_t i = 0; i < cache_->capacity() + 1; ++i) {
      const std::string name = "filler" + std::to_string(filler_++);
      Touch(name);
      Lookup(name);
    }
  }

  testing::TempDir dir_;
  UniqueFd root_;
  std::shared_ptr<NodeFdCache> cache_;
  std::unique_ptr<HandleNodeTable> table_;
  int filler_ = 0;
};

// The reason for the table: far more nodes than fds. 2000 nodes, 16 cached fds.
TEST_F(HandleNodeTableTest, ThousandsOfNodesWithBoundedFds) {
  constexpr int kFiles = 2000;
  const int fds_before = OpenFdCount();
  std::vector<uint64_t> ids;
  std::vector<ino_t> inos;
  for (int i = 0; i < kFiles; ++i) {
    const std::string name = "f" + std::to_string(i);
    Touch(name, std::string(static_cast<size_t>(i % 7), 'x'));
    ids.push_back(Lookup(name));
    struct stat st {};
    ASSERT_EQ(lstat(dir_.Join(name).c_str(), &st), 0);
    inos.push_back(st.st_ino);
  }
  EXPECT_LE(OpenFdCount(), fds_before + 16);
  EXPECT_EQ(table_->size(), static_cast<size_t>(kFiles) + 1);
  EXPECT_EQ(cache_->size(), 16u);
  // Every node, most of them reopened by handle, is still its own file.
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < kFiles; ++i) {
      auto node = table_->Get(ids[i]);
      ASSERT_TRUE(node.ok()) << i << ": " << node.status();
      auto st = StatFd((*node)->fd.get());
      ASSERT_TRUE(st.ok());
      EXPECT_EQ(st->st_ino, inos[i]);
      EXPECT_EQ(st->st_size, i % 7);
      EXPECT_FALSE(table_->IsPinned(ids[i]));
    }
    EXPECT_LE(OpenFdCount(), fds_before + 16);
  }
  for (uint64_t id : ids) table_->Forget(id, 1);
  EXPECT_EQ(table_->size(), 1u);
  EXPECT_EQ(cache_->size(), 0u);
  EXPECT_LE(OpenFdCount(), fds_before);
}

TEST_F(HandleNodeTableTest, DeletedFileIsEstale) {
  Touch("gone");
  const uint64_t id = Lookup("gone");
  PushOutEverything();
  ASSERT_EQ(unlink(dir_.Join("gone").c_str()), 0);
  auto node = table_->Get(id);
  ASSERT_FALSE(node.ok());
  EXPECT_EQ(ToErrno(node.status()), ESTALE);
  // Still known (the kernel has not forgotten it), and forgotten normally.
  EXPECT_EQ(table_->LookupCount(id), 1u);
  table_->Forget(id, 1);
  EXPECT_EQ(ToErrno(table_->Get(id).status()), ESTALE);
  EXPECT_FALSE(table_->Contains(id));
}

TEST_F(HandleNodeTableTest, DeletedFileStillServedWhileItsFdIsOpen) {
  Touch("gone");
  const uint64_t id = Lookup("gone");
  auto held = table_->Get(id);  // the cache's fd keeps the inode: it is deleted, not gone
  ASSERT_TRUE(held.ok());
  ASSERT_EQ(unlink(dir_.Join("gone").c_str()), 0);
  PushOutEverything();
  auto again = table_->Get(id);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->get(), held->get());  // the node still held, not a reopened one
  auto st = StatFd((*again)->fd.get());
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->st_nlink, 0u);
}

// Executors hold NodeRefs while they run: the cache pushing a node out must not close its fd.
TEST_F(HandleNodeTableTest, PushedOutNodeKeepsItsFdWhileHeld) {
  MakeTable(1);
  Touch("a", "aaa");
  Touch("b");
  const uint64_t a = Lookup("a");
  auto held = table_->Get(a);
  ASSERT_TRUE(held.ok());
  const int fd = (*held)->fd.get();
  Lookup("b");  // takes the only cache slot
  EXPECT_EQ(cache_->size(), 1u);
  auto st = StatFd(fd);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->st_size, 3);
  // While held, a Get gives the same node rather than a second fd.
  auto again = table_->Get(a);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->fd.get(), fd);
  again->reset();
  held->reset();
  auto reopened = table_->Get(a);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  st = StatFd((*reopened)->fd.get());
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->st_size, 3);
}

// A node a listing counts again (AddLookupOf, the READDIRPLUS fast path) is marked used, as Get
// marks it: the cache's clock hand passes over it once more and pushes out a node nobody used
// since it came in.
TEST_F(HandleNodeTableTest, ANodeCountedAgainByAListingOutlivesAnUnusedOne) {
  MakeTable(2);
  Touch("a");
  Touch("b");
  Touch("c");
  const uint64_t a = Lookup("a");  // cache slot 0, where the hand starts
  Lookup("b");                     // slot 1
  auto got = table_->Get(a);
  ASSERT_TRUE(got.ok()) << got.status();
  const NodeRef node_a = *got;
  // As the hand leaves a node it passed: not used since.
  node_a->used_recently.store(false);
  ASSERT_TRUE(table_->AddLookupOf(*node_a).has_value());
  Lookup("c");  // the cache is full: the hand clears a's mark and takes b's slot
  EXPECT_GE(node_a->cache_slot, 0) << "the node counted again was pushed out first";
  EXPECT_EQ(cache_->size(), 2u);
  EXPECT_EQ(table_->LookupCount(a), 2u);
}

TEST_F(HandleNodeTableTest, NothingCachedStillServes) {
  MakeTable(0);
  Touch("a", "a");
  const int fds_before = OpenFdCount();
  const uint64_t a = Lookup("a");
  EXPECT_EQ(OpenFdCount(), fds_before);
  for (int i = 0; i < 3; ++i) {
    auto node = table_->Get(a);
    ASSERT_TRUE(node.ok()) << node.status();
    EXPECT_TRUE(StatFd((*node)->fd.get()).ok());
  }
  EXPECT_EQ(OpenFdCount(), fds_before);
}

TEST_F(HandleNodeTableTest, DirectoriesAndSymlinksReopen) {
  ASSERT_EQ(mkdir(dir_.Join("d").c_str(), 0755), 0);
  Touch("d/inner", "12345");
  ASSERT_EQ(symlink("/etc/passwd", dir_.Join("link").c_str()), 0);
  const uint64_t d = Lookup("d");
  const uint64_t link = Lookup("link");
  PushOutEverything();
  auto dir = table_->Get(d);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ((*dir)->type, static_cast<mode_t>(S_IFDIR));
  // Lookups continue beneath a reopened directory.
  auto inner = LookupBeneath((*dir)->fd.get(), "inner");
  ASSERT_TRUE(inner.ok()) << inner.status();
  EXPECT_EQ(StatFd(inner->get())->st_size, 5);
  auto symlink_node = table_->Get(link);
  ASSERT_TRUE(symlink_node.ok()) << symlink_node.status();
  auto st = StatFd((*symlink_node)->fd.get());
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(S_ISLNK(st->st_mode)) << "reopened as the link itself, never followed";
}

// A node on another st_dev (a submount inside the export) is not reopened through the export's
// mount: it keeps its fd for life.
TEST_F(HandleNodeTableTest, OtherDeviceIsPinned) {
  struct stat shm {}, root {};
  ASSERT_EQ(fstat(root_.get(), &root), 0);
  if (stat("/dev/shm", &shm) != 0 || shm.st_dev == root.st_dev) {
    GTEST_SKIP() << "needs /dev/shm on another filesystem than " << dir_.path();
  }
  UniqueFd shm_fd(open("/dev/shm", O_PATH | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(shm_fd.valid());
  const EntryIds ids = table_->AddLookup(UniqueFd(dup(shm_fd.get())), shm).value();
  const uint64_t id = ids.nodeid;
  EXPECT_NE(ids.generation, 0u);
  EXPECT_TRUE(table_->IsPinned(id));
  PushOutEverything();
  auto node = table_->Get(id);
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(StatFd((*node)->fd.get())->st_ino, shm.st_ino);
  table_->Forget(id, 1);
  EXPECT_FALSE(table_->IsPinned(id));
}

// With file handles, an inode number can be freed and reused while the kernel still knows the
// old node; the new file must get a node of its own, and the old one stays stale.
TEST_F(HandleNodeTableTest, ReusedInodeNumberGetsNewNode) {
  Touch("old");
  const EntryIds old_ids = LookupIds("old");
  const uint64_t old_id = old_ids.nodeid;
  struct stat old_st {};
  ASSERT_EQ(lstat(dir_.Join("old").c_str(), &old_st), 0);
  PushOutEverything();
  ASSERT_EQ(unlink(dir_.Join("old").c_str()), 0);
  // Filesystems hand out a freed inode number again soon, but not on demand.
  std::string reused;
  for (int i = 0; i < 200 && reused.empty(); ++i) {
    const std::string name = "new" + std::to_string(i);
    Touch(name);
    struct stat st {};
    ASSERT_EQ(lstat(dir_.Join(name).c_str(), &st), 0);
    if (st.st_ino == old_st.st_ino) reused = name;
  }
  if (reused.empty()) GTEST_SKIP() << "the filesystem did not reuse the inode number";
  const EntryIds new_ids = LookupIds(reused);
  const uint64_t new_id = new_ids.nodeid;
  EXPECT_NE(new_id, old_id);
  EXPECT_NE(new_ids.generation, old_ids.generation) << "a reused inode number, a new generation";
  EXPECT_EQ(Lookup(reused), new_id);  // the new node is the one found by (dev, ino) now
  EXPECT_EQ(table_->LookupCount(new_id), 2u);
  EXPECT_EQ(ToErrno(table_->Get(old_id).status()), ESTALE);
  // Forgetting the old node must not drop the new node's (dev, ino) entry.
  table_->Forget(old_id, 1);
  EXPECT_EQ(Lookup(reused), new_id);
  auto node = table_->Get(new_id);
  ASSERT_TRUE(node.ok());
  EXPECT_EQ((*node)->ino, old_st.st_ino);
}

TEST_F(HandleNodeTableTest, LookupAdoptsItsFdForANodeWithoutOne) {
  Touch("a");
  const uint64_t a = Lookup("a");
  PushOutEverything();
  EXPECT_EQ(Lookup("a"), a);
  EXPECT_EQ(table_->LookupCount(a), 2u);
  // The second lookup's fd became the node's open fd (it holds the inode), so the node is still
  // served after the file is deleted; a reopen by handle would have been ESTALE.
  ASSERT_EQ(unlink(dir_.Join("a").c_str()), 0);
  auto node = table_->Get(a);
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(StatFd((*node)->fd.get())->st_nlink, 0u);
}

TEST_F(HandleNodeTableTest, DestroyedTableLeavesNothingInTheSharedCache) {
  Touch("a");
  Lookup("a");
  EXPECT_EQ(cache_->size(), 1u);
  table_.reset();
  EXPECT_EQ(cache_->size(), 0u);
}

// Workers race Gets (most reopening, the cache holds 4 of 64 nodes), lookups and forgets of the
// same nodes; every Get that succeeds must give the node's own file.
TEST_F(HandleNodeTableTest, ConcurrentGetsLookupsAndForgets) {
  MakeTable(4);
  constexpr int kFiles = 64;
  std::vector<uint64_t> ids;
  std::vector<ino_t> inos;
  for (int i = 0; i < kFiles; ++i) {
    const std::string name = "c" + std::to_string(i);
    Touch(name);
    ids.push_back(Lookup(name));
    struct stat st {};
    ASSERT_EQ(lstat(dir_.Join(name).c_str(), &st), 0);
    inos.push_back(st.st_ino);
  }
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int n = 0; n < 3000; ++n) {
        const int i = (n * 7 + t * 13) % kFiles;
        if (t == 3 && n % 2 == 0) {
          // One lookup more, one forget: the count never reaches zero.
          auto fd = LookupBeneath(root_.get(), "c" + std::to_string(i));
          auto st = StatFd(fd->get());
          if (table_->AddLookup(*std::move(fd), *st).value_or(EntryIds{}).nodeid != ids[i]) {
            ++wrong;
          }
          table_->Forget(ids[i], 1);
          continue;
        }
        auto node = table_->Get(ids[i]);
        if (!node.ok() || StatFd((*node)->fd.get())->st_ino != inos[i]) ++wrong;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
  for (int i = 0; i < kFiles; ++i) EXPECT_EQ(table_->LookupCount(ids[i]), 1u);
  EXPECT_LE(cache_->size(), 4u);
}

}  // namespace
}  // namespace ringfs::server

namespace ringfs::server {
namespace {

// Reclaim: node ids of another instance (here another table on the same export) adopted for
// the files their handles name.
class AdoptTest : public HandleNodeTableTest {
 protected:
  void SetUp() override {
    HandleNodeTableTest::SetUp();
    struct stat st {};
    ASSERT_EQ(fstat(root_.get(), &st), 0);
    auto other = HandleNodeTable::Create(UniqueFd(dup(root_.get())), st, cache_);
    ASSERT_TRUE(other.ok());
    before_restart_ = *std::move(other);
  }

  // The id the older instance gave `name`.
  uint64_t OldId(const std::string& name) {
    auto fd = LookupBeneath(root_.get(), name);
    EXPECT_TRUE(fd.ok());
    auto st = StatFd(fd->get());
    auto ids = before_restart_->AddLookup(*std::move(fd), *st);
    EXPECT_TRUE(ids.ok());
    return ids->nodeid;
  }

  absl::Status Adopt(uint64_t nodeid, const std::string& name, uint64_t nlookup = 1) {
    auto fd = LookupBeneath(root_.get(), name);
    if (!fd.ok()) return fd.status();
    auto st = StatFd(fd->get());
    auto handle = HandleOf(fd->get());
    if (!handle.ok()) return handle.status();
    return table_->Adopt(nodeid, nlookup, *std::move(handle), *std::move(fd), *st);
  }

  std::unique_ptr<HandleNodeTable> before_restart_;
};

TEST_F(AdoptTest, AdoptedIdNamesTheFileAndLaterLookupsFindIt) {
  Touch("a", "content");
  const uint64_t id = OldId("a");
  ASSERT_TRUE(Adopt(id, "a", 3).ok());
  EXPECT_EQ(table_->LookupCount(id), 3u);
  auto node = table_->Get(id);
  ASSERT_TRUE(node.ok()) << node.status();
  struct stat st {};
  ASSERT_EQ(stat(dir_.Join("a").c_str(), &st), 0);
  EXPECT_EQ((*node)->ino, st.st_ino);
  EXPECT_EQ(Lookup("a"), id) << "one node per inode: a LOOKUP finds the adopted id";
  EXPECT_EQ(table_->LookupCount(id), 4u);
}

TEST_F(AdoptTest, ReplayedAdoptSetsTheCountAgain) {
  Touch("a");
  const uint64_t id = OldId("a");
  ASSERT_TRUE(Adopt(id, "a", 2).ok());
  ASSERT_TRUE(Adopt(id, "a", 2).ok());
  EXPECT_EQ(table_->LookupCount(id), 2u);
  EXPECT_EQ(table_->size(), 2u);  // root + a
}

TEST_F(AdoptTest, IdOfAnotherFileIsRefused) {
  Touch("a");
  Touch("b");
  const uint64_t id = OldId("a");
  ASSERT_TRUE(Adopt(id, "a").ok());
  EXPECT_EQ(ToErrno(Adopt(id, "b")), ESTALE);
  EXPECT_EQ(ToErrno(Adopt(Lookup("b"), "a")), ESTALE) << "an id of this table for another file";
}

TEST_F(AdoptTest, FileWithAnotherIdIsRefused) {
  Touch("a");
  const uint64_t here = Lookup("a");
  EXPECT_EQ(ToErrno(Adopt(OldId("a"), "a")), ESTALE);
  EXPECT_EQ(table_->LookupCount(here), 1u);
}

TEST_F(AdoptTest, IdThisTableCouldHaveHandedOutIsRefused) {
  Touch("a");
  Touch("b");
  const uint64_t mine = Lookup("b");
  table_->Forget(mine, 1);
  // Forgotten here, so not in the table, but this table's sequence passed it.
  EXPECT_EQ(ToErrno(Adopt(mine, "a")), ESTALE);
}

TEST_F(AdoptTest, RootAndZeroLookups) {
  Touch("a");
  struct stat st {};
  ASSERT_EQ(fstat(root_.get(), &st), 0);
  auto root_handle = HandleOf(root_.get());
  ASSERT_TRUE(root_handle.ok());
  EXPECT_TRUE(table_->Adopt(fuse::kRootNodeId, 1, *root_handle, UniqueFd(dup(root_.get())), st)
                  .ok());
  EXPECT_EQ(ToErrno(Adopt(fuse::kRootNodeId, "a")), ESTALE) << "node 1 is the export root";
  EXPECT_EQ(ToErrno(Adopt(OldId("a"), "a", 0)), EINVAL);
}

}  // namespace
}  // namespace ringfs::server
