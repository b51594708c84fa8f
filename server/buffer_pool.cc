#include "server/buffer_pool.h"

#include "common/wire.h"

namespace ringfs::server {
namespace {
// How many idle buffers of each class stay cached (4 KiB, 128 KiB, ~1 MiB).
constexpr std::array<size_t, BufferPool::kClassCount> kCacheLimit = {1024, 64, 16};
}  // namespace

const std::array<size_t, BufferPool::kClassCount> BufferPool::kClassBytes = {
    4096, 128 * 1024, wire::kMaxFrameBytes};

BufferPool::~BufferPool() {
  for (Buffer* head : free_) {
    while (head != nullptr) delete std::exchange(head, head->next);
  }
}

Buffer* BufferPool::Get(size_t bytes) {
  int cls = 0;
  while (cls + 1 < static_cast<int>(kClassCount) && kClassBytes[cls] < bytes) ++cls;
  Buffer* buffer = free_[cls];
  if (buffer != nullptr) {
    free_[cls] = buffer->next;
    --free_count_[cls];
  } else {
    buffer = new Buffer;
    buffer->capacity = kClassBytes[cls];
    buffer->data = std::make_unique_for_overwrite<char[]>(buffer->capacity);
    buffer->size_class = cls;
  }
  buffer->next = nullptr;
  buffer->size = 0;
  return buffer;
}

void BufferPool::Put(Buffer* buffer) {
  if (buffer == nullptr) return;
  int cls = buffer->size_class;
  if (free_count_[cls] >= kCacheLimit[cls]) {
    delete buffer;
    return;
  }
  buffer->next = free_[cls];
  free_[cls] = buffer;
  ++free_count_[cls];
}

size_t BufferPool::cached() const {
  size_t n = 0;
  for (size_t c : free_count_) n += c;
  return n;
}

}  // namespace ringfs::server
