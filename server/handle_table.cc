#include "server/handle_table.h"

#include <cerrno>

#include "absl/strings/str_format.h"
#include "common/status.h"
#include "common/wire.h"

namespace ringfs::server {
namespace {

absl::Status FullError(size_t open) {
  return ErrnoError(ENFILE, absl::StrFormat("the client has %u open files and directories "
                                            "(--max-open-files-per-client)",
                                            open));
}

}  // namespace

absl::Status HandleTable::CheckRoom() const {
  absl::MutexLock lock(&mu_);
  if (handles_.size() < max_handles_) return absl::OkStatus();
  return FullError(handles_.size());
}

uint64_t HandleTable::Add(HandleRef handle) {
  absl::MutexLock lock(&mu_);
  const uint64_t fh = ids_.Next([this](uint64_t id) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return (id & wire::kClientDirHandleBit) != 0 || handles_.contains(id);
  });
  handles_[fh] = std::move(handle);
  return fh;
}

absl::Status HandleTable::Adopt(uint64_t fh, HandleRef handle) {
  HandleRef dropped = std::move(handle);  // declared first: closed after the lock is released
  absl::MutexLock lock(&mu_);
  if (auto it = handles_.find(fh); it != handles_.end()) {
    if (it->second->nodeid == dropped->nodeid && it->second->is_dir == dropped->is_dir) {
      return absl::OkStatus();
    }
    return ErrnoError(ESTALE, "file handle already names another open file");
  }
  if (fh == 0 || ids_.Passed(fh)) {
    return ErrnoError(ESTALE, "file handle belongs to this instance's own sequence");
  }
  if (handles_.size() >= max_handles_) return FullError(handles_.size());
  handles_[fh] = std::move(dropped);
  return absl::OkStatus();
}

absl::StatusOr<HandleRef> HandleTable::Get(uint64_t fh) const {
  absl::MutexLock lock(&mu_);
  auto it = handles_.find(fh);
  if (it == handles_.end()) return ErrnoError(ESTALE, "unknown file handle");
  return it->second;
}

absl::Status HandleTable::Remove(uint64_t fh) {
  HandleRef dropped;  // declared first: destroyed (fd closed) after the lock is released
  absl::MutexLock lock(&mu_);
  auto it = handles_.find(fh);
  if (it == handles_.end()) return ErrnoError(ESTALE, "unknown file handle");
  dropped = std::move(it->second);
  handles_.erase(it);
  return absl::OkStatus();
}

HandleRef HandleTable::FindByNode(uint64_t nodeid) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [fh, handle] : handles_) {
    if (handle->nodeid == nodeid) return handle;
  }
  return nullptr;
}

size_t HandleTable::size() const {
  absl::MutexLock lock(&mu_);
  return handles_.size();
}

}  // namespace ringfs::server
