#include "frontend/queue/request_class.h"

#include <fcntl.h>

#include <cstring>

#include "gtest/gtest.h"
#include "proto/fuse_abi.h"

namespace ringfs::frontend::queue {
namespace {

constexpr RequestClass kFg = RequestClass::kForeground;
constexpr RequestClass kBg = RequestClass::kBackground;

TEST(ClassifyRequestTest, Table) {
  fuse_write_in writeback{};
  writeback.write_flags = FUSE_WRITE_CACHE | FUSE_WRITE_LOCKOWNER;
  fuse_write_in direct_write{};
  direct_write.write_flags = FUSE_WRITE_LOCKOWNER;
  fuse_read_in read{};
  read.read_flags = FUSE_READ_LOCKOWNER;
  fuse_release_in release{};
  fuse_getattr_in getattr{};
  const ClassifierHints no_hints;
  ClassifierHints read_hint;
  read_hint.read_is_background = true;
  ClassifierHints write_hint;
  write_hint.write_is_background = true;

  const struct {
    const char* name;
    uint32_t opcode;
    const void* op_in;
    size_t op_in_size;
    ClassifierHints hints;
    RequestClass expected;
  } cases[] = {
      {"writeback WRITE", FUSE_WRITE, &writeback, sizeof(writeback), no_hints, kBg},
      {"direct WRITE", FUSE_WRITE, &direct_write, sizeof(direct_write), no_hints, kFg},
      {"hinted async WRITE", FUSE_WRITE, &direct_write, sizeof(direct_write), write_hint, kBg},
      {"truncated WRITE", FUSE_WRITE, &writeback, sizeof(writeback) - 1, no_hints, kFg},
      {"READ", FUSE_READ, &read, sizeof(read), no_hints, kFg},
      {"hinted READ", FUSE_READ, &read, sizeof(read), read_hint, kBg},
      {"RELEASE", FUSE_RELEASE, &release, sizeof(release), no_hints, kBg},
      {"RELEASEDIR", FUSE_RELEASEDIR, &release, sizeof(release), no_hints, kBg},
      {"GETATTR", FUSE_GETATTR, &getattr, sizeof(getattr), no_hints, kFg},
      {"GETATTR ignores hints", FUSE_GETATTR, &getattr, sizeof(getattr), read_hint, kFg},
      {"LOOKUP without op struct", FUSE_LOOKUP, nullptr, 0, no_hints, kFg},
      {"FLUSH (close waits for it)", FUSE_FLUSH, nullptr, 0, no_hints, kFg},
      {"FSYNC", FUSE_FSYNC, nullptr, 0, no_hints, kFg},
      {"unknown opcode", 9999, nullptr, 0, no_hints, kFg},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(ClassifyRequest(c.opcode, c.op_in, c.op_in_size, c.hints), c.expected) << c.name;
  }
}

TEST(ClassifyRequestTest, ReadsOpStructAtAnyAlignment) {
  alignas(8) unsigned char buffer[sizeof(fuse_write_in) + 1] = {};
  fuse_write_in writeback{};
  writeback.write_flags = FUSE_WRITE_CACHE;
  std::memcpy(buffer + 1, &writeback, sizeof(writeback));
  EXPECT_EQ(ClassifyRequest(FUSE_WRITE, buffer + 1, sizeof(writeback)), kBg);
}

TEST(ClassifyRequestTest, Names) {
  EXPECT_STREQ(RequestClassName(kFg), "foreground");
  EXPECT_STREQ(RequestClassName(kBg), "background");
}

}  // namespace
}  // namespace ringfs::frontend::queue

namespace ringfs::frontend::queue {
namespace {

TEST(ClassifyKernelRequestTest, DirectIoAndReadaheadAreBackground) {
  fuse_read_in read{};
  read.size = 4096;
  EXPECT_EQ(ClassifyKernelRequest(FUSE_READ, &read, sizeof(read), true), RequestClass::kForeground);
  read.size = 128 * 1024;
  EXPECT_EQ(ClassifyKernelRequest(FUSE_READ, &read, sizeof(read), true), RequestClass::kBackground);
  read.size = 4096;
  read.flags = O_RDONLY | O_DIRECT;
  EXPECT_EQ(ClassifyKernelRequest(FUSE_READ, &read, sizeof(read), true), RequestClass::kBackground);
  fuse_write_in write{};
  write.size = 4096;
  EXPECT_EQ(ClassifyKernelRequest(FUSE_WRITE, &write, sizeof(write), true),
            RequestClass::kForeground);
  write.flags = O_WRONLY | O_DIRECT;
  EXPECT_EQ(ClassifyKernelRequest(FUSE_WRITE, &write, sizeof(write), true),
            RequestClass::kBackground);
  write.flags = O_WRONLY;
  write.write_flags = FUSE_WRITE_CACHE;
  EXPECT_EQ(ClassifyKernelRequest(FUSE_WRITE, &write, sizeof(write), true),
            RequestClass::kBackground);
  EXPECT_EQ(ClassifyKernelRequest(FUSE_GETATTR, nullptr, 0, true), RequestClass::kForeground);
}

// A hard mount does without FUSE_ASYNC_DIO: its direct I/O is waited for by its caller.
TEST(ClassifyKernelRequestTest, DirectIoIsForegroundWithoutAsyncDio) {
  fuse_read_in read{};
  read.size = 128 * 1024;
  read.flags = O_RDONLY | O_DIRECT;
  EXPECT_EQ(ClassifyKernelRequest(FUSE_READ, &read, sizeof(read), false),
            RequestClass::kForeground);
  read.flags = O_RDONLY;
  EXPECT_EQ(ClassifyKernelRequest(FUSE_READ, &read, sizeof(read), false), RequestClass::kBackground)
      << "readahead";
  fuse_write_in write{};
  write.flags = O_WRONLY | O_DIRECT;
  EXPECT_EQ(ClassifyKernelRequest(FUSE_WRITE, &write, sizeof(write), false),
            RequestClass::kForeground);
  write.flags = O_WRONLY;
  write.write_flags = FUSE_WRITE_CACHE;
  EXPECT_EQ(ClassifyKernelRequest(FUSE_WRITE, &write, sizeof(write), false),
            RequestClass::kBackground);
}

}  // namespace
}  // namespace ringfs::frontend::queue
