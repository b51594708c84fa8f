#include "common/status.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace ringfs {
namespace {

TEST(StatusTest, ErrnoRoundTripsExactly) {
  for (int err : {ENOENT, EEXIST, ENOTEMPTY, EXDEV, ENOSPC, EDQUOT, EACCES, EPERM, ELOOP,
                  ENAMETOOLONG, EISDIR, ENOTDIR, EROFS, ENODATA, ERANGE, E2BIG, EBADF, EIO}) {
    EXPECT_EQ(ToErrno(ErrnoError(err, "op")), err) << err;
  }
}

TEST(StatusTest, CodesWithoutErrnoMapToClosestErrno) {
  EXPECT_EQ(ToErrno(absl::OkStatus()), 0);
  EXPECT_EQ(ToErrno(absl::NotFoundError("x")), ENOENT);
  EXPECT_EQ(ToErrno(absl::InvalidArgumentError("x")), EINVAL);
  EXPECT_EQ(ToErrno(absl::UnimplementedError("x")), ENOSYS);
  EXPECT_EQ(ToErrno(absl::PermissionDeniedError("x")), EACCES);
  EXPECT_EQ(ToErrno(absl::InternalError("x")), EIO);
}

absl::StatusOr<int> Half(int v) {
  if (v % 2) return absl::InvalidArgumentError("odd");
  return v / 2;
}

absl::Status UseMacros(int v, int* out) {
  ASSIGN_OR_RETURN(int half, Half(v));
  RETURN_IF_ERROR(half > 10 ? absl::OutOfRangeError("big") : absl::OkStatus());
  *out = half;
  return absl::OkStatus();
}

TEST(StatusTest, Macros) {
  int out = 0;
  EXPECT_TRUE(UseMacros(8, &out).ok());
  EXPECT_EQ(out, 4);
  EXPECT_EQ(UseMacros(3, &out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(UseMacros(40, &out).code(), absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace ringfs
