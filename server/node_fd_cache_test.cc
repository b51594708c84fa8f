// NodeFdCache: CLOCK replacement, erase, capacity 0, and the default capacity from the fd limit.
#include "server/node_fd_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <vector>

namespace ringfs::server {
namespace {

NodeRef NewNode(uint64_t id) {
  auto node = std::make_shared<Node>();
  node->id = id;
  node->fd.Reset(open("/", O_PATH | O_CLOEXEC));
  return node;
}

TEST(NodeFdCacheTest, FillsThenPushesOutTheNodeNotUsedRecently) {
  NodeFdCache cache(3);
  std::vector<NodeRef> nodes;
  for (uint64_t id = 1; id <= 4; ++id) nodes.push_back(NewNode(id));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(cache.Insert(nodes[i]), nullptr);
  EXPECT_EQ(cache.size(), 3u);
  nodes[0]->used_recently = true;  // what a table's Get does on a hit
  NodeRef evicted = cache.Insert(nodes[3]);
  ASSERT_NE(evicted, nullptr);
  EXPECT_EQ(evicted->id, 2u) << "node 1 was used, so it got a second chance";
  EXPECT_EQ(evicted->cache_slot, -1);
  EXPECT_FALSE(nodes[0]->used_recently) << "the hand cleared it on the way";
  EXPECT_EQ(cache.size(), 3u);
  // The pushed-out node is still a valid node for whoever holds it.
  EXPECT_GE(evicted->fd.get(), 0);
}

TEST(NodeFdCacheTest, EveryNodeUsedStillFindsAVictim) {
  NodeFdCache cache(2);
  NodeRef a = NewNode(1), b = NewNode(2), c = NewNode(3);
  (void)cache.Insert(a);
  (void)cache.Insert(b);
  a->used_recently = true;
  b->used_recently = true;
  NodeRef evicted = cache.Insert(c);
  ASSERT_NE(evicted, nullptr);
  EXPECT_TRUE(evicted == a || evicted == b);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(NodeFdCacheTest, EraseFreesTheSlot) {
  NodeFdCache cache(2);
  NodeRef a = NewNode(1), b = NewNode(2), c = NewNode(3);
  (void)cache.Insert(a);
  (void)cache.Insert(b);
  EXPECT_EQ(cache.Erase(*a), a);
  EXPECT_EQ(cache.Erase(*a), nullptr) << "not cached any more";
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.Insert(c), nullptr) << "the erased slot is reused, nothing pushed out";
  EXPECT_EQ(cache.Erase(*b), b);
  EXPECT_EQ(cache.Erase(*c), c);
  EXPECT_EQ(cache.size(), 0u);
}

TEST(NodeFdCacheTest, CapacityZeroKeepsNothing) {
  NodeFdCache cache(0);
  NodeRef a = NewNode(1);
  EXPECT_EQ(cache.Insert(a), nullptr);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(a.use_count(), 1);
  EXPECT_EQ(cache.Erase(*a), nullptr);
}

TEST(NodeFdCacheTest, DefaultCapacityIsAQuarterOfTheSoftFdLimit) {
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = 1000;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  EXPECT_EQ(DefaultNodeFdCacheCapacity(), 250u);
  low.rlim_cur = 20;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  EXPECT_EQ(DefaultNodeFdCacheCapacity(), 16u);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  EXPECT_LE(DefaultNodeFdCacheCapacity(), 16384u);
}

}  // namespace
}  // namespace ringfs::server
