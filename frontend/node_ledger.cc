#include "frontend/node_ledger.h"

#include <cstring>

namespace ringfs::frontend {
namespace {

template <typename T>
bool Read(const void* data, size_t size, T* out) {
  if (data == nullptr || size < sizeof(T)) return false;
  std::memcpy(out, data, sizeof(T));
  return true;
}

bool IsDotOrDotDot(const char* name, uint32_t len) {
  return (len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.');
}

}  // namespace

void NodeLedger::SetHandles(const wire::NodeHandleRecord* records, size_t count) {
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < count; ++i) {
    if (records[i].nodeid == 0 || records[i].nodeid == FUSE_ROOT_ID) continue;
    nodes_[records[i].nodeid].handle = records[i];
  }
}

void NodeLedger::AddLookupLocked(uint64_t nodeid) {
  if (nodeid == 0 || nodeid == FUSE_ROOT_ID) return;  // the root is valid on every instance
  auto [it, added] = nodes_.try_emplace(nodeid);
  ++it->second.nlookup;
  if (added) {
    // A lookup that crossed the FORGET of the same node: the server still had the node, so it
    // sent no handle again; the one it sent before still names it (ids are never reused).
    if (auto old = forgotten_.find(nodeid); old != forgotten_.end()) {
      it->second.handle = old->second.handle;
      forgotten_.erase(old);
    }
  }
}

void NodeLedger::ForgetLocked(uint64_t nodeid, uint64_t nlookup) {
  auto it = nodes_.find(nodeid);
  if (it == nodes_.end()) return;
  if (it->second.nlookup <= nlookup) {
    if (it->second.handle.handle_bytes != 0) {
      if (forgotten_order_.size() >= kForgottenHandles) {
        // Only if that entry is still the one the order names (a node forgotten, found and
        // forgotten again is in the order twice).
        auto [old_id, old_seq] = forgotten_order_.front();
        if (auto old = forgotten_.find(old_id); old != forgotten_.end() && old->second.seq == old_seq) {
          forgotten_.erase(old);
        }
        forgotten_order_.pop_front();
      }
      forgotten_[nodeid] = {it->second.handle, ++forgotten_seq_};
      forgotten_order_.emplace_back(nodeid, forgotten_seq_);
    }
    nodes_.erase(it);
  } else {
    it->second.nlookup -= nlookup;
  }
}

void NodeLedger::OnReply(const fuse_in_header& request, const void* op_in, size_t op_in_size,
                         const char* body, size_t body_size) {
  fuse_entry_out entry;
  fuse_open_out open;
  switch (request.opcode) {
    case FUSE_LOOKUP:
    case FUSE_MKNOD:
    case FUSE_MKDIR:
    case FUSE_SYMLINK:
    case FUSE_LINK:
      if (Read(body, body_size, &entry)) {
        absl::MutexLock lock(&mu_);
        AddLookupLocked(entry.nodeid);
      }
      return;
    case FUSE_CREATE: {
      fuse_create_in in;
      if (!Read(body, body_size, &entry) || !Read(op_in, op_in_size, &in) ||
          body_size < sizeof(entry) + sizeof(open)) {
        return;
      }
      std::memcpy(&open, body + sizeof(entry), sizeof(open));
      absl::MutexLock lock(&mu_);
      AddLookupLocked(entry.nodeid);
      if (entry.nodeid != 0) files_[open.fh] = {entry.nodeid, in.flags, false};
      return;
    }
    case FUSE_OPEN:
    case FUSE_OPENDIR: {
      fuse_open_in in;
      if (!Read(body, body_size, &open) || !Read(op_in, op_in_size, &in)) return;
      absl::MutexLock lock(&mu_);
      files_[open.fh] = {request.nodeid, in.flags, request.opcode == FUSE_OPENDIR};
      return;
    }
    case FUSE_READDIRPLUS: {
      absl::MutexLock lock(&mu_);
      size_t at = 0;
      while (body_size - at >= FUSE_NAME_OFFSET_DIRENTPLUS) {
        fuse_direntplus plus;
        std::memcpy(&plus, body + at, FUSE_NAME_OFFSET_DIRENTPLUS);
        size_t record = FUSE_DIRENTPLUS_SIZE(&plus);
        if (plus.dirent.namelen == 0 || record > body_size - at) break;
        // The kernel takes no lookup for "." and ".." (fs/fuse/readdir.c).
        if (!IsDotOrDotDot(body + at + FUSE_NAME_OFFSET_DIRENTPLUS, plus.dirent.namelen)) {
          AddLookupLocked(plus.entry_out.nodeid);
        }
        at += record;
      }
      return;
    }
    default:
      return;
  }
}

void NodeLedger::OnRequest(const fuse_in_header& request, const void* op_in, size_t op_in_size) {
  if (request.opcode != FUSE_RELEASE && request.opcode != FUSE_RELEASEDIR) return;
  fuse_release_in in;
  if (!Read(op_in, op_in_size, &in)) return;
  absl::MutexLock lock(&mu_);
  files_.erase(in.fh);
}

uint64_t NodeLedger::OnForget(const void* frame, size_t size) {
  fuse_in_header header;
  absl::MutexLock lock(&mu_);
  if (!Read(frame, size, &header) || header.len > size) return epoch_;
  const char* args = static_cast<const char*>(frame) + sizeof(header);
  size_t args_size = header.len - sizeof(header);
  if (header.opcode == FUSE_FORGET) {
    fuse_forget_in in;
    if (Read(args, args_size, &in)) ForgetLocked(header.nodeid, in.nlookup);
  } else if (header.opcode == FUSE_BATCH_FORGET) {
    fuse_batch_forget_in batch;
    if (!Read(args, args_size, &batch)) return epoch_;
    size_t room = (args_size - sizeof(batch)) / sizeof(fuse_forget_one);
    for (size_t i = 0; i < batch.count && i < room; ++i) {
      fuse_forget_one one;
      std::memcpy(&one, args + sizeof(batch) + i * sizeof(one), sizeof(one));
      ForgetLocked(one.nodeid, one.nlookup);
    }
  }
  return epoch_;
}

NodeLedger::Snapshot NodeLedger::Take() {
  Snapshot snapshot;
  absl::MutexLock lock(&mu_);
  snapshot.epoch = ++epoch_;
  snapshot.nodes.reserve(nodes_.size());
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    if (it->second.nlookup == 0) {
      // A handle whose entry reply never reached the kernel.
      nodes_.erase(it++);
      continue;
    }
    if (it->second.handle.handle_bytes == 0) {
      ++snapshot.nodes_without_handle;
    } else {
      wire::ReclaimNodeRecord record;
      record.nlookup = it->second.nlookup;
      record.handle = it->second.handle;
      record.handle.nodeid = it->first;
      snapshot.nodes.push_back(record);
    }
    ++it;
  }
  snapshot.files.reserve(files_.size());
  for (const auto& [fh, file] : files_) {
    wire::ReopenRecord record;
    record.fh = fh;
    record.nodeid = file.nodeid;
    record.flags = file.flags;
    record.directory = file.directory ? 1 : 0;
    snapshot.files.push_back(record);
  }
  return snapshot;
}

uint64_t NodeLedger::epoch() const {
  absl::MutexLock lock(&mu_);
  return epoch_;
}

size_t NodeLedger::nodes() const {
  absl::MutexLock lock(&mu_);
  return nodes_.size();
}

std::vector<uint64_t> NodeLedger::NodeIds() const {
  absl::MutexLock lock(&mu_);
  std::vector<uint64_t> ids;
  ids.reserve(nodes_.size());
  for (const auto& [id, node] : nodes_) ids.push_back(id);
  return ids;
}

size_t NodeLedger::open_files() const {
  absl::MutexLock lock(&mu_);
  return files_.size();
}

}  // namespace ringfs::frontend
