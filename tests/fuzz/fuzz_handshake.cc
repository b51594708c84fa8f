// Fuzzes the handshake both ends run on a new data connection: the 8-byte framing
// (wire::HandshakeBodyLength), then the body both as a ClientHello, checked by the server's
// Listener::Validate, and as a ServerHello, checked by the client's AcceptServerHello. Whatever
// the server answers must be a reply it can send (EncodeHandshake) that reads back the same and
// that the client accepts exactly when it says OK, with limits never above what either side
// asked for.
//
// Input: one byte of settings (bit 0: unused since authentication moved to the Authenticator;
// bit 1: the client wants dir attrs; bit 2: the client wants node handles), then the handshake
// frame.
#include <cstdint>
#include <cstring>
#include <string>

#include "common/wire.h"
#include "google/protobuf/stubs/logging.h"
#include "frontend/backend_channel.h"
#include "frontend/dir_attr_cache.h"
#include "frontend/node_ledger.h"
#include "server/listener.h"
#include "tests/fuzz/fuzz_check.h"

namespace ringfs {
namespace {

constexpr uint64_t kSessionId = 77;

frontend::BackendConfig ClientConfig(uint8_t settings, uint32_t max_inflight) {
  static frontend::DirAttrCache dir_attrs;
  static frontend::NodeLedger ledger;
  frontend::BackendConfig config;
  config.max_inflight = max_inflight;
  config.dir_attrs = (settings & 2) != 0 ? &dir_attrs : nullptr;
  config.ledger = (settings & 4) != 0 ? &ledger : nullptr;
  return config;
}

// The client's side of a ServerHello it received.
void CheckClient(const frontend::BackendConfig& config, const wire::ServerHello& reply) {
  absl::StatusOr<frontend::ServerSession> session = frontend::AcceptServerHello(config, reply);
  if (!session.ok()) {
    // Refused: not OK, no request allowed, or a challenge where the final answer belongs.
    FUZZ_CHECK(reply.result() != wire::ServerHello::OK || reply.max_inflight() == 0 ||
               reply.has_challenge());
    return;
  }
  FUZZ_CHECK(reply.result() == wire::ServerHello::OK);
  FUZZ_CHECK(session->max_inflight >= 1 && session->max_inflight <= config.max_inflight);
  FUZZ_CHECK(session->max_inflight <= reply.max_inflight());
  FUZZ_CHECK(!session->dir_attrs || config.dir_attrs != nullptr);
  FUZZ_CHECK(!session->node_handles || config.ledger != nullptr);
  FUZZ_CHECK(session->instance_id == reply.instance_id());
  FUZZ_CHECK(!session->fd.valid());
}

// The server's side of a ClientHello, then the client's side of the answer as sent.
void CheckServer(uint8_t settings, const wire::ClientHello& hello) {
  server::Listener::Options options;
  options.max_inflight = 64;
  options.server_id = "fuzz";
  options.instance_id = 0x1234;
  wire::ServerHello reply = server::Listener::Validate(hello, options, kSessionId);
  FUZZ_CHECK(reply.result() != wire::ServerHello::RESULT_UNSPECIFIED);
  FUZZ_CHECK(reply.wire_version() == wire::kWireVersion);
  if (reply.result() == wire::ServerHello::OK) {
    FUZZ_CHECK(hello.wire_version() == wire::kWireVersion);
    FUZZ_CHECK(reply.max_inflight() >= 1);
    FUZZ_CHECK(reply.max_inflight() <= hello.max_inflight());
    FUZZ_CHECK(reply.max_inflight() <= options.max_inflight);
    FUZZ_CHECK(reply.max_frame_bytes() >= 4096);
    FUZZ_CHECK(reply.max_frame_bytes() <= hello.max_frame_bytes());
    FUZZ_CHECK(reply.max_frame_bytes() <= wire::kMaxFrameBytes);
    FUZZ_CHECK(reply.session_id() == kSessionId);
  } else {
    FUZZ_CHECK(!reply.message().empty());
  }
  // Every answer, a refusal too, must reach the client: it fits the handshake limit.
  absl::StatusOr<std::string> frame = wire::EncodeHandshake(reply);
  FUZZ_CHECK(frame.ok());
  FUZZ_CHECK(frame->size() >= 8);
  char prefix[8];
  std::memcpy(prefix, frame->data(), sizeof(prefix));
  absl::StatusOr<uint32_t> length = wire::HandshakeBodyLength(prefix);
  FUZZ_CHECK(length.ok() && *length == frame->size() - 8);
  wire::ServerHello received;
  FUZZ_CHECK(received.ParseFromArray(frame->data() + 8, static_cast<int>(*length)));
  FUZZ_CHECK(received.result() == reply.result());
  const uint32_t asked = hello.max_inflight() == 0 ? 1 : hello.max_inflight();
  frontend::BackendConfig config = ClientConfig(settings, asked);
  absl::StatusOr<frontend::ServerSession> session = frontend::AcceptServerHello(config, received);
  FUZZ_CHECK(session.ok() == (reply.result() == wire::ServerHello::OK));
  CheckClient(config, received);
}

void Run(const uint8_t* data, size_t size) {
  if (size < 1 + 8) return;
  const uint8_t settings = data[0];
  char prefix[8];
  std::memcpy(prefix, data + 1, sizeof(prefix));
  absl::StatusOr<uint32_t> length = wire::HandshakeBodyLength(prefix);
  if (!length.ok()) return;
  FUZZ_CHECK(*length <= wire::kMaxHandshakeBytes);
  uint32_t magic;
  std::memcpy(&magic, prefix, sizeof(magic));
  FUZZ_CHECK(magic == wire::kHandshakeMagic);
  if (size - 9 < *length) return;  // the peer has not sent it all
  fuzz::ExactCopy body(data + 9, *length);

  wire::ClientHello hello;
  if (hello.ParseFromArray(body.data(), static_cast<int>(body.size()))) CheckServer(settings, hello);
  wire::ServerHello reply;
  if (reply.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    CheckClient(ClientConfig(settings, 16), reply);
  }
}

}  // namespace
}  // namespace ringfs

// Protobuf logs every string field with invalid UTF-8 it refuses to parse; that is an expected
// outcome here, and the log would drown libFuzzer's.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ringfs::Run(data, size);
  return 0;
}
