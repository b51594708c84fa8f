// One FUSE request from the kernel, decoded once at the transport edge into a typed view:
// header, op descriptor, argument struct, payload. The view points into the transport's own
// buffer (a ring entry, a /dev/fuse read slot) and is valid while that buffer holds the request;
// it owns nothing and allocates nothing. Everything behind the decoders (Forwarder,
// classification, local answers, reply bounds) reads the request through it, never raw bytes.
// Pure functions and a plain struct; any thread may decode into a view it owns.
#pragma once

#include <linux/fuse.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/fuse_ops.h"
#include "frontend/queue/request_class.h"
#include "frontend/reply_origin.h"
#include "proto/fuse_abi.h"

namespace ringfs::frontend {

// Why a request could not be decoded, or kOk. The Forwarder turns each into one answer
// (RefusalFor); the decoders only say what is wrong.
enum class DecodeResult : uint8_t {
  kOk,
  kTruncatedHeader,   // fewer bytes than a fuse_in_header: there is no unique to answer
  kUnknownOpcode,     // not in the opcode table (fuse_ops.cc)
  kBadLength,         // header.len differs from the bytes the transport delivered
  kShortStruct,       // fewer bytes than the opcode's argument struct
  kPayloadTooLarge,   // the ring says it wrote more payload than the entry holds
  kNoReplyOnRing,     // FORGET/BATCH_FORGET/INTERRUPT in a ring entry (the kernel never does)
};

struct KernelRequest {
  fuse_in_header header{};  // a copy: the transport's buffer later receives the reply
  fuse::OpInfo op{};  // empty when decoded is kTruncatedHeader, kBadLength or kUnknownOpcode
  const char* op_in = nullptr;  // the argument struct, op.in_struct_size bytes
  size_t op_in_size = 0;
  const char* payload = nullptr;  // what follows the struct (names, WRITE data, forgets)
  size_t payload_size = 0;
  // The whole frame, contiguous (classic transport); null where the transport split it (ring).
  const char* frame = nullptr;
  DecodeResult decoded = DecodeResult::kTruncatedHeader;

  uint32_t opcode() const { return header.opcode; }
  uint64_t unique() const { return header.unique; }
  // Bytes after the header, as they go to the server.
  size_t body_bytes() const { return op_in_size + payload_size; }
  // The argument struct as T, zero-filled beyond op_in_size (op_in may be unaligned).
  template <typename T>
  T Struct() const {
    T value{};
    if (op_in != nullptr) {
      std::memcpy(&value, op_in, op_in_size < sizeof(T) ? op_in_size : sizeof(T));
    }
    return value;
  }
};

// What the Forwarder keeps of a request while it is in ringfs-mount: kept by the transport
// beside the request's bytes (RingEntry, read slot), written only by the worker holding it.
struct RequestState {
  // Small members first, together in one word (the flags as bits): every queue slot of every
  // possible CPU has a RequestState (ring_memory_test's budget).
  queue::RequestClass request_class = queue::RequestClass::kForeground;
  ReplyOrigin reply_origin = ReplyOrigin::kServer;  // who produced the answer to commit
  // Its answer may make the kernel build a dentry or inode (KernelNotifier::AnswerBegins).
  bool builds_entry : 1 = false;
  // A READDIR/READDIRPLUS went to the server: DirEnds learns from its answer.
  bool listing : 1 = false;
  // A READDIR/READDIRPLUS counted by KeptListings (CompleteDirs::ListingSent) as in flight for
  // its directory, `keep_node`.
  bool listing_counted : 1 = false;
  // A READ or WRITE counted by KeptPages as in flight for its file, `keep_node`.
  bool pages_counted : 1 = false;
  uint64_t received_ns = 0;  // when the request reached ringfs-mount (latency, deadline)
  uint64_t sent_ns = 0;      // when it went to the server
  // A request whose answer names an entry that KeptEntries may record: its tickets, and the
  // name (the reply may land over the request's bytes).
  uint64_t keep_node = 0;  // the request's node: an ESTALE answer means it is gone
  uint64_t keep_ticket = 0;
  uint64_t change_ticket = 0;
  uint32_t keep_opcode = 0;
  // A READDIRPLUS at offset 0 of a handle-less listing whose answer the mount may keep
  // (KeptListings::Answered): the size it asks for, and its ticket, or 0.
  uint32_t listing_size = 0;
  uint64_t listing_ticket = 0;
  uint64_t keep_dir = 0;
  std::string keep_name;
  uint64_t listing_fh = 0;  // that READDIR's handle
};

// A request delivered in a ring entry: header in `entry.in_out`, argument struct in
// `entry.op_in`, the rest in `payload` (`entry.ring_ent_in_out.payload_sz` bytes, of
// `payload_capacity`). The ring does not report the struct's length; the kernel fills op_in
// with the opcode's struct, so op_in_size is the table's size.
void DecodeRingRequest(const fuse::UringReqHeader& entry, const char* payload,
                       size_t payload_capacity, KernelRequest* request);

// A request read from /dev/fuse: `size` bytes at `frame`, header first.
void DecodeDevFuseRequest(const char* frame, size_t size, KernelRequest* request);

}  // namespace ringfs::frontend
