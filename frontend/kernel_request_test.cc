// The kernel request decoders: what each refusal leaves in the view.
#include "frontend/kernel_request.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace ringfs::frontend {
namespace {

std::string Frame(uint32_t opcode, const std::string& body, uint32_t len_delta = 0) {
  fuse_in_header in{};
  in.len = static_cast<uint32_t>(sizeof(in) + body.size()) + len_delta;
  in.opcode = opcode;
  in.unique = 2;
  in.nodeid = FUSE_ROOT_ID;
  return std::string(reinterpret_cast<const char*>(&in), sizeof(in)) + body;
}

TEST(KernelRequestTest, DevFuseLookupSplitsStructAndPayload) {
  std::string frame = Frame(FUSE_LOOKUP, std::string("name\0", 5));
  KernelRequest request;
  DecodeDevFuseRequest(frame.data(), frame.size(), &request);
  ASSERT_EQ(request.decoded, DecodeResult::kOk);
  EXPECT_EQ(request.op_in_size, 0u);
  EXPECT_EQ(request.payload, frame.data() + sizeof(fuse_in_header));
  EXPECT_EQ(request.payload_size, 5u);
}

// Caught by the kernel request fuzz target (tests/fuzz/fuzz_kernel_request.cc): the header
// said `op` is valid for every result but kUnknownOpcode/kTruncatedHeader, but a length that
// disagrees with the read leaves it empty (the header is not trusted). The contract now says so.
TEST(KernelRequestTest, BadLengthLeavesNoOpDescriptor) {
  std::string frame = Frame(FUSE_GETATTR, std::string(sizeof(fuse_getattr_in), '\0'), 8);
  KernelRequest request;
  DecodeDevFuseRequest(frame.data(), frame.size(), &request);
  EXPECT_EQ(request.decoded, DecodeResult::kBadLength);
  EXPECT_TRUE(request.op.name.empty());
  EXPECT_EQ(request.op_in, nullptr);
  EXPECT_EQ(request.body_bytes(), 0u);
}

TEST(KernelRequestTest, DevFuseShortStructAndUnknownOpcode) {
  std::string frame = Frame(FUSE_GETATTR, "x");
  KernelRequest request;
  DecodeDevFuseRequest(frame.data(), frame.size(), &request);
  EXPECT_EQ(request.decoded, DecodeResult::kShortStruct);
  frame = Frame(999, "");
  DecodeDevFuseRequest(frame.data(), frame.size(), &request);
  EXPECT_EQ(request.decoded, DecodeResult::kUnknownOpcode);
  DecodeDevFuseRequest(frame.data(), sizeof(fuse_in_header) - 1, &request);
  EXPECT_EQ(request.decoded, DecodeResult::kTruncatedHeader);
}

TEST(KernelRequestTest, RingRefusesPayloadAboveCapacityAndRequestsWithoutReply) {
  fuse::UringReqHeader entry{};
  std::string frame = Frame(FUSE_WRITE, "");
  std::memcpy(entry.in_out, frame.data(), sizeof(fuse_in_header));
  entry.ring_ent_in_out.payload_sz = 65;
  char payload[64] = {};
  KernelRequest request;
  DecodeRingRequest(entry, payload, sizeof(payload), &request);
  EXPECT_EQ(request.decoded, DecodeResult::kPayloadTooLarge);
  entry.ring_ent_in_out.payload_sz = 64;
  DecodeRingRequest(entry, payload, sizeof(payload), &request);
  ASSERT_EQ(request.decoded, DecodeResult::kOk);
  EXPECT_EQ(request.op_in_size, sizeof(fuse_write_in));
  EXPECT_EQ(request.payload_size, 64u);
  frame = Frame(FUSE_FORGET, "");
  std::memcpy(entry.in_out, frame.data(), sizeof(fuse_in_header));
  DecodeRingRequest(entry, payload, sizeof(payload), &request);
  EXPECT_EQ(request.decoded, DecodeResult::kNoReplyOnRing);
}

// Every argument struct the table knows fits a ring entry's op_in block.
TEST(KernelRequestTest, EveryArgumentStructFitsTheRingEntry) {
  for (uint32_t opcode = 0; opcode < 64; ++opcode) {
    if (auto op = fuse::LookupOp(opcode)) {
      EXPECT_LE(op->in_struct_size, fuse::kUringOpInOutSize) << op->name;
    }
  }
}

}  // namespace
}  // namespace ringfs::frontend
