// IdSpace: a permutation (ids never repeat within a space), reserved ids skipped, taken ids
// skipped, Passed() for ids from outside, and unrelated sequences for different keys (what keeps
// a restarted server from handing out ids an older instance gave).
#include "server/id_space.h"

#include <gtest/gtest.h>

#include "absl/container/flat_hash_set.h"

namespace ringfs::server {
namespace {

constexpr IdSpace::Key kKeyA = {1, 2, 3, 4, 5, 6};
constexpr IdSpace::Key kKeyB = {7, 8, 9, 10, 11, 12};

auto NothingTaken() {
  return [](uint64_t) { return false; };
}

TEST(IdSpaceTest, UnpermuteInvertsPermute) {
  IdSpace space(IdSpace::RandomKey(), 0);
  for (uint64_t n : {0ull, 1ull, 2ull, 0xffffffffull, 0x100000000ull, ~0ull, 0x0123456789abcdefull}) {
    EXPECT_EQ(space.Unpermute(space.Permute(n)), n) << n;
    EXPECT_EQ(space.Permute(space.Unpermute(n)), n) << n;
  }
}

TEST(IdSpaceTest, IdsAreDistinctAndNeverReserved) {
  IdSpace space(kKeyA, 2);
  absl::flat_hash_set<uint64_t> seen;
  for (int i = 0; i < 200000; ++i) {
    const uint64_t id = space.Next(NothingTaken());
    ASSERT_GE(id, 2u);
    ASSERT_TRUE(seen.insert(id).second) << "id " << id << " handed out twice";
  }
}

TEST(IdSpaceTest, SameKeySameSequence) {
  IdSpace a(kKeyA, 1), b(kKeyA, 1);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.Next(NothingTaken()), b.Next(NothingTaken()));
}

// The regression behind issue 10: two instances must not hand out the same ids. Before, both
// counted 2, 3, 4, ...
TEST(IdSpaceTest, DifferentKeysGiveDisjointSequences) {
  for (const auto& [key_a, key_b] :
       {std::pair{kKeyA, kKeyB}, std::pair{IdSpace::RandomKey(), IdSpace::RandomKey()}}) {
    IdSpace a(key_a, 2), b(key_b, 2);
    absl::flat_hash_set<uint64_t> from_a;
    for (int i = 0; i < 100000; ++i) from_a.insert(a.Next(NothingTaken()));
    for (int i = 0; i < 100000; ++i) ASSERT_FALSE(from_a.contains(b.Next(NothingTaken())));
  }
}

TEST(IdSpaceTest, ConsecutiveIdsLookUnrelated) {
  IdSpace space(IdSpace::RandomKey(), 2);
  const uint64_t first = space.Next(NothingTaken());
  const uint64_t second = space.Next(NothingTaken());
  // Not a small step from each other (probability of failure ~2^-40).
  EXPECT_GT(first > second ? first - second : second - first, 1u << 24);
}

TEST(IdSpaceTest, TakenIdsAreSkipped) {
  IdSpace probe(kKeyA, 2);
  const uint64_t first = probe.Next(NothingTaken());
  const uint64_t second = probe.Next(NothingTaken());

  // An entry adopted under `first` before the space got there: the space goes past it.
  IdSpace space(kKeyA, 2);
  EXPECT_FALSE(space.Passed(first));
  EXPECT_EQ(space.Next([&](uint64_t id) { return id == first; }), second);
  EXPECT_TRUE(space.Passed(first));
  EXPECT_TRUE(space.Passed(second));
}

TEST(IdSpaceTest, PassedTellsOwnIdsFromForeignOnes) {
  IdSpace own(kKeyA, 2), foreign(kKeyB, 2);
  uint64_t mine = 0;
  for (int i = 0; i < 1000; ++i) mine = own.Next(NothingTaken());
  EXPECT_TRUE(own.Passed(mine));
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(own.Passed(foreign.Next(NothingTaken())));
}

TEST(IdSpaceTest, InstanceIdsAreNonZeroAndDiffer) {
  auto a = DrawInstanceId();
  auto b = DrawInstanceId();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, 0u);
  EXPECT_NE(*a, *b);
}

}  // namespace
}  // namespace ringfs::server
