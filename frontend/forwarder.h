// The decisions between a decoded kernel request (kernel_request.h) and the server, shared by
// both transports: refusals, INTERRUPT, FORGET, DESTROY, local answers, classification, the
// Submit call with its reply bounds, and the counting of all of it in the worker's WorkerStats.
// A transport only receives the bytes, decodes them, and commits or writes the answer; the ring
// transport adds routing and admission (ring-only concepts) between Accept and Forward.
// One Forwarder per worker, used only by that worker's thread; it holds no request state of
// its own (that lives in the transport's slot: the RequestState beside the request's bytes).
#pragma once

#include <linux/fuse.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "frontend/async_removals.h"
#include "frontend/backend_channel.h"
#include "frontend/complete_dirs.h"
#include "frontend/dir_attr_cache.h"
#include "frontend/dir_ends.h"
#include "frontend/interrupt_board.h"
#include "frontend/kept_entries.h"
#include "frontend/kept_pages.h"
#include "frontend/kernel_notifier.h"
#include "frontend/kernel_request.h"
#include "frontend/local_dir_handles.h"
#include "frontend/queue/request_class.h"
#include "frontend/reply_origin.h"
#include "frontend/worker_stats.h"
#include "frontend/xattr_cache.h"

namespace ringfs::frontend {

// The part of the backend channel the forwarder uses. A seam, so the forwarder is tested
// without a server; one virtual call per request, none per byte.
class RequestChannel {
 public:
  virtual ~RequestChannel() = default;
  // As BackendChannel::Submit.
  virtual void Submit(const PendingReply& reply, const fuse_in_header& header,
                      const iovec* parts, int nparts, uint64_t received_ns) = 0;
  // As BackendChannel::SubmitOneWay.
  virtual void SubmitOneWay(const void* frame, size_t size) = 0;
  // As BackendChannel::HandlelessListings.
  virtual bool HandlelessListings() const { return false; }
  // As BackendChannel::CanDetach and SubmitDetached.
  virtual bool CanDetach() const { return false; }
  // As BackendChannel::DetachesReleases.
  virtual bool DetachesReleases() const { return false; }
  virtual void SubmitDetached(const fuse_in_header& /*header*/, const iovec* /*parts*/,
                              int /*nparts*/, uint64_t /*received_ns*/, uint64_t /*seq*/,
                              uint64_t /*gate*/, uint64_t /*after*/,
                              const RecordsVoided& /*voided*/) {}
};

// The worker's BackendChannel behind that seam. REQUIRES: the channel outlives this.
class BackendRequestChannel final : public RequestChannel {
 public:
  explicit BackendRequestChannel(BackendChannel* channel) : channel_(channel) {}
  void Submit(const PendingReply& reply, const fuse_in_header& header, const iovec* parts,
              int nparts, uint64_t received_ns) override {
    channel_->Submit(reply, header, parts, nparts, received_ns);
  }
  void SubmitOneWay(const void* frame, size_t size) override {
    channel_->SubmitOneWay(frame, size);
  }
  bool HandlelessListings() const override { return channel_->HandlelessListings(); }
  bool CanDetach() const override { return channel_->CanDetach(); }
  bool DetachesReleases() const override { return channel_->DetachesReleases(); }
  void SubmitDetached(const fuse_in_header& header, const iovec* parts, int nparts,
                      uint64_t received_ns, uint64_t seq, uint64_t gate, uint64_t after,
                      const RecordsVoided& voided) override {
    channel_->SubmitDetached(header, parts, nparts, received_ns, seq, gate, after, voided);
  }

 private:
  BackendChannel* channel_;
};

// What the transport does with a request after Forwarder::Accept.
struct Verdict {
  enum class Kind : uint8_t {
    kAnswer,   // commit/write `header` and `body_size` bytes of the body buffer now
    kNone,     // the kernel expects no answer (INTERRUPT, FORGET, BATCH_FORGET)
    kForward,  // to the server: Forwarder::Forward (the ring routes and admits it first)
  };
  Kind kind = Kind::kNone;
  fuse_out_header header{};  // kAnswer: len counts the body, unique is the request's
  size_t body_size = 0;
};

// The answer a request that could not be decoded gets.
struct Refusal {
  int error = 0;  // positive errno
  ReplyOrigin origin = ReplyOrigin::kBadRequest;
};
// REQUIRES: `result` is neither kOk nor kTruncatedHeader (those get no refusal).
[[nodiscard]] Refusal RefusalFor(DecodeResult result);

// Where the reply body of a forwarded request lands.
struct ReplyBuffer {
  char* data = nullptr;
  size_t capacity = 0;
};

class Forwarder {
 public:
  struct Config {
    DirAttrCache* dir_attrs = nullptr;      // null: no post-op directory attributes
    InterruptBoard* interrupts = nullptr;   // null: INTERRUPT is not honoured
    uint64_t (*clock)() = MonotonicNs;      // a seam for tests
    XattrAbsenceCache* xattrs = nullptr;    // null: every GETXATTR goes to the server
    CompleteDirs* dirs = nullptr;           // null: every LOOKUP goes to the server
    KeptEntries* kept = nullptr;            // null: every FORGET goes to the server (needs dirs)
    KernelNotifier* notifier = nullptr;     // told of answers that build entries (may be null)
    AsyncRemovals* async = nullptr;         // null: every UNLINK waits for the server
    DirEnds* dir_ends = nullptr;            // null: every READDIR goes to the server
    KeptPages* kept_pages = nullptr;        // null: no READ or WRITE is counted for kept pages
    // Null: every OPENDIR goes to the server. Used while the channel's server lists
    // directories by node (RequestChannel::HandlelessListings).
    LocalDirHandles* local_dirs = nullptr;
    bool async_dio = true;  // FUSE_ASYNC_DIO agreed (queue::ClassifyKernelRequest)
    bool writeback_cache = false;  // FUSE_WRITEBACK_CACHE agreed (AdjustOpenRequestForWriteback)
  };

  Forwarder(Config config, WorkerStats* stats, RequestChannel* channel)
      : config_(config), stats_(stats), channel_(channel) {}
  Forwarder(const Forwarder&) = delete;
  Forwarder& operator=(const Forwarder&) = delete;

  // Decides a request just decoded and starts its `state`. A kAnswer's body (a local answer)
  // is written to `body`, which needs sizeof(fuse_attr_out) bytes (a READDIRPLUS's size: the
  // buffer its forwarded answer would land in) and may overlap the request's bytes (they are
  // not read afterwards). A request that expects no answer is done here.
  [[nodiscard]] Verdict Accept(const KernelRequest& request, RequestState* state, void* body);

  // Sends an accepted request to the server; the answer reaches the transport's ReplySink for
  // `slot`, its body in `reply`. REQUIRES: Accept said kForward; the request's bytes stay put
  // and unchanged until the slot is answered.
  void Forward(const KernelRequest& request, RequestState* state, uint32_t slot,
               ReplyBuffer reply);

  // The channel answered a forwarded request (from the transport's ReplySink::OnReply), its
  // body at `body`.
  void OnReply(RequestState* state, const fuse_out_header& header, const char* body,
               size_t body_size, ReplyOrigin origin);

  // The transport gave an answer with `error` (the header's, ≤ 0) to the kernel.
  void OnAnswered(const RequestState& state, int error);

  // The channel's tick (ReplySink::OnTick): lookups of kept entries that ended go back to the
  // server also while the kernel sends nothing.
  void OnTick();

  // Requests forwarded and not yet answered by the channel.
  uint32_t inflight() const { return inflight_; }

 private:
  Verdict Answer(const KernelRequest& request, RequestState* state, int error, size_t body_size,
                 ReplyOrigin origin);
  // A request the mount answers itself goes to the server as a detached record of the channel
  // (BackendChannel::SubmitDetached: `seq`, `gate`, `after`), counted as forwarded.
  void Detach(const KernelRequest& request, const RequestState& state, uint64_t seq, uint64_t gate,
              uint64_t after, bool early_setattr = false);
  // With async_write: a WRITE answered early, or a FLUSH answered now or sent to wait for the
  // file's early writes (kForward); nullopt for anything else.
  std::optional<Verdict> AcceptWithWrites(const KernelRequest& request, RequestState* state,
                                          void* body);
  // The mount's own directory handles (LocalDirHandles) become fh 0 in the request's bytes;
  // after everything that keys by the kernel's fh (DirEnds) has read it.
  void NameNoLocalHandle(const KernelRequest& request) const;
  // The request's parts as the channel sends them (argument struct, payload); returns how many.
  static int Parts(const KernelRequest& request, iovec (&parts)[2]);
  // A READDIR/READDIRPLUS asks for no more than its buffer holds besides the directory's record
  // (common/dir_attrs.h, listing attrs).
  static void LeaveRoomForRecord(const KernelRequest& request, ReplyBuffer reply);
  // Before a request goes to the server: what it changes is no longer known by the caches.
  // `early_setattr`: a SETATTR answered early, whose attributes AsyncRemovals made already.
  RecordsVoided RecordSending(const KernelRequest& request, bool early_setattr = false);
  // The counters of a request sent to the server.
  void CountForwarded(const KernelRequest& request, const RequestState& state);
  // The kernel's FORGET/BATCH_FORGET: lookups KeptEntries keeps are not sent; the rest is.
  void Forget(const KernelRequest& request);
  // Sends the lookups KeptEntries gives back to the server as BATCH_FORGETs.
  void ReturnKept();
  // `all` as BATCH_FORGETs of at most kForgetsPerFrame records, each under a unique of its own.
  void SendForgets(std::span<const fuse_forget_one> all);

  const Config config_;
  WorkerStats* const stats_;
  RequestChannel* const channel_;
  uint32_t inflight_ = 0;
  uint64_t own_forget_frames_ = 0;
  // The kernel reads as many forgets as the /dev/fuse buffer holds (65k records in 1 MiB + 8 KiB,
  // over the wire's frame limit), and a reset can return every kept lookup at once: frames of
  // 4,096 records (64 KiB) stay far from the limit.
  static constexpr size_t kForgetsPerFrame = 4096;
};

// The Forwarder's view of a worker's backend configuration (both transports).
Forwarder::Config ForwarderConfigOf(const BackendConfig& backend);

}  // namespace ringfs::frontend
