#include "frontend/ring_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace ringfs::frontend {

std::optional<PayloadRange> PlanPayloadTrim(PayloadUse* use, size_t used, int64_t now_ns,
                                            size_t head, int64_t trim_after_ns) {
  if (used > head) {
    use->touched = std::max(use->touched, PageRoundUp(used));
    use->last_large_ns = now_ns;
    return std::nullopt;
  }
  if (use->touched <= head || now_ns - use->last_large_ns < trim_after_ns) return std::nullopt;
  PayloadRange range{PageRoundUp(head), use->touched - PageRoundUp(head)};
  use->touched = head;
  return range;
}

size_t MeasureResidentBytes(const void* address, size_t length) {
  const size_t pages = PageRoundUp(length) / 4096;
  std::vector<unsigned char> resident(pages);
  if (mincore(const_cast<void*>(address), length, resident.data()) != 0) return 0;
  size_t count = 0;
  for (unsigned char page : resident) count += page & 1;
  return count * 4096;
}

void PopulateWrite(void* address, size_t length) {
  if (madvise(address, length, MADV_POPULATE_WRITE) == 0) return;
  // Older kernels: a write to each page faults it in.
  auto* bytes = static_cast<volatile char*>(address);
  for (size_t offset = 0; offset < length; offset += 4096) bytes[offset] = 0;
}

}  // namespace ringfs::frontend
