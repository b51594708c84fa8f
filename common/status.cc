#include "common/status.h"

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ringfs {
namespace {
constexpr absl::string_view kErrnoPayload = "ringfs/errno";
}  // namespace

absl::Status ErrnoError(int err, std::string_view what) {
  absl::Status status(absl::ErrnoToStatusCode(err),
                      absl::StrCat(absl::string_view(what.data(), what.size()), ": ", std::strerror(err)));
  status.SetPayload(kErrnoPayload, absl::Cord(absl::StrCat(err)));
  return status;
}

int ToErrno(const absl::Status& status) {
  if (status.ok()) return 0;
  if (auto payload = status.GetPayload(kErrnoPayload)) {
    int err = 0;
    if (absl::SimpleAtoi(std::string(*payload), &err) && err > 0) return err;
  }
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument: return EINVAL;
    case absl::StatusCode::kNotFound: return ENOENT;
    case absl::StatusCode::kAlreadyExists: return EEXIST;
    case absl::StatusCode::kPermissionDenied: return EACCES;
    case absl::StatusCode::kUnauthenticated: return EACCES;
    case absl::StatusCode::kResourceExhausted: return ENOSPC;
    case absl::StatusCode::kFailedPrecondition: return EINVAL;
    case absl::StatusCode::kAborted: return EAGAIN;
    case absl::StatusCode::kOutOfRange: return ERANGE;
    case absl::StatusCode::kUnimplemented: return ENOSYS;
    case absl::StatusCode::kUnavailable: return EIO;
    case absl::StatusCode::kDeadlineExceeded: return ETIMEDOUT;
    case absl::StatusCode::kCancelled: return ECANCELED;
    default: return EIO;
  }
}

}  // namespace ringfs
