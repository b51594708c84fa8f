// The Forwarder's decisions for both transports, without a kernel and without a server: each
// request is laid out as the ring or /dev/fuse delivers it, decoded by that transport's decoder,
// and handed to a Forwarder whose channel only records what it is given.
#include "frontend/forwarder.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fuse.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/wire.h"
#include "frontend/complete_dirs.h"
#include "frontend/dir_attr_cache.h"
#include "frontend/interrupt_board.h"
#include "frontend/kernel_request.h"
#include "frontend/worker_stats.h"

namespace ringfs::frontend {
namespace {

constexpr size_t kPayloadBytes = 64 * 1024;  // a ring entry's payload / a read slot's buffer

uint64_t fake_now_ns = 1'000'000;
uint64_t FakeClock() { return fake_now_ns; }

// The channel side: records every call.
class RecordingChannel final : public RequestChannel {
 public:
  struct Submitted {
    PendingReply reply;
    fuse_in_header header;
    std::string body;  // the parts, gathered
    int nparts;
    uint64_t received_ns;
    uint64_t detached_gate = 0;  // SubmitDetached's gate
  };

  void Submit(const PendingReply& reply, const fuse_in_header& header, const iovec* parts,
              int nparts, uint64_t received_ns) override {
    Submitted call{reply, header, "", nparts, received_ns};
    for (int i = 0; i < nparts; ++i) {
      call.body.append(static_cast<const char*>(parts[i].iov_base), parts[i].iov_len);
    }
    submitted.push_back(call);
  }
  void SubmitOneWay(const void* frame, size_t size) override {
    one_way.emplace_back(static_cast<const char*>(frame), size);
  }
  bool CanDetach() const override { return detach; }
  bool DetachesReleases() const override { return detach_releases; }
  bool HandlelessListings() const override { return handleless; }
  void SubmitDetached(const fuse_in_header& header, const iovec* parts, int nparts,
                      uint64_t received_ns, uint64_t seq, uint64_t gate, uint64_t /*after*/,
                      const RecordsVoided& /*voided*/) override {
    Submitted call{PendingReply{}, header, "", nparts, received_ns};
    for (int i = 0; i < nparts; ++i) {
      call.body.append(static_cast<const char*>(parts[i].iov_base), parts[i].iov_len);
    }
    call.reply.gate = seq;  // where the test looks for it
    call.detached_gate = gate;
    detached.push_back(call);
  }

  std::vector<Submitted> submitted;
  std::vector<std::string> one_way;
  bool detach = false;  // CanDetach
  bool detach_releases = false;  // DetachesReleases
  bool handleless = false;  // HandlelessListings
  std::vector<Submitted> detached;
};

enum class Transport { kRing, kClassic };

// One request laid out the way `transport` delivers it.
class Delivery {
 public:
  Delivery(Transport transport, uint32_t opcode, const void* op_struct, size_t op_size,
           std::string_view payload = {}, uint64_t nodeid = 7)
      : transport_(transport),
        buffer_(std::max(kPayloadBytes, sizeof(fuse_in_header) + op_size + payload.size())) {
    fuse_in_header in{};
    in.len = static_cast<uint32_t>(sizeof(in) + op_size + payload.size());
    in.opcode = opcode;
    in.unique = 42;
    in.nodeid = nodeid;
    if (transport == Transport::kRing) {
      std::memcpy(entry_.in_out, &in, sizeof(in));
      if (op_size > 0) std::memcpy(entry_.op_in, op_struct, op_size);
      // An empty payload's data() may be null, which memcpy must not get even for 0 bytes.
      if (!payload.empty()) std::memcpy(buffer_.data(), payload.data(), payload.size());
      entry_.ring_ent_in_out.payload_sz = static_cast<uint32_t>(payload.size());
    } else {
      std::memcpy(buffer_.data(), &in, sizeof(in));
      if (op_size > 0) std::memcpy(buffer_.data() + sizeof(in), op_struct, op_size);
      if (!payload.empty()) {
        std::memcpy(buffer_.data() + sizeof(in) + op_size, payload.data(), payload.size());
      }
      delivered_ = in.len;
    }
  }

  // What the transport read differs from the header (classic), or the ring claims more payload.
  void set_delivered(size_t bytes) { delivered_ = bytes; }
  void set_ring_payload(uint32_t bytes) { entry_.ring_ent_in_out.payload_sz = bytes; }

  KernelRequest Decode() {
    KernelRequest request;
    if (transport_ == Transport::kRing) {
      DecodeRingRequest(entry_, buffer_.data(), buffer_.size(), &request);
    } else {
      DecodeDevFuseRequest(buffer_.data(), delivered_, &request);
    }
    return request;
  }
  // Where the transport has a local answer's body written.
  char* body() {
    return transport_ == Transport::kRing ? buffer_.data()
                                          : buffer_.data() + sizeof(fuse_out_header);
  }

 private:
  Transport transport_;
  fuse::UringReqHeader entry_{};
  std::vector<char> buffer_;
  size_t delivered_ = 0;
};

template <typename T>
Delivery Make(Transport transport, uint32_t opcode, const T& op_struct,
              std::string_view payload = {}, uint64_t nodeid = 7) {
  return Delivery(transport, opcode, &op_struct, sizeof(op_struct), payload, nodeid);
}
Delivery MakeBare(Transport transport, uint32_t opcode, std::string_view payload = {}) {
  return Delivery(transport, opcode, nullptr, 0, payload);
}

fuse_read_in ReadIn(uint32_t size, uint32_t flags = 0) {
  fuse_read_in in{};
  in.size = size;
  in.flags = flags;
  return in;
}

// The records of a BATCH_FORGET frame the forwarder sent, after checking its framing.
std::vector<fuse_forget_one> ReadBatch(const std::string& frame) {
  std::vector<fuse_forget_one> out;
  fuse_in_header h;
  fuse_batch_forget_in in;
  std::memcpy(&h, frame.data(), sizeof(h));
  std::memcpy(&in, frame.data() + sizeof(h), sizeof(in));
  EXPECT_EQ(h.opcode, static_cast<uint32_t>(FUSE_BATCH_FORGET));
  EXPECT_NE(h.unique, 0u);
  EXPECT_EQ(h.len, sizeof(h) + sizeof(in) + in.count * sizeof(fuse_forget_one));
  EXPECT_EQ(frame.size(), h.len);
  if (frame.size() != sizeof(h) + sizeof(in) + in.count * sizeof(fuse_forget_one)) return out;
  for (uint32_t i = 0; i < in.count; ++i) {
    fuse_forget_one one;
    std::memcpy(&one, frame.data() + sizeof(h) + sizeof(in) + i * sizeof(one), sizeof(one));
    out.push_back(one);
  }
  return out;
}

// A forwarder with a dir-attr cache, an interrupt board and a recording channel.
class Harness {
 protected:
  Harness()
      : forwarder_(Forwarder::Config{&dir_attrs_, &interrupts_, FakeClock, nullptr, &dirs_, &kept_,
                                     &notifier_, &async_},
                   &stats_, &channel_) {}

  // Decodes and accepts; the view and state are left in request_ and state_.
  Verdict Accept(Delivery& delivery) {
    request_ = delivery.Decode();
    return forwarder_.Accept(request_, &state_, delivery.body());
  }
  // Accepts and, when it is to be forwarded, sends it (what it changes is recorded then).
  Verdict AcceptAndForward(Delivery& delivery) {
    Verdict verdict = Accept(delivery);
    if (verdict.kind == Verdict::Kind::kForward) {
      forwarder_.Forward(request_, &state_, 0, ReplyBuffer{scratch_, sizeof(scratch_)});
    }
    return verdict;
  }
  void ExpectAnswer(const Verdict& verdict, int error, ReplyOrigin origin) {
    ASSERT_EQ(verdict.kind, Verdict::Kind::kAnswer);
    EXPECT_EQ(verdict.header.error, -error);
    EXPECT_EQ(verdict.header.unique, 42u);
    EXPECT_EQ(verdict.header.len, sizeof(fuse_out_header) + verdict.body_size);
    EXPECT_EQ(state_.reply_origin, origin);
    EXPECT_TRUE(channel_.submitted.empty());
  }
  // The request was refused at decoding with `result`, answered EIO and counted as such.
  void ExpectRefusedAsBadRequest(Delivery& delivery, DecodeResult result) {
    Verdict verdict = Accept(delivery);
    EXPECT_EQ(request_.decoded, result);
    ExpectAnswer(verdict, EIO, ReplyOrigin::kBadRequest);
    uint64_t before = Failures(FailureReason::kBadRequest);
    forwarder_.OnAnswered(state_, verdict.header.error);
    EXPECT_EQ(Failures(FailureReason::kBadRequest), before + 1);
    EXPECT_TRUE(channel_.one_way.empty());
  }
  uint64_t Failures(FailureReason reason) const {
    return stats_.failures[static_cast<size_t>(reason)].load();
  }

  DirAttrCache dir_attrs_;
  // On in every test: it changes nothing until an UNLINK is answered early.
  AsyncRemovals async_;
  CompleteDirs dirs_{60'000'000'000};
  KeptEntries kept_;
  // Not started: only its count of answers on their way into the kernel is looked at.
  KernelNotifier notifier_{UniqueFd(open("/dev/null", O_WRONLY | O_CLOEXEC)), nullptr, nullptr};
  InterruptBoard interrupts_;
  WorkerStats stats_;
  RecordingChannel channel_;
  Forwarder forwarder_;
  KernelRequest request_;
  RequestState state_;
  char scratch_[512];
};

class ForwarderTest : public Harness, public ::testing::TestWithParam<Transport> {
 protected:
  Transport transport() const { return GetParam(); }
};

// Decisions that only one transport can meet.
class ForwarderEdgeTest : public Harness, public ::testing::Test {};

INSTANTIATE_TEST_SUITE_P(BothTransports, ForwarderTest,
                         ::testing::Values(Transport::kRing, Transport::kClassic),
                         [](const ::testing::TestParamInfo<Transport>& info) {
                           return info.param == Transport::kRing ? "Ring" : "Classic";
                         });

TEST_P(ForwarderTest, UnknownOpcodeIsNotImplemented) {
  Delivery delivery = MakeBare(transport(), 63);
  EXPECT_EQ(delivery.Decode().decoded, DecodeResult::kUnknownOpcode);
  Verdict verdict = Accept(delivery);
  ExpectAnswer(verdict, ENOSYS, ReplyOrigin::kLocal);
  forwarder_.OnAnswered(state_, verdict.header.error);
  EXPECT_EQ(stats_.TotalFailures(), 0u);  // a designed answer
  EXPECT_EQ(stats_.replies_by_errno[ENOSYS].load(), 1u);
}

TEST_P(ForwarderTest, OpcodeNotForwardedIsNotImplemented) {
  fuse_lk_in lock{};
  Delivery delivery = Make(transport(), FUSE_GETLK, lock);
  ExpectAnswer(Accept(delivery), ENOSYS, ReplyOrigin::kLocal);
}

// DESTROY was ENOSYS on the ring and a success on /dev/fuse; now a success on both.
TEST_P(ForwarderTest, DestroyGetsAnEmptySuccess) {
  Delivery delivery = MakeBare(transport(), FUSE_DESTROY);
  Verdict verdict = Accept(delivery);
  ExpectAnswer(verdict, 0, ReplyOrigin::kLocal);
  EXPECT_EQ(verdict.body_size, 0u);
}

TEST_P(ForwarderTest, FlushIsAnsweredLocally) {
  fuse_flush_in flush{};
  Delivery delivery = Make(transport(), FUSE_FLUSH, flush);
  Verdict verdict = Accept(delivery);
  ExpectAnswer(verdict, ENOSYS, ReplyOrigin::kLocal);
  EXPECT_EQ(stats_.answered_locally.load(), 1u);
  forwarder_.OnAnswered(state_, verdict.header.error);
  EXPECT_EQ(stats_.TotalFailures(), 0u);
}

TEST_P(ForwarderTest, DirectoryGetattrIsAnsweredOnceFromTheCache) {
  fuse_attr_out cached{};
  cached.attr_valid = 5;
  cached.attr.ino = 7;
  cached.attr.ctime = 99;
  dir_attrs_.Offer(7, cached, fake_now_ns);
  fuse_getattr_in getattr{};
  Delivery first = Make(transport(), FUSE_GETATTR, getattr);
  Verdict verdict = Accept(first);
  ExpectAnswer(verdict, 0, ReplyOrigin::kLocal);
  ASSERT_EQ(verdict.body_size, sizeof(fuse_attr_out));
  fuse_attr_out answered;
  std::memcpy(&answered, first.body(), sizeof(answered));
  EXPECT_EQ(answered.attr.ctime, 99u);
  EXPECT_EQ(stats_.answered_locally.load(), 1u);

  Delivery second = Make(transport(), FUSE_GETATTR, getattr);
  EXPECT_EQ(Accept(second).kind, Verdict::Kind::kForward);
}

// Write attrs: a WRITE is sent with a ticket for its record, which answers the file's next
// GETATTR (through its handle too) unless the file or a name changed after the WRITE was sent.
TEST_P(ForwarderTest, AFilesStatAfterItsWriteIsAnsweredFromTheWritesRecord) {
  fuse_attr_out written{};
  written.attr_valid = 60;
  written.attr.ino = 7;
  written.attr.size = 5;
  fuse_getattr_in fstat_in{};
  fstat_in.getattr_flags = FUSE_GETATTR_FH;
  auto write_sent = [&]() -> PendingReply {
    fuse_write_in write{};
    write.size = 5;
    Delivery delivery = Make(transport(), FUSE_WRITE, write, "hello");
    channel_.submitted.clear();
    EXPECT_EQ(AcceptAndForward(delivery).kind, Verdict::Kind::kForward);
    EXPECT_EQ(channel_.submitted.size(), 1u);
    return channel_.submitted.empty() ? PendingReply{} : channel_.submitted.back().reply;
  };
  PendingReply sent = write_sent();
  EXPECT_TRUE(sent.write_record);
  dir_attrs_.OfferWrite(7, written, sent.record_ticket, sent.record_reads,
                        fake_now_ns);  // its answer arrived
  channel_.submitted.clear();
  Delivery stat = Make(transport(), FUSE_GETATTR, fstat_in);
  Verdict verdict = Accept(stat);
  ExpectAnswer(verdict, 0, ReplyOrigin::kLocal);
  fuse_attr_out answered;
  std::memcpy(&answered, stat.body(), sizeof(answered));
  EXPECT_EQ(answered.attr.size, 5u);

  // A truncate sent before the write's answer came: the record is refused.
  sent = write_sent();
  fuse_setattr_in truncate{};
  truncate.valid = FATTR_SIZE;
  Delivery setattr = Make(transport(), FUSE_SETATTR, truncate);
  EXPECT_EQ(AcceptAndForward(setattr).kind, Verdict::Kind::kForward);
  dir_attrs_.OfferWrite(7, written, sent.record_ticket, sent.record_reads, fake_now_ns);
  Delivery again = Make(transport(), FUSE_GETATTR, fstat_in);
  EXPECT_EQ(Accept(again).kind, Verdict::Kind::kForward);

  // An unlink of some name (this file's, maybe) drops a record already held.
  sent = write_sent();
  dir_attrs_.OfferWrite(7, written, sent.record_ticket, sent.record_reads, fake_now_ns);
  Delivery unlink = MakeBare(transport(), FUSE_UNLINK, std::string_view("f\0", 2));
  EXPECT_EQ(AcceptAndForward(unlink).kind, Verdict::Kind::kForward);
  Delivery after_unlink = Make(transport(), FUSE_GETATTR, fstat_in);
  EXPECT_EQ(Accept(after_unlink).kind, Verdict::Kind::kForward);
}

// async_unlink: an UNLINK in a directory whose attributes the server sent lately is answered at
// once and handed to the channel; the directory's GETATTR is answered meanwhile; what follows
// waits for it unless it is I/O on an open file.
TEST_P(ForwarderTest, AnUnlinkIsAnsweredAtOnceAndWhatFollowsWaitsForIt) {
  fuse_attr_out dir{};
  dir.attr.ino = 7;
  dir.attr.mode = 040751;
  async_.Learn(7, dir, async_.Ticket(), fake_now_ns);
  Delivery unlink = MakeBare(transport(), FUSE_UNLINK, std::string_view("old\0", 4));
  EXPECT_EQ(Accept(unlink).kind, Verdict::Kind::kForward) << "the channel has no room";
  channel_.detach = true;
  Delivery again = MakeBare(transport(), FUSE_UNLINK, std::string_view("old\0", 4));
  ExpectAnswer(Accept(again), 0, ReplyOrigin::kLocal);
  ASSERT_EQ(channel_.detached.size(), 1u);
  EXPECT_EQ(channel_.detached[0].header.opcode, static_cast<uint32_t>(FUSE_UNLINK));
  EXPECT_EQ(channel_.detached[0].header.nodeid, 7u);
  EXPECT_EQ(channel_.detached[0].body, std::string("old\0", 4));
  const uint64_t seq = channel_.detached[0].reply.gate;
  EXPECT_GT(seq, 0u);

  fuse_getattr_in getattr{};
  Delivery attr = Make(transport(), FUSE_GETATTR, getattr);
  Verdict verdict = Accept(attr);
  ExpectAnswer(verdict, 0, ReplyOrigin::kLocal);
  fuse_attr_out answered;
  std::memcpy(&answered, attr.body(), sizeof(answered));
  EXPECT_EQ(answered.attr.mode, 040751u);

  Delivery lookup = MakeBare(transport(), FUSE_LOOKUP, std::string_view("old\0", 4));
  EXPECT_EQ(AcceptAndForward(lookup).kind, Verdict::Kind::kForward);
  Delivery read = Make(transport(), FUSE_READ, ReadIn(4096));
  EXPECT_EQ(AcceptAndForward(read).kind, Verdict::Kind::kForward);
  ASSERT_EQ(channel_.submitted.size(), 2u);
  EXPECT_EQ(channel_.submitted[0].reply.gate, seq) << "the LOOKUP waits for the unlink";
  EXPECT_EQ(channel_.submitted[1].reply.gate, 0u) << "a READ on an open file does not";

  // A SETATTR sent to the directory voids what the mount knew of its attributes.
  fuse_setattr_in chmod{};
  chmod.valid = FATTR_MODE;
  chmod.mode = 040700;
  Delivery setattr = Make(transport(), FUSE_SETATTR, chmod);
  EXPECT_EQ(AcceptAndForward(setattr).kind, Verdict::Kind::kForward);
  EXPECT_EQ(channel_.submitted.back().reply.gate, seq);
  fuse_attr_out snapshot = dir;  // a post-op snapshot from before the unlink
  snapshot.attr_valid = 60;
  dir_attrs_.Offer(7, snapshot, fake_now_ns);
  Delivery attr_after = Make(transport(), FUSE_GETATTR, getattr);
  EXPECT_EQ(Accept(attr_after).kind, Verdict::Kind::kForward) << "the old mode answered";

  EXPECT_EQ(async_.End(seq, 7), 0u);
  Delivery later = MakeBare(transport(), FUSE_LOOKUP, std::string_view("new\0", 4));
  EXPECT_EQ(AcceptAndForward(later).kind, Verdict::Kind::kForward);
  EXPECT_EQ(channel_.submitted.back().reply.gate, 0u) << "nothing outstanding";
  Delivery attr_later = Make(transport(), FUSE_GETATTR, getattr);
  EXPECT_EQ(Accept(attr_later).kind, Verdict::Kind::kAnswer)
      << "nothing owed: the newest post-op snapshot answers, as without the option";
}

// A file's RELEASE is answered at once and handed to the channel to go with the next request
// (the kernel neither waits for it nor reads its answer); one that drops a flock() lock, or
// any with sync_release or no detached record free, goes the usual way.
TEST_P(ForwarderTest, AReleaseIsAnsweredAtOnceAndSentWithWhatFollows) {
  fuse_release_in release{};
  release.fh = 99;
  Delivery plain = Make(transport(), FUSE_RELEASE, release);
  EXPECT_EQ(Accept(plain).kind, Verdict::Kind::kForward) << "sync_release";
  channel_.detach_releases = true;
  Delivery full = Make(transport(), FUSE_RELEASE, release);
  EXPECT_EQ(Accept(full).kind, Verdict::Kind::kForward) << "no detached record free";
  channel_.detach = true;
  Delivery detached = Make(transport(), FUSE_RELEASE, release);
  ExpectAnswer(Accept(detached), 0, ReplyOrigin::kLocal);
  ASSERT_EQ(channel_.detached.size(), 1u);
  EXPECT_EQ(channel_.detached[0].header.opcode, static_cast<uint32_t>(FUSE_RELEASE));
  EXPECT_EQ(channel_.detached[0].detached_gate, 0u) << "nothing owed for the file";
  EXPECT_EQ(channel_.detached[0].body,
            std::string(reinterpret_cast<const char*>(&release), sizeof(release)));
  release.release_flags = FUSE_RELEASE_FLOCK_UNLOCK;
  Delivery unlock = Make(transport(), FUSE_RELEASE, release);
  EXPECT_EQ(Accept(unlock).kind, Verdict::Kind::kForward) << "a flock() unlock goes at once";
  fuse_release_in dir_release{};
  Delivery releasedir = Make(transport(), FUSE_RELEASEDIR, dir_release);
  EXPECT_EQ(Accept(releasedir).kind, Verdict::Kind::kForward) << "directories are not detached";
  EXPECT_EQ(channel_.detached.size(), 1u);
}

TEST_P(ForwarderTest, LookupInADirectoryThisMountMadeIsAnsweredUntilTheNameMayExist) {
  dirs_.RecordCreated(7, dirs_.Ticket(), fake_now_ns);
  dirs_.RecordCreated(8, dirs_.Ticket(), fake_now_ns);
  auto lookup = [&](uint64_t dir, std::string_view name) {
    Delivery delivery(transport(), FUSE_LOOKUP, nullptr, 0, std::string(name) + '\0', dir);
    channel_.submitted.clear();
    Verdict verdict = Accept(delivery);
    if (verdict.kind == Verdict::Kind::kAnswer) {
      fuse_entry_out out;
      EXPECT_EQ(verdict.body_size, sizeof(out));
      std::memcpy(&out, delivery.body(), sizeof(out));
      EXPECT_EQ(out.nodeid, 0u);  // a negative entry, kept by the kernel for the lifetime
      EXPECT_EQ(out.entry_valid, 60u);
    }
    return verdict.kind;
  };
  EXPECT_EQ(lookup(7, "new"), Verdict::Kind::kAnswer);
  EXPECT_EQ(stats_.answered_locally.load(), 1u);
  // Requests that may make a name exist record it before they go to the server.
  fuse_create_in create{};
  Delivery creating = Make(transport(), FUSE_CREATE, create, std::string("new\0", 4), 7);
  EXPECT_EQ(AcceptAndForward(creating).kind, Verdict::Kind::kForward);
  EXPECT_EQ(lookup(7, "new"), Verdict::Kind::kForward);
  fuse_rename2_in rename{};
  rename.newdir = 8;
  Delivery renaming = Make(transport(), FUSE_RENAME2, rename, std::string("from\0to\0", 8), 7);
  EXPECT_EQ(AcceptAndForward(renaming).kind, Verdict::Kind::kForward);
  EXPECT_EQ(lookup(7, "from"), Verdict::Kind::kForward);
  EXPECT_EQ(lookup(8, "to"), Verdict::Kind::kForward);
  EXPECT_EQ(lookup(8, "from"), Verdict::Kind::kAnswer);
  fuse_link_in link{};
  Delivery linking = Make(transport(), FUSE_LINK, link, std::string("hard\0", 5), 8);
  EXPECT_EQ(AcceptAndForward(linking).kind, Verdict::Kind::kForward);
  EXPECT_EQ(lookup(8, "hard"), Verdict::Kind::kForward);
  Delivery symlinking(transport(), FUSE_SYMLINK, nullptr, 0, std::string("soft\0target\0", 12), 8);
  EXPECT_EQ(AcceptAndForward(symlinking).kind, Verdict::Kind::kForward);
  EXPECT_EQ(lookup(8, "soft"), Verdict::Kind::kForward);
  EXPECT_EQ(lookup(8, "target"), Verdict::Kind::kAnswer);
  // A directory this mount did not make goes to the server.
  EXPECT_EQ(lookup(9, "new"), Verdict::Kind::kForward);
}

TEST_F(ForwarderEdgeTest, ForgottenDirectoriesAreNoLongerKnownComplete) {
  for (uint64_t dir : {7, 8, 9}) dirs_.RecordCreated(dir, dirs_.Ticket(), fake_now_ns);
  fuse_forget_in forget{};
  forget.nlookup = 1;
  Delivery one = Make(Transport::kClassic, FUSE_FORGET, forget, {}, 7);
  EXPECT_EQ(Accept(one).kind, Verdict::Kind::kNone);
  EXPECT_FALSE(dirs_.KnownAbsent(7, "a", fake_now_ns));
  EXPECT_TRUE(dirs_.KnownAbsent(8, "a", fake_now_ns));
  fuse_batch_forget_in batch{};
  batch.count = 2;
  fuse_forget_one ones[2] = {{8, 1}, {9, 1}};
  Delivery many = Make(Transport::kClassic, FUSE_BATCH_FORGET, batch,
                       std::string_view(reinterpret_cast<const char*>(ones), sizeof(ones)), 0);
  EXPECT_EQ(Accept(many).kind, Verdict::Kind::kNone);
  EXPECT_EQ(dirs_.dirs(), 0u);
}

// The server's entry for a name is recorded; once the kernel forgets the node its FORGET is
// withheld, the next LOOKUP of the name is answered here, and a change to the name sends the
// kept lookups back to the server.
TEST_F(ForwarderEdgeTest, ForgottenNodesWithARecordedNameAreKeptAndAnswered) {
  Delivery looking(Transport::kClassic, FUSE_LOOKUP, nullptr, 0, std::string("f\0", 2), 7);
  ASSERT_EQ(Accept(looking).kind, Verdict::Kind::kForward);
  char reply_body[256];
  forwarder_.Forward(request_, &state_, 0, ReplyBuffer{reply_body, sizeof(reply_body)});
  fuse_entry_out entry{};
  entry.nodeid = 50;
  entry.generation = 9;
  entry.entry_valid = 60;
  entry.attr_valid = 60;
  entry.attr.mode = S_IFREG | 0644;
  std::memcpy(reply_body, &entry, sizeof(entry));
  forwarder_.OnReply(&state_, fuse_out_header{}, reply_body, sizeof(entry), ReplyOrigin::kServer);
  EXPECT_EQ(kept_.entries(), 1u);

  fuse_forget_in forget{};
  forget.nlookup = 2;
  Delivery one = Make(Transport::kClassic, FUSE_FORGET, forget, {}, 50);
  EXPECT_EQ(Accept(one).kind, Verdict::Kind::kNone);
  EXPECT_TRUE(channel_.one_way.empty());  // withheld
  fuse_batch_forget_in batch{};
  batch.count = 2;
  fuse_forget_one ones[2] = {{50, 1}, {60, 1}};
  Delivery many = Make(Transport::kClassic, FUSE_BATCH_FORGET, batch,
                       std::string_view(reinterpret_cast<const char*>(ones), sizeof(ones)), 0);
  EXPECT_EQ(Accept(many).kind, Verdict::Kind::kNone);
  ASSERT_EQ(channel_.one_way.size(), 1u);  // node 60 only
  std::vector<fuse_forget_one> sent = ReadBatch(channel_.one_way[0]);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].nodeid, 60u);
  EXPECT_EQ(kept_.kept(), 3u);

  Delivery again(Transport::kClassic, FUSE_LOOKUP, nullptr, 0, std::string("f\0", 2), 7);
  Verdict verdict = Accept(again);
  ASSERT_EQ(verdict.kind, Verdict::Kind::kAnswer);
  fuse_entry_out answered;
  ASSERT_EQ(verdict.body_size, sizeof(answered));
  std::memcpy(&answered, again.body(), sizeof(answered));
  EXPECT_EQ(answered.nodeid, 50u);
  EXPECT_EQ(answered.generation, 9u);
  EXPECT_EQ(answered.attr_valid, 60u);  // nothing changed node 50: the rest of their lifetime
  // A change sent by this mount: its attributes are no longer known, the lookup still kept goes
  // back with the next request, and LOOKUPs of it go to the server again.
  fuse_setattr_in setattr{};
  Delivery chmod = Make(Transport::kClassic, FUSE_SETATTR, setattr, {}, 50);
  EXPECT_EQ(AcceptAndForward(chmod).kind, Verdict::Kind::kForward);
  Delivery after(Transport::kClassic, FUSE_LOOKUP, nullptr, 0, std::string("f\0", 2), 7);
  EXPECT_EQ(Accept(after).kind, Verdict::Kind::kForward);

  ASSERT_EQ(channel_.one_way.size(), 2u);
  sent = ReadBatch(channel_.one_way[1]);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].nodeid, 50u);
  EXPECT_EQ(sent[0].nlookup, 2u);  // three kept, one handed back to the kernel
  EXPECT_EQ(kept_.kept(), 0u);
}

// A reset hands back every kept lookup at once; they go to the server in frames of at most 4,096
// records, far below the frame limit, and none is lost.
TEST_F(ForwarderEdgeTest, ManyKeptLookupsGoBackInSeveralFrames) {
  constexpr uint64_t kNodes = 9000;
  for (uint64_t i = 0; i < kNodes; ++i) {
    fuse_entry_out entry{};
    entry.nodeid = 1000 + i;
    entry.entry_valid = 60;
    entry.attr_valid = 60;
    entry.attr.mode = S_IFREG | 0644;
    kept_.Record(7, "f" + std::to_string(i), entry, kept_.Ticket(), true, fake_now_ns);
    ASSERT_TRUE(kept_.Keep(entry.nodeid, 2, fake_now_ns));
  }
  kept_.Reset();  // a lost connection, say
  fuse_getattr_in getattr{};
  Delivery asking = Make(Transport::kClassic, FUSE_GETATTR, getattr, {}, 8);
  ASSERT_EQ(Accept(asking).kind, Verdict::Kind::kForward);
  ASSERT_EQ(channel_.one_way.size(), 3u);  // 4,096 + 4,096 + 808
  uint64_t lookups = 0;
  for (const std::string& frame : channel_.one_way) {
    std::vector<fuse_forget_one> records = ReadBatch(frame);
    EXPECT_LE(records.size(), 4096u);
    for (const fuse_forget_one& one : records) lookups += one.nlookup;
  }
  EXPECT_EQ(lookups, 2 * kNodes);
  EXPECT_NE(channel_.one_way[0].substr(0, 16), channel_.one_way[1].substr(0, 16));  // uniques
  EXPECT_EQ(kept_.kept(), 0u);
}

// One /dev/fuse read hands over as many forgets as its buffer holds (1 MiB + 8 KiB: 66,045
// records), a frame larger than the wire allows (the server closed the connection on it): they
// go in frames of at most 4,096 records, in order, each under a unique of its own.
TEST_F(ForwarderEdgeTest, AKernelForgetBatchLargerThanAFrameGoesInSeveralFrames) {
  constexpr uint32_t kRecords = 66'045;
  std::vector<fuse_forget_one> ones(kRecords);
  for (uint32_t i = 0; i < kRecords; ++i) ones[i] = {2000 + i, 1 + i % 3};
  fuse_batch_forget_in batch{};
  batch.count = kRecords;
  Delivery many = Make(
      Transport::kClassic, FUSE_BATCH_FORGET, batch,
      std::string_view(reinterpret_cast<const char*>(ones.data()), ones.size() * sizeof(ones[0])),
      0);
  ASSERT_GT(sizeof(fuse_in_header) + sizeof(batch) + ones.size() * sizeof(ones[0]),
            size_t{wire::kMaxFrameBytes});
  EXPECT_EQ(Accept(many).kind, Verdict::Kind::kNone);
  ASSERT_EQ(channel_.one_way.size(), 17u);  // 16 x 4,096 + 509
  std::vector<fuse_forget_one> sent;
  std::set<uint64_t> uniques;
  for (const std::string& frame : channel_.one_way) {
    EXPECT_LE(frame.size(), size_t{wire::kMaxFrameBytes});
    std::vector<fuse_forget_one> records = ReadBatch(frame);
    EXPECT_LE(records.size(), 4096u);
    sent.insert(sent.end(), records.begin(), records.end());
    fuse_in_header header;
    std::memcpy(&header, frame.data(), sizeof(header));
    uniques.insert(header.unique);
  }
  ASSERT_EQ(sent.size(), ones.size());
  for (uint32_t i = 0; i < kRecords; ++i) {
    ASSERT_EQ(sent[i].nodeid, ones[i].nodeid) << i;
    ASSERT_EQ(sent[i].nlookup, ones[i].nlookup) << i;
  }
  EXPECT_EQ(uniques.size(), channel_.one_way.size());
  EXPECT_EQ(stats_.forwarded.load(), channel_.one_way.size());

  // A batch that fits goes as the kernel sent it, in one frame.
  channel_.one_way.clear();
  batch.count = 2;
  Delivery two =
      Make(Transport::kClassic, FUSE_BATCH_FORGET, batch,
           std::string_view(reinterpret_cast<const char*>(ones.data()), 2 * sizeof(ones[0])), 0);
  EXPECT_EQ(Accept(two).kind, Verdict::Kind::kNone);
  ASSERT_EQ(channel_.one_way.size(), 1u);
  EXPECT_EQ(ReadBatch(channel_.one_way[0]).size(), 2u);
}

// An idle mount: the channel's tick hands back what ended, with no request from the kernel.
TEST_F(ForwarderEdgeTest, KeptLookupsGoBackOnTheTickWhileNothingComes) {
  fuse_entry_out entry{};
  entry.nodeid = 80;
  entry.entry_valid = 60;
  entry.attr_valid = 60;
  entry.attr.mode = S_IFREG | 0644;
  kept_.Record(7, "idle", entry, kept_.Ticket(), true, fake_now_ns);
  ASSERT_TRUE(kept_.Keep(80, 1, fake_now_ns));
  forwarder_.OnTick();
  EXPECT_TRUE(channel_.one_way.empty());  // still valid: kept
  const uint64_t saved = fake_now_ns;
  fake_now_ns += 61'000'000'000;  // past the entry's lifetime
  forwarder_.OnTick();
  fake_now_ns = saved;
  ASSERT_EQ(channel_.one_way.size(), 1u);
  EXPECT_EQ(kept_.kept(), 0u);
  forwarder_.OnTick();
  EXPECT_EQ(channel_.one_way.size(), 1u);  // nothing more
}

// Requests whose answers the kernel builds dentries or inodes from are counted from Accept to
// OnAnswered, whether the server or the mount answers them (KernelNotifier repeats pushes that
// find nothing meanwhile); others are not.
TEST_F(ForwarderEdgeTest, AnswersThatBuildEntriesAreCountedUntilAnswered) {
  Delivery looking(Transport::kClassic, FUSE_LOOKUP, nullptr, 0, std::string("f\0", 2), 7);
  ASSERT_EQ(Accept(looking).kind, Verdict::Kind::kForward);
  EXPECT_EQ(notifier_.answers_in_flight(), 1);
  forwarder_.OnAnswered(state_, 0);
  EXPECT_EQ(notifier_.answers_in_flight(), 0);
  dirs_.RecordCreated(9, dirs_.Ticket(), fake_now_ns);
  Delivery absent(Transport::kClassic, FUSE_LOOKUP, nullptr, 0, std::string("g\0", 2), 9);
  ASSERT_EQ(Accept(absent).kind, Verdict::Kind::kAnswer);  // answered here
  EXPECT_EQ(notifier_.answers_in_flight(), 1);
  forwarder_.OnAnswered(state_, 0);
  EXPECT_EQ(notifier_.answers_in_flight(), 0);
  fuse_getattr_in getattr{};
  Delivery asking = Make(Transport::kClassic, FUSE_GETATTR, getattr, {}, 8);
  ASSERT_EQ(Accept(asking).kind, Verdict::Kind::kForward);
  EXPECT_EQ(notifier_.answers_in_flight(), 0);
  forwarder_.OnAnswered(state_, 0);
  EXPECT_EQ(notifier_.answers_in_flight(), 0);
}

// The export changed behind the server's back: an ESTALE answer about a kept node, or a negative
// answer for a kept name, ends what was kept (the kernel looks the name up again at once).
TEST_F(ForwarderEdgeTest, WhatTheServerNoLongerKnowsIsNotHandedOut) {
  auto lookup_answered = [&](const char* name, uint64_t node) {
    Delivery looking(Transport::kClassic, FUSE_LOOKUP, nullptr, 0, std::string(name) + '\0', 7);
    Verdict verdict = Accept(looking);
    if (verdict.kind != Verdict::Kind::kForward) return verdict.kind;
    char reply_body[256];
    forwarder_.Forward(request_, &state_, 0, ReplyBuffer{reply_body, sizeof(reply_body)});
    fuse_entry_out entry{};
    entry.nodeid = node;
    entry.entry_valid = 60;
    entry.attr_valid = 60;
    entry.attr.mode = S_IFREG | 0644;
    std::memcpy(reply_body, &entry, sizeof(entry));
    forwarder_.OnReply(&state_, fuse_out_header{}, reply_body, sizeof(entry), ReplyOrigin::kServer);
    return verdict.kind;
  };
  auto forget = [&](uint64_t node) {
    fuse_forget_in in{};
    in.nlookup = 1;
    Delivery one = Make(Transport::kClassic, FUSE_FORGET, in, {}, node);
    (void)Accept(one);
  };
  ASSERT_EQ(lookup_answered("s", 70), Verdict::Kind::kForward);
  forget(70);
  ASSERT_EQ(kept_.kept(), 1u);
  // The kernel asks about node 70 and hears ESTALE.
  fuse_getattr_in getattr{};
  Delivery asking = Make(Transport::kClassic, FUSE_GETATTR, getattr, {}, 70);
  ASSERT_EQ(Accept(asking).kind, Verdict::Kind::kForward);
  char body[256];
  forwarder_.Forward(request_, &state_, 0, ReplyBuffer{body, sizeof(body)});
  fuse_out_header stale{};
  stale.error = -ESTALE;
  forwarder_.OnReply(&state_, stale, body, 0, ReplyOrigin::kServer);
  EXPECT_EQ(kept_.kept(), 0u);
  EXPECT_EQ(lookup_answered("s", 0), Verdict::Kind::kForward);  // to the server

  // The kernel still holds node 71 when the server says "n" is gone: once forgotten, it is not
  // kept for that name.
  ASSERT_EQ(lookup_answered("n", 71), Verdict::Kind::kForward);
  ASSERT_EQ(lookup_answered("n", 0), Verdict::Kind::kForward);
  const size_t sent_before = channel_.one_way.size();
  forget(71);
  EXPECT_EQ(kept_.kept(), 0u);
  EXPECT_EQ(channel_.one_way.size(), sent_before + 1);
}

// Handle-less listings: OPENDIR is answered with a handle of the mount's own while the channel's
// server lists by node; a READDIR of it goes out with fh 0, its listing's end learned under the
// kernel's handle; RELEASEDIR of it is answered here.
TEST_P(ForwarderTest, ADirectoryOpenedHereIsListedByNodeAtTheServer) {
  LocalDirHandles local;
  DirEnds ends;
  RecordingChannel channel;
  WorkerStats stats;
  Forwarder::Config config;
  config.clock = FakeClock;
  config.dir_ends = &ends;
  config.local_dirs = &local;
  Forwarder forwarder(config, &stats, &channel);
  KernelRequest request;
  RequestState state;
  auto accept = [&](Delivery& delivery) {
    request = delivery.Decode();
    return forwarder.Accept(request, &state, delivery.body());
  };
  fuse_open_in open{};
  Delivery opendir = Make(transport(), FUSE_OPENDIR, open);
  EXPECT_EQ(accept(opendir).kind, Verdict::Kind::kForward) << "the server keeps handles";
  channel.handleless = true;
  Delivery opendir2 = Make(transport(), FUSE_OPENDIR, open);
  Verdict verdict = accept(opendir2);
  ASSERT_EQ(verdict.kind, Verdict::Kind::kAnswer);
  ASSERT_EQ(verdict.body_size, sizeof(fuse_open_out));
  fuse_open_out opened;
  std::memcpy(&opened, opendir2.body(), sizeof(opened));
  ASSERT_TRUE(local.IsLocal(opened.fh));

  fuse_read_in in{};
  in.fh = opened.fh;
  in.offset = 5;
  in.size = 4096;
  Delivery readdir = Make(transport(), FUSE_READDIR, in);
  ASSERT_EQ(accept(readdir).kind, Verdict::Kind::kForward);
  char reply[4096];
  forwarder.Forward(request, &state, 0, ReplyBuffer{reply, sizeof(reply)});
  ASSERT_EQ(channel.submitted.size(), 1u);
  fuse_read_in sent;
  ASSERT_GE(channel.submitted[0].body.size(), sizeof(sent));
  std::memcpy(&sent, channel.submitted[0].body.data(), sizeof(sent));
  EXPECT_EQ(sent.fh, 0u);
  EXPECT_EQ(sent.offset, 5u);
  // The server's empty answer: the end, known under the kernel's handle.
  fuse_out_header header{sizeof(fuse_out_header), 0, 42};
  forwarder.OnReply(&state, header, reply, 0, ReplyOrigin::kServer);
  EXPECT_TRUE(ends.AtEnd(opened.fh, 5));
  Delivery again = Make(transport(), FUSE_READDIR, in);
  EXPECT_EQ(accept(again).kind, Verdict::Kind::kAnswer);

  fuse_release_in release{};
  release.fh = opened.fh;
  Delivery releasedir = Make(transport(), FUSE_RELEASEDIR, release);
  verdict = accept(releasedir);
  ASSERT_EQ(verdict.kind, Verdict::Kind::kAnswer);
  EXPECT_EQ(verdict.header.error, 0);
  EXPECT_EQ(channel.submitted.size(), 1u) << "nothing more went out";
  EXPECT_FALSE(local.IsLocal(opened.fh));
  EXPECT_FALSE(ends.AtEnd(opened.fh, 5));
}

TEST_P(ForwarderTest, ClassifiesOnAccept) {
  fuse_write_in writeback{};
  writeback.size = 4;
  writeback.write_flags = FUSE_WRITE_CACHE;
  Delivery write = Make(transport(), FUSE_WRITE, writeback, "data");
  ASSERT_EQ(Accept(write).kind, Verdict::Kind::kForward);
  EXPECT_EQ(state_.request_class, queue::RequestClass::kBackground);

  Delivery page_read = Make(transport(), FUSE_READ, ReadIn(4096));
  ASSERT_EQ(Accept(page_read).kind, Verdict::Kind::kForward);
  EXPECT_EQ(state_.request_class, queue::RequestClass::kForeground);

  Delivery readahead = Make(transport(), FUSE_READ, ReadIn(128 * 1024));
  ASSERT_EQ(Accept(readahead).kind, Verdict::Kind::kForward);
  EXPECT_EQ(state_.request_class, queue::RequestClass::kBackground);

  Delivery direct = Make(transport(), FUSE_READ, ReadIn(4096, O_DIRECT));
  ASSERT_EQ(Accept(direct).kind, Verdict::Kind::kForward);
  EXPECT_EQ(state_.request_class, queue::RequestClass::kBackground);
}

TEST_P(ForwarderTest, ForwardPassesTheFrameAndReplyBounds) {
  fake_now_ns = 5'000'000;
  Delivery delivery = Make(transport(), FUSE_READ, ReadIn(8192));
  ASSERT_EQ(Accept(delivery).kind, Verdict::Kind::kForward);
  char reply_body[16];
  forwarder_.Forward(request_, &state_, /*slot=*/3, ReplyBuffer{reply_body, sizeof(reply_body)});
  ASSERT_EQ(channel_.submitted.size(), 1u);
  const RecordingChannel::Submitted& call = channel_.submitted[0];
  EXPECT_EQ(call.reply.slot, 3u);
  EXPECT_EQ(call.reply.opcode, static_cast<uint32_t>(FUSE_READ));
  EXPECT_EQ(call.reply.body, reply_body);
  EXPECT_EQ(call.reply.capacity, sizeof(reply_body));
  EXPECT_EQ(call.reply.min_body, 0u);
  EXPECT_EQ(call.reply.max_body, 8192u);
  EXPECT_EQ(call.header.unique, 42u);
  EXPECT_EQ(call.received_ns, 5'000'000u);
  fuse_read_in sent;
  ASSERT_EQ(call.body.size(), sizeof(sent));
  std::memcpy(&sent, call.body.data(), sizeof(sent));
  EXPECT_EQ(sent.size, 8192u);
  EXPECT_EQ(forwarder_.inflight(), 1u);
  EXPECT_EQ(stats_.forwarded.load(), 1u);
  // More than a page: readahead, counted as background.
  EXPECT_EQ(stats_.forwarded_background.load(), 1u);
  EXPECT_EQ(stats_.forwarded_by_op[1][FUSE_READ].load(), 1u);
  EXPECT_EQ(stats_.bytes_to_server.load(), sizeof(fuse_read_in));
}

TEST_P(ForwarderTest, StructAndPayloadReachTheChannelInOrder) {
  fuse_write_in write{};
  write.size = 5;
  Delivery delivery = Make(transport(), FUSE_WRITE, write, "hello");
  ASSERT_EQ(Accept(delivery).kind, Verdict::Kind::kForward);
  char reply_body[sizeof(fuse_write_out)];
  forwarder_.Forward(request_, &state_, 0, ReplyBuffer{reply_body, sizeof(reply_body)});
  ASSERT_EQ(channel_.submitted.size(), 1u);
  const RecordingChannel::Submitted& call = channel_.submitted[0];
  // The classic frame is contiguous; the ring's struct and payload are two parts.
  EXPECT_EQ(call.nparts, transport() == Transport::kRing ? 2 : 1);
  ASSERT_EQ(call.body.size(), sizeof(write) + 5);
  EXPECT_EQ(call.body.substr(sizeof(write)), "hello");
  EXPECT_EQ(call.reply.min_body, sizeof(fuse_write_out));
  EXPECT_EQ(call.reply.max_body, sizeof(fuse_write_out));
  EXPECT_EQ(stats_.bytes_to_server.load(), sizeof(write) + 5);
}

TEST_P(ForwarderTest, ZeroSizeGetxattrExpectsTheSizeReply) {
  fuse_getxattr_in probe{};
  Delivery delivery = Make(transport(), FUSE_GETXATTR, probe, std::string_view("user.a\0", 7));
  ASSERT_EQ(Accept(delivery).kind, Verdict::Kind::kForward);
  char reply_body[64];
  forwarder_.Forward(request_, &state_, 0, ReplyBuffer{reply_body, sizeof(reply_body)});
  ASSERT_EQ(channel_.submitted.size(), 1u);
  EXPECT_EQ(channel_.submitted[0].reply.min_body, sizeof(fuse_getxattr_out));
  EXPECT_EQ(channel_.submitted[0].reply.max_body, sizeof(fuse_getxattr_out));
}

TEST_P(ForwarderTest, ReplyAndAnswerAreCounted) {
  fake_now_ns = 1'000'000;
  Delivery delivery = Make(transport(), FUSE_READ, ReadIn(4096));
  ASSERT_EQ(Accept(delivery).kind, Verdict::Kind::kForward);
  char reply_body[4096];
  forwarder_.Forward(request_, &state_, 0, ReplyBuffer{reply_body, sizeof(reply_body)});
  fake_now_ns = 3'000'000;
  forwarder_.OnReply(&state_, fuse_out_header{}, reply_body, 100, ReplyOrigin::kServer);
  EXPECT_EQ(forwarder_.inflight(), 0u);
  EXPECT_EQ(stats_.bytes_from_server.load(), 100u);
  EXPECT_EQ(stats_.backend_rtt.sum_ns.load(), 2'000'000);
  forwarder_.OnAnswered(state_, 0);
  EXPECT_EQ(stats_.replies.load(), 1u);
  EXPECT_EQ(stats_.request_duration[0].sum_ns.load(), 2'000'000);

  // An answer ringfs gave because the server did not is a failure.
  forwarder_.OnReply(&state_, fuse_out_header{}, reply_body, 0, ReplyOrigin::kTimeout);
  forwarder_.OnAnswered(state_, -ETIMEDOUT);
  EXPECT_EQ(Failures(FailureReason::kTimeout), 1u);
}

// --- Size limits and malformed requests --------------------------------------------------

TEST_F(ForwarderEdgeTest, ClassicLengthOtherThanWhatWasReadIsRefused) {
  fuse_getattr_in getattr{};
  Delivery delivery = Make(Transport::kClassic, FUSE_GETATTR, getattr);
  delivery.set_delivered(sizeof(fuse_in_header) + sizeof(getattr) + 8);
  ExpectRefusedAsBadRequest(delivery, DecodeResult::kBadLength);
}

// Was forwarded cut short (the server answered EINVAL) and read zero-filled by the local
// answers; now refused at the edge like every request ringfs cannot take.
TEST_F(ForwarderEdgeTest, ClassicArgumentStructShorterThanTheOpcodesIsRefused) {
  uint32_t half_a_read_in[4] = {};
  Delivery delivery(Transport::kClassic, FUSE_READ, half_a_read_in, sizeof(half_a_read_in));
  ExpectRefusedAsBadRequest(delivery, DecodeResult::kShortStruct);
}

TEST_F(ForwarderEdgeTest, ClassicReadShorterThanAHeaderGetsNoAnswer) {
  Delivery delivery = MakeBare(Transport::kClassic, FUSE_GETATTR);
  delivery.set_delivered(sizeof(fuse_in_header) - 1);
  EXPECT_EQ(Accept(delivery).kind, Verdict::Kind::kNone);
  EXPECT_EQ(request_.decoded, DecodeResult::kTruncatedHeader);
  EXPECT_TRUE(channel_.submitted.empty());
}

TEST_F(ForwarderEdgeTest, RingPayloadLargerThanTheEntryIsRefused) {
  fuse_write_in write{};
  Delivery delivery = Make(Transport::kRing, FUSE_WRITE, write);
  delivery.set_ring_payload(kPayloadBytes + 1);
  ExpectRefusedAsBadRequest(delivery, DecodeResult::kPayloadTooLarge);
}

TEST_F(ForwarderEdgeTest, RingPayloadThatFillsTheEntryIsTaken) {
  fuse_write_in write{};
  Delivery delivery = Make(Transport::kRing, FUSE_WRITE, write);
  delivery.set_ring_payload(kPayloadBytes);
  EXPECT_EQ(Accept(delivery).kind, Verdict::Kind::kForward);
  EXPECT_EQ(request_.payload_size, kPayloadBytes);
  EXPECT_EQ(request_.op_in_size, sizeof(fuse_write_in));
}

// --- Requests without an answer ----------------------------------------------------------

TEST_F(ForwarderEdgeTest, ClassicInterruptIsPostedForTheChannels) {
  fuse_interrupt_in interrupt{};
  interrupt.unique = 1234;
  Delivery delivery = Make(Transport::kClassic, FUSE_INTERRUPT, interrupt);
  EXPECT_EQ(Accept(delivery).kind, Verdict::Kind::kNone);
  EXPECT_TRUE(interrupts_.Take(1234));
  EXPECT_TRUE(channel_.submitted.empty());
  EXPECT_TRUE(channel_.one_way.empty());
}

TEST(ForwarderNoBoardTest, ClassicInterruptIsDropped) {
  WorkerStats stats;
  RecordingChannel channel;
  Forwarder forwarder(Forwarder::Config{nullptr, nullptr, FakeClock}, &stats, &channel);
  fuse_interrupt_in interrupt{};
  Delivery delivery = Make(Transport::kClassic, FUSE_INTERRUPT, interrupt);
  RequestState state;
  EXPECT_EQ(forwarder.Accept(delivery.Decode(), &state, delivery.body()).kind,
            Verdict::Kind::kNone);
}

// The kernel's FORGET of a directory with early unlinks outstanding waits for them: sent first,
// it could make the server drop the directory the unlinks name (BackendChannel sends it later).
TEST_F(ForwarderEdgeTest, AForgetOfADirectoryWithUnlinksOwedWaits) {
  fuse_attr_out dir{};
  dir.attr.mode = 040755;
  async_.Learn(7, dir, async_.Ticket(), fake_now_ns);
  const uint64_t seq = async_.Begin(7, fake_now_ns);
  fuse_forget_in forget{};
  forget.nlookup = 3;
  Delivery delivery = Make(Transport::kClassic, FUSE_FORGET, forget);
  EXPECT_EQ(Accept(delivery).kind, Verdict::Kind::kNone);
  EXPECT_TRUE(channel_.one_way.empty());
  EXPECT_EQ(async_.End(seq, 7), 3u) << "handed to the channel that answers the last unlink";
  Delivery again = Make(Transport::kClassic, FUSE_FORGET, forget);
  EXPECT_EQ(Accept(again).kind, Verdict::Kind::kNone);
  EXPECT_EQ(channel_.one_way.size(), 1u) << "none owed: sent at once";
}

// A lookup of a directory the mount kept and now gives back (its entry expired) waits, like the
// kernel's own FORGET, while unlinks in that directory are owed.
TEST_F(ForwarderEdgeTest, AKeptDirectorysLookupGivenBackWaitsForItsUnlinks) {
  fuse_entry_out entry{};
  entry.nodeid = 80;
  entry.entry_valid = 60;
  entry.attr_valid = 60;
  entry.attr.mode = S_IFDIR | 0755;
  kept_.Record(7, "sub", entry, kept_.Ticket(), true, fake_now_ns);
  ASSERT_TRUE(kept_.Keep(80, 2, fake_now_ns));
  fuse_attr_out dir{};
  dir.attr.mode = S_IFDIR | 0755;
  async_.Learn(80, dir, async_.Ticket(), fake_now_ns);
  const uint64_t seq = async_.Begin(80, fake_now_ns);
  ASSERT_GT(seq, 0u);
  const uint64_t saved = fake_now_ns;
  fake_now_ns += 61'000'000'000;  // past the entry's lifetime: its lookups go back
  forwarder_.OnTick();
  fake_now_ns = saved;
  EXPECT_EQ(kept_.kept(), 0u);
  EXPECT_TRUE(channel_.one_way.empty()) << "sent before the unlink in it was answered";
  EXPECT_EQ(async_.End(seq, 80), 2u) << "handed to the channel that answers the unlink";
}

TEST_F(ForwarderEdgeTest, ClassicForgetGoesOneWayWhole) {
  fuse_forget_in forget{};
  forget.nlookup = 3;
  Delivery delivery = Make(Transport::kClassic, FUSE_FORGET, forget);
  EXPECT_EQ(Accept(delivery).kind, Verdict::Kind::kNone);
  ASSERT_EQ(channel_.one_way.size(), 1u);
  EXPECT_EQ(channel_.one_way[0].size(), sizeof(fuse_in_header) + sizeof(forget));
  EXPECT_TRUE(channel_.submitted.empty());
  EXPECT_EQ(stats_.forgets.load(), 1u);
  EXPECT_EQ(forwarder_.inflight(), 0u);
}

// The kernel sends FORGET, BATCH_FORGET and INTERRUPT on /dev/fuse only. An entry carrying one
// must still be committed to return to the kernel; it was forwarded as if it expected a reply.
TEST_F(ForwarderEdgeTest, RingEntryWithARequestWithoutReplyIsAnswered) {
  for (uint32_t opcode : {FUSE_FORGET, FUSE_BATCH_FORGET, FUSE_INTERRUPT}) {
    uint64_t zeros[2] = {};
    Delivery delivery(Transport::kRing, opcode, zeros, sizeof(zeros));
    ExpectRefusedAsBadRequest(delivery, DecodeResult::kNoReplyOnRing);
  }
  EXPECT_TRUE(interrupts_.empty());
}

TEST(RefusalTest, EachDecodeFailureHasOneAnswer) {
  struct Row {
    DecodeResult result;
    int error;
    ReplyOrigin origin;
  };
  const Row rows[] = {
      {DecodeResult::kUnknownOpcode, ENOSYS, ReplyOrigin::kLocal},
      {DecodeResult::kBadLength, EIO, ReplyOrigin::kBadRequest},
      {DecodeResult::kShortStruct, EIO, ReplyOrigin::kBadRequest},
      {DecodeResult::kPayloadTooLarge, EIO, ReplyOrigin::kBadRequest},
      {DecodeResult::kNoReplyOnRing, EIO, ReplyOrigin::kBadRequest},
  };
  for (const Row& row : rows) {
    Refusal refusal = RefusalFor(row.result);
    EXPECT_EQ(refusal.error, row.error) << static_cast<int>(row.result);
    EXPECT_EQ(refusal.origin, row.origin) << static_cast<int>(row.result);
  }
}

TEST(KernelRequestTest, ClassicViewSplitsStructAndPayload) {
  Delivery delivery = MakeBare(Transport::kClassic, FUSE_LOOKUP, std::string_view("name\0", 5));
  KernelRequest request = delivery.Decode();
  ASSERT_EQ(request.decoded, DecodeResult::kOk);
  EXPECT_EQ(request.op.name, "LOOKUP");
  EXPECT_EQ(request.op_in_size, 0u);
  EXPECT_EQ(std::string_view(request.payload, request.payload_size),
            std::string_view("name\0", 5));
  EXPECT_NE(request.frame, nullptr);
  EXPECT_EQ(request.header.nodeid, 7u);
}

TEST(KernelRequestTest, StructIsZeroFilledBeyondWhatIsThere) {
  uint32_t first_half = 77;
  KernelRequest request;
  request.op_in = reinterpret_cast<const char*>(&first_half);
  request.op_in_size = sizeof(first_half);
  fuse_read_in read = request.Struct<fuse_read_in>();
  EXPECT_EQ(read.fh & 0xffffffffu, 77u);
  EXPECT_EQ(read.size, 0u);
}

}  // namespace
}  // namespace ringfs::frontend
