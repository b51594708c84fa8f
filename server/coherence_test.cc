#include "server/coherence.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "common/unique_fd.h"

namespace ringfs::server {
namespace {

using wire::Invalidation;
using wire::InvalidationKind;

Request Make(uint32_t opcode, uint64_t nodeid, RequestArgs args) {
  Request r;
  r.opcode = opcode;
  r.nodeid = nodeid;
  r.args = std::move(args);
  return r;
}

TEST(ChangesOfTest, WhatEachRequestChanges) {
  EXPECT_TRUE(ChangesOf(Make(FUSE_LOOKUP, 1, LookupArgs{"a"})).empty());
  EXPECT_TRUE(ChangesOf(Make(FUSE_READ, 5, ReadArgs{1, 0, 4096})).empty());
  EXPECT_TRUE(ChangesOf(Make(FUSE_GETXATTR, 5, GetxattrArgs{0, "user.a"})).empty());
  EXPECT_TRUE(ChangesOf(Make(FUSE_OPEN, 5, OpenArgs{O_RDWR, 0})).empty());

  std::vector<Invalidation> create =
      ChangesOf(Make(FUSE_CREATE, 3, CreateArgs{O_CREAT, 0644, 0, "new"}));
  // A name change pushes the name only, never an INVAL_INODE of the directory: that would
  // void a GETATTR of the directory in flight on the other mount, which then checked
  // permissions against a stale mode (transient EACCES).
  EXPECT_EQ(create, (std::vector<Invalidation>{{InvalidationKind::kEntry, 3, -1, 0, "new"}}));
  EXPECT_EQ(ChangesOf(Make(FUSE_MKDIR, 3, MkdirArgs{0755, "d"})),
            (std::vector<Invalidation>{{InvalidationKind::kEntry, 3, -1, 0, "d"}}));
  EXPECT_EQ(ChangesOf(Make(FUSE_UNLINK, 3, UnlinkArgs{"gone"})),
            (std::vector<Invalidation>{{InvalidationKind::kEntry, 3, -1, 0, "gone"}}));

  std::vector<Invalidation> rename =
      ChangesOf(Make(FUSE_RENAME2, 3, RenameArgs{4, 0, "from", "to"}));
  EXPECT_EQ(rename, (std::vector<Invalidation>{{InvalidationKind::kEntry, 3, -1, 0, "from"},
                                                {InvalidationKind::kEntry, 4, -1, 0, "to"}}));
  EXPECT_EQ(ChangesOf(Make(FUSE_RENAME2, 3, RenameArgs{3, 0, "from", "to"})).size(), 2u);

  // The linked file's attributes (link count, ctime) did change: that one stays an inode record.
  EXPECT_EQ(ChangesOf(Make(FUSE_LINK, 3, LinkArgs{9, "l"})),
            (std::vector<Invalidation>{{InvalidationKind::kEntry, 3, -1, 0, "l"},
                                       {InvalidationKind::kInode, 9, -1, 0, ""}}));

  const char data[10] = {};
  EXPECT_EQ(ChangesOf(Make(FUSE_WRITE, 5, WriteArgs{1, 4096, 0, 0, {data, 10}})),
            (std::vector<Invalidation>{{InvalidationKind::kInode, 5, 4096, 10, ""}}));
  fuse_setattr_in truncate{};
  truncate.valid = FATTR_SIZE;
  truncate.size = 100;
  EXPECT_EQ(ChangesOf(Make(FUSE_SETATTR, 5, SetattrArgs{truncate})),
            (std::vector<Invalidation>{{InvalidationKind::kInode, 5, 100, 0, ""}}));
  fuse_setattr_in chmod{};
  chmod.valid = FATTR_MODE;
  EXPECT_EQ(ChangesOf(Make(FUSE_SETATTR, 5, SetattrArgs{chmod})),
            (std::vector<Invalidation>{{InvalidationKind::kInode, 5, -1, 0, ""}}));
  EXPECT_EQ(ChangesOf(Make(FUSE_OPEN, 5, OpenArgs{O_WRONLY | O_TRUNC, 0})),
            (std::vector<Invalidation>{{InvalidationKind::kInode, 5, 0, 0, ""}}));
  EXPECT_EQ(ChangesOf(Make(FUSE_SETXATTR, 5, SetxattrArgs{0, "user.x", {}})).size(), 1u);
  EXPECT_EQ(ChangesOf(Make(FUSE_REMOVEXATTR, 5, RemovexattrArgs{"user.x"})).size(), 1u);
}

class CoherenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ringfs-coherence-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    root_ = UniqueFd(open(dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(root_.valid());
    registry_ = std::make_unique<ClientRegistry>(root_.get());
    ASSERT_EQ(mkdirat(root_.get(), "d", 0755), 0);
    UniqueFd f(openat(root_.get(), "f", O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
    ASSERT_TRUE(f.valid());
  }
  void TearDown() override {
    registry_.reset();
    std::string cmd = "rm -rf " + dir_;
    (void)std::system(cmd.c_str());
  }

  // Looks `name` up in `state`'s table as LOOKUP would; returns its id there.
  uint64_t Learn(ClientState& state, const char* name) {
    UniqueFd fd(openat(root_.get(), name, O_PATH | O_NOFOLLOW | O_CLOEXEC));
    struct stat st;
    EXPECT_EQ(fstat(fd.get(), &st), 0);
    auto ids = state.nodes->AddLookup(std::move(fd), st);
    EXPECT_TRUE(ids.ok());
    return ids.ok() ? ids->nodeid : 0;
  }

  // A listening state: an outbox sink that counts wakes.
  std::shared_ptr<ClientState> Listener(const std::string& id, int* wakes) {
    auto state = registry_->GetOrCreate(id);
    EXPECT_TRUE(state.ok());
    (*state)->invalidations.AddSink(1, [wakes](uint64_t) { ++*wakes; });
    return *state;
  }

  std::string dir_;
  UniqueFd root_;
  std::unique_ptr<ClientRegistry> registry_;
};

TEST_F(CoherenceTest, PushesToTheOtherClientsThatHoldTheNodeInTheirIds) {
  int wakes_a = 0, wakes_b = 0, wakes_c = 0;
  auto a = Listener("a", &wakes_a);
  auto b = Listener("b", &wakes_b);
  auto c = Listener("c", &wakes_c);
  auto deaf = *registry_->GetOrCreate("deaf");  // never asked for invalidations
  Coherence coherence(registry_.get());

  (void)Learn(*b, "d");  // b's ids differ from a's: b learns d first
  const uint64_t a_file = Learn(*a, "f");
  const uint64_t b_file = Learn(*b, "f");
  (void)Learn(*deaf, "f");
  ASSERT_NE(a_file, b_file);

  const char data[4] = {};
  auto changes = ChangesOf(Make(FUSE_WRITE, a_file, WriteArgs{1, 0, 0, 0, {data, 4}}));
  EXPECT_EQ(coherence.Publish(*a, changes), 1u);
  std::vector<Invalidation> got = b->invalidations.Take(1, true);
  EXPECT_EQ(got, (std::vector<Invalidation>{{InvalidationKind::kInode, b_file, 0, 4, ""}}));
  EXPECT_EQ(wakes_b, 1);
  EXPECT_EQ(a->invalidations.pending(), 0u);  // never told about its own change
  EXPECT_EQ(c->invalidations.pending(), 0u);  // holds nothing of it
  EXPECT_EQ(wakes_c, 0);

  // A create in the root: every listener holds the root (node 1 everywhere).
  auto create = ChangesOf(Make(FUSE_CREATE, 1, CreateArgs{O_CREAT, 0644, 0, "n"}));
  EXPECT_EQ(coherence.Publish(*b, create), 2u);
  EXPECT_EQ(a->invalidations.Take(1, true).size(), 1u);
  EXPECT_EQ(c->invalidations.Take(1, true).size(), 1u);
  EXPECT_EQ(b->invalidations.pending(), 0u);

  // An id the origin does not know names nothing.
  EXPECT_EQ(coherence.Publish(*a, ChangesOf(Make(FUSE_SETATTR, 999, SetattrArgs{}))), 0u);

  // A request's own changes and a file it changed without naming it (an unlink's victim) go
  // to the others in one batch each.
  const std::optional<InodeKey> f_key = a->nodes->KeyOf(a_file);
  ASSERT_TRUE(f_key.has_value());
  const std::vector<Coherence::KeyedChange> files{
      {*f_key, {InvalidationKind::kInode, 0, 0, -1, ""}}};
  EXPECT_EQ(coherence.Publish(*a, create, files), 3u);  // the root to b and c, f to b
  got = b->invalidations.Take(1, true);
  EXPECT_EQ(got.size(), 2u);
  EXPECT_EQ(got.back(), (Invalidation{InvalidationKind::kInode, b_file, 0, -1, ""}));
  EXPECT_EQ(c->invalidations.Take(1, true).size(), 1u);
  EXPECT_EQ(a->invalidations.pending(), 0u);

  // The export watch lost events: every listener owes a reset; the deaf client gets nothing.
  EXPECT_EQ(coherence.PublishReset(), 3u);
  EXPECT_EQ(deaf->invalidations.pending(), 0u);
  EXPECT_EQ(wakes_c, 3);  // the create, the create with a file, the reset
}

TEST(InvalidationOutboxTest, OneWakeUntilTakenThenPassedOnWhenTheSessionCannotSend) {
  InvalidationOutbox outbox(/*max_pending=*/3);
  std::vector<uint64_t> woken;
  auto wake = [&](uint64_t session) { woken.push_back(session); };
  outbox.Push({{InvalidationKind::kInode, 2, -1, 0, ""}});  // nobody listens yet: dropped
  EXPECT_EQ(outbox.pending(), 0u);
  outbox.AddSink(10, wake);
  outbox.AddSink(11, wake);
  EXPECT_TRUE(woken.empty());
  outbox.Push({{InvalidationKind::kInode, 2, -1, 0, ""}});
  outbox.Push({{InvalidationKind::kInode, 3, -1, 0, ""}});
  EXPECT_EQ(woken, (std::vector<uint64_t>{10}));  // one wake for both
  // Session 10 is closing: the wake goes to 11, which takes both.
  EXPECT_TRUE(outbox.Take(10, false).empty());
  EXPECT_EQ(woken, (std::vector<uint64_t>{10, 11}));
  EXPECT_EQ(outbox.Take(11, true).size(), 2u);
  // The woken session ends before taking: the wake moves on.
  outbox.Push({{InvalidationKind::kInode, 4, -1, 0, ""}});
  EXPECT_EQ(woken.back(), 11u);
  outbox.RemoveSink(11);
  EXPECT_TRUE(woken.size() == 3);  // session 10 was removed by Take(10, false): nobody left
  // No session: records wait, bounded; the oldest are dropped.
  for (uint64_t i = 0; i < 5; ++i) outbox.Push({{InvalidationKind::kInode, 5 + i, -1, 0, ""}});
  EXPECT_EQ(outbox.pending(), 3u);
  EXPECT_EQ(outbox.dropped(), 3u);
  outbox.AddSink(12, wake);  // a new session gets what waited
  EXPECT_EQ(woken.back(), 12u);
  std::vector<Invalidation> got = outbox.Take(12, true);
  ASSERT_EQ(got.size(), 3u) << "a session that does not understand resets gets the newest";
  EXPECT_EQ(got.front().nodeid, 7u);
  // The export watch overflowed: such a session is never sent a record it cannot read.
  outbox.PushReset();
  outbox.Push({{InvalidationKind::kInode, 30, -1, 0, ""}});
  got = outbox.Take(12, true);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got.front().kind, InvalidationKind::kInode);
  EXPECT_EQ(outbox.resets(), 0u);
}

TEST(InvalidationOutboxTest, WhatOverflowsOrIsMissedBecomesOneReset) {
  const Invalidation reset{InvalidationKind::kReset, 0, -1, 0, ""};
  InvalidationOutbox outbox(/*max_pending=*/3);
  std::vector<uint64_t> woken;
  auto wake = [&](uint64_t session) { woken.push_back(session); };
  outbox.PushReset();  // nobody listens yet: nothing owed
  outbox.AddSink(10, wake, /*resets=*/true);
  EXPECT_TRUE(woken.empty());
  outbox.RemoveSink(10);
  // No session: records wait, and past the bound a reset is owed instead of all of them.
  for (uint64_t i = 0; i < 5; ++i) outbox.Push({{InvalidationKind::kInode, 5 + i, -1, 0, ""}});
  EXPECT_EQ(outbox.dropped(), 2u);
  outbox.AddSink(11, wake, /*resets=*/true);
  EXPECT_EQ(woken, (std::vector<uint64_t>{11}));
  EXPECT_EQ(outbox.Take(11, true), (std::vector<Invalidation>{reset}));
  EXPECT_EQ(outbox.resets(), 1u);
  // Caught up: records go as records again.
  outbox.Push({{InvalidationKind::kInode, 20, -1, 0, ""}});
  EXPECT_EQ(outbox.Take(11, true).size(), 1u);
  // A reset pushed directly wakes a session by itself, and covers what was queued before it.
  outbox.Push({{InvalidationKind::kInode, 21, -1, 0, ""}});
  outbox.PushReset();
  EXPECT_EQ(woken.size(), 3u) << "one wake for the record and the reset";
  EXPECT_EQ(outbox.Take(11, true), (std::vector<Invalidation>{reset}));
  outbox.PushReset();
  EXPECT_EQ(woken.size(), 4u);
  EXPECT_EQ(outbox.Take(11, true), (std::vector<Invalidation>{reset}));
  EXPECT_EQ(outbox.resets(), 3u);
}

}  // namespace
}  // namespace ringfs::server
