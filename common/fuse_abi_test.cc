// Layout of the FUSE 7.45 structures ringfs reads and writes, checked against the offsets the
// kernel uses (include/uapi/linux/fuse.h at 7.45).
#include "proto/fuse_abi.h"

#include <gtest/gtest.h>

#include <cstddef>

#include "common/fuse_ops.h"

namespace ringfs::fuse {
namespace {

TEST(FuseAbiTest, HeaderSizes) {
  EXPECT_EQ(sizeof(fuse_in_header), 40u);
  EXPECT_EQ(offsetof(fuse_in_header, unique), 8u);
  EXPECT_EQ(offsetof(fuse_in_header, nodeid), 16u);
  EXPECT_EQ(offsetof(fuse_in_header, uid), 24u);
  EXPECT_EQ(offsetof(fuse_in_header, pid), 32u);
  EXPECT_EQ(sizeof(fuse_out_header), 16u);
  EXPECT_EQ(offsetof(fuse_out_header, error), 4u);
  EXPECT_EQ(offsetof(fuse_out_header, unique), 8u);
}

TEST(FuseAbiTest, InitStructs) {
  EXPECT_EQ(sizeof(fuse_init_in), 64u);
  EXPECT_EQ(offsetof(fuse_init_in, flags2), 16u);
  EXPECT_EQ(sizeof(InitOut), 64u);
  EXPECT_EQ(offsetof(InitOut, max_write), 20u);
  EXPECT_EQ(offsetof(InitOut, max_pages), 28u);
  EXPECT_EQ(offsetof(InitOut, flags2), 32u);
  EXPECT_EQ(offsetof(InitOut, max_stack_depth), 36u);
  EXPECT_EQ(offsetof(InitOut, request_timeout), 40u);
}

TEST(FuseAbiTest, AttrAndEntry) {
  EXPECT_EQ(sizeof(fuse_attr), 88u);
  EXPECT_EQ(sizeof(fuse_entry_out), 128u);
  EXPECT_EQ(offsetof(fuse_entry_out, attr), 40u);
  EXPECT_EQ(sizeof(fuse_attr_out), 104u);
  EXPECT_EQ(sizeof(fuse_open_out), 16u);
  EXPECT_EQ(sizeof(fuse_statfs_out), 80u);
  EXPECT_EQ(sizeof(fuse_dirent), 24u);
  EXPECT_EQ(sizeof(fuse_direntplus), 152u);
}

TEST(FuseAbiTest, RequestStructs) {
  EXPECT_EQ(sizeof(fuse_setattr_in), 88u);
  EXPECT_EQ(sizeof(fuse_read_in), 40u);
  EXPECT_EQ(sizeof(fuse_write_in), 40u);
  EXPECT_EQ(sizeof(fuse_create_in), 16u);
  EXPECT_EQ(sizeof(fuse_mknod_in), 16u);
  EXPECT_EQ(sizeof(fuse_mkdir_in), 8u);
  EXPECT_EQ(sizeof(fuse_rename2_in), 16u);
  EXPECT_EQ(sizeof(fuse_release_in), 24u);
  EXPECT_EQ(sizeof(fuse_fallocate_in), 32u);
  EXPECT_EQ(sizeof(fuse_lseek_in), 24u);
  EXPECT_EQ(sizeof(fuse_copy_file_range_in), 56u);
  EXPECT_EQ(sizeof(fuse_batch_forget_in), 8u);
  EXPECT_EQ(sizeof(fuse_forget_one), 16u);
}

TEST(FuseAbiTest, UringLayout) {
  EXPECT_EQ(sizeof(UringReqHeader), 288u);
  EXPECT_EQ(offsetof(UringReqHeader, op_in), 128u);
  EXPECT_EQ(offsetof(UringReqHeader, ring_ent_in_out), 256u);
  EXPECT_EQ(offsetof(UringEntInOut, commit_id), 8u);
  EXPECT_EQ(offsetof(UringEntInOut, payload_sz), 16u);
  EXPECT_EQ(sizeof(UringCmdReq), 24u);
  EXPECT_EQ(offsetof(UringCmdReq, qid), 16u);
  EXPECT_EQ(kInitOverIoUring, 1ULL << 41);
}

TEST(FuseOpsTest, EveryArgumentStructFitsInOpIn) {
  for (uint32_t op = 0; op < 64; ++op) {
    if (auto info = LookupOp(op)) {
      EXPECT_LE(info->in_struct_size, kUringOpInOutSize) << info->name;
    }
  }
}

// Regression: the table once said 16 (sizeof fuse_setxattr_in), so the server read SETXATTR
// names 8 bytes late; without FUSE_SETXATTR_EXT the kernel sends the 8-byte compat struct.
TEST(FuseOpsTest, SetxattrUsesTheCompatStructSize) {
  EXPECT_EQ(LookupOp(FUSE_SETXATTR)->in_struct_size, 8u);
}

TEST(FuseOpsTest, ReplyBounds) {
  fuse_read_in read{};
  read.size = 4096;
  auto bounds = SuccessReplyBounds(FUSE_READ, &read, sizeof(read));
  EXPECT_EQ(bounds.min, 0u);
  EXPECT_EQ(bounds.max, 4096u);
  bounds = SuccessReplyBounds(FUSE_LOOKUP, nullptr, 0);
  EXPECT_EQ(bounds.min, sizeof(fuse_entry_out));
  EXPECT_EQ(bounds.max, sizeof(fuse_entry_out));
  EXPECT_FALSE(SuccessReplyBounds(FUSE_FORGET, nullptr, 0).expected);
  fuse_getxattr_in probe{};
  bounds = SuccessReplyBounds(FUSE_GETXATTR, &probe, sizeof(probe));
  EXPECT_EQ(bounds.min, sizeof(fuse_getxattr_out));
  EXPECT_FALSE(LookupOp(999).has_value());
  EXPECT_EQ(OpName(FUSE_RENAME2), "RENAME2");
}

}  // namespace
}  // namespace ringfs::fuse
