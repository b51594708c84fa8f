#include "frontend/forwarder.h"

#include <fcntl.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <optional>
#include <string_view>

#include "common/dir_attrs.h"
#include "common/fuse_ops.h"
#include "frontend/local_answer.h"
#include "frontend/open_reply.h"

namespace ringfs::frontend {

Refusal RefusalFor(DecodeResult result) {
  switch (result) {
    case DecodeResult::kUnknownOpcode:
      // By design, like an opcode that is known but not forwarded: the kernel then stops
      // sending it.
      return {ENOSYS, ReplyOrigin::kLocal};
    case DecodeResult::kBadLength:
    case DecodeResult::kShortStruct:
    case DecodeResult::kPayloadTooLarge:
    case DecodeResult::kNoReplyOnRing:
    case DecodeResult::kOk:
    case DecodeResult::kTruncatedHeader:
      break;
  }
  return {EIO, ReplyOrigin::kBadRequest};
}

namespace {

// The NUL-terminated string at `offset` of `payload` (empty when there is none).
std::string_view NameAt(const KernelRequest& request, size_t offset) {
  if (request.payload == nullptr || offset >= request.payload_size) return {};
  const char* start = request.payload + offset;
  return {start, strnlen(start, request.payload_size - offset)};
}

// Before a request that changes a name goes to the server: its names are no longer known absent
// (CompleteDirs) nor known to lead to a node (KeptEntries). Renames record both names
// (RENAME_WHITEOUT leaves one behind). Either cache may be null.
void RecordNames(const KernelRequest& request, CompleteDirs* dirs, KeptEntries* kept) {
  const uint64_t dir = request.header.nodeid;
  auto changes = [&](uint64_t in, std::string_view name, bool may_appear) {
    if (dirs != nullptr && may_appear) dirs->AddName(in, name);
    // A listing the mount keeps must not show a name removed (an early unlink's caller has its
    // answer already).
    if (dirs != nullptr && !may_appear) dirs->ListingChanged(in);
    if (kept != nullptr) kept->DropName(in, name);
  };
  switch (request.opcode()) {
    case FUSE_CREATE:
    case FUSE_MKNOD:
    case FUSE_MKDIR:
    case FUSE_SYMLINK:  // name, then the link's target
    case FUSE_LINK:     // the new name in `dir`
      changes(dir, NameAt(request, 0), true);
      return;
    case FUSE_UNLINK:
    case FUSE_RMDIR:
      changes(dir, NameAt(request, 0), false);
      return;
    case FUSE_RENAME:
    case FUSE_RENAME2: {
      const uint64_t newdir = request.opcode() == FUSE_RENAME
                                  ? request.Struct<fuse_rename_in>().newdir
                                  : request.Struct<fuse_rename2_in>().newdir;
      std::string_view old_name = NameAt(request, 0);
      changes(dir, old_name, true);
      changes(newdir, NameAt(request, old_name.size() + 1), true);
      return;
    }
    default:
      return;
  }
}

// Before a request that may change a node goes to the server: what KeptEntries knows of its
// attributes is stale. Besides the request's own node: LINK's target and COPY_FILE_RANGE's
// destination (a RENAME's directories are its names' directories, RecordNames).
void RecordChanged(const KernelRequest& request, KeptEntries& kept) {
  if (!fuse::ChangesSomething(request.opcode(), request.op_in, request.op_in_size)) return;
  // A name-space change's directory was touched by RecordNames already.
  if (!fuse::ChangesNamespace(request.opcode())) kept.Changed(request.header.nodeid);
  if (request.opcode() == FUSE_LINK) kept.Changed(request.Struct<fuse_link_in>().oldnodeid);
  if (request.opcode() == FUSE_COPY_FILE_RANGE) {
    kept.Changed(request.Struct<fuse_copy_file_range_in>().nodeid_out);
  }
}

// What a request that may change a file makes stale among write records (write attrs,
// DirAttrCache::OfferWrite): the record of the file's last write no longer tells its
// attributes. A WRITE brings its own; a removal or rename changes a node this mount cannot name
// from the request (its link count, its change time), and a create without O_EXCL may truncate
// an existing file. A READ may move its file's atime.
RecordsVoided WritesVoided(const KernelRequest& request) {
  const uint32_t opcode = request.opcode();
  if (opcode == FUSE_READ) return {.read = request.header.nodeid};
  if (opcode == FUSE_WRITE || !fuse::ChangesSomething(opcode, request.op_in, request.op_in_size)) {
    return {};
  }
  switch (opcode) {
    case FUSE_UNLINK:
    case FUSE_RMDIR:
    case FUSE_RENAME:
    case FUSE_RENAME2:
      return {.names = true};
    case FUSE_CREATE:
      return {.names = (request.Struct<fuse_create_in>().flags & O_EXCL) == 0};
    case FUSE_MKNOD:
    case FUSE_MKDIR:
    case FUSE_SYMLINK:
      return {};  // a new node: nothing of it is held
    case FUSE_LINK:
      return {.dropped = request.Struct<fuse_link_in>().oldnodeid};
    case FUSE_COPY_FILE_RANGE:  // the source is read, the destination changed
      return {.dropped = request.Struct<fuse_copy_file_range_in>().nodeid_out,
              .read = request.header.nodeid};
    default:
      return {.dropped = request.header.nodeid};
  }
}

// Requests whose success answer is the entry of their name in their node.
// Answers the kernel makes a dentry or inode of (a READDIRPLUS: several).
bool BuildsEntry(uint32_t opcode) {
  return opcode == FUSE_LOOKUP || opcode == FUSE_CREATE || opcode == FUSE_MKNOD ||
         opcode == FUSE_MKDIR || opcode == FUSE_SYMLINK || opcode == FUSE_LINK ||
         opcode == FUSE_READDIRPLUS;
}

// Requests on an open file's data, which no unlink changes: they need not wait for early
// unlinks (AsyncRemovals). Everything else may look at a name or a link count they change.
bool IndependentOfUnlinks(uint32_t opcode) {
  switch (opcode) {
    case FUSE_UNLINK:  // another name: the kernel never sends two for one name at once
    case FUSE_READ:
    case FUSE_WRITE:
    case FUSE_FLUSH:
    case FUSE_FSYNC:
    case FUSE_RELEASE:
    case FUSE_RELEASEDIR:
    case FUSE_LSEEK:
    // Opens the directory and nothing else: the server reads its names at the first READDIR,
    // which waits.
    case FUSE_OPENDIR:
      return true;
    default:
      return false;
  }
}

// Requests that could bring a file's attributes, or change or remove it, by a name or by
// another node than their own: they wait for every early SETATTR before them
// (AsyncRemovals::NamesGate). A create of a new name (O_EXCL) makes a new node.
bool MeetsFilesByName(const KernelRequest& request) {
  switch (request.opcode()) {
    case FUSE_LOOKUP:
    case FUSE_READDIRPLUS:
    case FUSE_LINK:
    case FUSE_UNLINK:
    case FUSE_RENAME:
    case FUSE_RENAME2:
    case FUSE_COPY_FILE_RANGE:
      return true;
    case FUSE_CREATE:
      return (request.Struct<fuse_create_in>().flags & O_EXCL) == 0;
    default:
      return false;
  }
}

// A WRITE that may be answered before the server ran it (AsyncRemovals::BeginWrite): through a
// write-only descriptor, which has no page cache behind it (frontend/open_reply.h), and asking
// nothing of the server's timing: no O_SYNC/O_DSYNC (the write's own flags carry RWF_DSYNC
// too), no O_APPEND (the server picks the offset), no O_DIRECT (its callers expect the device
// to have it), not the writeback of cached pages. FUSE_WRITE_KILL_SUIDGID (every write of a
// caller without CAP_FSETID) is fine: the answer carries no mode, and whatever asks for the
// mode next waits for the write (NodeGate).
bool MayWriteEarly(const fuse_write_in& in) {
  return (in.flags & O_ACCMODE) == O_WRONLY &&
         (in.flags & (O_SYNC | O_DSYNC | O_APPEND | O_DIRECT)) == 0 &&
         (in.write_flags & FUSE_WRITE_CACHE) == 0;
}

// A RELEASE that may reach the server a moment later than the kernel sent it: it only closes
// the server's handle (nothing a client sees changes: no lock is held there, and what was
// written is on the server already). One that drops a flock() lock goes at once, should the
// kernel ever hand those to us.
bool ReleaseMayWait(const KernelRequest& request) {
  return request.op_in_size >= sizeof(fuse_release_in) &&
         (request.Struct<fuse_release_in>().release_flags & FUSE_RELEASE_FLOCK_UNLOCK) == 0;
}

bool AnswersWithEntry(uint32_t opcode) {
  return opcode == FUSE_LOOKUP || opcode == FUSE_CREATE || opcode == FUSE_MKNOD ||
         opcode == FUSE_MKDIR || opcode == FUSE_SYMLINK;
}

}  // namespace

Verdict Forwarder::Answer(const KernelRequest& request, RequestState* state, int error,
                          size_t body_size, ReplyOrigin origin) {
  state->reply_origin = origin;
  Verdict verdict;
  verdict.kind = Verdict::Kind::kAnswer;
  verdict.header = {static_cast<uint32_t>(sizeof(fuse_out_header) + body_size), -error,
                    request.unique()};
  verdict.body_size = body_size;
  return verdict;
}

Forwarder::Config ForwarderConfigOf(const BackendConfig& backend) {
  return Forwarder::Config{.dir_attrs = backend.dir_attrs,
                           .interrupts = backend.interrupts,
                           .xattrs = backend.xattrs,
                           .dirs = backend.dirs,
                           .kept = backend.kept,
                           .notifier = backend.notifier,
                           .async = backend.async,
                           .dir_ends = backend.dir_ends,
                           .kept_pages = backend.kept_pages,
                           .local_dirs = backend.local_dirs,
                           .async_dio = backend.async_dio,
                           .writeback_cache = backend.writeback_cache};
}

Verdict Forwarder::Accept(const KernelRequest& request, RequestState* state, void* body) {
  *state = RequestState{};
  state->received_ns = config_.clock();
  if (request.decoded == DecodeResult::kTruncatedHeader) return Verdict{};  // no unique to answer
  if (request.decoded != DecodeResult::kOk) {
    Refusal refusal = RefusalFor(request.decoded);
    return Answer(request, state, refusal.error, 0, refusal.origin);
  }
  if (config_.kept != nullptr && config_.kept->HasReturns(state->received_ns)) ReturnKept();
  if (config_.notifier != nullptr && BuildsEntry(request.opcode())) {
    // Before anything is looked up for its answer (KernelNotifier: repeated notifications).
    config_.notifier->AnswerBegins();
    state->builds_entry = true;
  }
  switch (request.opcode()) {
    case FUSE_INTERRUPT:
      // The request it names is in some worker's backend channel: they look at the board.
      if (config_.interrupts != nullptr) {
        config_.interrupts->Post(request.Struct<fuse_interrupt_in>().unique, state->received_ns);
      }
      return Verdict{};
    case FUSE_FORGET:
    case FUSE_BATCH_FORGET:
      // Only the classic transport carries them (DecodeRingRequest refuses them), whole.
      WorkerStats::Add(stats_->forgets);
      Forget(request);
      return Verdict{};
    default:
      break;
  }
  if (!request.op.forwarded) {
    // DESTROY comes at unmount for some mounts and only needs an empty success.
    return Answer(request, state, request.opcode() == FUSE_DESTROY ? 0 : ENOSYS, 0,
                  ReplyOrigin::kLocal);
  }
  // Classified first: the answer's latency histogram is chosen by class, local answers too.
  state->request_class = queue::ClassifyKernelRequest(request.opcode(), request.op_in,
                                                      request.op_in_size, config_.async_dio);
  bool unlinks_owed = false;
  if (config_.async != nullptr && request.opcode() == FUSE_GETATTR) {
    // A directory with early unlinks outstanding: its attributes as the server last sent them.
    // Not a post-op snapshot either (AnswerLocally): one taken before them lives 60 s.
    if (std::optional<fuse_attr_out> attr =
            config_.async->DirAttrs(request.header.nodeid, &unlinks_owed)) {
      std::memcpy(body, &*attr, sizeof(*attr));
      WorkerStats::Add(stats_->answered_locally);
      return Answer(request, state, 0, sizeof(*attr), ReplyOrigin::kLocal);
    }
  }
  if (config_.async != nullptr && config_.async->writes()) {
    if (std::optional<Verdict> early = AcceptWithWrites(request, state, body)) return *early;
  }
  if (request.opcode() == FUSE_RELEASE && channel_->CanDetach()) {
    // The kernel neither waits for a RELEASE nor looks at its answer. Behind early changes of
    // its file: answered now and sent once they are done (waiting in its channel it would hold
    // the kernel's request slot, and given up at its deadline leave the file open at the
    // server). Otherwise, by default, answered now and sent with the next request: a create
    // loop's close then costs the server no wake-up of its own (ReleaseMayWait).
    const uint64_t gate =
        config_.async != nullptr ? config_.async->NodeGate(request.header.nodeid) : 0;
    if (gate != 0 || (channel_->DetachesReleases() && ReleaseMayWait(request))) {
      Detach(request, *state, /*seq=*/0, gate, /*after=*/0);
      return Answer(request, state, 0, 0, ReplyOrigin::kLocal);
    }
  }
  std::optional<LocalAnswer> local;
  if (!unlinks_owed) {
    // Only a kept listing page's replay looks at the early unlinks and the caller.
    const bool replayable = request.opcode() == FUSE_READDIRPLUS;
    local = AnswerLocally(
        request.opcode(), request.header.nodeid, request.op_in, request.op_in_size,
        {request.payload, request.payload_size},
        LocalCaches{
            config_.dir_attrs, config_.xattrs, config_.dirs, config_.kept, config_.dir_ends,
            config_.local_dirs, channel_->HandlelessListings(),
            replayable && config_.async != nullptr && !config_.async->Passed(config_.async->Gate()),
            replayable ? CallerKey(request.header.uid, request.header.gid) : 0},
        body, state->received_ns);
  }
  if (local) {
    // A designed reply (FLUSH's ENOSYS included), not a failure.
    WorkerStats::Add(stats_->answered_locally);
    return Answer(request, state, local->error, local->body_size, ReplyOrigin::kLocal);
  }
  // A chown or chmod that sets what the file already has (tar and cp -p as root restoring
  // root's ownership of what root just created): answered here, nothing sent.
  if (config_.async != nullptr && request.opcode() == FUSE_SETATTR &&
      config_.async->noop_setattrs() && config_.async->Passed(config_.async->Gate())) {
    if (std::optional<fuse_attr_out> same = config_.async->Unchanged(
            request.header.nodeid, request.Struct<fuse_setattr_in>(), state->received_ns)) {
      std::memcpy(body, &*same, sizeof(*same));
      WorkerStats::Add(stats_->answered_locally);
      return Answer(request, state, 0, sizeof(*same), ReplyOrigin::kLocal);
    }
  }
  // Not while an early unlink is owed: it could be of the file's name, and change its link count.
  if (config_.async != nullptr && config_.async->setattrs() &&
      request.opcode() == FUSE_SETATTR && channel_->CanDetach() &&
      config_.async->Passed(config_.async->Gate())) {
    timespec now_real{};
    clock_gettime(CLOCK_REALTIME, &now_real);
    if (std::optional<AsyncRemovals::EarlySetattr> early =
            config_.async->BeginSetattr(request.header.nodeid, request.Struct<fuse_setattr_in>(),
                                        state->received_ns, now_real)) {
      // Behind the same node's last early SETATTR, or folded into it.
      Detach(request, *state, early->seq, early->after, early->after, /*early_setattr=*/true);
      std::memcpy(body, &early->answer, sizeof(early->answer));
      return Answer(request, state, 0, sizeof(early->answer), ReplyOrigin::kLocal);
    }
  }
  // Not while an early SETATTR is owed: it could be of the file this removes.
  if (config_.async != nullptr && request.opcode() == FUSE_UNLINK && channel_->CanDetach() &&
      config_.async->Passed(config_.async->NamesGate())) {
    if (uint64_t seq = config_.async->Begin(request.header.nodeid, state->received_ns)) {
      Detach(request, *state, seq, /*gate=*/0, /*after=*/0);
      return Answer(request, state, 0, 0, ReplyOrigin::kLocal);
    }
  }
  Verdict verdict;
  verdict.kind = Verdict::Kind::kForward;
  return verdict;
}

std::optional<Verdict> Forwarder::AcceptWithWrites(const KernelRequest& request,
                                                   RequestState* state, void* body) {
  const uint64_t node = request.header.nodeid;
  if (request.opcode() == FUSE_FLUSH) {
    // The close waits for the early writes through this open file (Forward: answered by the
    // channel once they are done), and reports the first that failed.
    const uint64_t fh = request.Struct<fuse_flush_in>().fh;
    if (config_.async->WriteGate(fh) != 0) return Verdict{.kind = Verdict::Kind::kForward};
    WorkerStats::Add(stats_->answered_locally);
    return Answer(request, state, config_.async->TakeWriteError(fh), 0, ReplyOrigin::kLocal);
  }
  if (request.opcode() == FUSE_RELEASE) {
    config_.async->Released(request.Struct<fuse_release_in>().fh);
    return std::nullopt;
  }
  if (request.opcode() != FUSE_WRITE || !channel_->CanDetach()) return std::nullopt;
  const fuse_write_in& in = request.Struct<fuse_write_in>();
  if (!MayWriteEarly(in) || in.size != request.payload_size) return std::nullopt;
  std::optional<AsyncRemovals::EarlyWrite> early =
      config_.async->BeginWrite(node, in.fh, in.offset, in.size);
  if (!early) return std::nullopt;
  // Its record would come after writes answered later (early ones bring none, write_record):
  // the file's GETATTR waits for them at the server instead (Forward's NodeGate).
  if (config_.dir_attrs != nullptr) config_.dir_attrs->Drop(node);
  Detach(request, *state, early->seq, early->gate, /*after=*/0);
  fuse_write_out out{};
  out.size = in.size;
  std::memcpy(body, &out, sizeof(out));
  return Answer(request, state, 0, sizeof(out), ReplyOrigin::kLocal);
}

void Forwarder::Forward(const KernelRequest& request, RequestState* state, uint32_t slot,
                        ReplyBuffer reply) {
  // Listing attrs: the directory's record needs room, and must not follow what is learned later.
  const bool listing_record = config_.dir_attrs != nullptr && wire::IsListing(request.opcode());
  if (listing_record) LeaveRoomForRecord(request, reply);
  fuse::ReplyBounds bounds =
      fuse::SuccessReplyBounds(request.opcode(), request.op_in, request.op_in_size);
  PendingReply pending{slot, request.opcode(), reply.data, reply.capacity, bounds.min,
                       bounds.max};
  if (listing_record) pending.record_ticket = config_.dir_attrs->Ticket();
  pending.caller_waits = state->request_class == queue::RequestClass::kForeground;
  if (config_.dir_attrs != nullptr && wire::IsWrite(request.opcode())) {
    // Its record (write attrs) must not follow what is learned after it was sent.
    pending.record_ticket = config_.dir_attrs->Ticket();
    pending.record_reads = config_.dir_attrs->Reads(request.header.nodeid);
    pending.write_record = true;
  } else if (config_.dir_attrs != nullptr && config_.kept_pages != nullptr &&
             wire::IsOpen(request.opcode())) {
    // Its record (open attrs) answers the stat that follows the open, under the same rules.
    pending.record_ticket = config_.dir_attrs->Ticket();
    pending.record_reads = config_.dir_attrs->Reads(request.header.nodeid);
  }
  if (request.opcode() == FUSE_FLUSH && config_.async != nullptr && config_.async->writes()) {
    // Never sent (the server buffers nothing): answered once the early writes are done.
    pending.local = true;
    pending.gate = config_.async->WriteGate(request.Struct<fuse_flush_in>().fh);
    iovec parts[2];  // its fh, for the error it reports
    const int nparts = Parts(request, parts);
    channel_->Submit(pending, request.header, parts, nparts, state->received_ns);
    ++inflight_;
    return;
  }
  if (config_.async != nullptr) {
    uint64_t gate = IndependentOfUnlinks(request.opcode()) ? 0 : config_.async->Gate();
    gate = std::max(gate, config_.async->NodeGate(request.header.nodeid));
    if (MeetsFilesByName(request)) gate = std::max(gate, config_.async->NamesGate());
    pending.gate = gate;
  }
  if (config_.writeback_cache) {
    // The request's own bytes, which stay put until it is answered (Forward's contract); the
    // reopen after a restart then asks for the same (NodeLedger keeps these flags).
    AdjustOpenRequestForWriteback(request.opcode(), const_cast<char*>(request.op_in),
                                  request.op_in_size);
  }
  iovec parts[2];
  const int nparts = Parts(request, parts);
  // Applied again when it ends (BackendChannel::Answer).
  pending.voided = RecordSending(request);
  state->keep_node = request.header.nodeid;
  if (config_.kept != nullptr && config_.dirs != nullptr && AnswersWithEntry(request.opcode())) {
    // Before it is sent: a change sent meanwhile voids what its answer says.
    state->keep_ticket = config_.kept->Ticket();
    state->change_ticket = config_.dirs->ChangeTicket();
    state->keep_opcode = request.opcode();
    state->keep_dir = request.header.nodeid;
    state->keep_name = NameAt(request, 0);
  }
  if (config_.dirs != nullptr && wire::IsListing(request.opcode())) {
    // Its answer may fill the kernel's kept copy of the listing (KeptListings).
    const uint64_t ticket =
        config_.dirs->ListingSent(request.header.nodeid, state->received_ns,
                                  CallerKey(request.header.uid, request.header.gid));
    state->listing_counted = true;
    if (request.opcode() == FUSE_READDIRPLUS &&
        ReplayableListing(request.Struct<fuse_read_in>(), config_.local_dirs,
                          channel_->HandlelessListings())) {
      // ... and be kept by the mount to answer the next open's first READDIRPLUS.
      state->listing_ticket = ticket;
      state->listing_size = request.Struct<fuse_read_in>().size;
    }
  }
  if (config_.kept_pages != nullptr &&
      (request.opcode() == FUSE_READ || request.opcode() == FUSE_WRITE)) {
    // A READ's answer fills the kernel's pages of the file; a WRITE's bytes are in them already,
    // and the server may refuse them (KeptPages).
    config_.kept_pages->IoSent(request.header.nodeid, request.opcode() == FUSE_WRITE);
    state->pages_counted = true;
  }
  if (config_.dir_ends != nullptr &&
      (request.opcode() == FUSE_READDIR || request.opcode() == FUSE_READDIRPLUS)) {
    const fuse_read_in& in = request.Struct<fuse_read_in>();
    config_.dir_ends->Asking(in.fh, request.header.unique, in.offset, in.size,
                             request.opcode() == FUSE_READDIRPLUS);
    state->listing = true;
    state->listing_fh = in.fh;
  }
  NameNoLocalHandle(request);
  channel_->Submit(pending, request.header, parts, nparts, state->received_ns);
  ++inflight_;
  state->sent_ns = config_.clock();
  CountForwarded(request, *state);
}

void Forwarder::Detach(const KernelRequest& request, const RequestState& state, uint64_t seq,
                       uint64_t gate, uint64_t after, bool early_setattr) {
  // Applied again when it ends, as for any request: a WRITE does not wait for early unlinks
  // (IndependentOfUnlinks) and may be stat'ed at the server before one runs.
  const RecordsVoided voided = RecordSending(request, early_setattr);
  NameNoLocalHandle(request);
  iovec parts[2];
  const int nparts = Parts(request, parts);
  channel_->SubmitDetached(request.header, parts, nparts, state.received_ns, seq, gate, after,
                           voided);
  CountForwarded(request, state);
}

void Forwarder::CountForwarded(const KernelRequest& request, const RequestState& state) {
  const bool background = state.request_class == queue::RequestClass::kBackground;
  WorkerStats::Add(stats_->forwarded);
  WorkerStats::Add(background ? stats_->forwarded_background : stats_->forwarded_foreground);
  WorkerStats::Add(
      stats_->forwarded_by_op[background ? 1 : 0][request.opcode() % WorkerStats::kOpcodes]);
  WorkerStats::Add(stats_->bytes_to_server, request.body_bytes());
}

void Forwarder::LeaveRoomForRecord(const KernelRequest& request, ReplyBuffer reply) {
  constexpr size_t kRecord = sizeof(wire::DirAttrTrailer);
  const fuse_read_in in = request.Struct<fuse_read_in>();
  if (request.op_in_size < sizeof(in) || reply.capacity < 2 * kRecord ||
      in.size <= reply.capacity - kRecord) {
    return;
  }
  // A listing as large as the buffer (the kernel sizes READDIR by the caller's getdents buffer,
  // up to max_pages) leaves no room for the record the server appends (listing attrs): ask for
  // that much less. The request's bytes are ours until it is answered; a resend after a
  // reconnect carries the same, smaller size, harmless on a server without listing attrs.
  const uint32_t size = static_cast<uint32_t>(reply.capacity - kRecord);
  std::memcpy(const_cast<char*>(request.op_in) + offsetof(fuse_read_in, size), &size, sizeof(size));
}

void Forwarder::NameNoLocalHandle(const KernelRequest& request) const {
  if (config_.local_dirs == nullptr) return;
  // The request's bytes are ours until it is answered (as in LeaveRoomForRecord); a resend
  // after a reconnect carries fh 0 again.
  config_.local_dirs->ForServer(request.opcode(), const_cast<char*>(request.op_in),
                                request.op_in_size);
}

int Forwarder::Parts(const KernelRequest& request, iovec (&parts)[2]) {
  // The wire wants header | struct | payload. The classic transport has them contiguous; the
  // ring splits them, and the channel gathers the parts without copying.
  parts[0] = {const_cast<char*>(request.op_in), request.op_in_size};
  parts[1] = {const_cast<char*>(request.payload), request.payload_size};
  if (request.op_in + request.op_in_size == request.payload) {
    parts[0].iov_len += request.payload_size;
    return 1;
  }
  return 2;
}

RecordsVoided Forwarder::RecordSending(const KernelRequest& request, bool early_setattr) {
  // Just before it is sent, on the sending thread: from here to the channel's BeginChange no
  // other request can record an answer that this one's names or node make stale.
  RecordNames(request, config_.dirs, config_.kept);
  if (config_.kept != nullptr) RecordChanged(request, *config_.kept);
  RecordsVoided voided;
  if (config_.dir_attrs != nullptr) {
    voided = WritesVoided(request);
    config_.dir_attrs->Apply(voided);
  }
  if (config_.async != nullptr) {
    switch (request.opcode()) {
      case FUSE_SETATTR:  // its answer brings the new attributes back (BackendChannel::Answer)
        // One answered early made them itself (AsyncRemovals::BeginSetattr).
        if (!early_setattr) config_.async->SetattrSent(request.header.nodeid);
        break;
      case FUSE_SETXATTR:  // an ACL may change the mode
      case FUSE_REMOVEXATTR:
        config_.async->Forget(request.header.nodeid);
        break;
      case FUSE_UNLINK:
        // A snapshot from before it must not answer the GETATTR after it for its lifetime.
        if (config_.dir_attrs != nullptr) config_.dir_attrs->Drop(request.header.nodeid);
        break;
      default:
        break;
    }
  }
  return voided;
}

void Forwarder::OnReply(RequestState* state, const fuse_out_header& header, const char* body,
                        size_t body_size, ReplyOrigin origin) {
  state->reply_origin = origin;
  if (config_.kept != nullptr && origin == ReplyOrigin::kServer) {
    // Before the kernel sees the answer (it looks the name up again after an ESTALE).
    if (header.error == -ESTALE) config_.kept->Gone(state->keep_node);
    fuse_entry_out entry{};
    if (header.error == 0 && body_size >= sizeof(entry)) std::memcpy(&entry, body, sizeof(entry));
    if (state->keep_opcode == FUSE_LOOKUP && entry.nodeid == 0) {
      // The server says the name leads nowhere now (no entry, or an error).
      config_.kept->NoEntry(state->keep_dir, state->keep_name);
    } else if (state->keep_ticket != 0 && entry.nodeid != 0) {
      // Settled already (the channel settles before it delivers): only its own change counts.
      const bool self = state->keep_opcode != FUSE_LOOKUP;
      config_.kept->Record(state->keep_dir, state->keep_name, entry, state->keep_ticket,
                           config_.dirs->Quiet(state->change_ticket, self), config_.clock());
    }
  }
  state->keep_ticket = 0;
  state->keep_opcode = 0;
  if (state->listing) {
    // Anything but the server's own answer (a deadline, a lost connection) teaches nothing.
    config_.dir_ends->Learn(state->listing_fh, header.unique,
                            origin == ReplyOrigin::kServer ? -header.error : EIO,
                            {body, body_size});
  }
  state->listing = false;
  if (state->listing_ticket != 0 && origin == ReplyOrigin::kServer && header.error == 0) {
    config_.dirs->ListingAnswered(state->keep_node, state->listing_ticket, state->received_ns,
                                  state->listing_size, {body, body_size});
  }
  state->listing_ticket = 0;
  if (state->listing_counted) config_.dirs->ListingEnded(state->keep_node, config_.clock());
  state->listing_counted = false;
  if (state->pages_counted) config_.kept_pages->IoEnded(state->keep_node, config_.clock());
  state->pages_counted = false;
  if (inflight_ > 0) --inflight_;
  if (state->sent_ns != 0) {
    stats_->backend_rtt.Observe(static_cast<int64_t>(config_.clock() - state->sent_ns));
  }
  WorkerStats::Add(stats_->bytes_from_server, body_size);
}

void Forwarder::Forget(const KernelRequest& request) {
  if (request.opcode() == FUSE_FORGET) {
    const uint64_t node = request.header.nodeid;
    const uint64_t nlookup = request.Struct<fuse_forget_in>().nlookup;
    if (config_.kept != nullptr && config_.kept->Keep(node, nlookup, config_.clock())) {
      return;  // still in the server's table: the directory stays known too
    }
    if (config_.dirs != nullptr) config_.dirs->Drop(node);
    // Sent by the channel that answers the directory's last early unlink.
    if (config_.async != nullptr && config_.async->DeferForget(node, nlookup)) return;
    channel_->SubmitOneWay(request.frame, request.header.len);
    WorkerStats::Add(stats_->forwarded);
    return;
  }
  const uint32_t count = request.Struct<fuse_batch_forget_in>().count;
  std::vector<fuse_forget_one> sent;
  sent.reserve(count);
  const uint64_t now = config_.clock();
  for (uint32_t i = 0; i < count; ++i) {
    if ((i + 1) * sizeof(fuse_forget_one) > request.payload_size) break;
    fuse_forget_one one;
    std::memcpy(&one, request.payload + i * sizeof(one), sizeof(one));
    if (config_.kept != nullptr && config_.kept->Keep(one.nodeid, one.nlookup, now)) continue;
    if (config_.dirs != nullptr) config_.dirs->Drop(one.nodeid);
    if (config_.async != nullptr && config_.async->DeferForget(one.nodeid, one.nlookup)) continue;
    sent.push_back(one);
  }
  if (sent.size() == count && count <= kForgetsPerFrame) {
    channel_->SubmitOneWay(request.frame, request.header.len);
    WorkerStats::Add(stats_->forwarded);
  } else {
    SendForgets(sent);
  }
}

void Forwarder::OnTick() {
  if (config_.kept != nullptr && config_.kept->HasReturns(config_.clock())) ReturnKept();
}

void Forwarder::ReturnKept() {
  std::vector<fuse_forget_one> returns = config_.kept->TakeReturns(config_.clock());
  if (config_.async != nullptr) {
    // A directory's lookups with unlinks in it still owed wait for them (Forget).
    std::erase_if(returns, [this](const fuse_forget_one& one) {
      return config_.async->DeferForget(one.nodeid, one.nlookup);
    });
  }
  SendForgets(returns);
}

void Forwarder::SendForgets(std::span<const fuse_forget_one> all) {
  std::string frame;
  for (size_t first = 0; first < all.size(); first += kForgetsPerFrame) {
    const std::span<const fuse_forget_one> part =
        all.subspan(first, std::min<size_t>(kForgetsPerFrame, all.size() - first));
    fuse_in_header header{};
    header.opcode = FUSE_BATCH_FORGET;
    // The kernel's uniques never set bit 62 (nor 63, the channel's own requests); one-way
    // frames get no reply, so the number only has to be valid.
    header.unique = (uint64_t{1} << 62) | ++own_forget_frames_;
    fuse_batch_forget_in in{};
    in.count = static_cast<uint32_t>(part.size());
    header.len = static_cast<uint32_t>(sizeof(header) + sizeof(in) + part.size() * sizeof(part[0]));
    frame.clear();
    frame.append(reinterpret_cast<const char*>(&header), sizeof(header));
    frame.append(reinterpret_cast<const char*>(&in), sizeof(in));
    frame.append(reinterpret_cast<const char*>(part.data()), part.size() * sizeof(part[0]));
    channel_->SubmitOneWay(frame.data(), frame.size());
    WorkerStats::Add(stats_->forwarded);
  }
}

void Forwarder::OnAnswered(const RequestState& state, int error) {
  if (state.builds_entry) config_.notifier->AnswerEnds(config_.clock());
  WorkerStats::Add(stats_->replies);
  stats_->CountReply(error, state.reply_origin);
  if (state.received_ns != 0) {
    const bool background = state.request_class == queue::RequestClass::kBackground;
    stats_->request_duration[background ? 1 : 0].Observe(
        static_cast<int64_t>(config_.clock() - state.received_ns));
  }
}

}  // namespace ringfs::frontend
