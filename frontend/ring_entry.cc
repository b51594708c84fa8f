#include "frontend/ring_entry.h"

#include <sys/mman.h>

#include <cerrno>

#include "absl/strings/str_format.h"
#include "common/status.h"

namespace ringfs::frontend {
namespace {
constexpr size_t kHeaderStride = 512;  // keeps each entry's header on its own cache lines
}  // namespace

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
  size_t bytes = kHeaderStride + payload_bytes_;
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (memory == MAP_FAILED) return ErrnoError(errno, "mmap ring entry buffers");
  auto entry = std::make_unique<RingEntry>();
  entry->qid = qid;
  entry->header = static_cast<fuse::UringReqHeader*>(memory);
  entry->payload = static_cast<char*>(memory) + kHeaderStride;
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
