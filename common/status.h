// absl::Status helpers shared by every ringfs component: the two propagation macros, and the
// single mapping between errno values and statuses (the FUSE edge needs exact errnos back).
// Stateless; callable from any thread.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringfs {

// A status that remembers the exact errno (kept as a payload), so ToErrno() returns it unchanged.
absl::Status ErrnoError(int err, std::string_view what);

// The errno to answer the kernel with: the remembered errno when there is one, else the closest
// errno for the status code. OK maps to 0.
int ToErrno(const absl::Status& status);

}  // namespace ringfs

#define RINGFS_CONCAT_INNER(a, b) a##b
#define RINGFS_CONCAT(a, b) RINGFS_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                       \
  do {                                              \
    ::absl::Status ringfs_status_ = (expr);         \
    if (!ringfs_status_.ok()) return ringfs_status_; \
  } while (0)

#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(RINGFS_CONCAT(ringfs_statusor_, __LINE__), lhs, expr)

#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()
