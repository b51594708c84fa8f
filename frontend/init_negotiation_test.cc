#include "frontend/init_negotiation.h"

#include <gtest/gtest.h>

namespace ringfs::frontend {
namespace {

fuse_init_in KernelInit(bool offers_ring) {
  fuse_init_in in{};
  in.major = 7;
  in.minor = 45;
  in.max_readahead = 128 * 1024;
  in.flags = FUSE_ASYNC_READ | FUSE_BIG_WRITES | FUSE_DO_READDIRPLUS | FUSE_READDIRPLUS_AUTO |
             FUSE_PARALLEL_DIROPS | FUSE_MAX_PAGES | FUSE_WRITEBACK_CACHE | FUSE_INIT_EXT |
             FUSE_POSIX_LOCKS;
  in.flags2 = offers_ring ? static_cast<uint32_t>(fuse::kInitOverIoUring >> 32) : 0;
  return in;
}

TEST(InitNegotiationTest, UsesTheRingWhenOffered) {
  auto decision = NegotiateInit(KernelInit(true), {.transport = Transport::kAuto});
  ASSERT_TRUE(decision.ok()) << decision.status();
  EXPECT_TRUE(decision->use_ring);
  EXPECT_EQ(decision->reply.flags2 & (fuse::kInitOverIoUring >> 32),
            fuse::kInitOverIoUring >> 32);
  EXPECT_EQ(decision->reply.minor, 45u);
  EXPECT_EQ(decision->reply.max_pages, 256u);
  EXPECT_EQ(decision->reply.max_write, 1024u * 1024);
  EXPECT_TRUE(decision->reply.flags & FUSE_MAX_PAGES);
  EXPECT_TRUE(decision->reply.flags & FUSE_DO_READDIRPLUS);
  EXPECT_TRUE(decision->reply.flags & FUSE_PARALLEL_DIROPS);
  // Features not asked for stay off even when offered.
  EXPECT_FALSE(decision->reply.flags & FUSE_WRITEBACK_CACHE);
  EXPECT_FALSE(decision->reply.flags & FUSE_POSIX_LOCKS);
}

// Issue 14: with FUSE_URING_REDUCED_Q offered (only out-of-tree kernels so far) the mount
// registers the active set's queues only; without it, or with ring_queues=all, every queue.
TEST(InitNegotiationTest, ReducedQueuesWhenTheKernelOffersThem) {
  fuse_init_in in = KernelInit(true);
  EXPECT_FALSE(NegotiateInit(in, {.transport = Transport::kAuto})->reduced_queues)
      << "mainline 6.18 does not offer it";
  in.flags2 |= static_cast<uint32_t>(fuse::kInitUringReducedQ >> 32);
  auto reduced = NegotiateInit(in, {.transport = Transport::kAuto});
  ASSERT_TRUE(reduced.ok());
  EXPECT_TRUE(reduced->reduced_queues);
  EXPECT_TRUE(reduced->agreed_flags & fuse::kInitUringReducedQ);
  auto all = NegotiateInit(in, {.transport = Transport::kAuto, .reduced_queues = false});
  ASSERT_TRUE(all.ok());
  EXPECT_FALSE(all->reduced_queues);
  EXPECT_FALSE(all->agreed_flags & fuse::kInitUringReducedQ) << "the bit is not claimed";
  auto classic = NegotiateInit(in, {.transport = Transport::kClassic});
  ASSERT_TRUE(classic.ok());
  EXPECT_FALSE(classic->reduced_queues);
  EXPECT_FALSE(classic->agreed_flags & fuse::kInitUringReducedQ);
}

TEST(InitNegotiationTest, WritebackCacheIsAnOption) {
  auto decision =
      NegotiateInit(KernelInit(true), {.transport = Transport::kAuto, .writeback_cache = true});
  ASSERT_TRUE(decision.ok());
  EXPECT_TRUE(decision->reply.flags & FUSE_WRITEBACK_CACHE);
}

// A hard mount may wait for the server forever; with FUSE_ASYNC_DIO its O_DIRECT callers would
// wait uninterruptibly, even through kill -9. Without it they wait like any request: a signal
// sends an INTERRUPT, kill -9 ends them.
TEST(InitNegotiationTest, AsyncDirectIoExceptOnHardMounts) {
  fuse_init_in in = KernelInit(true);
  in.flags |= FUSE_ASYNC_DIO;
  auto soft = NegotiateInit(in, {.transport = Transport::kAuto});
  ASSERT_TRUE(soft.ok());
  EXPECT_TRUE(soft->reply.flags & FUSE_ASYNC_DIO);
  auto hard = NegotiateInit(in, {.transport = Transport::kAuto, .async_dio = false});
  ASSERT_TRUE(hard.ok());
  EXPECT_FALSE(hard->reply.flags & FUSE_ASYNC_DIO);
}

TEST(InitNegotiationTest, AutoFallsBackWithAReason) {
  auto decision = NegotiateInit(KernelInit(false),
                                {.transport = Transport::kAuto, .uring_module_enabled = false});
  ASSERT_TRUE(decision.ok());
  EXPECT_FALSE(decision->use_ring);
  EXPECT_NE(decision->ring_unavailable_reason.find("enable_uring"), std::string::npos);
  EXPECT_EQ(decision->reply.flags2 & (fuse::kInitOverIoUring >> 32), 0u);
}

TEST(InitNegotiationTest, UringRefusesWithoutTheRing) {
  auto decision = NegotiateInit(KernelInit(false), {.transport = Transport::kUring});
  EXPECT_EQ(decision.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(InitNegotiationTest, ClassicNeverAsksForTheRing) {
  auto decision = NegotiateInit(KernelInit(true), {.transport = Transport::kClassic});
  ASSERT_TRUE(decision.ok());
  EXPECT_FALSE(decision->use_ring);
  EXPECT_EQ(decision->reply.flags2 & (fuse::kInitOverIoUring >> 32), 0u);
}

TEST(InitNegotiationTest, OldOrForeignKernelsAreRefused) {
  fuse_init_in in = KernelInit(false);
  in.minor = 30;
  EXPECT_FALSE(NegotiateInit(in, {.transport = Transport::kAuto}).ok());
  in = KernelInit(false);
  in.major = 8;
  EXPECT_FALSE(NegotiateInit(in, {.transport = Transport::kAuto}).ok());
}

TEST(InitNegotiationTest, NewerKernelMinorIsCapped) {
  fuse_init_in in = KernelInit(true);
  in.minor = 99;
  auto decision = NegotiateInit(in, {.transport = Transport::kAuto});
  ASSERT_TRUE(decision.ok());
  EXPECT_EQ(decision->reply.minor, fuse::kKernelMinor);
}

}  // namespace
}  // namespace ringfs::frontend
