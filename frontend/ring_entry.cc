#include "frontend/ring_entry.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_format.h"
#include "common/status.h"

namespace ringfs::frontend {

void MarkServed(RingEntry* entry, size_t payload_bytes) {
  if (entry->payload_use.served) return;
  // Populating keeps what the kernel wrote: it only faults in the pages still missing.
  PopulateWrite(entry->header, kRingHeaderBytes + std::min(kRingResidentHead, payload_bytes));
  entry->payload_use.served = true;
  entry->resident_bytes.store(EntryResidentBytes(entry->payload_use), std::memory_order_relaxed);
}

EntryRegistry::EntryRegistry(size_t capacity, size_t payload_bytes)
    : capacity_(capacity),
      payload_bytes_(payload_bytes),
      slots_(new std::atomic<RingEntry*>[capacity]) {
  for (size_t i = 0; i < capacity; ++i) slots_[i].store(nullptr);
}

EntryRegistry::~EntryRegistry() {
  absl::MutexLock lock(&mu_);
  for (Allocation& allocation : allocations_) munmap(allocation.memory, allocation.bytes);
}

absl::StatusOr<RingEntry*> EntryRegistry::Create(uint16_t qid) {
  size_t bytes = kRingHeaderBytes + payload_bytes_;
  // Not MAP_POPULATE: a mount registers entries on every possible CPU's queue, and populating
  // 1 MiB for each cost ~1 MiB of resident memory per entry whether it is ever used or not.
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED) return ErrnoError(errno, "mmap ring entry buffers");
  auto entry = std::make_unique<RingEntry>();
  entry->qid = qid;
  entry->header = static_cast<fuse::UringReqHeader*>(memory);
  entry->payload = static_cast<char*>(memory) + kRingHeaderBytes;
  entry->payload_use.touched = std::min(kRingResidentHead, payload_bytes_);
  entry->iov[0] = {entry->header, sizeof(fuse::UringReqHeader)};
  entry->iov[1] = {entry->payload, payload_bytes_};
  RingEntry* raw = entry.get();
  absl::MutexLock lock(&mu_);
  size_t id = next_id_.load(std::memory_order_relaxed);
  if (id >= capacity_) {
    munmap(memory, bytes);
    return absl::ResourceExhaustedError(
        absl::StrFormat("more than %u ring entries requested", capacity_));
  }
  raw->id = static_cast<uint32_t>(id);
  allocations_.push_back({std::move(entry), memory, bytes});
  slots_[id].store(raw, std::memory_order_release);
  next_id_.store(id + 1, std::memory_order_release);
  return raw;
}

}  // namespace ringfs::frontend
