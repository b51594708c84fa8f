#include "frontend/kernel_request.h"

#include <optional>

namespace ringfs::frontend {
namespace {

// The opcode's descriptor, for a header already copied. False when the opcode is unknown.
bool LookUpOp(KernelRequest* request) {
  std::optional<fuse::OpInfo> op = fuse::LookupOp(request->header.opcode);
  if (!op) {
    request->op = fuse::OpInfo{};
    request->decoded = DecodeResult::kUnknownOpcode;
    return false;
  }
  request->op = *op;
  return true;
}

}  // namespace

void DecodeRingRequest(const fuse::UringReqHeader& entry, const char* payload,
                       size_t payload_capacity, KernelRequest* request) {
  static_assert(sizeof(fuse_in_header) <= sizeof(entry.in_out));
  request->frame = nullptr;
  request->op_in = entry.op_in;
  request->op_in_size = 0;
  request->payload = payload;
  request->payload_size = 0;
  std::memcpy(&request->header, entry.in_out, sizeof(request->header));
  if (!LookUpOp(request)) return;
  request->op_in_size = request->op.in_struct_size;
  if (request->op.reply == fuse::ReplyShape::kNone) {
    // Answered all the same: a commit is the only way to give the entry back to the kernel.
    request->decoded = DecodeResult::kNoReplyOnRing;
    return;
  }
  if (entry.ring_ent_in_out.payload_sz > payload_capacity) {
    request->decoded = DecodeResult::kPayloadTooLarge;
    return;
  }
  request->payload_size = entry.ring_ent_in_out.payload_sz;
  request->decoded = DecodeResult::kOk;
}

void DecodeDevFuseRequest(const char* frame, size_t size, KernelRequest* request) {
  request->frame = frame;
  request->op_in = nullptr;
  request->op_in_size = 0;
  request->payload = nullptr;
  request->payload_size = 0;
  if (size < sizeof(fuse_in_header)) {
    request->header = fuse_in_header{};
    request->op = fuse::OpInfo{};
    request->decoded = DecodeResult::kTruncatedHeader;
    return;
  }
  std::memcpy(&request->header, frame, sizeof(request->header));
  if (request->header.len != size) {
    request->op = fuse::OpInfo{};
    request->decoded = DecodeResult::kBadLength;
    return;
  }
  if (!LookUpOp(request)) return;
  size_t body = size - sizeof(fuse_in_header);
  if (body < request->op.in_struct_size) {
    request->decoded = DecodeResult::kShortStruct;
    return;
  }
  request->op_in = frame + sizeof(fuse_in_header);
  request->op_in_size = request->op.in_struct_size;
  request->payload = request->op_in + request->op_in_size;
  request->payload_size = body - request->op_in_size;
  request->decoded = DecodeResult::kOk;
}

}  // namespace ringfs::frontend
