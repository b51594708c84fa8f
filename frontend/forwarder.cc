#include "frontend/forwarder.h"

#include <cerrno>
#include <cstring>
#include <string_view>

#include "common/fuse_ops.h"
#include "frontend/local_answer.h"

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

// Before a request that may make a name exist goes to the server: its names are no longer
// known absent (CompleteDirs). Renames record both names (RENAME_WHITEOUT leaves one behind).
void RecordNames(const KernelRequest& request, CompleteDirs& dirs) {
  const uint64_t dir = request.header.nodeid;
  switch (request.opcode()) {
    case FUSE_CREATE:
    case FUSE_MKNOD:
    case FUSE_MKDIR:
    case FUSE_SYMLINK:  // name, then the link's target
    case FUSE_LINK:     // the new name in `dir`
      dirs.AddName(dir, NameAt(request, 0));
      return;
    case FUSE_RENAME:
    case FUSE_RENAME2: {
      const uint64_t newdir = request.opcode() == FUSE_RENAME
                                  ? request.Struct<fuse_rename_in>().newdir
                                  : request.Struct<fuse_rename2_in>().newdir;
      std::string_view old_name = NameAt(request, 0);
      dirs.AddName(dir, old_name);
      dirs.AddName(newdir, NameAt(request, old_name.size() + 1));
      return;
    }
    default:
      return;
  }
}

// The kernel forgets nodes: a forgotten directory is no longer known complete.
void DropForgotten(const KernelRequest& request, CompleteDirs& dirs) {
  if (request.opcode() == FUSE_FORGET) {
    dirs.Drop(request.header.nodeid);
    return;
  }
  const uint32_t count = request.Struct<fuse_batch_forget_in>().count;
  for (uint32_t i = 0; i < count; ++i) {
    if ((i + 1) * sizeof(fuse_forget_one) > request.payload_size) break;
    fuse_forget_one one;
    std::memcpy(&one, request.payload + i * sizeof(one), sizeof(one));
    dirs.Drop(one.nodeid);
  }
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

Verdict Forwarder::Accept(const KernelRequest& request, RequestState* state, void* body) {
  *state = RequestState{};
  state->received_ns = config_.clock();
  if (request.decoded == DecodeResult::kTruncatedHeader) return Verdict{};  // no unique to answer
  if (request.decoded != DecodeResult::kOk) {
    Refusal refusal = RefusalFor(request.decoded);
    return Answer(request, state, refusal.error, 0, refusal.origin);
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
      if (config_.dirs != nullptr) DropForgotten(request, *config_.dirs);
      channel_->SubmitOneWay(request.frame, request.header.len);
      WorkerStats::Add(stats_->forwarded);
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
  state->request_class =
      queue::ClassifyKernelRequest(request.opcode(), request.op_in, request.op_in_size);
  if (std::optional<LocalAnswer> local =
          AnswerLocally(request.opcode(), request.header.nodeid, request.op_in,
                        request.op_in_size, {request.payload, request.payload_size},
                        LocalCaches{config_.dir_attrs, config_.xattrs, config_.dirs}, body,
                        state->received_ns)) {
    // A designed reply (FLUSH's ENOSYS included), not a failure.
    WorkerStats::Add(stats_->answered_locally);
    return Answer(request, state, local->error, local->body_size, ReplyOrigin::kLocal);
  }
  if (config_.dirs != nullptr) RecordNames(request, *config_.dirs);
  Verdict verdict;
  verdict.kind = Verdict::Kind::kForward;
  return verdict;
}

void Forwarder::Forward(const KernelRequest& request, RequestState* state, uint32_t slot,
                        ReplyBuffer reply) {
  fuse::ReplyBounds bounds =
      fuse::SuccessReplyBounds(request.opcode(), request.op_in, request.op_in_size);
  PendingReply pending{slot, request.opcode(), reply.data, reply.capacity, bounds.min,
                       bounds.max};
  // The wire wants header | struct | payload. The classic transport has them contiguous; the
  // ring splits them, and the channel gathers the parts without copying.
  iovec parts[2] = {{const_cast<char*>(request.op_in), request.op_in_size},
                    {const_cast<char*>(request.payload), request.payload_size}};
  int nparts = 2;
  if (request.op_in + request.op_in_size == request.payload) {
    parts[0].iov_len += request.payload_size;
    nparts = 1;
  }
  channel_->Submit(pending, request.header, parts, nparts, state->received_ns);
  ++inflight_;
  state->sent_ns = config_.clock();
  const bool background = state->request_class == queue::RequestClass::kBackground;
  WorkerStats::Add(stats_->forwarded);
  WorkerStats::Add(background ? stats_->forwarded_background : stats_->forwarded_foreground);
  WorkerStats::Add(
      stats_->forwarded_by_op[background ? 1 : 0][request.opcode() % WorkerStats::kOpcodes]);
  WorkerStats::Add(stats_->bytes_to_server, request.body_bytes());
}

void Forwarder::OnReply(RequestState* state, size_t body_size, ReplyOrigin origin) {
  state->reply_origin = origin;
  if (inflight_ > 0) --inflight_;
  if (state->sent_ns != 0) {
    stats_->backend_rtt.Observe(static_cast<int64_t>(config_.clock() - state->sent_ns));
  }
  WorkerStats::Add(stats_->bytes_from_server, body_size);
}

void Forwarder::OnAnswered(const RequestState& state, int error) {
  WorkerStats::Add(stats_->replies);
  stats_->CountReply(error, state.reply_origin);
  if (state.received_ns != 0) {
    const bool background = state.request_class == queue::RequestClass::kBackground;
    stats_->request_duration[background ? 1 : 0].Observe(
        static_cast<int64_t>(config_.clock() - state.received_ns));
  }
}

}  // namespace ringfs::frontend
