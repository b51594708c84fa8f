// Table tests of DecodeRequest(): every malformed shape gives the expected errno, or "close the
// connection" when the frame itself cannot be trusted.
#include "server/request.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <string>

#include "common/status.h"
#include "common/wire.h"
#include "server/test_client.h"

namespace ringfs::server {
namespace {

using testing::Bytes;
using testing::CName;
using testing::Frame;

constexpr int kClose = -1;

struct Case {
  const char* what;
  std::string frame;
  int expected;  // errno, or kClose
};

std::string ReadIn(uint32_t size) {
  fuse_read_in in{};
  in.fh = 1;
  in.size = size;
  return Bytes(in);
}

std::string WriteIn(uint32_t size) {
  fuse_write_in in{};
  in.fh = 1;
  in.size = size;
  return Bytes(in);
}

std::string ReadAt(uint64_t offset) {
  fuse_read_in in{};
  in.fh = 1;
  in.offset = offset;
  in.size = 4096;
  return Bytes(in);
}

std::string WriteAt(uint64_t offset) {
  fuse_write_in in{};
  in.fh = 1;
  in.offset = offset;
  in.size = 4;
  return Bytes(in) + "data";
}

std::string FallocateAt(uint64_t offset, uint64_t length) {
  fuse_fallocate_in in{};
  in.fh = 1;
  in.offset = offset;
  in.length = length;
  return Bytes(in);
}

std::string CopyAt(uint64_t off_in, uint64_t off_out) {
  fuse_copy_file_range_in in{};
  in.fh_in = 1;
  in.fh_out = 2;
  in.off_in = off_in;
  in.off_out = off_out;
  in.len = 4096;
  return Bytes(in);
}

std::vector<Case> MalformedCases() {
  std::vector<Case> cases;
  cases.push_back({"short header", std::string(20, '\0'), kClose});
  {
    std::string f = Frame(FUSE_LOOKUP, 1, 1, CName("a"));
    fuse_in_header h;
    std::memcpy(&h, f.data(), sizeof(h));
    h.len += 10;
    std::memcpy(f.data(), &h, sizeof(h));
    cases.push_back({"len larger than frame", f, kClose});
  }
  {
    std::string f = Frame(FUSE_LOOKUP, 1, 1, CName("a")) + "xx";  // frame longer than len
    cases.push_back({"len smaller than frame", f, kClose});
  }
  cases.push_back({"unique 0", Frame(FUSE_LOOKUP, 0, 1, CName("a")), kClose});
  cases.push_back({"unknown opcode", Frame(999, 1, 1, ""), ENOSYS});
  cases.push_back({"unknown opcode in table range", Frame(60, 1, 1, ""), ENOSYS});
  cases.push_back({"not forwarded (GETLK)", Frame(FUSE_GETLK, 1, 1, std::string(64, '\0')), ENOSYS});
  cases.push_back({"INIT never on the wire", Frame(FUSE_INIT, 1, 1, std::string(64, '\0')), ENOSYS});
  cases.push_back({"DESTROY never on the wire", Frame(FUSE_DESTROY, 1, 1, ""), ENOSYS});
  cases.push_back({"READ struct truncated", Frame(FUSE_READ, 1, 1, std::string(10, '\0')), EINVAL});
  cases.push_back({"GETATTR struct truncated", Frame(FUSE_GETATTR, 1, 1, "x"), EINVAL});
  cases.push_back({"name without NUL", Frame(FUSE_LOOKUP, 1, 1, "abc"), EINVAL});
  cases.push_back({"name with slash", Frame(FUSE_LOOKUP, 1, 1, CName("a/b")), EINVAL});
  cases.push_back({"name ..", Frame(FUSE_LOOKUP, 1, 1, CName("..")), EINVAL});
  cases.push_back({"name .", Frame(FUSE_LOOKUP, 1, 1, CName(".")), EINVAL});
  cases.push_back({"empty name", Frame(FUSE_LOOKUP, 1, 1, CName("")), EINVAL});
  cases.push_back({"300-byte name", Frame(FUSE_LOOKUP, 1, 1, CName(std::string(300, 'n'))),
                   ENAMETOOLONG});
  cases.push_back({"MKDIR name missing", Frame(FUSE_MKDIR, 1, 1, Bytes(fuse_mkdir_in{})), EINVAL});
  cases.push_back({"RENAME second name missing",
                   Frame(FUSE_RENAME, 1, 1, Bytes(fuse_rename_in{1}) + CName("a")), EINVAL});
  cases.push_back({"RENAME2 new name ..",
                   Frame(FUSE_RENAME2, 1, 1, Bytes(fuse_rename2_in{}) + CName("a") + CName("..")),
                   EINVAL});
  cases.push_back({"SYMLINK target without NUL",
                   Frame(FUSE_SYMLINK, 1, 1, CName("l") + "target"), EINVAL});
  cases.push_back({"WRITE payload shorter than size",
                   Frame(FUSE_WRITE, 1, 2, WriteIn(100) + std::string(50, 'x')), EINVAL});
  cases.push_back({"WRITE payload longer than size",
                   Frame(FUSE_WRITE, 1, 2, WriteIn(10) + std::string(50, 'x')), EINVAL});
  cases.push_back({"WRITE size above kMaxIoBytes",
                   Frame(FUSE_WRITE, 1, 2, WriteIn(wire::kMaxIoBytes + 1)), E2BIG});
  cases.push_back({"oversized READ", Frame(FUSE_READ, 1, 2, ReadIn(wire::kMaxIoBytes + 1)), E2BIG});
  cases.push_back({"oversized READDIR", Frame(FUSE_READDIR, 1, 2, ReadIn(64u << 20)), E2BIG});
  // Offsets above INT64_MAX are negative as off_t (io_uring reads at the fd position for -1).
  constexpr uint64_t kMinusOne = ~0ull;
  constexpr uint64_t kInt64Min = 1ull << 63;
  cases.push_back({"READ at -1", Frame(FUSE_READ, 1, 2, ReadAt(kMinusOne)), EINVAL});
  cases.push_back({"READ at INT64_MIN", Frame(FUSE_READ, 1, 2, ReadAt(kInt64Min)), EINVAL});
  cases.push_back({"WRITE at -1", Frame(FUSE_WRITE, 1, 2, WriteAt(kMinusOne)), EINVAL});
  cases.push_back({"FALLOCATE at -1", Frame(FUSE_FALLOCATE, 1, 2, FallocateAt(kMinusOne, 1)),
                   EINVAL});
  cases.push_back({"FALLOCATE length -1", Frame(FUSE_FALLOCATE, 1, 2, FallocateAt(0, kMinusOne)),
                   EINVAL});
  cases.push_back({"COPY_FILE_RANGE from -1",
                   Frame(FUSE_COPY_FILE_RANGE, 1, 2, CopyAt(kMinusOne, 0)), EINVAL});
  cases.push_back({"COPY_FILE_RANGE_64 to -1",
                   Frame(fuse::kOpCopyFileRange64, 1, 2, CopyAt(0, kInt64Min)), EINVAL});
  {
    fuse_batch_forget_in in{};
    in.count = 0xffffffffu;
    fuse_forget_one one{5, 1};
    cases.push_back({"BATCH_FORGET count overflow",
                     Frame(FUSE_BATCH_FORGET, 1, 0, Bytes(in) + Bytes(one)), EINVAL});
    in.count = 2;
    cases.push_back({"BATCH_FORGET count > entries",
                     Frame(FUSE_BATCH_FORGET, 1, 0, Bytes(in) + Bytes(one)), EINVAL});
  }
  {
    fuse_setxattr_in in{};
    in.size = 70000;
    cases.push_back({"SETXATTR value too large",
                     Frame(FUSE_SETXATTR, 1, 1, Bytes(in) + CName("user.x") + std::string(70000, 'v')),
                     E2BIG});
    in.size = 5;
    cases.push_back({"SETXATTR value size mismatch",
                     Frame(FUSE_SETXATTR, 1, 1, Bytes(in) + CName("user.x") + "abc"), EINVAL});
    cases.push_back({"SETXATTR empty name",
                     Frame(FUSE_SETXATTR, 1, 1, Bytes(in) + CName("") + "abcde"), EINVAL});
  }
  {
    fuse_getxattr_in in{};
    in.size = 1 << 20;
    cases.push_back({"GETXATTR size too large",
                     Frame(FUSE_GETXATTR, 1, 1, Bytes(in) + CName("user.x")), E2BIG});
    in.size = 0;
    cases.push_back({"GETXATTR name too long",
                     Frame(FUSE_GETXATTR, 1, 1, Bytes(in) + CName(std::string(300, 'x'))), ERANGE});
  }
  return cases;
}

TEST(DecodeTest, MalformedFrames) {
  for (const Case& c : MalformedCases()) {
    SCOPED_TRACE(c.what);
    absl::StatusOr<Request> request = DecodeRequest(c.frame);
    ASSERT_FALSE(request.ok());
    if (c.expected == kClose) {
      EXPECT_TRUE(ShouldCloseConnection(request.status())) << request.status();
    } else {
      EXPECT_FALSE(ShouldCloseConnection(request.status())) << request.status();
      EXPECT_EQ(ToErrno(request.status()), c.expected) << request.status();
    }
  }
}

// The reason the frames-rejected metric is labelled with.
TEST(DecodeTest, RejectReasons) {
  fuse_setxattr_in xattr{};
  xattr.size = 5;
  struct ReasonCase {
    const char* what;
    std::string frame;
    RejectReason reason;
  } cases[] = {
      {"short header", std::string(20, '\0'), RejectReason::kBadHeader},
      {"unique 0", Frame(FUSE_LOOKUP, 0, 1, CName("a")), RejectReason::kBadHeader},
      {"unknown opcode", Frame(999, 1, 1, ""), RejectReason::kUnknownOpcode},
      {"GETLK", Frame(FUSE_GETLK, 1, 1, std::string(64, '\0')), RejectReason::kUnsupportedOpcode},
      {"READ truncated", Frame(FUSE_READ, 1, 1, std::string(10, '\0')), RejectReason::kTruncated},
      {"name without NUL", Frame(FUSE_LOOKUP, 1, 1, "abc"), RejectReason::kBadName},
      {"name with slash", Frame(FUSE_LOOKUP, 1, 1, CName("a/b")), RejectReason::kBadName},
      {"300-byte name", Frame(FUSE_LOOKUP, 1, 1, CName(std::string(300, 'n'))),
       RejectReason::kBadName},
      {"RENAME second name missing",
       Frame(FUSE_RENAME, 1, 1, Bytes(fuse_rename_in{1}) + CName("a")), RejectReason::kBadName},
      {"empty symlink target", Frame(FUSE_SYMLINK, 1, 1, CName("l") + CName("")),
       RejectReason::kBadName},
      {"SETXATTR empty name", Frame(FUSE_SETXATTR, 1, 1, Bytes(xattr) + CName("") + "abcde"),
       RejectReason::kBadName},
      {"oversized READ", Frame(FUSE_READ, 1, 2, ReadIn(wire::kMaxIoBytes + 1)),
       RejectReason::kTooLarge},
      {"WRITE payload short", Frame(FUSE_WRITE, 1, 2, WriteIn(100) + std::string(50, 'x')),
       RejectReason::kBadSize},
      // Without SETXATTR_EXT the argument struct is the 8-byte compat one.
      {"SETXATTR size mismatch",
       Frame(FUSE_SETXATTR, 1, 1, Bytes(xattr).substr(0, 8) + CName("user.x") + "abc"),
       RejectReason::kBadSize},
      {"READ at -1", Frame(FUSE_READ, 1, 2, ReadAt(~0ull)), RejectReason::kBadOffset},
      {"WRITE at -1", Frame(FUSE_WRITE, 1, 2, WriteAt(~0ull)), RejectReason::kBadOffset},
  };
  for (const ReasonCase& c : cases) {
    SCOPED_TRACE(c.what);
    RejectReason reason = RejectReason::kCount;
    ASSERT_FALSE(DecodeRequest(c.frame, &reason).ok());
    EXPECT_EQ(RejectReasonName(reason), RejectReasonName(c.reason));
  }
  for (size_t r = 0; r < static_cast<size_t>(RejectReason::kCount); ++r) {
    EXPECT_NE(RejectReasonName(static_cast<RejectReason>(r)), "other") << r;
  }
}

TEST(DecodeTest, LookupNameAndHeader) {
  std::string frame = Frame(FUSE_LOOKUP, 77, 5, CName("hello"), 1000, 100);
  auto request = DecodeRequest(frame);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->opcode, FUSE_LOOKUP);
  EXPECT_EQ(request->unique, 77u);
  EXPECT_EQ(request->nodeid, 5u);
  EXPECT_EQ(request->uid, 1000u);
  EXPECT_EQ(request->gid, 100u);
  EXPECT_TRUE(request->expects_reply);
  EXPECT_EQ(request->reply_capacity, sizeof(fuse_entry_out));
  EXPECT_EQ(std::get<LookupArgs>(request->args).name, "hello");
}

TEST(DecodeTest, LongestNameAccepted) {
  std::string name(255, 'n');
  std::string frame = Frame(FUSE_LOOKUP, 1, 1, CName(name));  // the request views into it
  auto request = DecodeRequest(frame);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(std::get<LookupArgs>(request->args).name, name);
}

TEST(DecodeTest, RenameAndSymlinkNames) {
  fuse_rename2_in in{};
  in.newdir = 9;
  in.flags = 1;
  std::string rename_frame = Frame(FUSE_RENAME2, 1, 3, Bytes(in) + CName("old") + CName("new"));
  auto rename = DecodeRequest(rename_frame);
  ASSERT_TRUE(rename.ok()) << rename.status();
  const auto& args = std::get<RenameArgs>(rename->args);
  EXPECT_EQ(args.newdir, 9u);
  EXPECT_EQ(args.flags, 1u);
  EXPECT_EQ(args.oldname, "old");
  EXPECT_EQ(args.newname, "new");
  std::string symlink_frame = Frame(FUSE_SYMLINK, 1, 1, CName("l") + CName("../x/y"));
  auto symlink = DecodeRequest(symlink_frame);
  ASSERT_TRUE(symlink.ok()) << symlink.status();
  EXPECT_EQ(std::get<SymlinkArgs>(symlink->args).target, "../x/y");
}

TEST(DecodeTest, WriteAndReadSizes) {
  std::string data(1000, 'd');
  std::string write_frame = Frame(FUSE_WRITE, 1, 2, WriteIn(1000) + data);
  auto write = DecodeRequest(write_frame);
  ASSERT_TRUE(write.ok()) << write.status();
  const auto& w = std::get<WriteArgs>(write->args);
  EXPECT_EQ(w.data.size(), 1000u);
  EXPECT_EQ(std::string(w.data.data(), w.data.size()), data);
  EXPECT_EQ(write->reply_capacity, sizeof(fuse_write_out));
  // A synchronous write (RWF_DSYNC, O_SYNC) keeps its flags: a direct write is made durable by
  // the server, not by a following FSYNC (ops_file.cc).
  fuse_write_in sync_in{};
  sync_in.fh = 1;
  sync_in.size = 4;
  sync_in.flags = O_WRONLY | O_DSYNC;
  auto sync_write = DecodeRequest(Frame(FUSE_WRITE, 1, 2, Bytes(sync_in) + "data"));
  ASSERT_TRUE(sync_write.ok()) << sync_write.status();
  EXPECT_EQ(std::get<WriteArgs>(sync_write->args).flags, static_cast<uint32_t>(O_WRONLY | O_DSYNC));
  auto read = DecodeRequest(Frame(FUSE_READ, 1, 2, ReadIn(wire::kMaxIoBytes)));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->reply_capacity, wire::kMaxIoBytes);
}

// The largest offsets off_t can hold still decode; READDIR offsets are cookies, not file offsets.
TEST(DecodeTest, LargestOffsetsAccepted) {
  constexpr uint64_t kMax = 0x7fffffffffffffffull;
  for (const std::string& frame :
       {Frame(FUSE_READ, 1, 2, ReadAt(kMax)), Frame(FUSE_WRITE, 1, 2, WriteAt(kMax)),
        Frame(FUSE_FALLOCATE, 1, 2, FallocateAt(kMax, kMax)),
        Frame(FUSE_COPY_FILE_RANGE, 1, 2, CopyAt(kMax, kMax)),
        Frame(FUSE_READDIR, 1, 2, ReadAt(~0ull))}) {
    auto request = DecodeRequest(frame);
    EXPECT_TRUE(request.ok()) << request.status();
  }
}

TEST(DecodeTest, NoReplyOpcodes) {
  fuse_batch_forget_in in{};
  in.count = 2;
  fuse_forget_one a{5, 1}, b{6, 2};
  std::string frame = Frame(FUSE_BATCH_FORGET, 1, 0, Bytes(in) + Bytes(a) + Bytes(b));
  auto request = DecodeRequest(frame);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_FALSE(request->expects_reply);
  const auto& batch = std::get<BatchForgetArgs>(request->args);
  ASSERT_EQ(batch.count, 2u);
  EXPECT_EQ(batch.Entry(1).nodeid, 6u);
  EXPECT_EQ(batch.Entry(1).nlookup, 2u);
  EXPECT_TRUE(IsNoReplyOpcode(FUSE_FORGET));
  EXPECT_TRUE(IsNoReplyOpcode(FUSE_INTERRUPT));
  EXPECT_FALSE(IsNoReplyOpcode(FUSE_LOOKUP));
}

TEST(DecodeTest, XattrProbeCapacity) {
  fuse_getxattr_in in{};
  auto probe = DecodeRequest(Frame(FUSE_GETXATTR, 1, 1, Bytes(in) + CName("user.a")));
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->reply_capacity, sizeof(fuse_getxattr_out));
  in.size = 100;
  auto sized = DecodeRequest(Frame(FUSE_LISTXATTR, 1, 1, Bytes(in)));
  ASSERT_TRUE(sized.ok()) << sized.status();
  EXPECT_EQ(sized->reply_capacity, 100u);
}

}  // namespace
}  // namespace ringfs::server

namespace ringfs::server {
namespace {

std::string Batch(uint32_t count) { return testing::Bytes(wire::ReclaimBatch{count, 0}); }

TEST(RequestReclaimTest, BatchesDecodeWithOneResultPerRecord) {
  wire::ReclaimNodeRecord node{};
  node.nlookup = 3;
  node.handle.nodeid = 77;
  // A Request points into its frame: the frames live as long as the decoded requests.
  const std::string nodes_frame = testing::Frame(
      wire::kOpReclaimNodes, 1, 0, Batch(2) + testing::Bytes(node) + testing::Bytes(node));
  auto nodes = DecodeRequest(nodes_frame);
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  const auto& args = std::get<ReclaimNodesArgs>(nodes->args);
  ASSERT_EQ(args.count, 2u);
  EXPECT_EQ(args.Record(1).handle.nodeid, 77u);
  EXPECT_EQ(args.Record(1).nlookup, 3u);
  EXPECT_EQ(nodes->reply_capacity, 2 * sizeof(int32_t));

  wire::ReopenRecord reopen{.fh = 5, .nodeid = 77, .flags = 2, .directory = 0};
  const std::string handles_frame =
      testing::Frame(wire::kOpReopenHandles, 2, 0, Batch(1) + testing::Bytes(reopen));
  auto handles = DecodeRequest(handles_frame);
  ASSERT_TRUE(handles.ok()) << handles.status();
  EXPECT_EQ(std::get<ReopenHandlesArgs>(handles->args).Record(0).fh, 5u);
  auto empty = DecodeRequest(testing::Frame(wire::kOpReopenHandles, 3, 0, Batch(0)));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->reply_capacity, 0u);
}

TEST(RequestReclaimTest, MalformedBatchesAreEinval) {
  wire::ReopenRecord reopen{};
  const std::vector<std::pair<const char*, std::string>> cases = {
      {"no batch header", testing::Frame(wire::kOpReopenHandles, 1, 0, "")},
      {"count larger than the frame",
       testing::Frame(wire::kOpReopenHandles, 1, 0, Batch(3) + testing::Bytes(reopen))},
      {"count smaller than the frame",
       testing::Frame(wire::kOpReopenHandles, 1, 0,
                      Batch(0) + testing::Bytes(reopen))},
      {"count above the per-frame maximum",
       testing::Frame(wire::kOpReclaimNodes, 1, 0, Batch(wire::kMaxReclaimNodesPerFrame + 1))},
      {"count overflowing 32 bits", testing::Frame(wire::kOpReclaimNodes, 1, 0, Batch(0xffffffffu))},
  };
  for (const auto& [what, frame] : cases) {
    auto request = DecodeRequest(frame);
    ASSERT_FALSE(request.ok()) << what;
    EXPECT_EQ(ToErrno(request.status()), EINVAL) << what;
  }
}

}  // namespace
}  // namespace ringfs::server
