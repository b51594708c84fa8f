// One worker's connection to ringfs-server, driven entirely through the worker's own io_uring:
// requests are queued and sent with SENDMSG (short sends continue where they stopped), replies
// are received into the buffer each request named, and nothing here ever blocks the worker.
// While the connection is down, requests wait; the channel connects and handshakes through the
// same ring, and once the connection is back every request still unanswered is sent again. A request that reaches
// its deadline (mount option timeout=) ends with ETIMEDOUT, one that the kernel interrupts with
// EINTR; a late reply to either is read and dropped.
// A request's buffers belong to the channel from Submit until its answer is delivered: the
// answer is held back while a SENDMSG or a receive still uses them.
// Owned and used by exactly one worker thread, which owns the io_uring passed in and routes to
// OnCompletion every completion whose tag has the channel's kind. Replies reach the ReplySink
// only from Deliver(), which the worker calls from its loop, never from inside the receive path.
#pragma once

#include <liburing.h>
#include <linux/fuse.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/fuse_ops.h"
#include "common/net.h"
#include "common/node_handle.h"
#include "common/tls_context.h"
#include "common/tls_ring.h"
#include "common/unique_fd.h"
#include "common/wire.h"
#include "frontend/async_removals.h"
#include "frontend/complete_dirs.h"
#include "frontend/dir_attr_cache.h"
#include "frontend/dir_ends.h"
#include "frontend/interrupt_board.h"
#include "frontend/kept_entries.h"
#include "frontend/kept_pages.h"
#include "frontend/kernel_notifier.h"
#include "frontend/local_dir_handles.h"
#include "frontend/node_ledger.h"
#include "frontend/page_drops.h"
#include "frontend/reclaim_run.h"
#include "frontend/reply_frame.h"
#include "frontend/reply_origin.h"
#include "frontend/server_binding.h"
#include "frontend/xattr_cache.h"

namespace ringfs::frontend {

struct BackendConfig {
  // The server when `binding` is null (unit tests, tools); a mount's channels ask the binding.
  SocketAddress address;
  std::string client_id;
  // Who we are to the server (its clients file) and the secret we prove without sending it
  // (frontend/client_auth.h). Empty secret: we can only reach servers that ask for none.
  std::string client_name;
  std::string token;
  uint32_t queue = 0;
  uint32_t fuse_minor = 0;
  // Most requests this channel may hold at once (the worker's ring entries or read slots); slot
  // numbers passed to Submit are below this. Also what the handshake asks the server to accept.
  uint32_t max_inflight = 16;
  std::chrono::nanoseconds entry_timeout{std::chrono::seconds(1)};
  std::chrono::nanoseconds attr_timeout{std::chrono::seconds(1)};
  std::chrono::milliseconds connect_timeout{5000};
  // A request not answered this long after it reached ringfs-mount ends with ETIMEDOUT.
  // Zero: hard — wait for the server forever (a caller can still be interrupted).
  std::chrono::milliseconds request_timeout{60000};
  // Where post-operation directory attributes go (common/dir_attrs.h); null: not asked for.
  DirAttrCache* dir_attrs = nullptr;
  // With dir_attrs: also ask for each WRITE's file after the write (write attrs).
  bool write_attrs = true;
  // With dir_attrs: ask for each OPEN's file at the open (open attrs) and let the kernel keep
  // a file's pages across opens while they are current (frontend/kept_pages.h); null: off.
  KeptPages* kept_pages = nullptr;
  // With kept_pages: confirms the drops KeptPages asks for (never null then).
  PageDrops* page_drops = nullptr;
  // Interrupts posted by the /dev/fuse readers; null: interrupts are not honoured.
  InterruptBoard* interrupts = nullptr;
  // What the kernel holds, for reclaim on a new server instance; null: not asked for (node
  // handles are not negotiated and a new instance leaves every old id ESTALE).
  NodeLedger* ledger = nullptr;
  // Which server to use and which instance holds the mount's state; null: `address` only.
  ServerBinding* binding = nullptr;
  // TLS on the connection (mount option tls); null: plaintext. The server's certificate must
  // name `tls_name`, or when that is empty the host of `address`.
  std::shared_ptr<tls::Context> tls;
  std::string tls_name;
  // Where the server's cache invalidations go (common/invalidation.h); null: not asked for.
  KernelNotifier* notifier = nullptr;
  // Learns from GETXATTR answers and creates which nodes have no file capability; null: off.
  XattrAbsenceCache* xattrs = nullptr;
  // Directories this mount knows complete (MKDIR answers make them; a lost or new connection
  // forgets them all); null: off.
  CompleteDirs* dirs = nullptr;
  // Entries the kernel forgot, kept (frontend/kept_entries.h); null: off. Needs `dirs`.
  KeptEntries* kept = nullptr;
  // Where open directories' listings end (frontend/dir_ends.h); null: off.
  DirEnds* dir_ends = nullptr;
  // Directory handles the mount hands out itself (handle-less listings, wire_format.md); null:
  // not asked for, every OPENDIR goes to the server.
  LocalDirHandles* local_dirs = nullptr;
  // Write-only opens get FOPEN_DIRECT_IO (frontend/open_reply.h); false when the kernel caches
  // writes (FUSE_WRITEBACK_CACHE agreed).
  bool direct_write_only = false;
  // FUSE_WRITEBACK_CACHE agreed: opens are adjusted for it (AdjustOpenRequestForWriteback).
  bool writeback_cache = false;
  // FUSE_ASYNC_DIO agreed: direct I/O comes as background requests (queue/request_class.h).
  bool async_dio = true;
  // The channel serves ring entries: the kernel may lose a caller's INTERRUPT
  // (EndSignalledCallers). A /dev/fuse reader's kernel path never does.
  bool probe_signals = false;
  // Unlinks answered before the server ran them (the async_unlink option); null: off.
  AsyncRemovals* async = nullptr;
  // A file's RELEASE is answered by the mount and sent with the next request, or at most
  // detached_batch_wait later (Forwarder; off with the sync_release option). Needs no `async`.
  bool detach_releases = false;
  // The longest a detached record waits for its batch (BackendChannel::kDetachedBatch): tests
  // lengthen it to look at a batch while it gathers.
  std::chrono::nanoseconds detached_batch_wait{std::chrono::milliseconds(1)};
};

// The name the server's certificate must carry (BackendConfig::tls_name or the address's host).
std::string TlsServerName(const BackendConfig& config);

// What a successful handshake told us.
struct ServerSession {
  UniqueFd fd;
  bool dir_attrs = false;     // the server appends dir-attr trailers
  bool empty_dir_hints = false;  // ... also to LOOKUPs that found an empty directory
  bool listing_attrs = false;    // ... and one ends every READDIR/READDIRPLUS reply
  bool write_attrs = false;      // ... and every WRITE reply
  bool open_attrs = false;       // ... and every OPEN reply
  bool handleless_listings = false;  // READDIR/FSYNCDIR with fh 0 list by node
  uint32_t max_inflight = 0;  // what the server accepted
  uint64_t instance_id = 0;   // the server process (wire_format.md §1)
  uint64_t session_id = 0;    // the server's id of this connection
  bool node_handles = false;  // handle notifications and reclaim (common/node_handle.h)
  bool invalidations = false; // the server pushes invalidations (common/invalidation.h)
  // Callers act as themselves on a writable export (ServerHello.callers_as_themselves).
  bool callers_as_themselves = false;
};

// Opens a connection and performs the handshake, blocking (bounded by connect_timeout and the
// handshake timeout): the mount's pre-flight check on the main thread. Workers connect through
// their ring instead (BackendChannel).
absl::StatusOr<ServerSession> ConnectToServer(const BackendConfig& config);

// The parts of the handshake both ways of connecting share. The hello carries a fresh nonce
// when the config has a secret.
wire::ClientHello MakeClientHello(const BackendConfig& config);
// Checks the server's final answer; the session's fd is left empty. `authenticated`: we
// answered a challenge (otherwise a server that asked for no secret is noted in the log).
absl::StatusOr<ServerSession> AcceptServerHello(const BackendConfig& config,
                                                const wire::ServerHello& reply,
                                                bool authenticated = false);

class ReplySink {
 public:
  virtual ~ReplySink() = default;
  // The request in `slot` is answered: header.error is 0 with the body in place, or an error.
  // The slot's buffers are the worker's again.
  virtual void OnReply(uint32_t slot, const fuse_out_header& header, size_t body_size,
                       ReplyOrigin origin) = 0;
  // The channel's tick (every kTickInterval, also while no request comes): the sink may submit.
  virtual void OnTick() {}
};

class BackendChannel {
 public:
  // How often deadlines, interrupts and connection attempts are looked at.
  static constexpr std::chrono::milliseconds kTickInterval{100};

  // `kind` is the tag the worker routes to OnCompletion (user_data bits 56..63).
  BackendChannel(BackendConfig config, io_uring* ring, uint8_t kind, ReplySink* sink);
  ~BackendChannel();
  BackendChannel(const BackendChannel&) = delete;
  BackendChannel& operator=(const BackendChannel&) = delete;

  // Arms the tick and starts connecting in the background. Requests may be submitted at once.
  void Start();

  // Takes a request that expects a reply. `header` is copied (its len is set here); `parts`
  // (argument struct, payload) must stay valid and unchanged until the slot is answered.
  // `received_ns` (MonotonicNs) starts the deadline. REQUIRES: `slot` < max_inflight and not
  // in use; `header.unique` not outstanding.
  void Submit(const PendingReply& reply, const fuse_in_header& header, const iovec* parts,
              int nparts, uint64_t received_ns);
  // A request without a reply (FORGET, BATCH_FORGET): the bytes are copied.
  void SubmitOneWay(const void* frame, size_t size);
  // An UNLINK the mount answers now (AsyncRemovals `seq`): its bytes are copied, the channel
  // sends it (again after a lost connection) and owns its answer: a failure is logged, counted
  // and the kernel told to look the name up again. REQUIRES: CanDetach().
  // A SETATTR answered early likewise: a failure is logged, counted and the kernel told to ask
  // for the node's attributes again. A WRITE too: a failure is logged, counted, the kernel told
  // to ask for the attributes again and the file's next FLUSH or FSYNC fails with it. `gate`: as
  // PendingReply::gate. `after`: the same node's early SETATTR it follows (0: none), into which it
  // may be folded while that one waits here. `voided`: what it makes stale among write records,
  // applied again when it ends (PendingReply::voided).
  void SubmitDetached(const fuse_in_header& header, const iovec* parts, int nparts,
                      uint64_t received_ns, uint64_t seq, uint64_t gate = 0, uint64_t after = 0,
                      const RecordsVoided& voided = {});
  bool CanDetach() const { return detachable() && detached_live_ < kDetached; }
  // RELEASEs of files may be detached without early changes before them (detach_releases).
  bool DetachesReleases() const { return config_.detach_releases; }
  // The server of the current (or last) connection lists directories by node (fh 0).
  bool HandlelessListings() const { return handleless_listings_on_; }
  // Early unlinks the server has not answered yet: a worker on its way out waits for them.
  uint32_t detached() const { return detached_live_; }
  // Times another channel's answered unlink woke this one (AsyncRemovals::WakeAtNextEnd).
  uint64_t gate_wakes() const { return gate_wakes_; }
  // The mount ended: whether its worker should keep running for the detached records still
  // owed to the server, and for the RELEASEs waiting behind early changes without one (no
  // deadline either: they hold a /dev/fuse slot or ring entry), for at most kDetachedDrain from
  // the first call (`*deadline_ns`, 0 before it). Past that they are given up, logged, and those
  // RELEASEs ended, which gives their slots back; false from then on. When only detached
  // RELEASEs are owed: at most kReleasesDrainNs, and not at all while no server is reached.
  bool KeepForDetached(uint64_t* deadline_ns);

  void OnCompletion(uint64_t user_data, int res);
  // Hands every answered request to the sink. Call from the worker loop.
  void Deliver();

  bool connected() const { return state_ == State::kUp; }
  // Nothing waits to be sent, one-way frames (FORGETs) included: a worker on its way out must
  // not drop them with the channel.
  bool send_idle() const {
    return send_queue_.empty() && held_one_way_.empty() && !send_outstanding_;
  }
  // Requests submitted and not yet delivered.
  size_t inflight() const { return live_; }
  uint64_t reconnects() const { return reconnects_; }
  uint64_t timeouts() const { return timeouts_; }
  uint64_t interrupts() const { return interrupted_; }
  // Reclaims this channel led (each re-established the mount's state on a new instance).
  uint64_t reclaims() const { return reclaims_; }
  uint64_t replayed_removals() const { return replayed_removals_; }

 private:
  enum class State { kDown, kConnecting, kUp, kDraining };
  // Operations on the ring; while connecting exactly one of the last three is outstanding.
  enum class Op : uint32_t {
    kRecv = 0,
    kSend = 1,
    kTick = 2,
    kConnect = 3,
    kHelloSend = 4,
    kHelloRecv = 5,
    // The authentication round trip after a ServerHello with a challenge: our ClientProof out,
    // the final ServerHello in.
    kProofSend = 6,
    kProofRecv = 7,
    // TLS (backend_channel_tls.cc): the handshake's end, and the ciphertext operations.
    kTlsHandshake = 8,
    kTlsRecv = 9,
    kTlsSend = 10,
    kTlsWake = 11,
    // The end of the wait that gathers detached records into one send (detached_batch_wait).
    kFlush = 12,
    // A read of gate_fd_: an early unlink another channel carried was answered (AsyncRemovals).
    kGateWake = 13,
  };
  enum class Stage : uint8_t { kFree, kWaiting, kQueued, kSent };

  struct Record {
    Stage stage = Stage::kFree;
    bool in_send = false;      // bytes of it are in the outstanding SENDMSG
    int end_error = 0;         // set: answer with this errno once its buffers are free
    ReplyOrigin end_origin = ReplyOrigin::kServer;
    uint64_t unique = 0;
    uint64_t deadline_ns = 0;  // 0: none
    uint64_t probe_ns = 0;     // when to look for a signal its INTERRUPT was lost for; 0: never
    PendingReply reply;
    fuse_in_header header{};
    iovec iov[4]{};
    bool held = false;  // answered while still in the outstanding SENDMSG
    bool interrupted = false;  // a local record's INTERRUPT came (EndDyingLocals)
    bool release_behind_changes = false;  // a RELEASE behind early changes of its file (Submit)
    int held_error = 0;
    size_t held_body = 0;
    uint64_t dir_ticket = 0;    // a MKDIR or LOOKUP: CompleteDirs' ticket
    bool dir_empty = false;     // its reply carried the trailer of a directory found empty
    // An OPEN's reply carried the opened file's record (open attrs): `open_attr` (KeptPages,
    // and the stat after the open).
    bool open_record = false;
    fuse_attr_out open_attr{};
    bool change = false;        // may change what a client caches, not settled (CompleteDirs)
    bool reached = false;       // handed to a socket at least once: the server may have it
    uint64_t reached_instance = 0;  // the server instance it was last handed to whole
    bool reached_another = false;   // handed whole to an instance before that one: it may have run
    // XattrAbsenceCache's ticket, taken for a GETXATTR of kAbsenceNames[xattr_name] and for an
    // exclusive create; 0 for every other request.
    uint64_t xattr_ticket = 0;
    int8_t xattr_name = -1;  // the GETXATTR's name (XattrAbsenceCache::IndexOf)
    int iovcnt = 0;
    size_t frame_bytes = 0;
    uint64_t gate = 0;          // PendingReply::gate
    uint64_t async_ticket = 0;  // AsyncRemovals::Ticket: the attributes its answer brings
  };
  // What a detached record (SubmitDetached) owns: the request's bytes and its reply's.
  struct Detached {
    bool live = false;
    uint64_t seq = 0;
    std::vector<uint64_t> merged;  // early SETATTRs of the same node folded into this one
    uint64_t since_ns = 0;     // when it was answered (the owed-too-long warning)
    std::string frame;         // argument struct and payload, as the kernel sent them
    std::vector<char> reply;   // room for the reply's trailers
  };
  struct SendItem {
    uint32_t slot;          // kOneWay for a one-way frame
    std::string one_way;
    uint64_t epoch = 0;     // of a FORGET: the ledger epoch it was counted in
    bool expects_reply = false;  // a RELEASE of our own whose reply is dropped
  };
  // While the mount's state is being re-established on a new instance nothing but the reclaim
  // frames may reach it.
  enum class Hold { kNone, kLeading, kWaiting };
  struct Answered {
    uint32_t slot;
    fuse_out_header header;
    size_t body;
    ReplyOrigin origin;
  };
  static constexpr uint32_t kOneWay = ~0u;
  // Detached records per channel (their slots follow the reclaim slot): past it unlinks are
  // synchronous again, which bounds what a slow server can owe.
  static constexpr uint32_t kDetached = 64;
  static constexpr size_t kDetachedReplyBytes = 512;
  // A detached record's copy of its frame keeps no more room than this once answered.
  static constexpr size_t kKeptFrameBytes = 64 << 10;
  static constexpr uint64_t kDetachedDrainNs = 30'000'000'000;
  // The same when only RELEASEs are owed (KeepForDetached).
  static constexpr uint64_t kReleasesDrainNs = 1'000'000'000;
  static constexpr uint64_t kDrainOver = ~0ull;  // KeepForDetached gave up
  // Detached records owed longer than this are logged (again at most this often).
  static constexpr uint64_t kDetachedOwedWarnNs = 60'000'000'000;
  // A request still unanswered this long has its caller looked at for a signal whose INTERRUPT
  // the kernel lost (caller_state.h), and again as often while it waits. Far beyond the
  // INTERRUPT's own way (the next tick), and a /proc read per second per waiting request.
  static constexpr uint64_t kSignalProbeNs = 1'000'000'000;
  // Detached records are sent kDetachedBatch at a time, or at most
  // BackendConfig::detached_batch_wait after the first waited (sooner with any other request):
  // the caller does not wait for them, and each send wakes the server, which on loopback costs
  // the mount's CPU more than the unlink itself.
  static constexpr uint32_t kDetachedBatch = 16;
  static constexpr uint32_t kNotify = ~1u;  // current_slot_ of a handle notification
  // Uniques of reclaim frames; the kernel's never have the top bit set.
  static constexpr uint64_t kReclaimUnique = uint64_t{1} << 63;
  // An EOF after this long without our sending anything looks like the server's idle close.
  static constexpr uint64_t kQuietBeforeCleanCloseNs = 1'000'000'000;
  // A clean end followed by a reconnect within this long lost nothing (Install).
  static constexpr uint64_t kQuickReconnectNs = 1'000'000'000;

  uint64_t Tag(Op op) const;
  // An O_APPEND WRITE whose file ended elsewhere than its kernel thought (`size_after`, from its
  // record): the kernel's pages of it are dropped.
  void AppendedElsewhere(const Record& r, uint64_t size_after);
  void OnTick();
  void StartConnect();
  void OnConnectStep(Op op, int res);
  // Submits the next send or receive of the handshake (hello or proof round).
  void SubmitHandshakeStep();
  // TLS hooks (backend_channel_tls.cc). Post* replace a plain RECV/SEND/SENDMSG on `fd`.
  void StartTlsHandshake();
  void OnTlsStep(Op op, int res);
  void PostRecv(int fd, char* buf, size_t len, Op op);
  void PostSend(int fd, const iovec* iov, size_t iovcnt, Op op);
  void ConnectFailed(const absl::Status& status);
  void Install(ServerSession session);
  // `clean`: the end looks like the server's idle close (an EOF between frames, after we sent
  // nothing for kQuietBeforeCleanCloseNs): nothing it had for us was lost (Install).
  void Fail(std::string_view why, bool clean = false);
  void FinishDrain();
  // After a handshake: ask the binding whether this instance may get requests.
  void Arrive();
  void ReleaseHold(uint64_t epoch);
  void SendReclaimFrame();
  void OnReclaimReply(int error, size_t body);
  char* BodyTarget();
  // A success reply that reached no one gave the client a lookup or an open handle at the
  // server: give them back (FORGET, RELEASE), so the server holds what the kernel holds.
  void GiveBack(uint32_t opcode, uint64_t nodeid, const char* body, size_t size);
  void QueueOwn(std::string frame, bool expects_reply);
  // A RELEASE (or RELEASEDIR) of our own of `release.fh`, whose reply is dropped.
  void QueueOwnRelease(uint32_t opcode, uint64_t nodeid, const fuse_release_in& release);
  // A FORGET frame of the channel's own (unique in the reclaim range).
  std::string OwnForget(uint64_t nodeid, uint64_t nlookup);
  void FillWindow();
  void KickSend();
  void OnSend(int res);
  void ArmRecv();
  void OnRecv(int res);
  void ParseStaging();
  bool BeginReply(const fuse_out_header& header);
  void FinishReply();
  size_t TakeTrailers();
  // Early unlinks are owed (AsyncRemovals): a write's or an open's record is not kept, as one
  // may be of its file and the server ran the write or open before it (an unlink detached later
  // drops the record: NamesChanged).
  bool UnlinksOwed() const;
  // Ends the request in `slot` with `err` now if its buffers are free; otherwise marks it and,
  // when a SENDMSG or receive holds them, resets the connection to get them back.
  void End(uint32_t slot, int err, ReplyOrigin origin);
  // A change that may have reached the server lost its answer: unsettled_changes_.
  void LoseChange();
  // `count` changes followed since they were sent or lost are settled: run, or never to run.
  void SettleChanges(uint64_t count);
  // XattrAbsenceCache bookkeeping of a request being sent and of its server answer.
  void NoteXattrRequest(Record& r);
  void NoteXattrReply(const Record& r, int error, size_t body);
  void Answer(uint32_t slot, int error, size_t body, ReplyOrigin origin = ReplyOrigin::kServer);
  bool Busy(uint32_t slot) const;
  bool IsDetached(uint32_t slot) const { return slot > reclaim_slot_; }
  // The server answered a detached record (or it ended without an answer).
  void FinishDetached(uint32_t slot, int error, size_t body, ReplyOrigin origin);
  // Folds early SETATTR `seq` into `after`, the same node's one before it, when that one still
  // waits here; false when it does not (or they cannot be folded).
  bool MergeSetattr(const fuse_in_header& header, const iovec* parts, int nparts, uint64_t seq,
                    uint64_t after);
  void FailedSetattr(const Record& r, const Detached& d, int error, ReplyOrigin origin);
  void FailedWrite(const Record& r, const fuse_write_in& in, uint32_t written, int error,
                   ReplyOrigin origin);
  // Answers the waiting records that are answered here (PendingReply::local) whose gate passed.
  void AnswerPassedLocals();
  // Ends with EINTR the waiting local records whose caller is dying (caller_state.h), or was
  // interrupted and cannot be looked at. Each tick.
  void EndDyingLocals();
  // Ends with EINTR the requests unanswered for kSignalProbeNs whose caller has a signal pending
  // that the kernel sent no INTERRUPT for (caller_state.h). Each tick.
  void EndSignalledCallers(uint64_t now);
  // Logs and counts its failure, and has the kernel look the name up again.
  void FailedDetached(const Record& r, const Detached& d, int error, ReplyOrigin origin);
  uint32_t window() const;
  // Detached records exist: for early requests (async) or RELEASEs (detach_releases).
  bool detachable() const { return config_.async != nullptr || config_.detach_releases; }

  BackendConfig config_;
  io_uring* ring_;
  uint8_t kind_;
  // Encrypts and decrypts under PostSend/PostRecv when config_.tls is set; kept for the
  // channel's life (its buffers may be in the kernel across connections).
  std::unique_ptr<tls::RingTransport> tls_;
  ReplySink* sink_;

  State state_ = State::kDown;
  UniqueFd fd_;
  size_t address_index_ = 0;     // of config_.address in the binding
  bool node_handles_on_ = false;
  bool invalidations_on_ = false;
  Hold hold_ = Hold::kNone;
  std::deque<SendItem> held_one_way_;  // FORGETs that came while holding
  std::unique_ptr<ReclaimRun> reclaim_;
  uint32_t reclaim_slot_ = 0;    // the record reclaim frames use: one past the kernel's slots
  uint64_t reclaim_uniques_ = 0;
  uint64_t reclaim_started_ns_ = 0;
  std::string reclaim_args_;
  std::vector<char> reclaim_reply_;
  uint64_t reclaims_ = 0;
  std::vector<wire::NodeHandleRecord> notify_buf_;  // the handle notification being read
  std::string invalidation_buf_;                    // the invalidation frame being read
  uint32_t generation_ = 1;
  TrailerRules trailers_on_;  // what this connection's replies carry
  bool handleless_listings_on_ = false;
  // Changes the server instance `server_instance_` may still run, their answers lost with a
  // connection: settled once a connection reaches another instance (single server), or a grace
  // period after the last was lost, once connected again (LoseChange, OnTick).
  uint64_t unsettled_changes_ = 0;
  uint64_t unsettled_since_ns_ = 0;  // when the last of them was lost
  uint32_t server_max_inflight_ = 0;
  uint64_t server_instance_ = 0;  // of the last connection
  uint64_t server_session_ = 0;   // the server's id of the last connection
  // The connection being set up: socket, handshake bytes out and in, deadline.
  UniqueFd attempt_fd_;
  std::string hello_out_;
  std::string hello_body_;    // the ClientHello as sent: the proofs cover these bytes
  bool proof_round_ = false;  // hello_out_/hello_in_ are the ClientProof and the final reply
  size_t hello_sent_ = 0;
  std::vector<char> hello_in_;
  size_t hello_received_ = 0;
  uint64_t attempt_deadline_ns_ = 0;
  bool attempt_expired_ = false;
  uint64_t next_attempt_ns_ = 0;
  uint64_t backoff_ns_ = 0;
  uint64_t down_since_ns_ = 0;
  uint32_t failed_attempts_ = 0;
  uint64_t reconnects_ = 0;
  uint64_t timeouts_ = 0;
  uint64_t interrupted_ = 0;
  bool ever_connected_ = false;
  bool ended_cleanly_ = false;  // the last connection ended as the server's idle close does (Fail)
  uint64_t last_send_ns_ = 0;  // when bytes last went to the socket
  uint64_t ended_ns_ = 0;      // when the last connection ended (Fail)
  uint64_t replayed_removals_ = 0;  // UNLINK/RMDIR ENOENTs answered success (FinishReply)
  std::vector<Detached> detached_;  // by slot - reclaim_slot_ - 1
  uint32_t detached_live_ = 0;
  uint32_t detached_releases_ = 0;  // of detached_live_: RELEASEs (KeepForDetached)
  uint64_t owed_warned_ns_ = 0;  // the last warning about detached records owed too long
  bool gathering_ = false;          // detached records wait for their batch (kDetachedBatch)
  uint32_t detached_gathered_ = 0;  // of this batch
  bool flush_armed_ = false;        // the kFlush timeout is outstanding
  UniqueFd gate_fd_;                // eventfd AsyncRemovals writes to (with config_.async)
  uint64_t gate_value_ = 0;
  uint64_t gate_wakes_ = 0;
  void ArmGateWake();
  __kernel_timespec flush_{};
  __kernel_timespec tick_{};

  // By slot, made on first use: a worker only ever sees the entries that come its way.
  std::vector<std::unique_ptr<Record>> records_;
  absl::flat_hash_map<uint64_t, uint32_t> by_unique_;
  // Answered early (interrupt, deadline) while the server still has them: their replies are
  // read and dropped. They count against the server's in-flight limit until then. By unique,
  // the opcode (what a dropped success reply gave that the kernel never got is given back).
  struct Dropped {
    uint32_t opcode = 0;
    uint64_t nodeid = 0;
    bool change = false;   // settled when its reply is read
    RecordsVoided voided;  // applied once more then: it ran at the server after its End
    // The names an UNLINK, RMDIR or RENAME removes: written into the kernel if it succeeds.
    std::vector<wire::Invalidation> entries;
  };
  absl::flat_hash_map<uint64_t, Dropped> dropped_;
  Dropped current_dropped_;  // of the dropped reply being read; opcode 0 when none
  size_t live_ = 0;
  uint32_t on_wire_ = 0;  // sent or being sent on this connection, awaiting a reply
  std::deque<uint32_t> waiting_;  // not yet queued for sending (down, or window full)
  std::deque<SendItem> send_queue_;
  size_t front_sent_ = 0;      // bytes of send_queue_.front() already on the wire
  bool send_outstanding_ = false;
  size_t send_items_ = 0;      // items covered by the outstanding SENDMSG
  static constexpr int kMaxSendIov = 64;
  iovec send_iov_[kMaxSendIov]{};
  msghdr send_msg_{};
  std::vector<Answered> answered_;

  // Receive side.
  enum class RecvMode { kIdle, kStaging, kDirect, kDiscard };
  std::vector<char> staging_;
  size_t staging_begin_ = 0;
  size_t staging_end_ = 0;
  RecvMode mode_ = RecvMode::kIdle;
  bool recv_outstanding_ = false;
  std::vector<char> discard_;
  fuse_out_header current_{};
  uint32_t current_slot_ = kOneWay;  // kOneWay: the reply is dropped
  size_t current_body_ = 0;
  size_t current_received_ = 0;
};

}  // namespace ringfs::frontend
