#include "frontend/ring_worker.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "absl/strings/str_format.h"
#include "common/fuse_ops.h"
#include "common/log.h"
#include "common/status.h"
#include "frontend/completion_tags.h"
#include "frontend/worker_thread.h"

namespace ringfs::frontend {
namespace {
// The FUSE command lives in the 80-byte area that starts here in a 128-byte SQE.
static_assert(offsetof(io_uring_sqe, cmd) == 48);
constexpr size_t kHeaderStride = 512;  // keeps each entry's header on its own cache lines
}  // namespace

RingWorker::RingWorker(RingWorkerConfig config, WorkerStats* stats)
    : config_(std::move(config)), stats_(stats) {}

RingWorker::~RingWorker() {
  Join();
  backend_.reset();
  if (ring_initialized_) io_uring_queue_exit(&ring_);
  if (buffers_ != nullptr) munmap(buffers_, buffers_bytes_);
}

absl::Status RingWorker::Start() {
  return StartWorkerThread(
      &thread_, [this] { return Setup(); }, [this] { Loop(); });
}

void RingWorker::Join() {
  if (thread_.joinable()) thread_.join();
}

absl::Status RingWorker::Setup() {
  PinCurrentThread(config_.cpu);
  // SQE128 is required for the FUSE command; the ring is sized so every entry and the backend
  // receive can have an SQE outstanding at once.
  io_uring_params params{};
  params.flags = IORING_SETUP_SQE128 | IORING_SETUP_SUBMIT_ALL;
  unsigned sq_size = 2 * config_.depth + 8;
  if (int rc = io_uring_queue_init_params(sq_size, &ring_, &params); rc < 0) {
    return ErrnoError(-rc, "io_uring_queue_init (SQE128)");
  }
  ring_initialized_ = true;

  // Allocated after pinning so first touch places the pages on this CPU's node.
  size_t per_entry = kHeaderStride + config_.payload_bytes;
  buffers_bytes_ = per_entry * config_.depth;
  void* memory = mmap(nullptr, buffers_bytes_, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (memory == MAP_FAILED) return ErrnoError(errno, "mmap ring entry buffers");
  buffers_ = static_cast<char*>(memory);

  backend_ = std::make_unique<BackendChannel>(
      config_.backend, &ring_, static_cast<uint8_t>(CompletionKind::kBackend), this);
  RETURN_IF_ERROR(backend_->Connect());

  entries_.resize(config_.depth);
  for (uint32_t i = 0; i < config_.depth; ++i) {
    Entry& entry = entries_[i];
    char* base = buffers_ + i * per_entry;
    entry.header = reinterpret_cast<fuse::UringReqHeader*>(base);
    entry.payload = base + kHeaderStride;
    entry.iov[0] = {entry.header, sizeof(fuse::UringReqHeader)};
    entry.iov[1] = {entry.payload, config_.payload_bytes};
    entry.alive = true;
    ++alive_entries_;
    SubmitCmd(i, fuse::kUringCmdRegister, 0);
  }
  int submitted = io_uring_submit(&ring_);
  if (submitted < 0) return ErrnoError(-submitted, "submit REGISTER");
  return absl::OkStatus();
}

io_uring_sqe* RingWorker::NextSqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  while (sqe == nullptr) {
    io_uring_submit(&ring_);
    sqe = io_uring_get_sqe(&ring_);
  }
  return sqe;
}

void RingWorker::SubmitCmd(uint32_t index, fuse::UringCmd cmd, uint64_t commit_id) {
  Entry& entry = entries_[index];
  io_uring_sqe* sqe = NextSqe();
  io_uring_prep_rw(IORING_OP_URING_CMD, sqe, config_.fuse_fd, entry.iov, 2, 0);
  sqe->cmd_op = cmd;
  fuse::UringCmdReq request{};
  request.qid = config_.qid;
  request.commit_id = commit_id;
  // The command area is the 80 bytes from `cmd` to the end of the 128-byte SQE.
  char* command_area = reinterpret_cast<char*>(sqe) + offsetof(io_uring_sqe, cmd);
  std::memset(command_area, 0, 80);
  std::memcpy(command_area, &request, sizeof(request));
  io_uring_sqe_set_data64(sqe, MakeTag(CompletionKind::kRingEntry, index));
}

void RingWorker::Loop() {
  while (alive_entries_ > 0) {
    int rc = io_uring_submit_and_wait(&ring_, 1);
    if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
      RINGFS_LOG_ERROR("queue %u: io_uring_submit_and_wait: %s", config_.qid, std::strerror(-rc));
      break;
    }
    io_uring_cqe* cqe;
    unsigned head;
    unsigned seen = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++seen;
      uint64_t tag = cqe->user_data;
      int res = cqe->res;
      switch (TagKind(tag)) {
        case CompletionKind::kRingEntry:
          OnEntryCompletion(TagIndex(tag), res);
          break;
        case CompletionKind::kBackend:
          backend_->OnCompletion(tag, res);
          break;
        default:
          break;
      }
    }
    io_uring_cq_advance(&ring_, seen);
  }
  RINGFS_LOG_DEBUG("queue %u: all ring entries ended; worker exits", config_.qid);
  finished_.store(true, std::memory_order_release);
}

void RingWorker::OnEntryCompletion(uint32_t index, int res) {
  if (index >= entries_.size()) return;
  Entry& entry = entries_[index];
  if (res == 0) {
    HandleRequest(index);
    return;
  }
  if (res == -EAGAIN || res == -EINTR) {
    SubmitCmd(index, fuse::kUringCmdRegister, 0);  // INIT not yet visible: register again
    return;
  }
  // -ENOTCONN/-ECONNABORTED at unmount or abort; anything else is a kernel refusal, after which
  // the kernel serves this connection through /dev/fuse.
  if (res != -ENOTCONN && res != -ECONNABORTED && res != -ENODEV) {
    RINGFS_LOG_ERROR("queue %u entry %u: ring command failed: %s", config_.qid, index,
                     std::strerror(-res));
  }
  if (entry.alive) {
    entry.alive = false;
    --alive_entries_;
  }
}

void RingWorker::HandleRequest(uint32_t index) {
  Entry& entry = entries_[index];
  stats_->Add(stats_->ring_requests);
  fuse_in_header in;
  std::memcpy(&in, entry.header->in_out, sizeof(in));
  uint32_t payload_size = entry.header->ring_ent_in_out.payload_sz;
  std::optional<fuse::OpInfo> op = fuse::LookupOp(in.opcode);
  if (!op || !op->forwarded) {
    AnswerError(index, in.unique, ENOSYS);
    return;
  }
  if (payload_size > config_.payload_bytes) {
    RINGFS_LOG_ERROR("queue %u: %s request with %u payload bytes exceeds the entry", config_.qid,
                     std::string(op->name), payload_size);
    AnswerError(index, in.unique, EIO);
    return;
  }
  // The ring splits a request into header / argument struct / payload; the wire wants the
  // classic contiguous frame, so the three parts are gathered without copying.
  fuse_in_header frame = in;
  frame.len = static_cast<uint32_t>(sizeof(frame) + op->in_struct_size + payload_size);
  iovec iov[3] = {{&frame, sizeof(frame)},
                  {entry.header->op_in, op->in_struct_size},
                  {entry.payload, payload_size}};
  fuse::ReplyBounds bounds =
      fuse::SuccessReplyBounds(in.opcode, entry.header->op_in, op->in_struct_size);
  PendingReply reply{index, in.opcode, entry.payload, config_.payload_bytes, bounds.min,
                     bounds.max};
  absl::Status status = backend_->Send(in.unique, bounds.expected ? &reply : nullptr, iov, 3);
  if (!status.ok()) {
    RINGFS_LOG_DEBUG("queue %u: %s failed: %s", config_.qid, std::string(op->name),
                     status.ToString());
    AnswerError(index, in.unique, EIO);
    return;
  }
  if (!bounds.expected) AnswerError(index, in.unique, 0);  // the entry must still be returned
}

void RingWorker::AnswerError(uint32_t index, uint64_t unique, int err) {
  fuse_out_header header{};
  header.len = sizeof(header);
  header.error = -err;
  header.unique = unique;
  if (err != 0) stats_->Add(stats_->errors);
  OnReply(index, header, 0);
}

void RingWorker::OnReply(uint32_t slot, const fuse_out_header& header, size_t body_size) {
  Entry& entry = entries_[slot];
  std::memcpy(entry.header->in_out, &header, sizeof(header));
  entry.header->ring_ent_in_out.payload_sz = static_cast<uint32_t>(body_size);
  stats_->Add(stats_->replies);
  SubmitCmd(slot, fuse::kUringCmdCommitAndFetch, header.unique);
}

}  // namespace ringfs::frontend
