#include "frontend/reclaim_run.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace ringfs::frontend {
namespace {

template <typename Record>
std::string Batch(const std::vector<Record>& records, size_t first, uint32_t count) {
  wire::ReclaimBatch batch;
  batch.count = count;
  std::string args(sizeof(batch) + count * sizeof(Record), '\0');
  std::memcpy(args.data(), &batch, sizeof(batch));
  std::memcpy(args.data() + sizeof(batch), records.data() + first, count * sizeof(Record));
  return args;
}

}  // namespace

bool ReclaimRun::Next(Frame* frame) {
  if (next_node_ < snapshot_.nodes.size()) {
    uint32_t count = static_cast<uint32_t>(
        std::min<size_t>(snapshot_.nodes.size() - next_node_, wire::kMaxReclaimNodesPerFrame));
    frame->opcode = wire::kOpReclaimNodes;
    frame->args = Batch(snapshot_.nodes, next_node_, count);
    frame->records = count;
    next_node_ += count;
  } else if (next_file_ < snapshot_.files.size()) {
    uint32_t count = static_cast<uint32_t>(
        std::min<size_t>(snapshot_.files.size() - next_file_, wire::kMaxReopenPerFrame));
    frame->opcode = wire::kOpReopenHandles;
    frame->args = Batch(snapshot_.files, next_file_, count);
    frame->records = count;
    next_file_ += count;
  } else {
    return false;
  }
  last_opcode_ = frame->opcode;
  last_records_ = frame->records;
  return true;
}

void ReclaimRun::OnReply(int frame_error, const int32_t* results, size_t count) {
  const bool nodes = last_opcode_ == wire::kOpReclaimNodes;
  if (frame_error != 0 || count != last_records_) {
    Count(nodes, last_records_, frame_error != 0 ? -frame_error : EPROTO);
    return;
  }
  size_t failed = 0;
  int error = 0;
  for (size_t i = 0; i < count; ++i) {
    if (results[i] == 0) continue;
    ++failed;
    if (error == 0) error = -results[i];
  }
  Count(nodes, failed, error);
}

void ReclaimRun::Count(bool nodes, size_t failed, int error) {
  (nodes ? nodes_failed_ : files_failed_) += failed;
  if (failed > 0 && first_error_ == 0) first_error_ = error;
}

}  // namespace ringfs::frontend
