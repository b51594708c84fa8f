// Fuzzes frontend's kernel request decoders (frontend/kernel_request.cc), which turn what the
// kernel delivered into a KernelRequest view: DecodeDevFuseRequest on a /dev/fuse read, and
// DecodeRingRequest on a ring entry (its 288-byte header block) plus a payload buffer. Checks
// that a decoded view never points outside the bytes it came from and that the parts add up to
// the frame, then reads every part through the view (ASan sees any overrun), and feeds the
// argument struct to SuccessReplyBounds as the Forwarder does.
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/fuse_ops.h"
#include "frontend/kernel_request.h"
#include "proto/fuse_abi.h"
#include "tests/fuzz/fuzz_check.h"

namespace ringfs::frontend {
namespace {

using fuzz::Inside;

// Touches every byte of a part (what forwarding it would do).
uint8_t Touch(const char* p, size_t n) {
  uint8_t x = 0;
  for (size_t i = 0; i < n; ++i) x ^= static_cast<uint8_t>(p[i]);
  return x;
}

void CheckCommon(const KernelRequest& request) {
  if (request.decoded == DecodeResult::kTruncatedHeader ||
      request.decoded == DecodeResult::kUnknownOpcode ||
      request.decoded == DecodeResult::kBadLength) {
    // No descriptor: the header cannot be trusted, or the opcode is not in the table.
    FUZZ_CHECK(request.op.name.empty() && request.op.in_struct_size == 0);
    if (request.decoded == DecodeResult::kUnknownOpcode) {
      FUZZ_CHECK(!fuse::LookupOp(request.opcode()).has_value());
    }
    return;
  }
  std::optional<fuse::OpInfo> op = fuse::LookupOp(request.opcode());
  FUZZ_CHECK(op.has_value());
  FUZZ_CHECK(op->name == request.op.name && op->in_struct_size == request.op.in_struct_size);
  if (request.decoded != DecodeResult::kOk) return;
  FUZZ_CHECK(request.op_in_size == request.op.in_struct_size);
  FUZZ_CHECK(request.body_bytes() == request.op_in_size + request.payload_size);
  fuse::ReplyBounds bounds =
      fuse::SuccessReplyBounds(request.opcode(), request.op_in, request.op_in_size);
  FUZZ_CHECK(bounds.min <= bounds.max);
  FUZZ_CHECK(bounds.expected == (request.op.reply != fuse::ReplyShape::kNone));
  (void)request.Struct<fuse_read_in>();
  (void)request.Struct<fuse_setattr_in>();
}

void FuzzDevFuse(const uint8_t* data, size_t size) {
  fuzz::ExactCopy copy(data, size);
  KernelRequest request;
  DecodeDevFuseRequest(copy.data(), size, &request);
  FUZZ_CHECK(request.frame == copy.data());
  if (size < sizeof(fuse_in_header)) {
    FUZZ_CHECK(request.decoded == DecodeResult::kTruncatedHeader);
    return;
  }
  FUZZ_CHECK(request.decoded != DecodeResult::kTruncatedHeader);
  FUZZ_CHECK(request.decoded != DecodeResult::kPayloadTooLarge);
  FUZZ_CHECK(request.decoded != DecodeResult::kNoReplyOnRing);
  FUZZ_CHECK(std::memcmp(&request.header, copy.data(), sizeof(fuse_in_header)) == 0);
  if (request.header.len != size) FUZZ_CHECK(request.decoded == DecodeResult::kBadLength);
  CheckCommon(request);
  if (request.decoded != DecodeResult::kOk) return;
  FUZZ_CHECK(request.header.len == size);
  FUZZ_CHECK(request.op_in == copy.data() + sizeof(fuse_in_header));
  FUZZ_CHECK(request.payload == request.op_in + request.op_in_size);
  FUZZ_CHECK(sizeof(fuse_in_header) + request.body_bytes() == size);
  FUZZ_CHECK(Inside(copy.span(), request.op_in, request.op_in_size));
  FUZZ_CHECK(Inside(copy.span(), request.payload, request.payload_size));
  (void)Touch(request.op_in, request.op_in_size);
  (void)Touch(request.payload, request.payload_size);
}

// Input: the 288-byte UringReqHeader, one byte of payload capacity (in 16-byte steps, so the
// fuzzer can go below and above payload_sz), then the payload buffer's bytes.
void FuzzRing(const uint8_t* data, size_t size) {
  if (size < sizeof(fuse::UringReqHeader) + 1) return;
  auto entry = std::make_unique<fuse::UringReqHeader>();
  std::memcpy(entry.get(), data, sizeof(*entry));
  data += sizeof(*entry);
  size -= sizeof(*entry);
  const size_t capacity = std::min<size_t>(size - 1, size_t{data[0]} * 16);
  fuzz::ExactCopy payload(data + 1, capacity);
  KernelRequest request;
  DecodeRingRequest(*entry, payload.data(), capacity, &request);
  FUZZ_CHECK(request.frame == nullptr);
  FUZZ_CHECK(request.decoded != DecodeResult::kTruncatedHeader);
  FUZZ_CHECK(request.decoded != DecodeResult::kBadLength);
  FUZZ_CHECK(request.decoded != DecodeResult::kShortStruct);
  FUZZ_CHECK(std::memcmp(&request.header, entry->in_out, sizeof(fuse_in_header)) == 0);
  CheckCommon(request);
  if (request.decoded == DecodeResult::kNoReplyOnRing) {
    FUZZ_CHECK(request.op.reply == fuse::ReplyShape::kNone);
  }
  if (request.decoded != DecodeResult::kOk) return;
  // The argument struct lives in the entry's op_in block, which it must fit.
  FUZZ_CHECK(request.op_in == entry->op_in);
  FUZZ_CHECK(request.op_in_size <= sizeof(entry->op_in));
  FUZZ_CHECK(request.payload == payload.data());
  FUZZ_CHECK(request.payload_size == entry->ring_ent_in_out.payload_sz);
  FUZZ_CHECK(request.payload_size <= capacity);
  (void)Touch(request.op_in, request.op_in_size);
  (void)Touch(request.payload, request.payload_size);
}

}  // namespace
}  // namespace ringfs::frontend

// The first byte picks the decoder (even: /dev/fuse, odd: ring); the rest is its input.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0) {
    ringfs::frontend::FuzzDevFuse(data + 1, size - 1);
  } else {
    ringfs::frontend::FuzzRing(data + 1, size - 1);
  }
  return 0;
}
