// Per-worker pool of reply and frame buffers in three size classes, so the steady state
// allocates nothing per request. Owned and used by one worker thread only (not thread-safe).
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <vector>

namespace ringfs::server {

struct Buffer {
  std::unique_ptr<char[]> data;
  size_t capacity = 0;
  size_t size = 0;         // bytes in use (a reply's length)
  Buffer* next = nullptr;  // intrusive link for free lists and send queues
  int size_class = 0;
};

class BufferPool {
 public:
  // Capacities of the classes; the largest holds any frame or reply (wire::kMaxFrameBytes).
  static constexpr size_t kClassCount = 3;
  static const std::array<size_t, kClassCount> kClassBytes;

  BufferPool() = default;
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A buffer of at least `bytes` (size set to 0). REQUIRES: bytes <= kClassBytes.back().
  Buffer* Get(size_t bytes);
  // Returns a buffer; null is ignored. Buffers above the per-class cache limit are freed.
  void Put(Buffer* buffer);

  size_t cached() const;

 private:
  std::array<Buffer*, kClassCount> free_{};
  std::array<size_t, kClassCount> free_count_{};
};

}  // namespace ringfs::server
