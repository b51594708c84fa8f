#include "frontend/ring_memory.h"

#include <sys/mman.h>

#include <cstring>
#include <vector>

#include "frontend/queue/topology.h"
#include "frontend/ring_entry.h"
#include "gtest/gtest.h"

namespace ringfs::frontend {
namespace {

constexpr size_t kPayload = 1 << 20;  // max_write of a mount
constexpr int64_t kSecond = 1'000'000'000;

TEST(PlanPayloadTrimTest, SmallRequestsNeverTrimOrGrow) {
  PayloadUse use;
  EXPECT_FALSE(PlanPayloadTrim(&use, 4096, 10 * kSecond));
  EXPECT_FALSE(PlanPayloadTrim(&use, kRingResidentHead, 20 * kSecond));
  EXPECT_EQ(use.touched, kRingResidentHead);
}

TEST(PlanPayloadTrimTest, ALargePayloadIsKeptWhileLargeOnesKeepComing) {
  PayloadUse use;
  EXPECT_FALSE(PlanPayloadTrim(&use, 300000, 10 * kSecond));
  EXPECT_EQ(use.touched, PageRoundUp(300000));
  EXPECT_FALSE(PlanPayloadTrim(&use, kPayload, 11 * kSecond));
  EXPECT_EQ(use.touched, kPayload);
  // A small one soon after: a sequential job between two large requests keeps its pages.
  EXPECT_FALSE(PlanPayloadTrim(&use, 100, 11 * kSecond + kRingTrimAfterNs - 1));
  EXPECT_EQ(use.touched, kPayload);
}

TEST(PlanPayloadTrimTest, ASmallRequestAfterTheQuietPeriodReturnsTheTail) {
  PayloadUse use;
  EXPECT_FALSE(PlanPayloadTrim(&use, kPayload, 10 * kSecond));
  std::optional<PayloadRange> trim = PlanPayloadTrim(&use, 200, 10 * kSecond + kRingTrimAfterNs);
  ASSERT_TRUE(trim);
  EXPECT_EQ(trim->offset, kRingResidentHead);
  EXPECT_EQ(trim->length, kPayload - kRingResidentHead);
  EXPECT_EQ(use.touched, kRingResidentHead);
  EXPECT_FALSE(PlanPayloadTrim(&use, 200, 20 * kSecond)) << "nothing left to return";
}

// The accounting the metrics report is what mincore(2) sees, through a whole large request and
// the trim after it.
TEST(RingMemoryTest, AccountingMatchesTheResidentPages) {
  EntryRegistry registry(4, kPayload);
  absl::StatusOr<RingEntry*> created = registry.Create(0);
  ASSERT_TRUE(created.ok()) << created.status();
  RingEntry* entry = *created;
  const size_t mapped = kRingHeaderBytes + kPayload;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(entry->payload) % 4096, 0u) << "page-aligned payload";
  EXPECT_EQ(MeasureResidentBytes(entry->header, mapped), 0u) << "registered, never served";
  EXPECT_EQ(entry->resident_bytes.load(), 0u);

  // Its first request, a small one: the kernel's copy faults in a header page and a payload page.
  std::memset(entry->header, 'h', sizeof(fuse::UringReqHeader));
  std::memset(entry->payload, 'r', 100);
  MarkServed(entry, kPayload);
  EXPECT_EQ(MeasureResidentBytes(entry->header, mapped), kRingHeaderBytes + kRingResidentHead);
  EXPECT_EQ(entry->resident_bytes.load(), kRingHeaderBytes + kRingResidentHead);
  EXPECT_EQ(entry->payload[99], 'r') << "the request the kernel copied in is kept";
  EXPECT_EQ(reinterpret_cast<const char*>(entry->header)[0], 'h');

  // A 1 MiB WRITE lands in the payload (the kernel's copy faults the pages in, as this does).
  std::memset(entry->payload, 'w', kPayload);
  EXPECT_FALSE(PlanPayloadTrim(&entry->payload_use, kPayload, 5 * kSecond));
  EXPECT_EQ(MeasureResidentBytes(entry->header, mapped), EntryResidentBytes(entry->payload_use));

  // Then small requests only: the tail goes back, the head keeps its contents.
  std::optional<PayloadRange> trim =
      PlanPayloadTrim(&entry->payload_use, 64, 5 * kSecond + kRingTrimAfterNs);
  ASSERT_TRUE(trim);
  ASSERT_EQ(madvise(entry->payload + trim->offset, trim->length, MADV_DONTNEED), 0);
  EXPECT_EQ(MeasureResidentBytes(entry->header, mapped), EntryResidentBytes(entry->payload_use));
  EXPECT_EQ(EntryResidentBytes(entry->payload_use), kRingHeaderBytes + kRingResidentHead);
  EXPECT_EQ(entry->payload[kRingResidentHead - 1], 'w');
}

// Issue 14: an idle mount's ring memory does not grow with queue_depth x max_write per possible
// CPU. Every queue of the topology registers `depth` entries, created as the engine creates them,
// and measured: their buffers are not resident until they serve, so what an idle mount pays per
// entry is its bookkeeping.
void CheckIdleRingMemory(const queue::Topology& topology, uint32_t depth) {
  EntryRegistry registry(topology.size() * depth, kPayload);
  for (int cpu : topology.cpus()) {
    for (uint32_t i = 0; i < depth; ++i) {
      absl::StatusOr<RingEntry*> entry = registry.Create(static_cast<uint16_t>(cpu));
      ASSERT_TRUE(entry.ok()) << entry.status();
    }
  }
  uint64_t accounted = 0, measured = 0;
  registry.ForEach([&](const RingEntry& entry) {
    accounted += entry.resident_bytes.load();
    measured += MeasureResidentBytes(entry.header, kRingHeaderBytes + kPayload);
  });
  EXPECT_EQ(registry.size(), topology.size() * depth);
  EXPECT_EQ(accounted, 0u);
  EXPECT_EQ(measured, 0u);
  const uint64_t idle = uint64_t{topology.size()} * depth * EntryRegistry::kBookkeepingBytes;
  // The fixed depth of earlier versions: depth x (max_write + 512) per possible CPU, populated.
  const uint64_t before = uint64_t{topology.size()} * depth * (kPayload + 512);
  EXPECT_LT(idle * 1000, before);
  // The budget for a whole mount is 32 MB + 2 MB per active CPU; the entries of all
  // possible CPUs' queues must take a small part of the 32 MB, whatever their number.
  EXPECT_LE(idle, 6u << 20);
}

TEST(RingMemoryTest, IdleEntriesOf128PossibleCpus) {
  std::vector<std::vector<int>> nodes(2);
  for (int cpu = 0; cpu < 128; ++cpu) nodes[cpu / 64].push_back(cpu);
  CheckIdleRingMemory(queue::Topology::ForTest(nodes), 16);
}

TEST(RingMemoryTest, IdleEntriesOf256PossibleCpus) {
  std::vector<std::vector<int>> nodes(4);
  for (int cpu = 0; cpu < 256; ++cpu) nodes[cpu / 64].push_back(cpu);
  CheckIdleRingMemory(queue::Topology::ForTest(nodes), 64);
}

}  // namespace
}  // namespace ringfs::frontend
