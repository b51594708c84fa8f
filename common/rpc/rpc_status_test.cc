#include "common/rpc/rpc_status.h"

#include <gtest/gtest.h>

namespace ringfs::rpc {
namespace {

struct Row {
  absl::StatusCode absl_code;
  grpc::StatusCode grpc_code;
};

constexpr Row kTable[] = {
    {absl::StatusCode::kCancelled, grpc::StatusCode::CANCELLED},
    {absl::StatusCode::kUnknown, grpc::StatusCode::UNKNOWN},
    {absl::StatusCode::kInvalidArgument, grpc::StatusCode::INVALID_ARGUMENT},
    {absl::StatusCode::kDeadlineExceeded, grpc::StatusCode::DEADLINE_EXCEEDED},
    {absl::StatusCode::kNotFound, grpc::StatusCode::NOT_FOUND},
    {absl::StatusCode::kAlreadyExists, grpc::StatusCode::ALREADY_EXISTS},
    {absl::StatusCode::kPermissionDenied, grpc::StatusCode::PERMISSION_DENIED},
    {absl::StatusCode::kResourceExhausted, grpc::StatusCode::RESOURCE_EXHAUSTED},
    {absl::StatusCode::kFailedPrecondition, grpc::StatusCode::FAILED_PRECONDITION},
    {absl::StatusCode::kAborted, grpc::StatusCode::ABORTED},
    {absl::StatusCode::kOutOfRange, grpc::StatusCode::OUT_OF_RANGE},
    {absl::StatusCode::kUnimplemented, grpc::StatusCode::UNIMPLEMENTED},
    {absl::StatusCode::kInternal, grpc::StatusCode::INTERNAL},
    {absl::StatusCode::kUnavailable, grpc::StatusCode::UNAVAILABLE},
    {absl::StatusCode::kDataLoss, grpc::StatusCode::DATA_LOSS},
    {absl::StatusCode::kUnauthenticated, grpc::StatusCode::UNAUTHENTICATED},
};

TEST(RpcStatusTest, EveryCodeMapsToItsGrpcCodeWithTheMessage) {
  for (const Row& row : kTable) {
    grpc::Status status = ToGrpcStatus(absl::Status(row.absl_code, "what went wrong"));
    EXPECT_EQ(status.error_code(), row.grpc_code) << absl::StatusCodeToString(row.absl_code);
    EXPECT_EQ(status.error_message(), "what went wrong");
  }
}

TEST(RpcStatusTest, EveryGrpcCodeMapsBack) {
  for (const Row& row : kTable) {
    absl::Status status = FromGrpcStatus(grpc::Status(row.grpc_code, "msg"));
    EXPECT_EQ(status.code(), row.absl_code) << absl::StatusCodeToString(row.absl_code);
    EXPECT_EQ(status.message(), "msg");
  }
}

TEST(RpcStatusTest, OkIsOkBothWays) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

TEST(RpcStatusTest, CodeOutsideTheEnumIsUnknown) {
  EXPECT_EQ(ToGrpcStatus(absl::Status(static_cast<absl::StatusCode>(99), "x")).error_code(),
            grpc::StatusCode::UNKNOWN);
}

}  // namespace
}  // namespace ringfs::rpc
