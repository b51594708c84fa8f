#include "frontend/devfuse_worker.h"

#include <sys/mman.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "common/status.h"
#include "frontend/completion_tags.h"
#include "frontend/fusectl.h"
#include "frontend/worker_thread.h"

namespace ringfs::frontend {

DevFuseWorker::DevFuseWorker(DevFuseWorkerConfig config, WorkerStats* stats)
    : config_(std::move(config)), stats_(stats) {}

DevFuseWorker::~DevFuseWorker() {
  Join();
  forwarder_.reset();
  channel_.reset();
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
  // Not populated: a slot's pages become resident as requests fill them (FORGETs and small
  // requests touch one page), not 1 MiB per slot at the start.
  void* memory = mmap(nullptr, buffers_bytes_, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED) return ErrnoError(errno, "mmap /dev/fuse buffers");
  buffers_ = static_cast<char*>(memory);
  BackendConfig backend = config_.backend;
  backend.max_inflight = config_.slots;
  backend_ = std::make_unique<BackendChannel>(
      std::move(backend), &ring_, static_cast<uint8_t>(CompletionKind::kBackend), this);
  backend_->Start();
  channel_.emplace(backend_.get());
  forwarder_.emplace(ForwarderConfigOf(config_.backend), stats_, &*channel_);
  use_.assign(config_.slots, SlotUse::kFree);
  slots_.assign(config_.slots, Slot{});
  alive_slots_ = config_.slots;
  if (gathering()) {
    MaybeRead();
  } else {
    for (uint32_t slot = 0; slot < config_.slots; ++slot) PostRead(slot);
  }
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
  use_[slot] = SlotUse::kReading;
  ++reading_;
}

void DevFuseWorker::DoneWith(uint32_t slot) {
  if (!gathering()) {
    PostRead(slot);
    return;
  }
  if (connection_ended_) {
    use_[slot] = SlotUse::kDead;
    --alive_slots_;
    return;
  }
  use_[slot] = SlotUse::kFree;
  MaybeRead();
}

void DevFuseWorker::MaybeRead() {
  if (reading_ > 0 || read_pause_runs_ || connection_ended_) return;
  for (uint32_t slot = 0; slot < use_.size(); ++slot) {
    if (use_[slot] == SlotUse::kFree) {
      PostRead(slot);
      return;
    }
  }
  // Every slot holds a request: the first one answered reads again.
}

void DevFuseWorker::StartReadPause(uint64_t ns) {
  if (read_pause_runs_) return;
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  while (sqe == nullptr) {
    io_uring_submit(&ring_);
    sqe = io_uring_get_sqe(&ring_);
  }
  read_pause_.tv_sec = static_cast<int64_t>(ns / 1'000'000'000);
  read_pause_.tv_nsec = static_cast<long long>(ns % 1'000'000'000);
  io_uring_prep_timeout(sqe, &read_pause_, 0, 0);
  io_uring_sqe_set_data64(sqe, MakeTag(CompletionKind::kReadsResume, 0));
  read_pause_runs_ = true;
}

void DevFuseWorker::ResumeReads() {
  read_pause_runs_ = false;
  if (gathering()) {
    MaybeRead();
    return;
  }
  if (connection_ended_) return;  // EndConnection ended the free slots
  for (uint32_t slot = 0; slot < use_.size(); ++slot) {
    if (use_[slot] == SlotUse::kFree) PostRead(slot);
  }
}

// Free slots would only read ENODEV: they end now, the others when their request is done (a
// posted read sees ENODEV; a request waiting on the server ends in DoneWith).
void DevFuseWorker::EndConnection() {
  connection_ended_ = true;
  for (SlotUse& use : use_) {
    if (use == SlotUse::kFree) {
      use = SlotUse::kDead;
      --alive_slots_;
    }
  }
}

void DevFuseWorker::Loop() {
  uint64_t stop_deadline_ns = 0;
  // Requests answered early go to the server before the mount's end lets the worker go. Once
  // the connection ended (a read saw ENODEV) that wait starts even while slots are alive: a
  // RELEASE waiting behind early changes keeps its slot until KeepForDetached ends it.
  uint64_t looked_ns = 0;
  for (;;) {
    if (!connection_ended_ && alive_slots_ > 0) {
      // Every slot may hold a request, none reading: the end shows as POLLERR (looked at
      // about every tick of the channel, which wakes this loop).
      const uint64_t now = MonotonicNs();
      if (now - looked_ns >= kLookNs) {
        looked_ns = now;
        if (!ConnectionAlive(config_.fuse_fd.get())) EndConnection();
      }
    }
    const bool keep =
        (alive_slots_ == 0 || connection_ended_) && backend_->KeepForDetached(&stop_deadline_ns);
    if (alive_slots_ == 0 && !keep) break;
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
      } else if (TagKind(tag) == CompletionKind::kReadsResume) {
        ResumeReads();
      } else if (TagKind(tag) == CompletionKind::kBackend) {
        backend_->OnCompletion(tag, cqe->res);
      }
    }
    io_uring_cq_advance(&ring_, seen);
    backend_->Deliver();
    WorkerStats::Set(stats_->inflight, forwarder_->inflight());
    WorkerStats::Set(stats_->reconnects, backend_->reconnects());
  }
  RINGFS_LOG_DEBUG("%s worker: /dev/fuse connection ended; worker exits", config_.role);
  finished_.store(true, std::memory_order_release);
}

void DevFuseWorker::OnRead(uint32_t slot, int res) {
  if (slot >= use_.size() || use_[slot] != SlotUse::kReading) return;
  --reading_;
  use_[slot] = SlotUse::kBusy;
  if (res < 0) {
    // ENOENT: the request was interrupted before we got it; EINTR/EAGAIN: just try again.
    if (res == -ENOENT || res == -EINTR || res == -EAGAIN) {
      PostRead(slot);
      return;
    }
    if (res != -ENODEV && res != -ECONNABORTED && ConnectionAlive(config_.fuse_fd.get())) {
      // Not the end of the mount (a fault copying a request ends that request, and the kernel
      // goes on): the slot reads again after a pause, so that an error that repeats costs no
      // CPU. Ending the slot instead would, after a few such errors, end this worker
      // and with it the mount (MountSession::ConnectionEnded).
      const uint64_t now = MonotonicNs();
      if (now - last_error_log_ns_ >= kErrorLogNs) {
        last_error_log_ns_ = now;
        RINGFS_LOG_ERROR("%s worker: read /dev/fuse: %s (reading again in %llu ms)", config_.role,
                         std::strerror(-res),
                         static_cast<unsigned long long>(kErrorPauseNs / 1'000'000));
      }
      use_[slot] = SlotUse::kFree;
      StartReadPause(kErrorPauseNs);
      return;
    }
    // Unmounted or aborted (fusectl): the end of the mount, not just of this slot.
    use_[slot] = SlotUse::kDead;
    --alive_slots_;
    EndConnection();
    return;
  }
  char* buffer = buffers_ + slot * config_.buffer_bytes;
  Slot& slot_state = slots_[slot];
  stats_->Add(stats_->devfuse_requests);
  DecodeDevFuseRequest(buffer, static_cast<size_t>(res), &slot_state.request);
  // A local answer's body goes right after the header: the request's bytes are not needed any
  // more and may be overwritten.
  slot_state.reply_offset = sizeof(fuse_out_header);
  Verdict verdict =
      forwarder_->Accept(slot_state.request, &slot_state.state, buffer + slot_state.reply_offset);
  switch (verdict.kind) {
    case Verdict::Kind::kNone: {
      const uint32_t opcode = slot_state.request.opcode();
      if (gathering() && (opcode == FUSE_FORGET || opcode == FUSE_BATCH_FORGET)) {
        StartReadPause(config_.forget_gather_ns);
      }
      DoneWith(slot);
      return;
    }
    case Verdict::Kind::kAnswer:
      WriteReply(slot, verdict.header, verdict.body_size);
      return;
    case Verdict::Kind::kForward:
      break;
  }
  // The reply body lands in the same buffer after the request, never over it: a request cut
  // off by a lost connection is sent again from these bytes. (The buffer holds the largest
  // WRITE plus 8 KiB, and the largest READ reply, after any request that is not a WRITE.)
  slot_state.reply_offset = (slot_state.request.header.len + 15) & ~size_t{15};
  forwarder_->Forward(slot_state.request, &slot_state.state, slot,
                      ReplyBuffer{buffer + slot_state.reply_offset,
                                  config_.buffer_bytes - slot_state.reply_offset});
  // Gathering: the next request is read while this one waits for the server.
  if (gathering()) MaybeRead();
}

void DevFuseWorker::OnReply(uint32_t slot, const fuse_out_header& header, size_t body_size,
                            ReplyOrigin origin) {
  const char* body = buffers_ + slot * config_.buffer_bytes + slots_[slot].reply_offset;
  forwarder_->OnReply(&slots_[slot].state, header, body, body_size, origin);
  WriteReply(slot, header, body_size);
}

void DevFuseWorker::WriteReply(uint32_t slot, const fuse_out_header& header, size_t body_size) {
  char* buffer = buffers_ + slot * config_.buffer_bytes;
  const Slot& slot_state = slots_[slot];
  iovec parts[2] = {{const_cast<fuse_out_header*>(&header), sizeof(header)},
                    {buffer + slot_state.reply_offset, body_size}};
  ssize_t written = writev(config_.fuse_fd.get(), parts, body_size > 0 ? 2 : 1);
  // ENOENT: the kernel gave up on the request (interrupted or aborted) - nothing to do.
  if (written < 0 && errno != ENOENT && errno != ENODEV) {
    RINGFS_LOG_WARN("%s worker: write reply to /dev/fuse: %s", config_.role,
                    std::strerror(errno));
  }
  forwarder_->OnAnswered(slot_state.state, header.error);
  DoneWith(slot);
}

}  // namespace ringfs::frontend
