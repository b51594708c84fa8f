// The ledger counts what the kernel counts: lookups from entry replies (READDIRPLUS entries but
// "." and ".."), FORGETs, open handles until RELEASE; snapshots carry only reclaimable nodes.
#include "frontend/node_ledger.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace ringfs::frontend {
namespace {

fuse_in_header Header(uint32_t opcode, uint64_t nodeid = 1) {
  fuse_in_header in{};
  in.opcode = opcode;
  in.nodeid = nodeid;
  return in;
}

void Entry(NodeLedger& ledger, uint32_t opcode, uint64_t nodeid) {
  fuse_entry_out entry{};
  entry.nodeid = nodeid;
  ledger.OnReply(Header(opcode), nullptr, 0, reinterpret_cast<const char*>(&entry),
                 sizeof(entry));
}

void Handle(NodeLedger& ledger, uint64_t nodeid) {
  wire::NodeHandleRecord record;
  record.nodeid = nodeid;
  record.handle_bytes = 8;
  ledger.SetHandles(&record, 1);
}

std::string Forget(uint64_t nodeid, uint64_t nlookup) {
  fuse_in_header in = Header(FUSE_FORGET, nodeid);
  fuse_forget_in forget{nlookup};
  in.len = sizeof(in) + sizeof(forget);
  std::string frame(reinterpret_cast<const char*>(&in), sizeof(in));
  frame.append(reinterpret_cast<const char*>(&forget), sizeof(forget));
  return frame;
}

TEST(NodeLedgerTest, CountsLookupsAndForgetsLikeTheKernel) {
  NodeLedger ledger;
  Handle(ledger, 5);
  Entry(ledger, FUSE_LOOKUP, 5);
  Entry(ledger, FUSE_MKDIR, 5);
  Entry(ledger, FUSE_LOOKUP, 0);  // a negative entry holds nothing
  Entry(ledger, FUSE_LOOKUP, FUSE_ROOT_ID);
  std::string forget = Forget(5, 1);
  ledger.OnForget(forget.data(), forget.size());
  NodeLedger::Snapshot snapshot = ledger.Take();
  ASSERT_EQ(snapshot.nodes.size(), 1u);
  EXPECT_EQ(snapshot.nodes[0].handle.nodeid, 5u);
  EXPECT_EQ(snapshot.nodes[0].nlookup, 1u);
  ledger.OnForget(forget.data(), forget.size());
  EXPECT_EQ(ledger.nodes(), 0u);
}

TEST(NodeLedgerTest, BatchForgetAndEpochs) {
  NodeLedger ledger;
  for (uint64_t id : {7, 8}) {
    Handle(ledger, id);
    Entry(ledger, FUSE_LOOKUP, id);
    Entry(ledger, FUSE_LOOKUP, id);
  }
  fuse_in_header in = Header(FUSE_BATCH_FORGET, 0);
  fuse_batch_forget_in batch{2, 0};
  fuse_forget_one ones[2] = {{7, 2}, {8, 1}};
  in.len = sizeof(in) + sizeof(batch) + sizeof(ones);
  std::string frame(reinterpret_cast<const char*>(&in), sizeof(in));
  frame.append(reinterpret_cast<const char*>(&batch), sizeof(batch));
  frame.append(reinterpret_cast<const char*>(ones), sizeof(ones));
  uint64_t before = ledger.OnForget(frame.data(), frame.size());
  NodeLedger::Snapshot snapshot = ledger.Take();
  EXPECT_GT(snapshot.epoch, before) << "a FORGET counted before the snapshot is older than it";
  ASSERT_EQ(snapshot.nodes.size(), 1u);
  EXPECT_EQ(snapshot.nodes[0].handle.nodeid, 8u);
  EXPECT_EQ(snapshot.nodes[0].nlookup, 1u);
  std::string later = Forget(8, 1);
  EXPECT_EQ(ledger.OnForget(later.data(), later.size()), snapshot.epoch);
}

TEST(NodeLedgerTest, NodesWithoutHandleAreCountedNotSent) {
  NodeLedger ledger;
  Entry(ledger, FUSE_LOOKUP, 9);
  Handle(ledger, 10);  // its reply never reached the kernel: dropped at the snapshot
  NodeLedger::Snapshot snapshot = ledger.Take();
  EXPECT_TRUE(snapshot.nodes.empty());
  EXPECT_EQ(snapshot.nodes_without_handle, 1u);
  EXPECT_EQ(ledger.nodes(), 1u);
}

// The kernel forgets a node while a LOOKUP of it is on its way back: the server still had it,
// so that reply brings no handle; the node must keep the handle it had (else: ESTALE after the
// next restart, seen in it_reclaim's kill cycles when every name was looked up again at once).
TEST(NodeLedgerTest, ALookupThatCrossedTheForgetKeepsTheHandle) {
  NodeLedger ledger;
  Handle(ledger, 11);
  Entry(ledger, FUSE_LOOKUP, 11);
  std::string forget = Forget(11, 1);
  ledger.OnForget(forget.data(), forget.size());
  EXPECT_EQ(ledger.nodes(), 0u);
  Entry(ledger, FUSE_LOOKUP, 11);  // no new handle with it
  NodeLedger::Snapshot snapshot = ledger.Take();
  ASSERT_EQ(snapshot.nodes.size(), 1u);
  EXPECT_EQ(snapshot.nodes[0].handle.nodeid, 11u);
  EXPECT_EQ(snapshot.nodes[0].nlookup, 1u);
  EXPECT_EQ(snapshot.nodes_without_handle, 0u);
}

TEST(NodeLedgerTest, ReaddirplusEntriesButDotsCount) {
  NodeLedger ledger;
  std::string body;
  auto add = [&body](uint64_t nodeid, const std::string& name) {
    fuse_direntplus plus{};
    plus.entry_out.nodeid = nodeid;
    plus.dirent.namelen = static_cast<uint32_t>(name.size());
    std::string record(FUSE_DIRENTPLUS_SIZE(&plus), '\0');
    std::memcpy(record.data(), &plus, FUSE_NAME_OFFSET_DIRENTPLUS);
    std::memcpy(record.data() + FUSE_NAME_OFFSET_DIRENTPLUS, name.data(), name.size());
    body += record;
  };
  add(3, ".");
  add(4, "..");
  add(11, "a");
  add(12, "bb");
  add(0, "c");
  ledger.OnReply(Header(FUSE_READDIRPLUS), nullptr, 0, body.data(), body.size());
  EXPECT_EQ(ledger.nodes(), 2u);
}

TEST(NodeLedgerTest, OpenFilesLiveUntilRelease) {
  NodeLedger ledger;
  fuse_open_in open_in{};
  open_in.flags = 02;
  fuse_open_out open_out{};
  open_out.fh = 40;
  ledger.OnReply(Header(FUSE_OPENDIR, 6), &open_in, sizeof(open_in),
                 reinterpret_cast<const char*>(&open_out), sizeof(open_out));
  fuse_create_in create_in{};
  create_in.flags = 0101;
  struct {
    fuse_entry_out entry;
    fuse_open_out open;
  } created{};
  created.entry.nodeid = 13;
  created.open.fh = 41;
  ledger.OnReply(Header(FUSE_CREATE, 6), &create_in, sizeof(create_in),
                 reinterpret_cast<const char*>(&created), sizeof(created));
  NodeLedger::Snapshot snapshot = ledger.Take();
  ASSERT_EQ(snapshot.files.size(), 2u);
  for (const wire::ReopenRecord& file : snapshot.files) {
    if (file.fh == 40) {
      EXPECT_EQ(file.nodeid, 6u);
      EXPECT_EQ(file.directory, 1u);
    } else {
      EXPECT_EQ(file.nodeid, 13u);
      EXPECT_EQ(file.flags, 0101u);
      EXPECT_EQ(file.directory, 0u);
    }
  }
  fuse_release_in release{};
  release.fh = 41;
  ledger.OnRequest(Header(FUSE_RELEASE, 13), &release, sizeof(release));
  EXPECT_EQ(ledger.open_files(), 1u);
}

}  // namespace
}  // namespace ringfs::frontend
