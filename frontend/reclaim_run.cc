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

template <typename Record>
bool ReclaimRun::TakeBatch(const std::vector<Record>& records, size_t* next, uint32_t max_count,
                           uint32_t opcode, Frame* frame) {
  if (*next >= records.size()) return false;
  const uint32_t count = static_cast<uint32_t>(std::min<size_t>(records.size() - *next, max_count));
  frame->opcode = opcode;
  frame->args = Batch(records, *next, count);
  frame->records = count;
  *next += count;
  last_opcode_ = opcode;
  last_records_ = count;
  return true;
}

bool ReclaimRun::Next(Frame* frame) {
  // Nodes first: a reopen names a node the new instance must know already.
  return TakeBatch(snapshot_.nodes, &next_node_, wire::kMaxReclaimNodesPerFrame,
                   wire::kOpReclaimNodes, frame) ||
         TakeBatch(snapshot_.files, &next_file_, wire::kMaxReopenPerFrame,
                   wire::kOpReopenHandles, frame);
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
