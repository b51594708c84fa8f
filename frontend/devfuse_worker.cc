#include "frontend/devfuse_worker.h"

#include <sys/mman.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "common/fuse_ops.h"
#include "common/log.h"
#include "common/status.h"
#include "frontend/completion_tags.h"
#include "frontend/local_answer.h"
#include "frontend/queue/request_class.h"
#include "frontend/worker_thread.h"

namespace ringfs::frontend {

DevFuseWorker::DevFuseWorker(DevFuseWorkerConfig config, WorkerStats* stats)
    : config_(std::move(config)), stats_(stats) {}

DevFuseWorker::~DevFuseWorker() {
  Join();
  backend_.reset();
  if (ring_initialized_) io_uring_queue_exit(&ring_);
  if (buffers_ != nullptr) munmap(buffers_, buffers_bytes_);
}

absl::Status DevFuseWorker::Start() {
  return StartWorkerThread(
      &thread_, [this] { return Setup(); }, [this] { Loop(); });
}

void DevFuseWorker::Join() {
  if (thread_.joinable()) thread_.join();
}

absl::Status DevFuseWorker::Setup() {
  if (config_.cpu >= 0) PinCurrentThread(config_.cpu);
  if (int rc = io_uring_queue_init(2 * config_.slots + 8, &ring_, 0); rc < 0) {
    return ErrnoError(-rc, "io_uring_queue_init");
  }
  ring_initialized_ = true;
  buffers_bytes_ = config_.buffer_bytes * config_.slots;
  void* memory = mmap(nullptr, buffers_bytes_, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (memory == MAP_FAILED) return ErrnoError(errno, "mmap /dev/fuse buffers");
  buffers_ = static_cast<char*>(memory);
  BackendConfig backend = config_.backend;
  backend.max_inflight = config_.slots;
  backend_ = std::make_unique<BackendChannel>(
      std::move(backend), &ring_, static_cast<uint8_t>(CompletionKind::kBackend), this);
  backend_->Start();
  slot_alive_.assign(config_.slots, true);
  slot_times_.assign(config_.slots, SlotTimes{});
  reply_offset_.assign(config_.slots, sizeof(fuse_out_header));
  alive_slots_ = config_.slots;
  for (uint32_t slot = 0; slot < config_.slots; ++slot) PostRead(slot);
  int submitted = io_uring_submit(&ring_);
  if (submitted < 0) return ErrnoError(-submitted, "submit /dev/fuse reads");
  return absl::OkStatus();
}

void DevFuseWorker::PostRead(uint32_t slot) {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  while (sqe == nullptr) {
    io_uring_submit(&ring_);
    sqe = io_uring_get_sqe(&ring_);
  }
  io_uring_prep_read(sqe, config_.fuse_fd.get(), buffers_ + slot * config_.buffer_bytes,
                     config_.buffer_bytes, static_cast<uint64_t>(-1));
  io_uring_sqe_set_data64(sqe, MakeTag(CompletionKind::kDevRead, slot));
}

void DevFuseWorker::Loop() {
  while (alive_slots_ > 0) {
    int rc = io_uring_submit_and_wait(&ring_, 1);
    if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
      RINGFS_LOG_ERROR("%s worker: io_uring_submit_and_wait: %s", config_.role,
                       std::strerror(-rc));
      break;
    }
    io_uring_cqe* cqe;
    unsigned head;
    unsigned seen = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++seen;
      uint64_t tag = cqe->user_data;
      if (TagKind(tag) == CompletionKind::kDevRead) {
        OnRead(TagIndex(tag), cqe->res);
      } else if (TagKind(tag) == CompletionKind::kBackend) {
        backend_->OnCompletion(tag, cqe->res);
      }
    }
    io_uring_cq_advance(&ring_, seen);
    backend_->Deliver();
    WorkerStats::Set(stats_->reconnects, backend_->reconnects());
  }
  RINGFS_LOG_DEBUG("%s worker: /dev/fuse connection ended; worker exits", config_.role);
  finished_.store(true, std::memory_order_release);
}

void DevFuseWorker::OnRead(uint32_t slot, int res) {
  if (slot >= slot_alive_.size() || !slot_alive_[slot]) return;
  if (res < 0) {
    // ENOENT: the request was interrupted before we got it; EINTR/EAGAIN: just try again.
    if (res == -ENOENT || res == -EINTR || res == -EAGAIN) {
      PostRead(slot);
      return;
    }
    if (res != -ENODEV) {
      RINGFS_LOG_ERROR("%s worker: read /dev/fuse: %s", config_.role, std::strerror(-res));
    }
    slot_alive_[slot] = false;
    --alive_slots_;
    return;
  }
  char* buffer = buffers_ + slot * config_.buffer_bytes;
  fuse_in_header in;
  if (static_cast<size_t>(res) < sizeof(in)) {
    PostRead(slot);
    return;
  }
  std::memcpy(&in, buffer, sizeof(in));
  stats_->Add(stats_->devfuse_requests);
  slot_times_[slot] = SlotTimes{MonotonicNs(), 0, false};
  std::optional<fuse::OpInfo> op = fuse::LookupOp(in.opcode);
  fuse_out_header error{sizeof(fuse_out_header), 0, in.unique};
  if (in.len != static_cast<uint32_t>(res)) {
    error.error = -EIO;
    WriteReply(slot, error, 0, ReplyOrigin::kBadRequest);
    return;
  }
  if (in.opcode == FUSE_INTERRUPT) {
    // The request it names is in some worker's backend channel: they look at the board.
    fuse_interrupt_in interrupt{};
    if (in.len >= sizeof(in) + sizeof(interrupt) && config_.backend.interrupts != nullptr) {
      std::memcpy(&interrupt, buffer + sizeof(in), sizeof(interrupt));
      config_.backend.interrupts->Post(interrupt.unique, MonotonicNs());
    }
    PostRead(slot);
    return;
  }
  if (in.opcode == FUSE_FORGET || in.opcode == FUSE_BATCH_FORGET) {
    stats_->Add(stats_->forgets);
    backend_->SubmitOneWay(buffer, in.len);
    stats_->Add(stats_->forwarded);
    PostRead(slot);
    return;
  }
  if (!op || !op->forwarded) {
    // DESTROY comes at unmount for some mounts and only needs an empty success.
    error.error = in.opcode == FUSE_DESTROY ? 0 : -ENOSYS;
    WriteReply(slot, error, 0, ReplyOrigin::kLocal);
    return;
  }
  size_t struct_size = std::min<size_t>(op->in_struct_size, in.len - sizeof(in));
  const char* op_in = buffer + sizeof(in);
  if (std::optional<LocalAnswer> local =
          AnswerLocally(in.opcode, in.nodeid, op_in, struct_size, config_.backend.dir_attrs,
                        buffer + sizeof(fuse_out_header), MonotonicNs())) {
    // The request's bytes are no longer needed: the body may overwrite them. Not an error
    // (see RingWorker::CommitLocal).
    stats_->Add(stats_->answered_locally);
    fuse_out_header header{static_cast<uint32_t>(sizeof(fuse_out_header) + local->body_size),
                           -local->error, in.unique};
    WriteReply(slot, header, local->body_size, ReplyOrigin::kLocal);
    return;
  }
  fuse::ReplyBounds bounds = fuse::SuccessReplyBounds(in.opcode, op_in, struct_size);
  // The reply body lands in the same buffer after the request, never over it: a request cut
  // off by a lost connection is sent again from these bytes. (The buffer holds the largest
  // WRITE plus 8 KiB, and the largest READ reply, after any request that is not a WRITE.)
  size_t body_offset = (in.len + 15) & ~size_t{15};
  reply_offset_[slot] = body_offset;
  PendingReply reply{slot, in.opcode, buffer + body_offset, config_.buffer_bytes - body_offset,
                     bounds.min, bounds.max};
  iovec rest{buffer + sizeof(in), in.len - sizeof(in)};
  backend_->Submit(reply, in, &rest, 1, slot_times_[slot].received_ns);
  const bool background = queue::ClassifyKernelRequest(in.opcode, op_in, struct_size) ==
                          queue::RequestClass::kBackground;
  slot_times_[slot].sent_ns = MonotonicNs();
  slot_times_[slot].background = background;
  stats_->Add(stats_->forwarded);
  stats_->Add(background ? stats_->forwarded_background : stats_->forwarded_foreground);
  stats_->Add(stats_->forwarded_by_op[background ? 1 : 0][in.opcode % WorkerStats::kOpcodes]);
  stats_->Add(stats_->bytes_to_server, in.len - sizeof(in));
  WorkerStats::Set(stats_->inflight, ++inflight_);
}

void DevFuseWorker::OnReply(uint32_t slot, const fuse_out_header& header, size_t body_size,
                            ReplyOrigin origin) {
  if (inflight_ > 0) WorkerStats::Set(stats_->inflight, --inflight_);
  if (slot < slot_times_.size() && slot_times_[slot].sent_ns != 0) {
    stats_->backend_rtt.Observe(MonotonicNs() - slot_times_[slot].sent_ns);
  }
  stats_->Add(stats_->bytes_from_server, body_size);
  WriteReply(slot, header, body_size, origin);
}

void DevFuseWorker::WriteReply(uint32_t slot, const fuse_out_header& header, size_t body_size,
                               ReplyOrigin origin) {
  char* buffer = buffers_ + slot * config_.buffer_bytes;
  iovec parts[2] = {{const_cast<fuse_out_header*>(&header), sizeof(header)},
                    {buffer + reply_offset_[slot], body_size}};
  ssize_t written = writev(config_.fuse_fd.get(), parts, body_size > 0 ? 2 : 1);
  reply_offset_[slot] = sizeof(fuse_out_header);  // where local answers put their bodies
  // ENOENT: the kernel gave up on the request (interrupted or aborted) — nothing to do.
  if (written < 0 && errno != ENOENT && errno != ENODEV) {
    RINGFS_LOG_WARN("%s worker: write reply to /dev/fuse: %s", config_.role,
                    std::strerror(errno));
  }
  stats_->Add(stats_->replies);
  stats_->CountReply(header.error, origin);
  if (slot < slot_times_.size() && slot_times_[slot].received_ns != 0) {
    const SlotTimes& times = slot_times_[slot];
    stats_->request_duration[times.background ? 1 : 0].Observe(MonotonicNs() - times.received_ns);
  }
  PostRead(slot);
}

}  // namespace ringfs::frontend
