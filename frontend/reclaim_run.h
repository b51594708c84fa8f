// ReclaimRun: one re-establishment of a mount's state on a new server instance, as a sequence
// of batch frames (common/node_handle.h): first every node the kernel holds (kOpReclaimNodes),
// then every open file and directory (kOpReopenHandles), since a reopen needs its node. The
// channel that leads the reclaim sends one frame at a time and hands each reply back here.
// What a record's reply refuses stays unknown to the new instance: the kernel's later requests
// on that node or fh get ESTALE — that object only.
// Plain value owned by one channel; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "frontend/node_ledger.h"

namespace ringfs::frontend {

class ReclaimRun {
 public:
  explicit ReclaimRun(NodeLedger::Snapshot snapshot) : snapshot_(std::move(snapshot)) {}

  struct Frame {
    uint32_t opcode = 0;
    std::string args;  // ReclaimBatch and the records, what follows fuse_in_header
    uint32_t records = 0;
  };
  // The next frame to send; false when every record has been sent.
  bool Next(Frame* frame);
  // The reply to the frame Next gave last: `frame_error` (0 or -errno of the whole frame) and,
  // when it is 0, one result per record.
  void OnReply(int frame_error, const int32_t* results, size_t count);

  uint64_t epoch() const { return snapshot_.epoch; }
  size_t nodes_total() const { return snapshot_.nodes.size(); }
  size_t files_total() const { return snapshot_.files.size(); }
  size_t nodes_failed() const { return nodes_failed_; }
  size_t files_failed() const { return files_failed_; }
  size_t nodes_without_handle() const { return snapshot_.nodes_without_handle; }
  // The errno most records were refused with, for the log (0: none refused).
  int first_error() const { return first_error_; }

 private:
  void Count(bool nodes, size_t failed, int error);
  template <typename Record>
  bool TakeBatch(const std::vector<Record>& records, size_t* next, uint32_t max_count,
                 uint32_t opcode, Frame* frame);

  NodeLedger::Snapshot snapshot_;
  size_t next_node_ = 0;
  size_t next_file_ = 0;
  uint32_t last_opcode_ = 0;
  uint32_t last_records_ = 0;
  size_t nodes_failed_ = 0;
  size_t files_failed_ = 0;
  int first_error_ = 0;
};

}  // namespace ringfs::frontend
