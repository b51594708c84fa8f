// What a ring entry's buffers cost, and when the pages of large payloads go back to the kernel.
// The kernel fixes every entry's payload size at the first REGISTER (max_write, 1 MiB), so each
// entry maps that much. Nothing of it is resident until the entry serves its first request (the
// kernel gives new requests to the entry committed last, so a queue's cold entries are the ones
// its callers' concurrency never reached); then its header page and a small head of the payload
// are made resident, and the rest faults in when a request or reply needs it.
// Pages are returned only while a worker holds the entry (between the kernel handing it a request
// and our commit): an entry waiting in the kernel can receive a request at any moment, copied in
// by task work, and MADV_DONTNEED (or MADV_FREE, which clears the dirty bit) at that moment would
// lose it. An entry that stays idle in the kernel keeps what it has: there is no UNREGISTER.
// Pure functions and plain structs; the holder of an entry is its only writer.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace ringfs::frontend {

// The header (fuse_uring_req_header, 288 bytes) gets a page of its own so that the payload is
// page-aligned and its tail can be returned page by page.
inline constexpr size_t kRingHeaderBytes = 4096;
// Payload bytes resident from the start: names, attributes, directory pages and 4 KiB reads and
// writes fit, so the common small requests never fault.
inline constexpr size_t kRingResidentHead = 16384;
// An entry keeps the pages of large payloads while it keeps serving large ones; once it has
// served none for this long, the next small request it serves returns them (hysteresis: a
// sequential job does not fault its buffers in again on every request).
inline constexpr int64_t kRingTrimAfterNs = 2'000'000'000;

// What one entry's payload has touched; written by the worker holding the entry.
struct PayloadUse {
  bool served = false;                 // false: never served, nothing resident
  size_t touched = kRingResidentHead;  // payload bytes possibly resident once served (page multiple)
  int64_t last_large_ns = 0;           // when a request or reply last went past the head
};

struct PayloadRange {
  size_t offset = 0;  // from the payload's start; page-aligned
  size_t length = 0;
};

// Called by the holder just before it commits an entry whose request and reply used `used`
// payload bytes. Returns the range to return to the kernel now, if any, and updates `use`.
std::optional<PayloadRange> PlanPayloadTrim(PayloadUse* use, size_t used, int64_t now_ns,
                                            size_t head = kRingResidentHead,
                                            int64_t trim_after_ns = kRingTrimAfterNs);

// Resident memory of an entry by its accounting: none before it served, then the header page and
// the touched payload.
inline uint64_t EntryResidentBytes(const PayloadUse& use) {
  return use.served ? kRingHeaderBytes + use.touched : 0;
}

// Bytes of [address, address + length) resident now, by mincore(2): the truth the accounting is
// checked against in tests. `address` must be page-aligned. Returns 0 on error.
size_t MeasureResidentBytes(const void* address, size_t length);

// Makes [address, address + length) resident and writable now (MADV_POPULATE_WRITE, or touching
// each page on kernels before 5.14).
void PopulateWrite(void* address, size_t length);

// Rounds up to the page size (4096).
constexpr size_t PageRoundUp(size_t bytes) { return (bytes + 4095) & ~size_t{4095}; }

}  // namespace ringfs::frontend
