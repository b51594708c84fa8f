#include "frontend/backend_channel.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "common/auth_proof.h"
#include "common/dir_attrs.h"
#include "common/hello_channel.h"
#include "common/host_id.h"
#include "common/invalidation.h"
#include "common/log.h"
#include "common/status.h"
#include "common/wire.h"
#include "frontend/caller_state.h"
#include "frontend/client_auth.h"
#include "frontend/open_reply.h"
#include "frontend/removed_entries.h"

namespace ringfs::frontend {
namespace {

// An OPEN's answer on its way to the kernel: FOPEN_KEEP_CACHE when the pages the kernel kept
// are current (KeptPages); `record`: the file at the open, null when the server sent none.
KeptPages::AtOpenAnswer KeepPagesAtOpen(KeptPages& kept, PageDrops& drops, uint64_t nodeid,
                                        const fuse_attr* record, char* body) {
  fuse_open_out out;
  std::memcpy(&out, body, sizeof(out));
  const KeptPages::AtOpenAnswer answer = kept.AtOpen(nodeid, record, MonotonicNs());
  if (answer == KeptPages::AtOpenAnswer::kDropUnconfirmed) drops.Post(nodeid);
  if (answer != KeptPages::AtOpenAnswer::kKeep) return answer;
  out.open_flags |= FOPEN_KEEP_CACHE;
  std::memcpy(body, &out, sizeof(out));
  return answer;
}

constexpr size_t kStagingBytes = 256 * 1024;
// Replies up to this size are received whole into staging before they are copied out.
constexpr size_t kWholeReplyBytes = 64 * 1024;
constexpr size_t kDiscardBytes = 64 * 1024;
constexpr uint32_t kGenerationMask = 0xffffff;
// Reconnect attempts start at once, then back off to this.
constexpr uint64_t kFirstBackoffNs = 100'000'000;
constexpr uint64_t kMaxBackoffNs = 1'000'000'000;
// A drained connection whose operations have not completed this long after shutdown() gets
// them cancelled.
constexpr uint64_t kDrainCancelNs = 1'000'000'000;
// How long a change whose answer was lost with a connection may still run on the same server
// process: after that it counts as settled (CompleteDirs::BeginChange).
constexpr uint64_t kUnsettledGraceNs = 60'000'000'000;

io_uring_sqe* GetSqe(io_uring* ring) {
  io_uring_sqe* sqe = io_uring_get_sqe(ring);
  while (sqe == nullptr) {
    io_uring_submit(ring);
    sqe = io_uring_get_sqe(ring);
  }
  return sqe;
}

// A server host that vanishes without a reset (power, partition) would otherwise be noticed
// only when TCP gives up retransmitting, after many minutes: probe an idle connection after
// 10 s, and give up on unacknowledged data or probes after 30 s. A stopped server process does
// not trip this (its kernel still acknowledges); deadlines cover that.
void DetectDeadPeer(int fd, bool is_unix) {
  if (is_unix) return;
  int on = 1, idle = 10, interval = 5, count = 4;
  unsigned int user_timeout_ms = 30'000;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof(user_timeout_ms));
}

uint64_t Ms(std::chrono::milliseconds ms) { return static_cast<uint64_t>(ms.count()) * 1'000'000; }

}  // namespace

wire::ClientHello MakeClientHello(const BackendConfig& config) {
  wire::ClientHello hello;
  hello.set_wire_version(wire::kWireVersion);
  hello.set_client_id(config.client_id);
  hello.set_export_name("/");
  hello.set_client_name(config.client_name);
  if (!config.token.empty()) {
    // Without a nonce the server takes us for a client without a secret and says so.
    absl::StatusOr<std::string> nonce = auth::DrawNonce();
    if (nonce.ok()) hello.set_client_nonce(*std::move(nonce));
  }
  hello.set_max_inflight(config.max_inflight);
  hello.set_max_frame_bytes(wire::kMaxFrameBytes);
  hello.set_fuse_minor(config.fuse_minor);
  hello.set_queue(config.queue);
  hello.set_host_id(ThisHostId());
  hello.set_entry_timeout_ns(config.entry_timeout.count());
  hello.set_attr_timeout_ns(config.attr_timeout.count());
  hello.set_want_dir_attrs(config.dir_attrs != nullptr);
  hello.set_want_node_handles(config.ledger != nullptr);
  hello.set_want_invalidations(config.notifier != nullptr);
  hello.set_want_cache_resets(config.notifier != nullptr);
  hello.set_want_empty_dir_hints(config.dir_attrs != nullptr && config.dirs != nullptr &&
                                 config.notifier != nullptr);
  hello.set_want_listing_attrs(config.dir_attrs != nullptr);
  hello.set_want_write_attrs(config.dir_attrs != nullptr && config.write_attrs);
  hello.set_want_open_attrs(config.dir_attrs != nullptr && config.kept_pages != nullptr);
  hello.set_want_handleless_listings(config.local_dirs != nullptr);
  return hello;
}

absl::StatusOr<ServerSession> AcceptServerHello(const BackendConfig& config,
                                                const wire::ServerHello& reply,
                                                bool authenticated) {
  if (reply.has_challenge()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("server %s sent a second authentication challenge", config.address.text));
  }
  if (reply.result() != wire::ServerHello::OK) {
    std::string reason = wire::ServerHello::Result_Name(reply.result());
    auto message = absl::StrFormat("server %s refused the connection (%s): %s",
                                   config.address.text, reason, reply.message());
    if (reply.result() == wire::ServerHello::AUTH_FAILED) {
      return absl::PermissionDeniedError(message);
    }
    return absl::FailedPreconditionError(message);
  }
  if (reply.max_inflight() == 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("server %s accepts no request in flight", config.address.text));
  }
  if (!authenticated && !config.token.empty()) {
    // Mutual: a server that never proved it knows our secret may be an impostor.
    return absl::PermissionDeniedError(absl::StrFormat(
        "server %s asks for no authentication, so it cannot prove it knows our secret: refused "
        "(mount without token_file= to use a server without authentication)",
        config.address.text));
  }
  ServerSession session;
  session.dir_attrs = config.dir_attrs != nullptr && reply.dir_attrs();
  session.max_inflight = std::min(reply.max_inflight(), config.max_inflight);
  session.instance_id = reply.instance_id();
  session.session_id = reply.session_id();
  session.node_handles = config.ledger != nullptr && reply.node_handles();
  session.invalidations = config.notifier != nullptr && reply.invalidations();
  session.empty_dir_hints = session.dir_attrs && session.invalidations &&
                            config.dirs != nullptr && reply.empty_dir_hints();
  session.listing_attrs = session.dir_attrs && reply.listing_attrs();
  session.write_attrs = session.dir_attrs && config.write_attrs && reply.write_attrs();
  session.open_attrs = session.dir_attrs && config.kept_pages != nullptr && reply.open_attrs();
  session.handleless_listings = config.local_dirs != nullptr && reply.handleless_listings();
  session.callers_as_themselves = reply.callers_as_themselves();
  return session;
}

absl::StatusOr<ServerSession> ConnectToServer(const BackendConfig& config) {
  ASSIGN_OR_RETURN(UniqueFd fd, ConnectTo(config.address, config.connect_timeout));
  absl::StatusOr<HelloChannel> channel =
      config.tls != nullptr
          ? HelloChannel::ClientTls(fd.get(), config.tls, TlsServerName(config))
          : HelloChannel(fd.get());
  if (!channel.ok()) {
    return absl::UnavailableError(absl::StrFormat("TLS with %s (as '%s') failed: %s",
                                                  config.address.text, TlsServerName(config),
                                                  channel.status().message()));
  }
  ASSIGN_OR_RETURN(std::string hello, wire::EncodeHandshake(MakeClientHello(config)));
  RETURN_IF_ERROR(channel->SendFrame(hello));
  wire::ServerHello reply;
  auto receive = [&]() -> absl::Status {
    absl::Status status = channel->Receive(&reply);
    if (status.ok()) return status;
    return absl::UnavailableError(absl::StrFormat("handshake with %s failed: %s",
                                                  config.address.text, status.ToString()));
  };
  RETURN_IF_ERROR(receive());
  const bool authenticated = reply.has_challenge();
  if (authenticated) {
    ASSIGN_OR_RETURN(std::string binding, ChannelBinding(channel->stream()));
    ASSIGN_OR_RETURN(std::string proof,
                     AnswerChallenge(config.token, config.address.text,
                                     std::string_view(hello).substr(8), reply.challenge(),
                                     binding));
    RETURN_IF_ERROR(channel->SendFrame(proof));
    reply.Clear();
    RETURN_IF_ERROR(receive());
  }
  ASSIGN_OR_RETURN(ServerSession session, AcceptServerHello(config, reply, authenticated));
  session.fd = std::move(fd);
  return session;
}

BackendChannel::BackendChannel(BackendConfig config, io_uring* ring, uint8_t kind, ReplySink* sink)
    : config_(std::move(config)),
      ring_(ring),
      kind_(kind),
      sink_(sink),
      records_(config_.max_inflight + 1 + (detachable() ? kDetached : 0)),
      staging_(kStagingBytes),
      discard_(kDiscardBytes) {
  by_unique_.reserve(records_.size());
  if (detachable()) detached_.resize(kDetached);
  if (config_.async != nullptr) gate_fd_.Reset(eventfd(0, EFD_CLOEXEC));
  if (config_.tls != nullptr) tls_ = std::make_unique<tls::RingTransport>(ring_);
  reclaim_slot_ = config_.max_inflight;
  tick_.tv_sec = 0;
  tick_.tv_nsec = std::chrono::nanoseconds(kTickInterval).count();
}

BackendChannel::~BackendChannel() {
  // The caches outlive this channel (a worker retired): the changes it followed no longer hold
  // them back. One that lost its answer may still run at the server; the grace this channel
  // would have waited for it is cut short here.
  uint64_t unsettled = unsettled_changes_;
  for (const auto& [unique, dropped] : dropped_) unsettled += dropped.change;
  uint64_t live = 0;  // sent or waiting, counted by CompleteDirs::BeginChange
  for (const auto& r : records_) live += r != nullptr && r->stage != Stage::kFree && r->change;
  if (config_.dirs != nullptr && unsettled + live != 0) config_.dirs->EndChange(unsettled + live);
  if (config_.dir_attrs != nullptr && unsettled != 0) config_.dir_attrs->Settle(unsettled);
  // A receive or send still in the kernel would use our buffers after we are gone: cancel them
  // and wait.
  if (fd_.valid()) shutdown(fd_.get(), SHUT_RDWR);
  if (gate_fd_.valid()) config_.async->Unregister(gate_fd_.get());
  for (Op op : {Op::kRecv, Op::kSend, Op::kTick, Op::kConnect, Op::kHelloSend, Op::kHelloRecv,
                Op::kProofSend, Op::kProofRecv, Op::kTlsHandshake, Op::kTlsRecv, Op::kTlsSend,
                Op::kTlsWake, Op::kFlush, Op::kGateWake}) {
    io_uring_sync_cancel_reg cancel{};
    cancel.addr = Tag(op);
    cancel.flags = IORING_ASYNC_CANCEL_ALL;
    cancel.timeout = {1, 0};
    (void)io_uring_register_sync_cancel(ring_, &cancel);
  }
}

uint64_t BackendChannel::Tag(Op op) const {
  // The tick outlives connections: it carries no generation.
  uint32_t generation =
      op == Op::kTick || op == Op::kFlush || op == Op::kGateWake ? 0 : generation_ & kGenerationMask;
  return (static_cast<uint64_t>(kind_) << 56) | (static_cast<uint64_t>(generation) << 32) |
         static_cast<uint32_t>(op);
}

void BackendChannel::Start() {
  io_uring_sqe* sqe = GetSqe(ring_);
  io_uring_prep_timeout(sqe, &tick_, 0, 0);
  io_uring_sqe_set_data64(sqe, Tag(Op::kTick));
  if (gate_fd_.valid()) ArmGateWake();
  StartConnect();
}

void BackendChannel::ArmGateWake() {
  io_uring_sqe* sqe = GetSqe(ring_);
  io_uring_prep_read(sqe, gate_fd_.get(), &gate_value_, sizeof(gate_value_), 0);
  io_uring_sqe_set_data64(sqe, Tag(Op::kGateWake));
}

// ---- requests in ----

void BackendChannel::Submit(const PendingReply& reply, const fuse_in_header& header,
                            const iovec* parts, int nparts, uint64_t received_ns) {
  std::unique_ptr<Record>& slot_record = records_[reply.slot];
  if (!slot_record) slot_record = std::make_unique<Record>();
  Record& r = *slot_record;
  r = Record{};
  r.unique = header.unique;
  r.reply = reply;
  r.header = header;
  r.iov[0] = {&r.header, sizeof(r.header)};
  r.iovcnt = 1;
  r.frame_bytes = sizeof(r.header);
  for (int i = 0; i < nparts && r.iovcnt < 4; ++i) {
    if (parts[i].iov_len == 0) continue;
    r.iov[r.iovcnt++] = parts[i];
    r.frame_bytes += parts[i].iov_len;
  }
  r.header.len = static_cast<uint32_t>(r.frame_bytes);
  r.gate = reply.gate;
  const uint32_t slot = reply.slot;
  // A RELEASE behind early changes (detached, or gated when no detached record was free) ends
  // its fh in the ledger once it ended (Answer): until then a new server instance must get the
  // file re-opened, for the writes it waits for. It has no deadline either: given up unsent it
  // would leave the file open at the server.
  r.release_behind_changes = header.opcode == FUSE_RELEASE && (IsDetached(slot) || reply.gate != 0);
  if (config_.ledger != nullptr && r.iovcnt > 1 && !r.release_behind_changes) {
    config_.ledger->OnRequest(header, r.iov[1].iov_base, r.iov[1].iov_len);
  }
  r.xattr_ticket = 0;
  r.xattr_name = -1;
  if (config_.xattrs != nullptr) NoteXattrRequest(r);
  r.async_ticket = config_.async != nullptr ? config_.async->Ticket() : 0;
  r.dir_ticket = 0;
  r.dir_empty = false;
  r.open_record = false;
  if (config_.dirs != nullptr) {
    if (header.opcode == FUSE_MKDIR) r.dir_ticket = config_.dirs->Ticket();
    if (header.opcode == FUSE_LOOKUP && trailers_on_.empty_dir_hints) {
      r.dir_ticket = config_.dirs->LookupTicket();
    }
  }
  // Followed until settled for the caches that a change run late would make wrong.
  r.change = (config_.dirs != nullptr || config_.dir_attrs != nullptr) &&
             fuse::ChangesSomething(header.opcode, nparts > 0 ? parts[0].iov_base : nullptr,
                                    nparts > 0 ? parts[0].iov_len : 0);
  if (r.change && config_.dirs != nullptr) config_.dirs->BeginChange();
  // A detached record has no deadline: it would open the gate of what follows it while the
  // server may still run it (those requests have their own deadlines), and drop it unsent.
  if (config_.request_timeout.count() > 0 && !IsDetached(slot) && !r.release_behind_changes) {
    r.deadline_ns = received_ns + Ms(config_.request_timeout);
  }
  by_unique_[r.unique] = slot;
  ++live_;
  // A local record's INTERRUPT is looked at by the tick (OnTick: only a dying caller's counts).
  if (!IsDetached(slot) && !reply.local && config_.interrupts != nullptr &&
      config_.interrupts->Take(r.unique)) {
    // Interrupted before it got here: it never reaches the server.
    ++interrupted_;
    Answer(slot, -EINTR, 0, ReplyOrigin::kInterrupted);
    return;
  }
  // Only where the kernel may lose its INTERRUPT (ring entries), and only for what the kernel
  // would interrupt: a request its caller waits in. Background requests (readahead, write-back,
  // async direct I/O, RELEASE) never are: their sender has gone on.
  if (config_.probe_signals && reply.caller_waits && header.pid != 0 && !IsDetached(slot) &&
      !reply.local) {
    r.probe_ns = received_ns + kSignalProbeNs;
  }
  r.stage = Stage::kWaiting;
  waiting_.push_back(slot);
  if (!IsDetached(slot) || header.opcode == FUSE_WRITE) {
    // What was gathered goes along. An early WRITE is not held back: its file's close waits
    // for it.
    gathering_ = false;
  } else if (!gathering_) {
    // A new batch. The timer armed for an earlier one, still running, ends it too: sooner
    // than detached_batch_wait, never later, and a stream of batches cut short by other
    // requests costs one timer per detached_batch_wait, not one per batch.
    gathering_ = true;
    detached_gathered_ = 1;
    if (!flush_armed_) {
      flush_armed_ = true;
      const int64_t wait = config_.detached_batch_wait.count();
      flush_.tv_sec = wait / 1'000'000'000;
      flush_.tv_nsec = wait % 1'000'000'000;
      io_uring_sqe* sqe = GetSqe(ring_);
      io_uring_prep_timeout(sqe, &flush_, 0, 0);
      io_uring_sqe_set_data64(sqe, Tag(Op::kFlush));
    }
  } else if (++detached_gathered_ >= kDetachedBatch) {
    gathering_ = false;
  }
  FillWindow();
}

void BackendChannel::SubmitDetached(const fuse_in_header& header, const iovec* parts, int nparts,
                                    uint64_t received_ns, uint64_t seq, uint64_t gate,
                                    uint64_t after, const RecordsVoided& voided) {
  if (header.opcode == FUSE_SETATTR && after != 0 &&
      MergeSetattr(header, parts, nparts, seq, after)) {
    return;
  }
  uint32_t index = 0;
  while (detached_[index].live) ++index;  // CanDetach() said one is free
  Detached& d = detached_[index];
  d.live = true;
  d.seq = seq;
  d.merged.clear();
  d.since_ns = received_ns;
  d.frame.clear();
  for (int i = 0; i < nparts; ++i) {
    d.frame.append(static_cast<const char*>(parts[i].iov_base), parts[i].iov_len);
  }
  d.reply.resize(kDetachedReplyBytes);
  ++detached_live_;
  if (header.opcode == FUSE_RELEASE) ++detached_releases_;
  const uint32_t slot = reclaim_slot_ + 1 + index;
  // Its own copy stands for the kernel's bytes, its own buffer for the reply's.
  fuse::ReplyBounds bounds = fuse::SuccessReplyBounds(header.opcode, nullptr, 0);
  PendingReply reply{slot, header.opcode, d.reply.data(), d.reply.size(), bounds.min, bounds.max};
  reply.gate = gate;
  reply.voided = voided;
  const iovec part{d.frame.data(), d.frame.size()};
  Submit(reply, header, &part, 1, received_ns);
}

bool BackendChannel::MergeSetattr(const fuse_in_header& header, const iovec* parts, int nparts,
                                  uint64_t seq, uint64_t after) {
  // The ring hands the argument struct and an empty payload as two parts.
  fuse_setattr_in in;
  size_t size = 0;
  for (int i = 0; i < nparts; ++i) {
    if (size + parts[i].iov_len > sizeof(in)) return false;
    std::memcpy(reinterpret_cast<char*>(&in) + size, parts[i].iov_base, parts[i].iov_len);
    size += parts[i].iov_len;
  }
  if (size != sizeof(in)) return false;
  // Folded, the server stops at the first change that fails and the rest are lost, so only
  // changes that fail together are folded: a mode and explicitly set times (both need the
  // owner). An owner change fails alone (EPERM under root_squash, or for a caller that is not
  // root), and times set to now need only write access.
  constexpr uint32_t kAlone = FATTR_UID | FATTR_GID | FATTR_ATIME_NOW | FATTR_MTIME_NOW;
  if ((in.valid & kAlone) != 0) return false;
  // The one before it, if it still waits in this channel (the server has not seen it): a chmod
  // after a utimes (tar, cp -p) then costs the server one request. They commute: no
  // setuid/setgid bits are involved (AsyncRemovals::BeginSetattr), and the server applies the
  // owner, then the mode, then the times.
  for (auto it = waiting_.rbegin(); it != waiting_.rend(); ++it) {
    if (!IsDetached(*it)) continue;
    Record& r = *records_[*it];
    Detached& d = detached_[*it - reclaim_slot_ - 1];
    const uint64_t last = d.merged.empty() ? d.seq : d.merged.back();
    if (last != after) continue;
    // The server runs each request as its caller: only one caller's changes are folded.
    if (r.reached || r.header.opcode != FUSE_SETATTR || r.header.nodeid != header.nodeid ||
        r.header.uid != header.uid || r.header.gid != header.gid || r.header.pid != header.pid ||
        d.frame.size() != sizeof(fuse_setattr_in)) {
      return false;
    }
    fuse_setattr_in held;
    std::memcpy(&held, d.frame.data(), sizeof(held));
    if ((held.valid & kAlone) != 0) return false;
    if ((in.valid & FATTR_FH) != 0 && (held.valid & FATTR_FH) != 0 && in.fh != held.fh) {
      return false;
    }
    if ((in.valid & FATTR_FH) != 0) held.fh = in.fh;
    if ((in.valid & FATTR_LOCKOWNER) != 0) held.lock_owner = in.lock_owner;
    if ((in.valid & FATTR_MODE) != 0) held.mode = in.mode;
    if ((in.valid & FATTR_UID) != 0) held.uid = in.uid;
    if ((in.valid & FATTR_GID) != 0) held.gid = in.gid;
    if ((in.valid & (FATTR_ATIME | FATTR_ATIME_NOW)) != 0) {
      held.valid &= ~(FATTR_ATIME | FATTR_ATIME_NOW);
      held.atime = in.atime;
      held.atimensec = in.atimensec;
    }
    if ((in.valid & (FATTR_MTIME | FATTR_MTIME_NOW)) != 0) {
      held.valid &= ~(FATTR_MTIME | FATTR_MTIME_NOW);
      held.mtime = in.mtime;
      held.mtimensec = in.mtimensec;
    }
    held.valid |= in.valid;
    std::memcpy(d.frame.data(), &held, sizeof(held));
    d.merged.push_back(seq);
    config_.async->SetattrFolded();
    return true;
  }
  return false;
}

void BackendChannel::SubmitOneWay(const void* frame, size_t size) {
  uint64_t epoch = config_.ledger != nullptr ? config_.ledger->OnForget(frame, size) : 0;
  SendItem item{kOneWay, std::string(static_cast<const char*>(frame), size), epoch};
  if (hold_ != Hold::kNone) {
    held_one_way_.push_back(std::move(item));
    return;
  }
  send_queue_.push_back(std::move(item));
  KickSend();
}

uint32_t BackendChannel::window() const {
  uint32_t used = on_wire_ + static_cast<uint32_t>(dropped_.size());
  return used >= server_max_inflight_ ? 0 : server_max_inflight_ - used;
}

void BackendChannel::EndDyingLocals() {
  // A dying caller waits for the answer (the kernel sends no second INTERRUPT, and a process
  // killed inside write() closes its files from its exit, with none at all): caller_state.h.
  std::vector<uint32_t> dying;
  for (uint32_t slot : waiting_) {
    const Record& r = *records_[slot];
    if (!r.reply.local) continue;
    const CallerState state = CallerStateOf(static_cast<pid_t>(r.header.pid));
    if (state == CallerState::kDying || (state == CallerState::kUnknown && r.interrupted)) {
      dying.push_back(slot);
    }
  }
  for (uint32_t slot : dying) {
    ++interrupted_;
    End(slot, EINTR, ReplyOrigin::kInterrupted);
  }
}

void BackendChannel::EndSignalledCallers(uint64_t now) {
  std::vector<uint32_t> signalled;
  for (uint32_t slot = 0; slot < records_.size(); ++slot) {
    Record* r = records_[slot].get();
    if (r == nullptr || r->stage == Stage::kFree || r->end_error != 0 || r->probe_ns == 0 ||
        now < r->probe_ns) {
      continue;
    }
    r->probe_ns = now + kSignalProbeNs;
    if (CallerSignalled(static_cast<pid_t>(r->header.pid))) signalled.push_back(slot);
  }
  for (uint32_t slot : signalled) {
    ++interrupted_;
    End(slot, EINTR, ReplyOrigin::kInterrupted);
  }
}

void BackendChannel::AnswerPassedLocals() {
  bool asked = false;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    Record& r = *records_[*it];
    if (!r.reply.local) {
      ++it;
      continue;
    }
    if (!config_.async->Passed(r.gate)) {
      if (!asked && gate_fd_.valid()) {
        config_.async->WakeAtNextEnd(gate_fd_.get());
        asked = true;
      }
      if (!config_.async->Passed(r.gate)) {
        ++it;
        continue;
      }
    }
    const uint32_t slot = *it;
    it = waiting_.erase(it);
    Answer(slot, 0, 0, ReplyOrigin::kLocal);
  }
}

void BackendChannel::FillWindow() {
  // Before the connection's state is looked at: they never reach the server.
  if (config_.async != nullptr && config_.async->writes()) AnswerPassedLocals();
  if (state_ != State::kUp || hold_ != Hold::kNone) return;
  while (!waiting_.empty() && window() > 0) {
    // The oldest that may go: one gated behind early unlinks waits (AsyncRemovals), and
    // detached ones wait for their batch; the others pass them.
    auto next = waiting_.begin();
    if (detachable()) {
      bool asked = false;
      while (next != waiting_.end()) {
        if ((gathering_ && IsDetached(*next)) || records_[*next]->reply.local) {
          ++next;
          continue;
        }
        const uint64_t gate = records_[*next]->gate;
        if (gate == 0 || config_.async->Passed(gate)) break;
        if (!asked && gate_fd_.valid()) {
          // Ask first, then look again: an End in between is not missed.
          config_.async->WakeAtNextEnd(gate_fd_.get());
          asked = true;
          if (config_.async->Passed(gate)) break;
        }
        ++next;
      }
      if (next == waiting_.end()) break;
    }
    uint32_t slot = *next;
    waiting_.erase(next);
    Record& r = *records_[slot];
    r.stage = Stage::kQueued;
    ++on_wire_;
    send_queue_.push_back({slot, {}});
  }
  KickSend();
}

// ---- sending ----

void BackendChannel::KickSend() {
  if (state_ != State::kUp || send_outstanding_ || send_queue_.empty()) return;
  int n = 0;
  size_t items = 0;
  for (size_t i = 0; i < send_queue_.size(); ++i) {
    const SendItem& item = send_queue_[i];
    iovec parts[4];
    int count = 0;
    if (item.slot == kOneWay) {
      parts[count++] = {const_cast<char*>(item.one_way.data()), item.one_way.size()};
    } else {
      const Record& r = *records_[item.slot];
      for (int k = 0; k < r.iovcnt; ++k) parts[count++] = r.iov[k];
    }
    if (n + count > kMaxSendIov) break;
    size_t skip = i == 0 ? front_sent_ : 0;
    for (int k = 0; k < count; ++k) {
      iovec part = parts[k];
      if (skip >= part.iov_len) {
        skip -= part.iov_len;
        continue;
      }
      part.iov_base = static_cast<char*>(part.iov_base) + skip;
      part.iov_len -= skip;
      skip = 0;
      send_iov_[n++] = part;
    }
    if (item.slot != kOneWay) records_[item.slot]->in_send = true;
    ++items;
  }
  send_items_ = items;
  send_outstanding_ = true;
  PostSend(fd_.get(), send_iov_, static_cast<size_t>(n), Op::kSend);
}

void BackendChannel::OnSend(int res) {
  send_outstanding_ = false;
  for (size_t i = 0; i < send_items_ && i < send_queue_.size(); ++i) {
    if (send_queue_[i].slot != kOneWay) records_[send_queue_[i].slot]->in_send = false;
  }
  size_t covered = send_items_;
  send_items_ = 0;
  if (state_ == State::kDraining) {
    if (!recv_outstanding_) FinishDrain();
    return;
  }
  if (res < 0 && res != -EINTR && res != -EAGAIN) {
    Fail(absl::StrFormat("send failed: %s", std::strerror(-res)));
    return;
  }
  size_t left = res > 0 ? static_cast<size_t>(res) : 0;
  if (left > 0) last_send_ns_ = MonotonicNs();
  while (left > 0 && covered > 0 && !send_queue_.empty()) {
    SendItem& item = send_queue_.front();
    size_t size = item.slot == kOneWay ? item.one_way.size() : records_[item.slot]->frame_bytes;
    size_t rest = size - front_sent_;
    // Bytes of it went out: the server may have it (or will, once the rest follows).
    if (item.slot != kOneWay) records_[item.slot]->reached = true;
    if (left < rest) {
      front_sent_ += left;
      break;
    }
    if (item.slot != kOneWay) {
      // Whole: that instance can run it.
      Record& r = *records_[item.slot];
      if (r.reached_instance != 0 && r.reached_instance != server_instance_) {
        r.reached_another = true;
      }
      r.reached_instance = server_instance_;
    }
    left -= rest;
    front_sent_ = 0;
    --covered;
    uint32_t slot = item.slot;
    send_queue_.pop_front();
    if (slot == kOneWay) continue;
    Record& r = *records_[slot];
    if (r.held) {
      Answer(slot, r.held_error, r.held_body);  // its reply overtook this completion
    } else {
      r.stage = Stage::kSent;
    }
  }
  KickSend();
}

// ---- connection lifecycle ----

void BackendChannel::StartConnect() {
  state_ = State::kConnecting;
  proof_round_ = false;
  attempt_expired_ = false;
  attempt_deadline_ns_ =
      MonotonicNs() + Ms(config_.connect_timeout) + Ms(wire::kHandshakeTimeout);
  if (config_.binding != nullptr) {
    ServerBinding::Target target = config_.binding->Current();
    address_index_ = target.index;
    config_.address = std::move(target.address);
  }
  const SocketAddress& address = config_.address;
  attempt_fd_.Reset(socket(address.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!attempt_fd_.valid()) {
    ConnectFailed(ErrnoError(errno, "socket"));
    return;
  }
  io_uring_sqe* sqe = GetSqe(ring_);
  io_uring_prep_connect(sqe, attempt_fd_.get(),
                        reinterpret_cast<const sockaddr*>(&address.storage), address.length);
  io_uring_sqe_set_data64(sqe, Tag(Op::kConnect));
}

// Connect, send the ClientHello, read the ServerHello's 8-byte prefix, then its body; when that
// ServerHello carries a challenge, the same again for our ClientProof and the final ServerHello:
// one operation at a time on the attempt's socket, each continuing where a short one stopped.
void BackendChannel::OnConnectStep(Op op, int res) {
  if (state_ != State::kConnecting) return;
  const std::string& where = config_.address.text;
  if (attempt_expired_) {
    ConnectFailed(absl::DeadlineExceededError(absl::StrFormat(
        "no connection and handshake with %s within %d ms", where,
        static_cast<int>((config_.connect_timeout + wire::kHandshakeTimeout).count()))));
    return;
  }
  // The TLS reason of a failed step says more than its errno (a connect has none yet).
  if (res < 0 && op != Op::kConnect && tls_ != nullptr && !tls_->last_error().empty()) {
    ConnectFailed(absl::UnavailableError(absl::StrFormat(
        "TLS with %s (as '%s'): %s", where, TlsServerName(config_), tls_->last_error())));
    return;
  }
  const bool retry = res == -EINTR || res == -EAGAIN;
  if (res < 0 && !retry) {
    ConnectFailed(ErrnoError(
        -res, absl::StrFormat("%s %s", op == Op::kConnect ? "connect" : "handshake with", where)));
    return;
  }
  if (op == Op::kConnect) {
    if (retry) {
      StartConnect();
      return;
    }
    TuneDataSocket(attempt_fd_.get(), config_.address.is_unix);
    DetectDeadPeer(attempt_fd_.get(), config_.address.is_unix);
    wire::ClientHello client_hello = MakeClientHello(config_);
    if (ever_connected_) {
      // What the lost connection had unanswered is resent on this one: the server must not
      // run any of it beside or after these copies (server/session_fence.h).
      client_hello.set_replaces_session(server_session_);
      client_hello.set_replaces_instance(server_instance_);
    }
    absl::StatusOr<std::string> hello = wire::EncodeHandshake(client_hello);
    if (!hello.ok()) {
      ConnectFailed(hello.status());
      return;
    }
    hello_out_ = std::move(*hello);
    hello_body_ = hello_out_.substr(8);
    hello_sent_ = 0;
    hello_in_.assign(8, 0);
    hello_received_ = 0;
    if (tls_ != nullptr) {
      StartTlsHandshake();  // completes as kTlsHandshake; the hello then goes through TLS
      return;
    }
  } else if (op == Op::kTlsHandshake) {
    // TLS is up: the hello goes out through it below.
  } else if (res == 0) {
    ConnectFailed(absl::UnavailableError(
        absl::StrFormat("handshake with %s: the server closed the connection", where)));
    return;
  } else if (op == Op::kHelloSend || op == Op::kProofSend) {
    if (res > 0) hello_sent_ += static_cast<size_t>(res);
  } else if (res > 0) {
    hello_received_ += static_cast<size_t>(res);
    if (hello_received_ == 8) {
      char prefix[8];
      std::memcpy(prefix, hello_in_.data(), sizeof(prefix));
      absl::StatusOr<uint32_t> length = wire::HandshakeBodyLength(prefix);
      if (!length.ok()) {
        ConnectFailed(length.status());
        return;
      }
      hello_in_.resize(8 + *length);
    }
    if (hello_received_ > 8 || (hello_received_ == 8 && hello_in_.size() == 8)) {
      if (hello_received_ == hello_in_.size()) {
        wire::ServerHello reply;
        if (!reply.ParseFromArray(hello_in_.data() + 8, static_cast<int>(hello_in_.size() - 8))) {
          ConnectFailed(absl::InvalidArgumentError(
              absl::StrFormat("handshake with %s: malformed ServerHello", where)));
          return;
        }
        if (!proof_round_ && reply.has_challenge()) {
          // One more round trip: our proof out, the final ServerHello in.
          absl::StatusOr<std::string> binding =
              ChannelBinding(tls_ != nullptr ? tls_->stream() : nullptr);
          absl::StatusOr<std::string> proof =
              binding.ok() ? AnswerChallenge(config_.token, where, hello_body_, reply.challenge(),
                                             *binding)
                           : binding.status();
          if (!proof.ok()) {
            ConnectFailed(proof.status());
            return;
          }
          proof_round_ = true;
          hello_out_ = std::move(*proof);
          hello_sent_ = 0;
          hello_in_.assign(8, 0);
          hello_received_ = 0;
          SubmitHandshakeStep();
          return;
        }
        absl::StatusOr<ServerSession> session = AcceptServerHello(config_, reply, proof_round_);
        if (!session.ok()) {
          ConnectFailed(session.status());
          return;
        }
        session->fd = std::move(attempt_fd_);
        Install(std::move(*session));
        return;
      }
    }
  }
  SubmitHandshakeStep();
}

void BackendChannel::SubmitHandshakeStep() {
  if (hello_sent_ < hello_out_.size()) {
    iovec rest = {hello_out_.data() + hello_sent_, hello_out_.size() - hello_sent_};
    PostSend(attempt_fd_.get(), &rest, 1, proof_round_ ? Op::kProofSend : Op::kHelloSend);
    return;
  }
  PostRecv(attempt_fd_.get(), hello_in_.data() + hello_received_,
           hello_in_.size() - hello_received_, proof_round_ ? Op::kProofRecv : Op::kHelloRecv);
}

void BackendChannel::ConnectFailed(const absl::Status& status) {
  attempt_fd_.Reset();
  ++failed_attempts_;
  if (config_.binding != nullptr) config_.binding->ConnectFailed(address_index_);
  backoff_ns_ = backoff_ns_ == 0 ? kFirstBackoffNs : std::min(2 * backoff_ns_, kMaxBackoffNs);
  next_attempt_ns_ = MonotonicNs() + backoff_ns_;
  state_ = State::kDown;
  // The first failure and then one in 30 (about half a minute at the longest backoff).
  if (failed_attempts_ == 1 || failed_attempts_ % 30 == 0) {
    if (status.code() == absl::StatusCode::kPermissionDenied) {
      RINGFS_LOG_ERROR("queue %u: %s; %zu requests waiting", config_.queue, status.message(),
                       live_);
    } else {
      RINGFS_LOG_WARN("queue %u: cannot reach server %s (attempt %u): %s; %zu requests waiting",
                      config_.queue, config_.address.text, failed_attempts_, status.message(),
                      live_);
    }
  }
}

void BackendChannel::Install(ServerSession session) {
  const uint64_t now = MonotonicNs();
  fd_ = std::move(session.fd);
  trailers_on_ = TrailerRules{.dir_attrs = session.dir_attrs,
                              .empty_dir_hints = session.empty_dir_hints,
                              .listing_attrs = session.listing_attrs,
                              .write_attrs = session.write_attrs,
                              .open_attrs = session.open_attrs};
  handleless_listings_on_ = session.handleless_listings;
  node_handles_on_ = session.node_handles;
  if (config_.notifier != nullptr && !session.invalidations && !invalidations_on_) {
    RINGFS_LOG_WARN("queue %u: server %s does not push cache invalidations: changes made through "
                    "other mounts are seen only when the entry/attr timeouts expire",
                    config_.queue, config_.address.text);
  }
  invalidations_on_ = session.invalidations;
  if (config_.async != nullptr) {
    config_.async->SetNoopSafe(session.invalidations && session.callers_as_themselves);
  }
  if (config_.dirs != nullptr) {
    // Without pushes nothing stays known; after a reconnect pushes may have been lost.
    if (!session.invalidations) {
      config_.dirs->Disable();
      if (config_.kept != nullptr) config_.kept->Disable();
    } else if (ever_connected_) {
      config_.dirs->Reset();
      if (config_.kept != nullptr) config_.kept->Reset();
    }
  }
  const bool quick_return = ended_cleanly_ && now - ended_ns_ <= kQuickReconnectNs;
  if (config_.notifier != nullptr && ever_connected_ &&
      (session.instance_id != server_instance_ || !quick_return)) {
    // Pushes may be lost: a new instance knows nothing of what this mount caches until it
    // reclaims; a connection that broke, or one the server closed for another reason than
    // idleness, loses what was in flight or queued; and while the mount had no connection for
    // long the server may have dropped queued records (beyond 65,536) or this client's state
    // (--reclaim-grace). The kernel forgets what it cached before. Not after the server's idle
    // close of this queue's connection followed by a prompt reconnect.
    config_.notifier->ResetKernelCaches();
  }
  server_max_inflight_ = session.max_inflight;
  state_ = State::kUp;
  if (ever_connected_ && session.instance_id != server_instance_ && config_.binding == nullptr) {
    // Node ids and open files of the old instance now answer ESTALE (wire_format.md §2).
    RINGFS_LOG_WARN("queue %u: %s is a different server instance (%016x, was %016x): files and "
                    "directories known before answer ESTALE until looked up again",
                    config_.queue, config_.address.text, session.instance_id, server_instance_);
  }
  if (ever_connected_ && session.instance_id != server_instance_ && unsettled_changes_ != 0 &&
      config_.binding == nullptr) {
    // The process that may have had them is gone (this is a new one), so they will never run.
    // (With several servers another instance does not mean the old one stopped.)
    SettleChanges(unsettled_changes_);
    unsettled_changes_ = 0;
  }
  server_instance_ = session.instance_id;
  server_session_ = session.session_id;
  if (ever_connected_) {
    ++reconnects_;
    RINGFS_LOG_INFO("queue %u: reconnected to %s after %.1f s; sending %zu waiting requests",
                    config_.queue, config_.address.text, (now - down_since_ns_) / 1e9,
                    waiting_.size());
  }
  ever_connected_ = true;
  failed_attempts_ = 0;
  backoff_ns_ = 0;
  mode_ = RecvMode::kStaging;
  staging_begin_ = staging_end_ = 0;
  ArmRecv();
  Arrive();
}

void BackendChannel::Arrive() {
  uint64_t epoch = 0;
  ServerBinding::Verdict verdict =
      config_.binding == nullptr
          ? ServerBinding::Verdict::kReady
          : config_.binding->Arrived(server_instance_, address_index_, &epoch);
  if (verdict == ServerBinding::Verdict::kReady) {
    ReleaseHold(epoch);
    return;
  }
  if (verdict == ServerBinding::Verdict::kStale) {
    Fail("the mount's state is on another server instance now");
    return;
  }
  // Nothing but reclaim frames may reach the instance before the state is re-established there.
  if (hold_ == Hold::kNone) {
    for (SendItem& item : send_queue_) held_one_way_.push_back(std::move(item));
    send_queue_.clear();
  }
  hold_ = verdict == ServerBinding::Verdict::kLead ? Hold::kLeading : Hold::kWaiting;
  if (hold_ == Hold::kWaiting) return;  // the tick asks again
  if (config_.ledger == nullptr || !node_handles_on_) {
    RINGFS_LOG_WARN("queue %u: %s is a new server instance (%016x) that %s: files and "
                    "directories known before answer ESTALE until looked up again",
                    config_.queue, config_.address.text, server_instance_,
                    config_.ledger == nullptr ? "this mount does not reclaim on"
                                              : "gives no node handles");
    config_.binding->Finished(server_instance_, 0);
    ReleaseHold(0);
    return;
  }
  reclaim_ = std::make_unique<ReclaimRun>(config_.ledger->Take());
  reclaim_started_ns_ = MonotonicNs();
  RINGFS_LOG_INFO("queue %u: %s is a new server instance (%016x): re-establishing %zu nodes "
                  "and %zu open files",
                  config_.queue, config_.address.text, server_instance_,
                  reclaim_->nodes_total(), reclaim_->files_total());
  SendReclaimFrame();
}

void BackendChannel::ReleaseHold(uint64_t epoch) {
  hold_ = Hold::kNone;
  // FORGETs counted before `epoch` are already in the lookup counts the instance got.
  auto keep = [epoch](const SendItem& item) { return item.slot != kOneWay || item.epoch >= epoch; };
  std::deque<SendItem> queue;
  for (size_t i = 0; i < send_queue_.size(); ++i) {
    bool started = i == 0 && (front_sent_ > 0 || send_outstanding_);
    if (started || keep(send_queue_[i])) queue.push_back(std::move(send_queue_[i]));
  }
  for (SendItem& item : held_one_way_) {
    if (keep(item)) queue.push_back(std::move(item));
  }
  held_one_way_.clear();
  send_queue_ = std::move(queue);
  FillWindow();
  KickSend();
}

void BackendChannel::SendReclaimFrame() {
  ReclaimRun::Frame frame;
  if (!reclaim_->Next(&frame)) {
    ++reclaims_;
    const double ms = (MonotonicNs() - reclaim_started_ns_) / 1e6;
    if (reclaim_->nodes_failed() + reclaim_->files_failed() + reclaim_->nodes_without_handle() ==
        0) {
      RINGFS_LOG_INFO("queue %u: re-established %zu nodes and %zu open files on %s in %.1f ms",
                      config_.queue, reclaim_->nodes_total(), reclaim_->files_total(),
                      config_.address.text, ms);
    } else {
      RINGFS_LOG_WARN("queue %u: re-established on %s in %.1f ms: %zu of %zu nodes and %zu of "
                      "%zu open files refused (%s), %zu nodes without a handle; those answer "
                      "ESTALE",
                      config_.queue, config_.address.text, ms, reclaim_->nodes_failed(),
                      reclaim_->nodes_total(), reclaim_->files_failed(), reclaim_->files_total(),
                      reclaim_->first_error() == 0 ? "-" : std::strerror(reclaim_->first_error()),
                      reclaim_->nodes_without_handle());
    }
    const uint64_t epoch = reclaim_->epoch();
    const uint64_t refused = reclaim_->nodes_failed() + reclaim_->files_failed() +
                             reclaim_->nodes_without_handle();
    reclaim_.reset();
    config_.binding->Finished(server_instance_, epoch, refused, /*counted=*/true);
    ReleaseHold(epoch);
    return;
  }
  std::unique_ptr<Record>& slot_record = records_[reclaim_slot_];
  if (!slot_record) slot_record = std::make_unique<Record>();
  Record& r = *slot_record;
  r = Record{};
  reclaim_args_ = std::move(frame.args);
  reclaim_reply_.assign(frame.records * sizeof(int32_t), 0);
  const size_t reply_bytes = reclaim_reply_.size();
  r.unique = kReclaimUnique | ++reclaim_uniques_;
  r.reply = {reclaim_slot_, frame.opcode, reclaim_reply_.data(), reply_bytes, reply_bytes,
             reply_bytes};
  r.header.opcode = frame.opcode;
  r.header.unique = r.unique;
  r.iov[0] = {&r.header, sizeof(r.header)};
  r.iov[1] = {reclaim_args_.data(), reclaim_args_.size()};
  r.iovcnt = 2;
  r.frame_bytes = sizeof(r.header) + reclaim_args_.size();
  r.header.len = static_cast<uint32_t>(r.frame_bytes);
  r.stage = Stage::kQueued;
  by_unique_[r.unique] = reclaim_slot_;
  ++on_wire_;
  send_queue_.push_back({reclaim_slot_, {}});
  KickSend();
}

void BackendChannel::OnReclaimReply(int error, size_t body) {
  if (!reclaim_) return;
  std::vector<int32_t> results(body / sizeof(int32_t));
  std::memcpy(results.data(), reclaim_reply_.data(), results.size() * sizeof(int32_t));
  reclaim_->OnReply(error, results.data(), results.size());
  SendReclaimFrame();
}

void BackendChannel::Fail(std::string_view why, bool clean) {
  if (state_ != State::kUp) return;
  ended_cleanly_ = clean;
  ended_ns_ = MonotonicNs();
  RINGFS_LOG_WARN("queue %u: connection to %s lost (%s); %u requests at the server will be "
                  "sent again",
                  config_.queue, config_.address.text, why, on_wire_);
  shutdown(fd_.get(), SHUT_RDWR);  // completes the outstanding receive and send
  state_ = State::kDraining;
  // Pushes may be lost from now on: no directory stays known complete, no entry kept, no
  // post-op record answers (a write record would otherwise answer the stat after a crash with
  // the file before it: nothing is sent, so nothing reconnects first).
  if (config_.dirs != nullptr) config_.dirs->Reset();
  if (config_.kept != nullptr) config_.kept->Reset();
  if (config_.dir_attrs != nullptr) config_.dir_attrs->Reset();
  // Not needed (the next open's record decides), but nothing learned from a server that may
  // be gone for good is kept.
  if (config_.kept_pages != nullptr) config_.kept_pages->Reset();
  if (config_.async != nullptr) config_.async->ForgetAll();
  down_since_ns_ = MonotonicNs();
  if (!send_outstanding_ && !recv_outstanding_) FinishDrain();
}

void BackendChannel::FinishDrain() {
  if (mode_ == RecvMode::kDirect && current_slot_ != kOneWay && current_slot_ != kNotify) {
    // Part of its reply has landed in the request's buffer. If that overwrote bytes of the
    // request itself (a GETXATTR's name, say), the request can no longer be sent again.
    Record& r = *records_[current_slot_];
    const char* written_end = r.reply.body + current_received_;
    for (int i = 1; i < r.iovcnt; ++i) {
      const char* part = static_cast<const char*>(r.iov[i].iov_base);
      if (part < written_end && r.reply.body < part + r.iov[i].iov_len) {
        r.end_error = EIO;
        r.end_origin = ReplyOrigin::kConnectionLost;
      }
    }
  }
  fd_.Reset();
  ++generation_;
  mode_ = RecvMode::kIdle;
  staging_begin_ = staging_end_ = 0;
  current_slot_ = kOneWay;
  for (const auto& [unique, dropped] : dropped_) {
    if (dropped.change) LoseChange();
  }
  dropped_.clear();
  on_wire_ = 0;
  front_sent_ = 0;
  // A reclaim cut short starts again, from a new snapshot, on whichever instance comes next.
  if (records_[reclaim_slot_] && records_[reclaim_slot_]->stage != Stage::kFree) {
    records_[reclaim_slot_]->stage = Stage::kFree;
    by_unique_.erase(records_[reclaim_slot_]->unique);
  }
  if (reclaim_) {
    reclaim_.reset();
    config_.binding->Abandoned(server_instance_);
  }
  hold_ = Hold::kNone;
  // Whatever the old connection had goes back to wait for the next one, oldest first; one-way
  // frames (FORGETs) stay queued and go out whole (or are dropped once a reclaim counted them).
  std::vector<uint32_t> replay;
  std::deque<SendItem> keep;
  for (SendItem& item : send_queue_) {
    if (item.slot == kOneWay) {
      // A RELEASE of our own would get a reply no one waits for on the next connection.
      if (!item.expects_reply) keep.push_back(std::move(item));
    } else if (item.slot != reclaim_slot_) {
      replay.push_back(item.slot);
    }
  }
  for (SendItem& item : held_one_way_) {
    if (!item.expects_reply) keep.push_back(std::move(item));
  }
  held_one_way_.clear();
  send_queue_ = std::move(keep);
  for (uint32_t slot = 0; slot < records_.size(); ++slot) {
    if (slot != reclaim_slot_ && records_[slot] && records_[slot]->stage == Stage::kSent) {
      replay.push_back(slot);
    }
  }
  std::sort(replay.begin(), replay.end(), [this](uint32_t a, uint32_t b) {
    return records_[a]->unique < records_[b]->unique;
  });
  for (auto it = replay.rbegin(); it != replay.rend(); ++it) {
    Record& r = *records_[*it];
    r.in_send = false;
    if (r.held) {
      Answer(*it, r.held_error, r.held_body);
    } else if (r.end_error != 0) {
      Answer(*it, -r.end_error, 0, r.end_origin);
    } else {
      r.stage = Stage::kWaiting;
      waiting_.push_front(*it);
    }
  }
  state_ = State::kDown;
  next_attempt_ns_ = MonotonicNs();  // the first attempt at once
}

// ---- ticks: connect, interrupts, deadlines ----

void BackendChannel::SettleChanges(uint64_t count) {
  if (config_.dirs != nullptr) config_.dirs->EndChange(count);
  if (config_.dir_attrs != nullptr) config_.dir_attrs->Settle(count);
}

void BackendChannel::LoseChange() {
  ++unsettled_changes_;
  unsettled_since_ns_ = MonotonicNs();
}

void BackendChannel::OnTick() {
  io_uring_sqe* sqe = GetSqe(ring_);
  io_uring_prep_timeout(sqe, &tick_, 0, 0);
  io_uring_sqe_set_data64(sqe, Tag(Op::kTick));

  const uint64_t now = MonotonicNs();
  if (unsettled_changes_ != 0 && state_ == State::kUp &&
      now - unsettled_since_ns_ > kUnsettledGraceNs) {
    // The same server process, reached again: whatever it still had of the old connection has
    // long run by now.
    SettleChanges(unsettled_changes_);
    unsettled_changes_ = 0;
  }
  if (state_ == State::kUp && config_.binding != nullptr) {
    if (hold_ == Hold::kWaiting) {
      Arrive();  // has the lead finished (or given up)?
    } else if (hold_ == Hold::kNone && config_.binding->bound() != server_instance_) {
      Fail("the mount's state moved to another server instance");
    }
  }
  if (state_ == State::kDown && now >= next_attempt_ns_) StartConnect();
  if (state_ == State::kConnecting && !attempt_expired_ && now > attempt_deadline_ns_) {
    // The outstanding step then completes with an error and the attempt is given up.
    attempt_expired_ = true;
    shutdown(attempt_fd_.get(), SHUT_RDWR);
    for (Op op : {Op::kConnect, Op::kHelloSend, Op::kHelloRecv, Op::kProofSend, Op::kProofRecv,
                  Op::kTlsRecv, Op::kTlsSend}) {
      io_uring_sqe* cancel = GetSqe(ring_);
      io_uring_prep_cancel64(cancel, Tag(op), 0);
      io_uring_sqe_set_data64(cancel, 0);
    }
  }
  if (state_ == State::kDraining && now - down_since_ns_ > kDrainCancelNs) {
    // shutdown() should have completed them; make sure nothing keeps a request's buffers.
    for (Op op : {Op::kSend, Op::kRecv, Op::kTlsRecv, Op::kTlsSend}) {
      io_uring_sqe* cancel = GetSqe(ring_);
      io_uring_prep_cancel64(cancel, Tag(op), 0);
      io_uring_sqe_set_data64(cancel, 0);
    }
    down_since_ns_ = now;
  }
  if (config_.interrupts != nullptr && !config_.interrupts->empty() && live_ > 0) {
    for (uint64_t unique : config_.interrupts->Pending(now)) {
      auto it = by_unique_.find(unique);
      // A detached record's caller was answered success: an INTERRUPT that crossed that answer
      // must not cancel it.
      if (it == by_unique_.end() || IsDetached(it->second)) continue;
      if (!config_.interrupts->Take(unique)) continue;
      Record& r = *records_[it->second];
      if (r.reply.local) {
        // A close waiting for its file's early writes: only a dying caller's ends (below).
        r.interrupted = true;
        continue;
      }
      ++interrupted_;
      End(it->second, EINTR, ReplyOrigin::kInterrupted);
    }
  }
  if (config_.async != nullptr && config_.async->writes() && !waiting_.empty()) {
    EndDyingLocals();
  }
  if (config_.interrupts != nullptr && live_ > 0) EndSignalledCallers(now);
  if (config_.request_timeout.count() > 0 && live_ > 0) {
    uint32_t expired = 0;
    for (uint32_t slot = 0; slot < records_.size(); ++slot) {
      Record* r = records_[slot].get();
      if (r == nullptr || r->stage == Stage::kFree || r->end_error != 0 || r->held) continue;
      if (r->deadline_ns != 0 && now >= r->deadline_ns) {
        ++expired;
        End(slot, ETIMEDOUT, ReplyOrigin::kTimeout);
      }
    }
    if (expired > 0) {
      timeouts_ += expired;
      RINGFS_LOG_WARN("queue %u: %u requests not answered by %s within timeout=%.1f s: "
                      "ETIMEDOUT",
                      config_.queue, expired, config_.address.text,
                      config_.request_timeout.count() / 1e3);
    }
  }
  // Requests gated behind early unlinks another worker's channel carried.
  if (!waiting_.empty()) FillWindow();
  if (detached_live_ > 0 && now - owed_warned_ns_ > kDetachedOwedWarnNs) {
    uint64_t oldest = now;
    for (const Detached& d : detached_) {
      if (d.live) oldest = std::min(oldest, d.since_ns);
    }
    if (now - oldest > kDetachedOwedWarnNs) {
      owed_warned_ns_ = now;
      RINGFS_LOG_WARN(
          "queue %u: %u requests answered early (unlinks, attribute changes, writes, releases) "
          "are still not answered by %s, the oldest after %.0f s; the requests that follow them "
          "wait",
          config_.queue, detached_live_, config_.address.text, (now - oldest) / 1e9);
    }
  }
  sink_->OnTick();
}

bool BackendChannel::Busy(uint32_t slot) const {
  const Record& r = *records_[slot];
  if (r.in_send) return true;
  if (r.stage == Stage::kQueued && !send_queue_.empty() && send_queue_.front().slot == slot &&
      front_sent_ > 0) {
    return true;  // half of it is on the wire: the rest must follow or the stream breaks
  }
  return mode_ == RecvMode::kDirect && current_slot_ == slot;
}

void BackendChannel::End(uint32_t slot, int err, ReplyOrigin origin) {
  Record& r = *records_[slot];
  if (r.held || r.stage == Stage::kFree) return;  // answered already, or about to be
  if (Busy(slot)) {
    // Only a reset gets the buffers back from the kernel; the other requests are sent again.
    r.end_error = err;
    r.end_origin = origin;
    Fail(absl::StrFormat("request %u must end (%s) while the socket still uses its buffers",
                         r.unique, std::strerror(err)));
    return;
  }
  // A RELEASE that ends before it ever reached a server (its deadline passed while the
  // window was full of requests to a stopped server) still has the file open there: the
  // channel closes it with a RELEASE of its own, whose answer it drops. The kernel is told as
  // it would be (it never looks at a RELEASE's answer).
  const bool release_unsent = r.header.opcode == FUSE_RELEASE && !r.reached && r.iovcnt > 1 &&
                              r.iov[1].iov_len >= sizeof(fuse_release_in) &&
                              (r.stage == Stage::kWaiting || r.stage == Stage::kQueued);
  switch (r.stage) {
    case Stage::kWaiting:
      waiting_.erase(std::find(waiting_.begin(), waiting_.end(), slot));
      break;
    case Stage::kQueued:
      send_queue_.erase(std::find_if(send_queue_.begin(), send_queue_.end(),
                                     [slot](const SendItem& item) { return item.slot == slot; }));
      --on_wire_;
      break;
    case Stage::kSent:
      // The server has it: its reply, if one comes, is read and dropped.
      --on_wire_;
      dropped_[r.unique] = {r.header.opcode, r.header.nodeid, r.change, r.reply.voided,
                            config_.notifier != nullptr
                                ? EntriesItRemoves(r.header, r.iov, r.iovcnt)
                                : std::vector<wire::Invalidation>{}};
      if (r.change && config_.dir_attrs != nullptr) config_.dir_attrs->Unsettle();
      r.change = false;  // settled when its reply comes
      break;
    case Stage::kFree:
      return;
  }
  if (release_unsent) {
    fuse_release_in release;
    std::memcpy(&release, r.iov[1].iov_base, sizeof(release));
    QueueOwnRelease(FUSE_RELEASE, r.header.nodeid, release);
  }
  Answer(slot, -err, 0, origin);
}

// An O_APPEND write goes where the server's file ends, which the kernel placed at the end it had
// cached: after another mount's append (pushed as an invalidation, which marks the size stale
// but does not reload it) the two differ, and the kernel's page cache holds the bytes at the
// wrong offset (a read() refetches them, an mmap does not). The write's post-op size says so:
// the file's cached pages and attributes are dropped.
void BackendChannel::AppendedElsewhere(const Record& r, uint64_t size_after) {
  if (config_.notifier == nullptr || r.iovcnt < 2 || r.iov[1].iov_len < sizeof(fuse_write_in) ||
      current_body_ < sizeof(fuse_write_out)) {
    return;
  }
  fuse_write_in in;
  std::memcpy(&in, r.iov[1].iov_base, sizeof(in));
  if ((in.flags & O_APPEND) == 0) return;
  fuse_write_out out;
  std::memcpy(&out, r.reply.body, sizeof(out));
  if (in.offset + out.size == size_after) return;
  wire::Invalidation pages;
  pages.kind = wire::InvalidationKind::kInode;
  pages.nodeid = r.header.nodeid;
  pages.offset = 0;  // every page, and the attributes
  pages.length = 0;
  config_.notifier->Post({std::move(pages)});
}

void BackendChannel::NoteXattrRequest(Record& r) {
  switch (r.header.opcode) {
    case FUSE_GETXATTR: {
      // The name follows fuse_getxattr_in: in the same part (classic) or the next one (ring).
      std::string_view name;
      if (r.iovcnt > 2) {
        name = {static_cast<const char*>(r.iov[2].iov_base), r.iov[2].iov_len};
      } else if (r.iovcnt > 1 && r.iov[1].iov_len > sizeof(fuse_getxattr_in)) {
        name = {static_cast<const char*>(r.iov[1].iov_base) + sizeof(fuse_getxattr_in),
                r.iov[1].iov_len - sizeof(fuse_getxattr_in)};
      }
      name = name.substr(0, name.find('\0'));
      r.xattr_name = static_cast<int8_t>(XattrAbsenceCache::IndexOf(name));
      if (r.xattr_name >= 0) r.xattr_ticket = config_.xattrs->Ticket();
      break;
    }
    case FUSE_CREATE: {
      fuse_create_in in{};
      if (r.iovcnt < 2 || r.iov[1].iov_len < sizeof(in)) break;
      std::memcpy(&in, r.iov[1].iov_base, sizeof(in));
      if ((in.flags & O_EXCL) == 0) break;  // may open a file that was there
      r.xattr_ticket = config_.xattrs->Ticket();
      break;
    }
    case FUSE_MKNOD:
    case FUSE_MKDIR:
    case FUSE_SYMLINK:
      r.xattr_ticket = config_.xattrs->Ticket();
      break;
    case FUSE_SETXATTR:
      config_.xattrs->Drop(r.header.nodeid);
      break;
    default:
      break;
  }
}

void BackendChannel::NoteXattrReply(const Record& r, int error, size_t body) {
  if (r.xattr_ticket == 0) return;
  const uint64_t now = MonotonicNs();
  if (r.header.opcode == FUSE_GETXATTR) {
    if (error == -ENODATA) {
      config_.xattrs->RecordAbsent(r.header.nodeid, r.xattr_name, r.xattr_ticket, now);
    }
    return;
  }
  if (error == 0 && body >= sizeof(fuse_entry_out)) {  // a create that took a ticket
    fuse_entry_out entry;
    std::memcpy(&entry, r.reply.body, sizeof(entry));
    if (entry.nodeid != 0) config_.xattrs->RecordCreated(entry.nodeid, r.xattr_ticket, now);
  }
}

void BackendChannel::Answer(uint32_t slot, int error, size_t body, ReplyOrigin origin) {
  Record& r = *records_[slot];
  r.stage = Stage::kFree;
  r.held = false;
  r.end_error = 0;
  by_unique_.erase(r.unique);
  if (slot == reclaim_slot_) {
    OnReclaimReply(error, body);
    return;
  }
  --live_;
  if (r.release_behind_changes && config_.ledger != nullptr && r.iovcnt > 1) {
    // Whatever the answer: the kernel released the fh (Submit).
    config_.ledger->OnRequest(r.header, r.iov[1].iov_base, r.iov[1].iov_len);
  }
  if (config_.xattrs != nullptr && origin == ReplyOrigin::kServer) NoteXattrReply(r, error, body);
  r.xattr_ticket = 0;
  if (r.reply.write_record && (error != 0 || origin != ReplyOrigin::kServer)) {
    // A write that failed, or whose answer never came (deadline, interrupt, lost connection),
    // may still have changed the file at the server: an older write's record must not answer
    // for it (a successful answer without its record drops it in TakeTrailers).
    config_.dir_attrs->Drop(r.header.nodeid);
  }
  if (config_.dir_attrs != nullptr) {
    // However it ended: a WRITE sent after this change may have been stat'ed at the server
    // before the change ran (another connection, or writeback without the inode lock), and its
    // record, taken since the send, would hide the change.
    config_.dir_attrs->Apply(r.reply.voided);
  }
  if (config_.dirs != nullptr && fuse::ChangesNamespace(r.header.opcode)) {
    // However it ended: a listing sent after this change was, but run at the server before it,
    // must not be kept by the kernel (KeptListings; the change was recorded when sent too).
    config_.dirs->ListingChanged(r.header.nodeid);
    if ((r.header.opcode == FUSE_RENAME || r.header.opcode == FUSE_RENAME2) && r.iovcnt > 1 &&
        r.iov[1].iov_len >= sizeof(uint64_t)) {
      uint64_t newdir;  // first in fuse_rename_in and fuse_rename2_in
      std::memcpy(&newdir, r.iov[1].iov_base, sizeof(newdir));
      config_.dirs->ListingChanged(newdir);
    }
  }
  if (r.change) {
    // Settled when the server answered or never had it; otherwise it may still run there.
    if (origin == ReplyOrigin::kServer || !r.reached) {
      if (config_.dirs != nullptr) config_.dirs->EndChange();
    } else {
      if (config_.dir_attrs != nullptr) config_.dir_attrs->Unsettle();
      LoseChange();
    }
    r.change = false;
  }
  if (r.dir_ticket != 0 && r.dir_empty && error == 0 && origin == ReplyOrigin::kServer) {
    if (r.header.opcode == FUSE_MKDIR) {
      // Before the kernel learns the new directory: nothing can be created in it through this
      // mount yet, and the server found it empty once every change in it was being pushed here.
      fuse_entry_out entry;
      std::memcpy(&entry, r.reply.body, sizeof(entry));
      config_.dirs->RecordCreated(entry.nodeid, r.dir_ticket, MonotonicNs());
    } else {
      config_.dirs->RecordFoundEmpty(r.header.nodeid, r.dir_ticket, MonotonicNs());
    }
  }
  r.dir_ticket = 0;
  r.dir_empty = false;
  if (error == 0 && origin == ReplyOrigin::kServer) {
    const void* op_in = r.iovcnt > 1 ? r.iov[1].iov_base : nullptr;
    size_t op_in_size = r.iovcnt > 1 ? r.iov[1].iov_len : 0;
    // The kernel gets this reply: what it now holds (node lookups, open files) is recorded.
    if (config_.ledger != nullptr) {
      config_.ledger->OnReply(r.header, op_in, op_in_size, r.reply.body, body);
    }
    if (config_.direct_write_only) {
      AdjustOpenReply(r.header.opcode, op_in, op_in_size, r.reply.body, body);
    }
    if (config_.kept_pages != nullptr && wire::IsOpen(r.header.opcode) &&
        body >= sizeof(fuse_open_out)) {
      // Also without a record (none negotiated, or none sent): the drop is recorded.
      const KeptPages::AtOpenAnswer answer =
          KeepPagesAtOpen(*config_.kept_pages, *config_.page_drops, r.header.nodeid,
                          r.open_record ? &r.open_attr.attr : nullptr, r.reply.body);
      // The record answers the stat after the open, as a write's does after writes, where the
      // kernel is likely to ask: it keeps pages whose READs voided its atime, or a page drop
      // (PageDrops) will void all its attributes. Elsewhere it would only crowd out the records
      // that answer; and an older one must not answer for the file this open found.
      if (r.open_record && answer != KeptPages::AtOpenAnswer::kDrop && !UnlinksOwed()) {
        config_.dir_attrs->OfferWrite(r.header.nodeid, r.open_attr, r.reply.record_ticket,
                                      r.reply.record_reads, MonotonicNs());
      } else {
        config_.dir_attrs->Drop(r.header.nodeid);
      }
    }
    if (config_.async != nullptr && !IsDetached(slot)) {
      // A directory's new mode or owner, for the GETATTRs answered while unlinks are owed; a
      // file's attributes, for SETATTRs answered early (a detached one's: FinishDetached).
      LearnFromReply(*config_.async, r.header, op_in, op_in_size, r.reply.body, body,
                     r.async_ticket, MonotonicNs());
    }
  }
  if (config_.async != nullptr) {
    // Whatever the answer: the change may have run (an ACL may have changed the mode, a
    // fallocate the size, an unlink a link count). Requests sent before this answer, which may
    // have run before the change, no longer bring the node's attributes.
    ForgetChanged(*config_.async, r.header, r.iovcnt > 1 ? r.iov[1].iov_base : nullptr,
                  r.iovcnt > 1 ? r.iov[1].iov_len : 0);
    if (r.header.opcode == FUSE_SETATTR && !IsDetached(slot)) {
      // Counted when sent (Forwarder::RecordSending); one that reached the server and ended
      // without its answer may still run there.
      config_.async->SetattrEnded(r.header.nodeid, origin != ReplyOrigin::kServer && r.reached);
    }
  }
  if (IsDetached(slot)) {
    FinishDetached(slot, error, body, origin);
    return;
  }
  if (error == 0 && config_.async != nullptr && r.iovcnt > 1) {
    // An early WRITE through the open file that failed is reported here (AsyncRemovals).
    const iovec& op_in = r.iov[1];
    if (r.header.opcode == FUSE_FLUSH && op_in.iov_len >= sizeof(fuse_flush_in)) {
      error = -config_.async->TakeWriteError(static_cast<const fuse_flush_in*>(op_in.iov_base)->fh);
    } else if (r.header.opcode == FUSE_FSYNC && op_in.iov_len >= sizeof(fuse_fsync_in)) {
      error = -config_.async->TakeWriteError(static_cast<const fuse_fsync_in*>(op_in.iov_base)->fh);
    }
  }
  fuse_out_header header{};
  header.len = static_cast<uint32_t>(sizeof(header) + body);
  header.error = error;
  header.unique = r.unique;
  answered_.push_back({slot, header, body, origin});
}

void BackendChannel::FinishDetached(uint32_t slot, int error, size_t body, ReplyOrigin origin) {
  const Record& r = *records_[slot];
  Detached& d = detached_[slot - reclaim_slot_ - 1];
  d.live = false;
  --detached_live_;
  if (r.header.opcode == FUSE_RELEASE) --detached_releases_;
  uint64_t forgets = 0;
  if (r.header.opcode == FUSE_SETATTR) {
    const bool done = error == 0 && origin == ReplyOrigin::kServer && body >= sizeof(fuse_attr_out);
    fuse_attr_out attr{};
    if (done) std::memcpy(&attr, r.reply.body, sizeof(attr));
    if (!done) FailedSetattr(r, d, error, origin);
    const uint64_t now = MonotonicNs();
    forgets = config_.async->EndSetattr(d.seq, r.header.nodeid, done ? &attr : nullptr,
                                        r.async_ticket, now);
    for (uint64_t seq : d.merged) {
      forgets += config_.async->EndSetattr(seq, r.header.nodeid, done ? &attr : nullptr,
                                           r.async_ticket, now);
    }
    d.merged.clear();
  } else if (r.header.opcode == FUSE_RELEASE) {
    // Nothing more (Answer ended its fh): the kernel never looks at its answer.
  } else if (r.header.opcode == FUSE_WRITE) {
    fuse_write_in in{};
    std::memcpy(&in, d.frame.data(), std::min(sizeof(in), d.frame.size()));
    fuse_write_out out{};
    if (error == 0 && origin == ReplyOrigin::kServer && body >= sizeof(out)) {
      std::memcpy(&out, r.reply.body, sizeof(out));
    }
    // The caller was told every byte was written: fewer is a failure too.
    int failed = 0;
    if (error != 0 || origin != ReplyOrigin::kServer) {
      failed = error < 0 ? -error : EIO;
    } else if (out.size < in.size) {
      failed = EIO;
    }
    if (failed != 0) FailedWrite(r, in, out.size, failed, origin);
    forgets = config_.async->EndWrite(d.seq, r.header.nodeid, in.fh, in.size, failed);
    // A slot keeps its buffer for the next record; not a megabyte of one write's data.
    if (d.frame.capacity() > kKeptFrameBytes) std::string().swap(d.frame);
  } else {
    // ENOENT: the name is gone, as asked (another client, or an instance that died after it
    // ran).
    if (error != 0 && error != -ENOENT) FailedDetached(r, d, error, origin);
    // After the failure's invalidation is posted: what the gate held back then finds the name.
    forgets = config_.async->End(d.seq, r.header.nodeid);
  }
  if (forgets > 0) {
    // The kernel's FORGETs of the directory, held until its unlinks were answered.
    const std::string frame = OwnForget(r.header.nodeid, forgets);
    SubmitOneWay(frame.data(), frame.size());
  }
}

std::string BackendChannel::OwnForget(uint64_t nodeid, uint64_t nlookup) {
  fuse_in_header in{};
  in.opcode = FUSE_FORGET;
  // Never 0: the server refuses a frame with unique 0 and closes the connection.
  in.unique = kReclaimUnique | ++reclaim_uniques_;
  in.nodeid = nodeid;
  fuse_forget_in forget{nlookup};
  in.len = sizeof(in) + sizeof(forget);
  std::string frame(reinterpret_cast<const char*>(&in), sizeof(in));
  frame.append(reinterpret_cast<const char*>(&forget), sizeof(forget));
  return frame;
}

void BackendChannel::FailedDetached(const Record& r, const Detached& d, int error,
                                    ReplyOrigin origin) {
  config_.async->Failed();
  const std::string_view name(d.frame.data(), strnlen(d.frame.data(), d.frame.size()));
  const bool unknown = origin != ReplyOrigin::kServer;
  RINGFS_LOG_WARN("queue %u: unlink of \"%s\" in directory %llu, answered before the server ran "
                  "it, %s: %s; the kernel looks the name up again",
                  config_.queue, std::string(name),
                  static_cast<unsigned long long>(r.header.nodeid),
                  unknown ? "ended without the server's answer (it may or may not have run)"
                          : "failed at the server",
                  std::strerror(-error));
  // The kernel dropped the name when the unlink was answered; the server may still have it.
  if (config_.notifier != nullptr) {
    std::vector<wire::Invalidation> again(2);
    again[0].kind = wire::InvalidationKind::kEntry;
    again[0].nodeid = r.header.nodeid;
    again[0].name = std::string(name);
    again[1].kind = wire::InvalidationKind::kInode;
    again[1].nodeid = r.header.nodeid;
    config_.notifier->Post(std::move(again));
  }
}

void BackendChannel::FailedSetattr(const Record& r, const Detached& d, int error,
                                   ReplyOrigin origin) {
  // Each early SETATTR folded into this one failed with it.
  for (size_t i = 0; i <= d.merged.size(); ++i) config_.async->SetattrFailed();
  const bool unknown = origin != ReplyOrigin::kServer;
  RINGFS_LOG_WARN(
      "queue %u: setattr of node %llu (valid 0x%x), answered before the server ran "
      "it, %s: %s; the kernel asks for the file's attributes again",
      config_.queue, static_cast<unsigned long long>(r.header.nodeid),
      r.iovcnt > 1 && r.iov[1].iov_len >= sizeof(fuse_setattr_in)
          ? static_cast<const fuse_setattr_in*>(r.iov[1].iov_base)->valid
          : 0u,
      unknown ? "ended without the server's answer (it may or may not have run)"
              : "failed at the server",
      std::strerror(error < 0 ? -error : EIO));
  // The kernel holds the attributes the early answer gave.
  if (config_.notifier != nullptr) {
    std::vector<wire::Invalidation> again(1);
    again[0].kind = wire::InvalidationKind::kInode;
    again[0].nodeid = r.header.nodeid;
    config_.notifier->Post(std::move(again));
  }
}

void BackendChannel::FailedWrite(const Record& r, const fuse_write_in& in, uint32_t written,
                                 int error, ReplyOrigin origin) {
  const bool unknown = origin != ReplyOrigin::kServer;
  RINGFS_LOG_WARN(
      "queue %u: write of %u bytes at offset %llu of node %llu, answered before the server ran "
      "it, %s: %s (%u bytes written); the file's next close or fsync reports it",
      config_.queue, in.size, static_cast<unsigned long long>(in.offset),
      static_cast<unsigned long long>(r.header.nodeid),
      unknown ? "ended without the server's answer (it may or may not have run)"
              : "failed at the server",
      std::strerror(error), written);
  // The kernel holds the size the early answer made.
  if (config_.notifier != nullptr) {
    std::vector<wire::Invalidation> again(1);
    again[0].kind = wire::InvalidationKind::kInode;
    again[0].nodeid = r.header.nodeid;
    config_.notifier->Post(std::move(again));
  }
}

bool BackendChannel::KeepForDetached(uint64_t* deadline_ns) {
  if (*deadline_ns == kDrainOver) return false;
  // RELEASEs behind early changes that found no detached record free wait like those records.
  std::vector<uint32_t> releases;
  if (live_ > 0) {
    for (uint32_t slot = 0; slot < records_.size(); ++slot) {
      const Record* r = records_[slot].get();
      if (r != nullptr && r->stage != Stage::kFree && !r->held && r->release_behind_changes &&
          !IsDetached(slot)) {
        releases.push_back(slot);
      }
    }
  }
  if (detached_live_ == 0 && releases.empty()) return false;
  // Only RELEASEs owed change nothing a client could see, and the server lets go of a gone
  // client's open files itself (its session ends). So they are waited for briefly, and not at
  // all while no server is reached: a mount whose server is down or stopped ends as promptly
  // as before they were answered early.
  const bool only_releases = detached_live_ == detached_releases_ && releases.empty();
  if (only_releases && state_ != State::kUp) {
    RINGFS_LOG_INFO(
        "queue %u: the mount ended with %u RELEASEs unanswered and no server "
        "reached; the server closes those files when the session ends",
        config_.queue, detached_releases_);
    *deadline_ns = kDrainOver;
    return false;
  }
  const uint64_t now = MonotonicNs();
  if (*deadline_ns == 0) {
    *deadline_ns = now + (only_releases ? kReleasesDrainNs : kDetachedDrainNs);
    RINGFS_LOG_INFO(
        "queue %u: the mount ended with %zu requests answered early (unlinks, attribute changes, "
        "writes, releases) not yet answered by the server; waiting for them",
        config_.queue, detached_live_ + releases.size());
    return true;
  }
  if (now < *deadline_ns) return true;
  if (only_releases) {
    RINGFS_LOG_INFO(
        "queue %u: %u RELEASEs not answered within %llu ms of the mount's end; the "
        "server closes those files when the session ends",
        config_.queue, detached_releases_,
        static_cast<unsigned long long>(kReleasesDrainNs / 1'000'000));
  } else {
    RINGFS_LOG_ERROR(
        "queue %u: %zu requests answered early (unlinks, attribute changes, writes, releases) "
        "were not answered by the server within %llu s of the mount's end; they may not have run",
        config_.queue, detached_live_ + releases.size(),
        static_cast<unsigned long long>(kDetachedDrainNs / 1'000'000'000));
  }
  for (uint32_t slot : releases) End(slot, ETIMEDOUT, ReplyOrigin::kTimeout);
  timeouts_ += releases.size();
  *deadline_ns = kDrainOver;
  return false;
}

void BackendChannel::Deliver() {
  if (answered_.empty()) return;
  // A sink may submit again while we iterate; it then appends to the emptied answered_.
  std::vector<Answered> batch;
  batch.swap(answered_);
  for (const Answered& a : batch) sink_->OnReply(a.slot, a.header, a.body, a.origin);
}

// ---- receiving ----

void BackendChannel::OnCompletion(uint64_t user_data, int res) {
  Op op = static_cast<Op>(user_data & 0xffffffffu);
  if (op == Op::kTick) {
    OnTick();
    return;
  }
  if (op == Op::kGateWake) {
    if (res != -ECANCELED) ArmGateWake();
    ++gate_wakes_;
    FillWindow();
    return;
  }
  if (op == Op::kFlush) {
    flush_armed_ = false;
    gathering_ = false;
    FillWindow();
    return;
  }
  if (op == Op::kTlsRecv || op == Op::kTlsSend || op == Op::kTlsWake) {
    OnTlsStep(op, res);
    return;
  }
  if (((user_data >> 32) & kGenerationMask) != (generation_ & kGenerationMask)) return;
  if (op == Op::kConnect || op == Op::kHelloSend || op == Op::kHelloRecv ||
      op == Op::kProofSend || op == Op::kProofRecv || op == Op::kTlsHandshake) {
    OnConnectStep(op, res);
    return;
  }
  if (op == Op::kSend) {
    OnSend(res);
  } else if (op == Op::kRecv) {
    OnRecv(res);
  }
}

void BackendChannel::ArmRecv() {
  recv_outstanding_ = true;
  if (mode_ == RecvMode::kDirect) {
    PostRecv(fd_.get(), BodyTarget() + current_received_, current_body_ - current_received_,
             Op::kRecv);
  } else if (mode_ == RecvMode::kDiscard) {
    PostRecv(fd_.get(), discard_.data(),
             std::min(discard_.size(), current_body_ - current_received_), Op::kRecv);
  } else {
    PostRecv(fd_.get(), staging_.data() + staging_end_, staging_.size() - staging_end_,
             Op::kRecv);
  }
}

void BackendChannel::OnRecv(int res) {
  recv_outstanding_ = false;
  if (state_ == State::kDraining) {
    if (!send_outstanding_) FinishDrain();
    return;
  }
  if (res == -EINTR || res == -EAGAIN) {
    ArmRecv();
    return;
  }
  if (res <= 0) {
    // Clean only as the server's idle close looks: between frames, and nothing sent for a
    // while. Other closes of the server (a frame it refused, a TLS error) come right after our
    // bytes and may drop what it had queued for us, invalidations included.
    const bool idle_close = res == 0 && mode_ == RecvMode::kStaging &&
                            staging_end_ == staging_begin_ &&
                            MonotonicNs() - last_send_ns_ >= kQuietBeforeCleanCloseNs;
    Fail(res == 0 ? std::string("server closed the connection")
                  : absl::StrFormat("receive failed: %s", std::strerror(-res)),
         /*clean=*/idle_close);
    return;
  }
  if (mode_ == RecvMode::kDirect || mode_ == RecvMode::kDiscard) {
    current_received_ += static_cast<size_t>(res);
    if (current_received_ < current_body_) {
      ArmRecv();
      return;
    }
    if (mode_ == RecvMode::kDirect) FinishReply();
    mode_ = RecvMode::kStaging;
    staging_begin_ = staging_end_ = 0;
    ArmRecv();
    return;
  }
  staging_end_ += static_cast<size_t>(res);
  ParseStaging();
}

void BackendChannel::ParseStaging() {
  while (staging_end_ - staging_begin_ >= sizeof(fuse_out_header)) {
    fuse_out_header header;
    std::memcpy(&header, staging_.data() + staging_begin_, sizeof(header));
    // A small reply is copied only once it is whole: until then the request's buffer (whose
    // payload may share it, e.g. a LOOKUP's name) stays intact and can be sent again.
    if (header.len >= sizeof(header) && header.len - sizeof(header) <= kWholeReplyBytes &&
        staging_end_ - staging_begin_ < header.len) {
      break;
    }
    if (!BeginReply(header)) return;  // the connection was failed
    staging_begin_ += sizeof(header);
    if (current_dropped_.opcode != 0 && header.error == 0 &&
        staging_end_ - staging_begin_ >= current_body_) {
      // Small replies are whole here; a dropped READ or READDIR gave nothing to give back.
      GiveBack(current_dropped_.opcode, current_dropped_.nodeid, staging_.data() + staging_begin_,
               current_body_);
    }
    size_t take = std::min(staging_end_ - staging_begin_, current_body_);
    if (take > 0 && current_slot_ != kOneWay) {
      std::memcpy(BodyTarget(), staging_.data() + staging_begin_, take);
    }
    staging_begin_ += take;
    current_received_ = take;
    if (current_received_ < current_body_) {
      // The rest of a large body goes straight into the request's own buffer (or is dropped).
      staging_begin_ = staging_end_ = 0;
      mode_ = current_slot_ == kOneWay ? RecvMode::kDiscard : RecvMode::kDirect;
      ArmRecv();
      return;
    }
    if (current_slot_ != kOneWay) FinishReply();
  }
  size_t left = staging_end_ - staging_begin_;
  if (left > 0 && staging_begin_ > 0) {
    std::memmove(staging_.data(), staging_.data() + staging_begin_, left);
  }
  staging_begin_ = 0;
  staging_end_ = left;
  mode_ = RecvMode::kStaging;
  ArmRecv();
}

bool BackendChannel::BeginReply(const fuse_out_header& header) {
  std::optional<size_t> body_bytes = ReplyBodyBytes(header);
  if (!body_bytes) {
    Fail(absl::StrFormat("invalid reply length %u", header.len));
    return false;
  }
  size_t body = *body_bytes;
  current_ = header;
  current_body_ = body;
  current_received_ = 0;
  if (header.unique == 0 && header.error == wire::kNotifyInvalidate) {
    if (!invalidations_on_ || body == 0) {
      Fail(absl::StrFormat("unexpected invalidation frame (%zu bytes)", body));
      return false;
    }
    invalidation_buf_.resize(body);
    current_slot_ = kNotify;
    return true;
  }
  if (header.unique == 0) {
    size_t records = NotificationRecords(header, body, node_handles_on_);
    if (records == 0) {
      Fail(absl::StrFormat("invalid notification (code %d, %zu bytes)", header.error, body));
      return false;
    }
    notify_buf_.resize(records);
    current_slot_ = kNotify;
    return true;
  }
  current_dropped_ = {};
  if (auto dropped = dropped_.find(header.unique); dropped != dropped_.end()) {
    current_dropped_ = std::move(dropped->second);
    dropped_.erase(dropped);
    if (config_.dir_attrs != nullptr) config_.dir_attrs->Apply(current_dropped_.voided);
    if (header.error == 0 && !current_dropped_.entries.empty()) {
      // The caller was told it failed (its deadline), so its kernel kept the names; it ran
      // after all: without this they would show the removed file for the entry lifetime.
      config_.notifier->Post(std::move(current_dropped_.entries));
    }
    if (current_dropped_.change) SettleChanges(1);
    current_slot_ = kOneWay;  // answered already (interrupt, deadline): read and drop
    FillWindow();
    return true;
  }
  auto it = by_unique_.find(header.unique);
  if (it == by_unique_.end() || records_[it->second]->stage == Stage::kWaiting ||
      (records_[it->second]->stage == Stage::kQueued && !records_[it->second]->in_send)) {
    Fail(absl::StrFormat("reply for unknown request %u", header.unique));
    return false;
  }
  uint32_t slot = it->second;
  const PendingReply& expect = records_[slot]->reply;
  if (!ValidReply(expect, header, body, trailers_on_)) {
    RINGFS_LOG_WARN("queue %u: invalid reply to %s request %u: error %d, %zu body bytes",
                    config_.queue, std::string(fuse::OpName(expect.opcode)), header.unique,
                    header.error, body);
    // This request fails; the stream can no longer be trusted, so the others are sent again.
    End(slot, EIO, ReplyOrigin::kInvalidReply);
    Fail("invalid reply");
    return false;
  }
  current_slot_ = slot;
  return true;
}

void BackendChannel::GiveBack(uint32_t opcode, uint64_t nodeid, const char* body,
                              size_t size) {
  fuse_entry_out entry{};
  fuse_open_out open{};
  bool has_entry = false, has_open = false;
  if (opcode == FUSE_LOOKUP || opcode == FUSE_MKNOD || opcode == FUSE_MKDIR ||
      opcode == FUSE_SYMLINK || opcode == FUSE_LINK || opcode == FUSE_CREATE) {
    has_entry = size >= sizeof(entry);
    if (has_entry) std::memcpy(&entry, body, sizeof(entry));
    if (opcode == FUSE_CREATE && size >= sizeof(entry) + sizeof(open)) {
      std::memcpy(&open, body + sizeof(entry), sizeof(open));
      has_open = true;
      nodeid = entry.nodeid;
    }
  } else if (opcode == FUSE_OPEN || opcode == FUSE_OPENDIR) {
    has_open = size >= sizeof(open);
    if (has_open) std::memcpy(&open, body, sizeof(open));
  }
  if (has_open) {
    fuse_release_in release{};
    release.fh = open.fh;
    QueueOwnRelease(opcode == FUSE_OPENDIR ? FUSE_RELEASEDIR : FUSE_RELEASE, nodeid, release);
  }
  if (has_entry && entry.nodeid != 0 && entry.nodeid != FUSE_ROOT_ID) {
    QueueOwn(OwnForget(entry.nodeid, 1), /*expects_reply=*/false);
  }
}

void BackendChannel::QueueOwnRelease(uint32_t opcode, uint64_t nodeid,
                                     const fuse_release_in& release) {
  fuse_in_header in{};
  in.opcode = opcode;
  in.unique = kReclaimUnique | ++reclaim_uniques_;
  in.nodeid = nodeid;
  in.len = sizeof(in) + sizeof(release);
  std::string frame(reinterpret_cast<const char*>(&in), sizeof(in));
  frame.append(reinterpret_cast<const char*>(&release), sizeof(release));
  dropped_[in.unique] = {in.opcode, nodeid};
  QueueOwn(std::move(frame), /*expects_reply=*/true);
}

// Frames of the channel's own, for the instance that is connected now: counted in no ledger,
// so a reclaim (which starts a new epoch) makes them stale.
void BackendChannel::QueueOwn(std::string frame, bool expects_reply) {
  SendItem item{kOneWay, std::move(frame),
                config_.ledger != nullptr ? config_.ledger->epoch() : 0, expects_reply};
  (hold_ != Hold::kNone ? held_one_way_ : send_queue_).push_back(std::move(item));
  KickSend();
}

char* BackendChannel::BodyTarget() {
  if (current_slot_ == kNotify && current_.error == wire::kNotifyInvalidate) {
    return invalidation_buf_.data();
  }
  return current_slot_ == kNotify ? reinterpret_cast<char*>(notify_buf_.data())
                                  : records_[current_slot_]->reply.body;
}

void BackendChannel::FinishReply() {
  if (current_slot_ == kNotify && current_.error == wire::kNotifyInvalidate) {
    current_slot_ = kOneWay;
    std::vector<wire::Invalidation> records;
    if (!wire::ParseInvalidations(invalidation_buf_, &records)) {
      Fail("malformed invalidation frame");
      return;
    }
    if (config_.async != nullptr) {
      for (const wire::Invalidation& record : records) {
        if (record.kind == wire::InvalidationKind::kReset) {
          config_.async->ForgetAll();
        } else {
          config_.async->Forget(record.nodeid);
        }
      }
    }
    config_.notifier->Post(std::move(records));
    return;
  }
  if (current_slot_ == kNotify) {
    config_.ledger->SetHandles(notify_buf_.data(), notify_buf_.size());
    current_slot_ = kOneWay;
    return;
  }
  Record& r = *records_[current_slot_];
  if (current_.error == -ENOENT && r.reached_another &&
      (r.header.opcode == FUSE_UNLINK || r.header.opcode == FUSE_RMDIR)) {
    // Sent again to a new instance after the one that had it went without answering: that one
    // may have removed the name, and its reply cache went with it. The name is gone, which is
    // what was asked. (Creates that find their name keep EEXIST: it may be another client's,
    // and O_EXCL must never succeed twice. NFS without a persistent reply cache answers both.)
    RINGFS_LOG_INFO("queue %u: %s replayed on a new server instance found no name; the old "
                    "instance may have removed it: answered success",
                    config_.queue, fuse::OpName(r.header.opcode));
    current_.error = 0;
    ++replayed_removals_;
  }
  size_t body = current_.error == 0 ? TakeTrailers() : current_body_;
  --on_wire_;
  if (r.in_send) {
    // Our SENDMSG's completion has not been reaped yet: the slot goes back after it.
    r.held = true;
    r.held_error = current_.error;
    r.held_body = body;
  } else {
    Answer(current_slot_, current_.error, body);
  }
  current_slot_ = kOneWay;
  FillWindow();
}

bool BackendChannel::UnlinksOwed() const {
  return config_.async != nullptr && !config_.async->Passed(config_.async->Gate());
}

size_t BackendChannel::TakeTrailers() {
  Record& r = *records_[current_slot_];
  const PendingReply& reply = r.reply;
  if (config_.dir_attrs != nullptr && fuse::ChangesNamespace(r.header.opcode)) {
    // Done at the server: a listing record from before the change must not answer after it
    // (a SETATTR's or an xattr's node: RecordsVoided, in Answer).
    config_.dir_attrs->Changed(r.header.nodeid);
  }
  long extra = DirAttrTrailerBytes(reply, current_body_, trailers_on_);
  if (extra <= 0) return current_body_;
  size_t plain = current_body_ - static_cast<size_t>(extra);
  const uint64_t now_ns = MonotonicNs();
  const bool unlinks_owed = UnlinksOwed();
  for (size_t at = plain; at < current_body_; at += sizeof(wire::DirAttrTrailer)) {
    wire::DirAttrTrailer trailer;
    std::memcpy(&trailer, reply.body + at, sizeof(trailer));
    if (wire::IsWrite(r.header.opcode)) {
      // The file after this write: answers the GETATTR the kernel sends after writes (they
      // voided its size and times), unless something newer was learned since it was sent.
      if (trailer.nodeid == r.header.nodeid) AppendedElsewhere(r, trailer.attr.attr.size);
      if (trailer.nodeid != 0 && trailer.nodeid == r.header.nodeid && reply.write_record &&
          !unlinks_owed) {
        config_.dir_attrs->OfferWrite(trailer.nodeid, trailer.attr, reply.record_ticket,
                                      reply.record_reads, now_ns);
      } else {
        // A later write without a usable record: an older one must not answer for it.
        config_.dir_attrs->Drop(r.header.nodeid);
      }
      continue;
    }
    if (wire::IsOpen(r.header.opcode)) {
      // The file as the open found it: whether the kernel may keep its pages, and the answer
      // to the stat after the open (both at delivery).
      r.open_record = trailer.nodeid != 0 && trailer.nodeid == r.header.nodeid;
      r.open_attr = trailer.attr;
      continue;
    }
    if (wire::IsListing(r.header.opcode)) {
      // The listed directory after the listing: answers the GETATTR the kernel sends next (it
      // voided the atime), unless something newer was learned since it was sent. Only this
      // record; early unlinks' bookkeeping waits for changes.
      if (trailer.nodeid != 0 && trailer.nodeid == r.header.nodeid) {
        config_.dir_attrs->OfferListing(trailer.nodeid, trailer.attr, reply.record_ticket, now_ns);
      }
      continue;
    }
    // A LOOKUP changed nothing: its snapshot may be older than one a change on another
    // connection brought, so it only says "empty".
    if (r.header.opcode != FUSE_LOOKUP) {
      config_.dir_attrs->Offer(trailer.nodeid, trailer.attr, now_ns);
      if (config_.async != nullptr) {
        config_.async->Learn(trailer.nodeid, trailer.attr, r.async_ticket, now_ns);
      }
    }
    // The trailer of a directory the server found empty (common/dir_attrs.h): a MKDIR's for
    // the directory it made, a negative LOOKUP's for the directory it looked in.
    if (plain >= sizeof(fuse_entry_out)) {
      fuse_entry_out entry;
      std::memcpy(&entry, reply.body, sizeof(entry));
      if (r.header.opcode == FUSE_MKDIR && entry.nodeid != 0 && trailer.nodeid == entry.nodeid) {
        r.dir_empty = true;
      }
      if (r.header.opcode == FUSE_LOOKUP && entry.nodeid == 0 &&
          trailer.nodeid == r.header.nodeid) {
        r.dir_empty = true;
      }
    }
  }
  return plain;
}

}  // namespace ringfs::frontend
