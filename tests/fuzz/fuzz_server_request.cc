// Fuzzes server::DecodeRequest (server/request.cc): one wire frame, exactly as a connection's
// receive path hands it over, into a typed Request. Besides "no crash, no UB, no read outside
// the frame" it checks what the executors rely on: every name a valid path component, strings
// and payloads inside the frame, sizes within the wire limits, offsets non-negative as off_t,
// record counts that fit the frame.
#include <cstdint>
#include <limits>
#include <string_view>
#include <variant>

#include "common/node_handle.h"
#include "common/wire.h"
#include "server/request.h"
#include "tests/fuzz/fuzz_check.h"

namespace ringfs::server {
namespace {

using fuzz::Inside;

void CheckName(std::span<const char> frame, std::string_view name) {
  FUZZ_CHECK(!name.empty());
  FUZZ_CHECK(name.size() <= kMaxNameBytes);
  FUZZ_CHECK(name != "." && name != "..");
  FUZZ_CHECK(name.find('/') == std::string_view::npos);
  FUZZ_CHECK(name.find('\0') == std::string_view::npos);
  FUZZ_CHECK(Inside(frame, name.data(), name.size() + 1));  // its NUL too
  FUZZ_CHECK(name.data()[name.size()] == '\0');
}

void CheckString(std::span<const char> frame, std::string_view s, size_t max) {
  FUZZ_CHECK(!s.empty());
  FUZZ_CHECK(s.size() <= max);
  FUZZ_CHECK(s.find('\0') == std::string_view::npos);
  FUZZ_CHECK(Inside(frame, s.data(), s.size() + 1));
  FUZZ_CHECK(s.data()[s.size()] == '\0');
}

bool NonNegative(uint64_t offset) {
  return offset <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}

void CheckArgs(std::span<const char> frame, const fuse_in_header& header,
               const Request& request) {
  const RequestArgs& args = request.args;
  if (const auto* a = std::get_if<LookupArgs>(&args)) CheckName(frame, a->name);
  if (const auto* a = std::get_if<MknodArgs>(&args)) CheckName(frame, a->name);
  if (const auto* a = std::get_if<MkdirArgs>(&args)) CheckName(frame, a->name);
  if (const auto* a = std::get_if<UnlinkArgs>(&args)) CheckName(frame, a->name);
  if (const auto* a = std::get_if<RmdirArgs>(&args)) CheckName(frame, a->name);
  if (const auto* a = std::get_if<LinkArgs>(&args)) CheckName(frame, a->name);
  if (const auto* a = std::get_if<CreateArgs>(&args)) CheckName(frame, a->name);
  if (const auto* a = std::get_if<RenameArgs>(&args)) {
    CheckName(frame, a->oldname);
    CheckName(frame, a->newname);
    FUZZ_CHECK(a->oldname.data() + a->oldname.size() < a->newname.data());
    if (header.opcode == FUSE_RENAME) FUZZ_CHECK(a->flags == 0);
  }
  if (const auto* a = std::get_if<SymlinkArgs>(&args)) {
    CheckName(frame, a->name);
    CheckString(frame, a->target, kMaxSymlinkTarget);
  }
  if (const auto* a = std::get_if<SetxattrArgs>(&args)) {
    CheckString(frame, a->name, kMaxXattrNameBytes);
    FUZZ_CHECK(a->value.size() <= kMaxXattrValue);
    FUZZ_CHECK(Inside(frame, a->value.data(), a->value.size()));
    // The value is the rest of the frame, right after the name's NUL.
    FUZZ_CHECK(a->value.data() == a->name.data() + a->name.size() + 1);
    FUZZ_CHECK(a->value.data() + a->value.size() == frame.data() + frame.size());
  }
  if (const auto* a = std::get_if<GetxattrArgs>(&args)) {
    CheckString(frame, a->name, kMaxXattrNameBytes);
    FUZZ_CHECK(a->size <= kMaxXattrValue);
  }
  if (const auto* a = std::get_if<RemovexattrArgs>(&args)) {
    CheckString(frame, a->name, kMaxXattrNameBytes);
  }
  if (const auto* a = std::get_if<ListxattrArgs>(&args)) FUZZ_CHECK(a->size <= kMaxXattrValue);
  if (const auto* a = std::get_if<ReadArgs>(&args)) {
    FUZZ_CHECK(a->size <= wire::kMaxIoBytes);
    FUZZ_CHECK(NonNegative(a->offset));
  }
  if (const auto* a = std::get_if<ReaddirArgs>(&args)) FUZZ_CHECK(a->size <= wire::kMaxIoBytes);
  if (const auto* a = std::get_if<WriteArgs>(&args)) {
    FUZZ_CHECK(a->data.size() <= wire::kMaxIoBytes);
    FUZZ_CHECK(NonNegative(a->offset));
    FUZZ_CHECK(Inside(frame, a->data.data(), a->data.size()));
    FUZZ_CHECK(a->data.data() + a->data.size() == frame.data() + frame.size());
  }
  if (const auto* a = std::get_if<FallocateArgs>(&args)) {
    FUZZ_CHECK(NonNegative(a->offset) && NonNegative(a->length));
  }
  if (const auto* a = std::get_if<CopyFileRangeArgs>(&args)) {
    FUZZ_CHECK(NonNegative(a->off_in) && NonNegative(a->off_out));
    FUZZ_CHECK(a->wide == (header.opcode == fuse::kOpCopyFileRange64));
  }
  if (const auto* a = std::get_if<BatchForgetArgs>(&args)) {
    FUZZ_CHECK(Inside(frame, a->entries, size_t{a->count} * sizeof(fuse_forget_one)));
    uint64_t sum = 0;
    for (uint32_t i = 0; i < a->count; ++i) sum += a->Entry(i).nlookup;  // ASan: every record
    (void)sum;
  }
  if (const auto* a = std::get_if<ReclaimNodesArgs>(&args)) {
    FUZZ_CHECK(a->count <= wire::kMaxReclaimNodesPerFrame);
    FUZZ_CHECK(a->records + size_t{a->count} * sizeof(wire::ReclaimNodeRecord) ==
               frame.data() + frame.size());
    for (uint32_t i = 0; i < a->count; ++i) (void)a->Record(i);
    FUZZ_CHECK(request.reply_capacity == size_t{a->count} * sizeof(int32_t));
  }
  if (const auto* a = std::get_if<ReopenHandlesArgs>(&args)) {
    FUZZ_CHECK(a->count <= wire::kMaxReopenPerFrame);
    FUZZ_CHECK(a->records + size_t{a->count} * sizeof(wire::ReopenRecord) ==
               frame.data() + frame.size());
    for (uint32_t i = 0; i < a->count; ++i) (void)a->Record(i);
    FUZZ_CHECK(request.reply_capacity == size_t{a->count} * sizeof(int32_t));
  }
}

}  // namespace
}  // namespace ringfs::server

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringfs::server;
  ringfs::fuzz::ExactCopy copy(data, size);
  std::span<const char> frame = copy.span();
  RejectReason reason = RejectReason::kCount;
  absl::StatusOr<Request> request = DecodeRequest(frame, &reason);
  if (!request.ok()) {
    FUZZ_CHECK(reason != RejectReason::kCount);
    FUZZ_CHECK(RejectReasonName(reason) != "other");
    const bool untrusted = ShouldCloseConnection(request.status());
    // Only a frame whose header cannot be trusted closes the connection; any other refusal is
    // answered, so its header must be readable.
    FUZZ_CHECK(untrusted == (reason == RejectReason::kBadHeader));
    if (!untrusted) {
      FUZZ_CHECK(frame.size() >= sizeof(fuse_in_header));
      FrameHeader peek = PeekHeader(frame);
      FUZZ_CHECK(peek.len == frame.size() && peek.unique != 0);
    }
    return 0;
  }
  FUZZ_CHECK(frame.size() >= sizeof(fuse_in_header));
  fuse_in_header header;
  std::memcpy(&header, frame.data(), sizeof(header));
  FUZZ_CHECK(header.len == frame.size());
  FUZZ_CHECK(request->unique != 0 && request->unique == header.unique);
  FUZZ_CHECK(request->opcode == header.opcode && request->nodeid == header.nodeid);
  FUZZ_CHECK(request->expects_reply == !IsNoReplyOpcode(header.opcode));
  // A reply never has to be larger than a frame either side accepts.
  FUZZ_CHECK(request->reply_capacity <= ringfs::wire::kMaxFrameBytes);
  ringfs::server::CheckArgs(frame, header, *request);
  return 0;
}
