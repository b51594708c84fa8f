#include "server/reply_cache.h"

#include <string_view>

#include "absl/hash/hash.h"
#include "common/fuse_ops.h"
#include "proto/fuse_abi.h"

namespace ringfs::server {

bool ReplyCache::Caches(uint32_t opcode) { return fuse::ChangesNamespace(opcode); }

uint64_t ReplyCache::Fingerprint(uint32_t opcode, uint64_t nodeid, std::span<const char> args) {
  return absl::HashOf(opcode, nodeid, std::string_view(args.data(), args.size()));
}

ReplyCache::Decision ReplyCache::Begin(uint64_t unique, uint64_t fingerprint, std::string* reply) {
  absl::MutexLock lock(&mu_);
  for (;;) {
    auto it = entries_.find(unique);
    if (it == entries_.end()) {
      entries_[unique] = Entry{.fingerprint = fingerprint};
      return Decision::kExecute;
    }
    if (it->second.fingerprint != fingerprint) return Decision::kExecuteUncached;
    if (it->second.done) {
      *reply = it->second.reply;
      ++replays_;
      return Decision::kReplay;
    }
    // Another worker runs it now; Finish or Abandon wakes us (the entry may be gone then).
    finished_.Wait(&mu_);
  }
}

void ReplyCache::Finish(uint64_t unique, std::span<const char> reply) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(unique);
  if (it == entries_.end() || it->second.done) return;
  it->second.done = true;
  it->second.reply.assign(reply.data(), reply.size());
  bytes_ += reply.size() + kEntryOverhead;
  order_.push_back(unique);
  EvictLocked();
  finished_.SignalAll();
}

void ReplyCache::Abandon(uint64_t unique) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(unique);
  if (it == entries_.end() || it->second.done) return;
  entries_.erase(it);
  finished_.SignalAll();
}

void ReplyCache::EvictLocked() {
  while (!order_.empty() && (order_.size() > options_.max_entries || bytes_ > options_.max_bytes)) {
    auto it = entries_.find(order_.front());
    order_.pop_front();
    if (it == entries_.end()) continue;
    bytes_ -= it->second.reply.size() + kEntryOverhead;
    entries_.erase(it);
  }
}

size_t ReplyCache::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

size_t ReplyCache::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

uint64_t ReplyCache::replays() const {
  absl::MutexLock lock(&mu_);
  return replays_;
}

}  // namespace ringfs::server
