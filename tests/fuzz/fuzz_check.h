// What every fuzz target of tests/fuzz uses: an invariant check that aborts with its text (so a
// violation is a crash libFuzzer keeps, also in builds with NDEBUG), and a copy of the input in
// a heap block of exactly its size, so that ASan sees every read past the end of a frame.
// Header-only; each target is one process driven by libFuzzer's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>

#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

namespace ringfs::fuzz {

// `size` bytes of `data` in a block of their own; empty input gives a 1-byte block (never read).
class ExactCopy {
 public:
  ExactCopy(const uint8_t* data, size_t size)
      : bytes_(new char[size == 0 ? 1 : size]), size_(size) {
    if (size > 0) std::memcpy(bytes_.get(), data, size);
  }
  const char* data() const { return bytes_.get(); }
  size_t size() const { return size_; }
  std::span<const char> span() const { return {bytes_.get(), size_}; }

 private:
  std::unique_ptr<char[]> bytes_;
  size_t size_;
};

// True when [p, p + n) lies inside `frame`.
inline bool Inside(std::span<const char> frame, const char* p, size_t n) {
  const auto begin = reinterpret_cast<uintptr_t>(frame.data());
  const auto at = reinterpret_cast<uintptr_t>(p);
  return at >= begin && n <= frame.size() && at - begin <= frame.size() - n;
}

}  // namespace ringfs::fuzz
