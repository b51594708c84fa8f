// Reclaim over real sockets (common/node_handle.h): a server hands out sealed node handles
// before the replies that name new nodes; after it stops, a new instance on the same export and
// handle key takes the old node ids and fh back, so old descriptors reach their own files. Forged,
// tampered, foreign-key, deleted and out-of-export handles are ESTALE.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "common/node_handle.h"
#include "server/handle_seal.h"
#include "server/inode_handle.h"
#include "server/server.h"
#include "server/test_client.h"

namespace ringfs::server {
namespace {

using testing::Bytes;
using testing::CName;
using testing::Frame;
using testing::Reply;
using testing::TestClient;

constexpr char kClientId[] = "reclaiming-mount";

// A reply and the node-handle notifications that came before it.
struct Answer {
  Reply reply;
  std::vector<wire::NodeHandleRecord> notes;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string Batch(uint32_t count) { return Bytes(wire::ReclaimBatch{count, 0}); }

class ReclaimTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (server_) server_->Stop();
  }

  void StartServer(const std::string& key_file) {
    if (server_) server_->Stop();
    ServerConfig config;
    config.export_dir = export_.path();
    // Root acts as root here: these tests are about the wire, not squashing (security_wire_test).
    config.export_options.squash = ExportOptions::Squash::kNone;
    config.listen = "127.0.0.1:0";
    config.workers = 2;
    config.handle_key_file = key_file;
    config.handle_key_explicit = true;
    server_ = std::make_unique<Server>(config);
    ASSERT_TRUE(server_->Start().ok());
  }

  std::unique_ptr<TestClient> Connect(bool want_node_handles = true) {
    wire::ClientHello hello = testing::DefaultHello(kClientId);
    hello.set_want_node_handles(want_node_handles);
    wire::ServerHello reply;
    auto client = TestClient::Connect(server_->bound_address(), hello, &reply);
    EXPECT_TRUE(client.ok()) << client.status();
    EXPECT_EQ(reply.result(), wire::ServerHello::OK) << reply.message();
    EXPECT_EQ(reply.node_handles(), want_node_handles);
    return client.ok() ? *std::move(client) : nullptr;
  }

  // Sends `frame` and reads until its reply, collecting the notifications on the way.
  Answer Call(TestClient& client, const std::string& frame) {
    Answer answer;
    EXPECT_TRUE(client.Send(frame).ok());
    fuse_in_header in{};
    std::memcpy(&in, frame.data(), sizeof(in));
    for (;;) {
      auto r = client.Receive();
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) return answer;
      if (r->header.unique == 0 && r->header.error == wire::kNotifyNodeHandles) {
        EXPECT_EQ(r->body.size() % sizeof(wire::NodeHandleRecord), 0u);
        EXPECT_GT(r->body.size(), 0u);
        for (size_t off = 0; off + sizeof(wire::NodeHandleRecord) <= r->body.size();
             off += sizeof(wire::NodeHandleRecord)) {
          wire::NodeHandleRecord record;
          std::memcpy(&record, r->body.data() + off, sizeof(record));
          answer.notes.push_back(record);
        }
        continue;
      }
      EXPECT_EQ(r->header.unique, in.unique);
      answer.reply = *r;
      return answer;
    }
  }

  // LOOKUP of `name` in the root; checks that exactly one notification, for the node, came first
  // when `expect_note`.
  Answer Lookup(TestClient& client, const std::string& name, bool expect_note = true) {
    Answer a = Call(client, Frame(FUSE_LOOKUP, ++unique_, 1, CName(name)));
    EXPECT_EQ(a.reply.header.error, 0) << name;
    if (expect_note) {
      EXPECT_EQ(a.notes.size(), 1u) << name;
      if (!a.notes.empty()) {
        EXPECT_EQ(a.notes[0].nodeid, a.reply.As<fuse_entry_out>().nodeid);
        EXPECT_GT(a.notes[0].handle_bytes, 0u);
      }
    } else {
      EXPECT_TRUE(a.notes.empty()) << name;
    }
    return a;
  }

  // On a connection of its own: LOOKUPs of `names` in the root, and the records announced.
  std::vector<wire::NodeHandleRecord> LookUpAll(const std::vector<std::string>& names) {
    std::vector<wire::NodeHandleRecord> notes;
    auto client = Connect();
    if (client == nullptr) return notes;
    for (const std::string& name : names) {
      Answer a = Lookup(*client, name);
      notes.insert(notes.end(), a.notes.begin(), a.notes.end());
    }
    return notes;
  }

  uint64_t Open(TestClient& client, uint64_t nodeid, uint32_t flags, bool dir = false) {
    fuse_open_in in{};
    in.flags = flags;
    Answer a = Call(client, Frame(dir ? FUSE_OPENDIR : FUSE_OPEN, ++unique_, nodeid, Bytes(in)));
    EXPECT_EQ(a.reply.header.error, 0);
    return a.reply.As<fuse_open_out>().fh;
  }

  // The per-record results of a reclaim batch, or {frame error} when the frame failed.
  std::vector<int32_t> Results(TestClient& client, uint32_t opcode, uint32_t count,
                               const std::string& records) {
    Answer a = Call(client, Frame(opcode, ++unique_, 0, Batch(count) + records));
    if (a.reply.header.error != 0) return {a.reply.header.error};
    EXPECT_EQ(a.reply.body.size(), count * sizeof(int32_t));
    std::vector<int32_t> results(a.reply.body.size() / sizeof(int32_t));
    std::memcpy(results.data(), a.reply.body.data(), a.reply.body.size());
    return results;
  }

  std::vector<int32_t> Reclaim(TestClient& client,
                               const std::vector<wire::NodeHandleRecord>& records,
                               uint64_t nlookup = 1) {
    std::string bytes;
    for (const auto& record : records) bytes += Bytes(wire::ReclaimNodeRecord{nlookup, record});
    return Results(client, wire::kOpReclaimNodes, static_cast<uint32_t>(records.size()), bytes);
  }

  std::vector<int32_t> Reopen(TestClient& client, const std::vector<wire::ReopenRecord>& records) {
    std::string bytes;
    for (const auto& record : records) bytes += Bytes(record);
    return Results(client, wire::kOpReopenHandles, static_cast<uint32_t>(records.size()), bytes);
  }

  std::string ReadFh(TestClient& client, uint64_t fh, uint64_t nodeid) {
    fuse_read_in in{};
    in.fh = fh;
    in.size = 4096;
    Answer a = Call(client, Frame(FUSE_READ, ++unique_, nodeid, Bytes(in)));
    EXPECT_EQ(a.reply.header.error, 0);
    return a.reply.body;
  }

  int WriteFh(TestClient& client, uint64_t fh, uint64_t nodeid, const std::string& data) {
    fuse_write_in in{};
    in.fh = fh;
    in.size = static_cast<uint32_t>(data.size());
    return Call(client, Frame(FUSE_WRITE, ++unique_, nodeid, Bytes(in) + data)).reply.header.error;
  }

  void Write(const std::string& path, const std::string& content) {
    std::ofstream(path) << content;
  }

  // A record for `path` sealed with the key in `key_file` for this export: what only a server
  // could make, for objects a server would never seal.
  wire::NodeHandleRecord SealForTest(const std::string& key_file, const std::string& path,
                                     uint64_t nodeid) {
    UniqueFd root(open(export_.path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    UniqueFd fd(open(path.c_str(), O_PATH | O_CLOEXEC));
    auto root_handle = HandleOf(root.get());
    auto handle = HandleOf(fd.get());
    EXPECT_TRUE(root_handle.ok() && handle.ok());
    return HandleSeal(ReadAll(key_file), root_handle->bytes).Seal(nodeid, &*handle);
  }

  testing::TempDir export_;
  testing::TempDir keys_;  // key files, outside the export
  const std::string key_ = keys_.Join("handle.key");
  std::unique_ptr<Server> server_;
  uint64_t unique_ = 100;
};

TEST_F(ReclaimTest, OpenFilesAndNodesSurviveARestartWithTheSameKey) {
  Write(export_.Join("a"), "hello-a");
  ASSERT_EQ(mkdir(export_.Join("d").c_str(), 0755), 0);
  Write(export_.Join("d/b"), "hello-b");
  StartServer(key_);
  auto a_client = Connect();
  ASSERT_NE(a_client, nullptr);
  TestClient& c = *a_client;
  std::vector<wire::NodeHandleRecord> notes;
  Answer a = Lookup(c, "a");
  const uint64_t a_id = a.reply.As<fuse_entry_out>().nodeid;
  notes.insert(notes.end(), a.notes.begin(), a.notes.end());
  Answer d = Lookup(c, "d");
  const uint64_t d_id = d.reply.As<fuse_entry_out>().nodeid;
  notes.insert(notes.end(), d.notes.begin(), d.notes.end());
  // CREATE: a notification for the new file before the reply.
  fuse_create_in create{};
  create.flags = O_RDWR | O_CREAT | O_EXCL;
  create.mode = S_IFREG | 0644;
  Answer created = Call(c, Frame(FUSE_CREATE, ++unique_, d_id, Bytes(create) + CName("c")));
  ASSERT_EQ(created.reply.header.error, 0);
  const uint64_t c_id = created.reply.As<fuse_entry_out>().nodeid;
  fuse_open_out c_open{};
  std::memcpy(&c_open, created.reply.body.data() + sizeof(fuse_entry_out), sizeof(c_open));
  ASSERT_EQ(created.notes.size(), 1u);
  EXPECT_EQ(created.notes[0].nodeid, c_id);
  notes.push_back(created.notes[0]);
  ASSERT_EQ(WriteFh(c, c_open.fh, c_id, "new-c"), 0);
  const uint64_t a_fh = Open(c, a_id, O_RDWR);
  const uint64_t d_fh = Open(c, d_id, O_RDONLY | O_DIRECTORY, /*dir=*/true);
  // A repeated LOOKUP of a known node announces nothing.
  Lookup(c, "a", /*expect_note=*/false);
  a_client.reset();

  // A new instance: the old ids are unknown until reclaimed.
  StartServer(key_);
  auto b_client = Connect();
  ASSERT_NE(b_client, nullptr);
  TestClient& b = *b_client;
  Answer stale = Call(b, Frame(FUSE_GETATTR, ++unique_, a_id, Bytes(fuse_getattr_in{})));
  EXPECT_EQ(stale.reply.header.error, -ESTALE);
  EXPECT_EQ(Reclaim(b, notes, /*nlookup=*/2), (std::vector<int32_t>{0, 0, 0}));
  EXPECT_EQ(Reclaim(b, notes, /*nlookup=*/2), (std::vector<int32_t>{0, 0, 0})) << "a replay";
  EXPECT_EQ(server_->registry()->GetOrCreate(ClientStateKey("", kClientId)).value()->nodes->LookupCount(a_id), 2u);
  const std::vector<wire::ReopenRecord> reopen = {
      {.fh = a_fh, .nodeid = a_id, .flags = O_RDWR, .directory = 0},
      {.fh = d_fh, .nodeid = d_id, .flags = O_RDONLY | O_DIRECTORY, .directory = 1},
      // O_TRUNC and O_CREAT are ignored: reopening must not truncate what was written.
      {.fh = c_open.fh, .nodeid = c_id, .flags = O_RDWR | O_CREAT | O_TRUNC, .directory = 0},
      {.fh = 0x5eed, .nodeid = fuse::kRootNodeId, .flags = O_RDONLY, .directory = 1},
  };
  EXPECT_EQ(Reopen(b, reopen), (std::vector<int32_t>{0, 0, 0, 0}));

  EXPECT_EQ(ReadFh(b, a_fh, a_id), "hello-a");
  EXPECT_EQ(ReadFh(b, c_open.fh, c_id), "new-c");
  ASSERT_EQ(WriteFh(b, a_fh, a_id, "HELLO"), 0);
  EXPECT_EQ(ReadAll(export_.Join("a")), "HELLO-a");
  EXPECT_EQ(ReadAll(export_.Join("d/b")), "hello-b");
  Answer attr = Call(b, Frame(FUSE_GETATTR, ++unique_, a_id, Bytes(fuse_getattr_in{})));
  ASSERT_EQ(attr.reply.header.error, 0);
  struct stat st {};
  ASSERT_EQ(stat(export_.Join("a").c_str(), &st), 0);
  EXPECT_EQ(attr.reply.As<fuse_attr_out>().attr.ino, st.st_ino);
  // The reclaimed directory handle lists; its new entries are announced, one record each.
  fuse_read_in list{};
  list.fh = d_fh;
  list.size = 4096;
  Answer plus = Call(b, Frame(FUSE_READDIRPLUS, ++unique_, d_id, Bytes(list)));
  ASSERT_EQ(plus.reply.header.error, 0);
  ASSERT_EQ(plus.notes.size(), 1u) << "b is new to this instance; c was reclaimed";
  // A LOOKUP of a reclaimed node finds its old id and announces nothing.
  Answer again = Call(b, Frame(FUSE_LOOKUP, ++unique_, d_id, CName("c")));
  EXPECT_EQ(again.reply.As<fuse_entry_out>().nodeid, c_id);
  EXPECT_TRUE(again.notes.empty());
}

TEST_F(ReclaimTest, NotificationsComeBeforeRepliesThatNameNewNodes) {
  Write(export_.Join("x"), "x");
  Write(export_.Join("y"), "y");
  StartServer(key_);
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  Lookup(*client, "x");
  Lookup(*client, "x", /*expect_note=*/false);
  fuse_mkdir_in mkdir_in{S_IFDIR | 0755, 0};
  Answer made = Call(*client, Frame(FUSE_MKDIR, ++unique_, 1, Bytes(mkdir_in) + CName("m")));
  ASSERT_EQ(made.reply.header.error, 0);
  ASSERT_EQ(made.notes.size(), 1u);
  EXPECT_EQ(made.notes[0].nodeid, made.reply.As<fuse_entry_out>().nodeid);
  // READDIRPLUS of the root: "x" and "m" are known, "y" is new: one record, before the reply.
  const uint64_t fh = Open(*client, 1, O_RDONLY | O_DIRECTORY, /*dir=*/true);
  fuse_read_in list{};
  list.fh = fh;
  list.size = 64 * 1024;
  Answer plus = Call(*client, Frame(FUSE_READDIRPLUS, ++unique_, 1, Bytes(list)));
  ASSERT_EQ(plus.reply.header.error, 0);
  ASSERT_EQ(plus.notes.size(), 1u);
  Answer y = Lookup(*client, "y", /*expect_note=*/false);
  EXPECT_EQ(plus.notes[0].nodeid, y.reply.As<fuse_entry_out>().nodeid);

  // A connection that did not ask gets no notification, and reclaim is ENOSYS there.
  Write(export_.Join("z"), "z");
  auto plain = Connect(/*want_node_handles=*/false);
  ASSERT_NE(plain, nullptr);
  Answer z = Call(*plain, Frame(FUSE_LOOKUP, ++unique_, 1, CName("z")));
  EXPECT_EQ(z.reply.header.error, 0);
  EXPECT_TRUE(z.notes.empty());
  EXPECT_EQ(Reclaim(*plain, made.notes), (std::vector<int32_t>{-ENOSYS}));
  EXPECT_EQ(Reopen(*plain, {}), (std::vector<int32_t>{-ENOSYS}));
}

// A new node's notification and the reply that names it leave in one SENDMSG: the client
// wakes once per request, not twice (the notification used to be posted alone the moment it
// was queued, and the reply followed in a second send).
TEST_F(ReclaimTest, ANotificationLeavesInTheSendOfItsReply) {
  StartServer(key_);
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  // The session's completed sends, once they stop changing (a send is counted when its
  // completion is reaped, a moment after the client has the bytes).
  auto settled_sends = [&]() -> uint64_t {
    uint64_t last = ~0ull;
    for (int i = 0; i < 200; ++i) {
      admin::ListSessionsResponse sessions = server_->ListSessions();
      EXPECT_EQ(sessions.sessions_size(), 1);
      if (sessions.sessions_size() != 1) return 0;
      const uint64_t now = sessions.sessions(0).sends();
      if (now == last) return now;
      last = now;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return last;
  };
  fuse_mkdir_in mkdir_in{S_IFDIR | 0755, 0};
  ASSERT_EQ(Call(*client, Frame(FUSE_MKDIR, ++unique_, 1, Bytes(mkdir_in) + CName("d0")))
                .reply.header.error,
            0);
  const uint64_t before = settled_sends();
  constexpr int kMade = 20;
  for (int i = 1; i <= kMade; ++i) {
    Answer made = Call(
        *client, Frame(FUSE_MKDIR, ++unique_, 1, Bytes(mkdir_in) + CName("d" + std::to_string(i))));
    ASSERT_EQ(made.reply.header.error, 0);
    ASSERT_EQ(made.notes.size(), 1u) << "each new directory is announced";
  }
  EXPECT_EQ(settled_sends() - before, static_cast<uint64_t>(kMade))
      << "one send per request, its notification included";
}

TEST_F(ReclaimTest, TamperedForeignKeyDeletedAndOutsideHandlesAreEstale) {
  Write(export_.Join("a"), "a");
  Write(export_.Join("gone"), "gone");
  testing::TempDir outside;  // on the same filesystem as the export, but not below it
  ASSERT_EQ(mkdir(outside.Join("secret").c_str(), 0700), 0);
  StartServer(key_);
  const std::vector<wire::NodeHandleRecord> notes = LookUpAll({"a", "gone"});
  ASSERT_EQ(notes.size(), 2u);
  ASSERT_EQ(unlink(export_.Join("gone").c_str()), 0);

  // Another key: nothing the first one sealed verifies.
  StartServer(keys_.Join("other.key"));
  {
    auto client = Connect();
    ASSERT_NE(client, nullptr);
    EXPECT_EQ(Reclaim(*client, {notes[0]}), (std::vector<int32_t>{-ESTALE}));
  }
  StartServer(key_);
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  wire::NodeHandleRecord tampered = notes[0];
  tampered.mac[0] ^= 0x80;
  wire::NodeHandleRecord other_bytes = notes[0];
  other_bytes.f_handle[0] ^= 1;
  // Correctly sealed, but a directory outside the export: the walk up never meets the root.
  wire::NodeHandleRecord outside_dir = SealForTest(key_, outside.Join("secret"), 0x1234567);
  EXPECT_EQ(Reclaim(*client, {tampered, other_bytes, notes[1], outside_dir}),
            (std::vector<int32_t>{-ESTALE, -ESTALE, -ESTALE, -ESTALE}));
  // Nothing was adopted by the refused records; the good one still works.
  EXPECT_EQ(Reclaim(*client, {notes[0]}), (std::vector<int32_t>{0}));
  // An fh of a node that was not reclaimed is refused.
  EXPECT_EQ(Reopen(*client, {{.fh = 99, .nodeid = notes[1].nodeid, .flags = O_RDONLY}}),
            (std::vector<int32_t>{-ESTALE}));
}

// Documented limit (server/README.md): a file has no way up to check, so a sealed handle of a file
// moved out of the export after it was handed out still opens it, as NFS with no_subtree_check.
// Directories are checked.
TEST_F(ReclaimTest, FileMovedOutOfTheExportStaysReachableButADirectoryDoesNot) {
  Write(export_.Join("f"), "f");
  ASSERT_EQ(mkdir(export_.Join("dir").c_str(), 0755), 0);
  testing::TempDir outside;
  StartServer(key_);
  const std::vector<wire::NodeHandleRecord> notes = LookUpAll({"f", "dir"});
  ASSERT_EQ(notes.size(), 2u);
  ASSERT_EQ(rename(export_.Join("f").c_str(), outside.Join("f").c_str()), 0);
  ASSERT_EQ(rename(export_.Join("dir").c_str(), outside.Join("dir").c_str()), 0);
  StartServer(key_);
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(Reclaim(*client, notes), (std::vector<int32_t>{0, -ESTALE}));
}

TEST_F(ReclaimTest, MalformedBatchIsEinvalAndTheServerCarriesOn) {
  Write(export_.Join("a"), "a");
  StartServer(key_);
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  wire::ReclaimNodeRecord one{};
  Answer bad = Call(*client, Frame(wire::kOpReclaimNodes, ++unique_, 0, Batch(5) + Bytes(one)));
  EXPECT_EQ(bad.reply.header.error, -EINVAL);
  Answer huge = Call(*client, Frame(wire::kOpReopenHandles, ++unique_, 0, Batch(0xffffffffu)));
  EXPECT_EQ(huge.reply.header.error, -EINVAL);
  Lookup(*client, "a");
}

}  // namespace
}  // namespace ringfs::server
