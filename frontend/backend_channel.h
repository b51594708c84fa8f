// One worker's connection to ringfs-server: connect + handshake, sending request frames gathered
// from the caller's buffers, and receiving replies into the buffer each request named.
// Owned and used by exactly one worker thread, which also owns the io_uring passed in; the
// channel only queues RECV SQEs on it and expects the worker to route their completions back.
#pragma once

#include <linux/fuse.h>
#include <sys/uio.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <liburing.h>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/fuse_ops.h"
#include "common/net.h"
#include "common/unique_fd.h"
#include "frontend/dir_attr_cache.h"

namespace ringfs::frontend {

struct BackendConfig {
  SocketAddress address;
  std::string client_id;
  std::string token;
  uint32_t queue = 0;
  uint32_t fuse_minor = 0;
  uint32_t max_inflight = 16;
  std::chrono::nanoseconds entry_timeout{std::chrono::seconds(1)};
  std::chrono::nanoseconds attr_timeout{std::chrono::seconds(1)};
  std::chrono::milliseconds connect_timeout{5000};
  // A blocked send gives up after this long and the connection is treated as dead.
  std::chrono::milliseconds send_timeout{30000};
  // Where post-operation directory attributes go (common/dir_attrs.h); null: not asked for.
  DirAttrCache* dir_attrs = nullptr;
};

// Opens a connection and performs the handshake; used by the channel and by the mount's
// pre-flight check. `dir_attrs_on`, when given, says whether the server will append dir attrs.
absl::StatusOr<UniqueFd> ConnectToServer(const BackendConfig& config,
                                         bool* dir_attrs_on = nullptr);

// Where a reply's body lands and which sizes are acceptable for it.
struct PendingReply {
  uint32_t slot = 0;
  uint32_t opcode = 0;
  char* body = nullptr;
  size_t capacity = 0;
  size_t min_body = 0;
  size_t max_body = 0;
};

class ReplySink {
 public:
  virtual ~ReplySink() = default;
  // The reply for `slot` is complete: header.error is 0 with the body in place, or an error
  // (from the server, or EIO when the connection failed or the reply was invalid).
  virtual void OnReply(uint32_t slot, const fuse_out_header& header, size_t body_size) = 0;
};

class BackendChannel {
 public:
  // `recv_kind` is the tag the worker uses for this channel's completions in user_data bits
  // 56..63; the channel puts a generation in bits 32..55 so stale completions are recognised.
  BackendChannel(BackendConfig config, io_uring* ring, uint8_t recv_kind, ReplySink* sink);
  ~BackendChannel();
  BackendChannel(const BackendChannel&) = delete;
  BackendChannel& operator=(const BackendChannel&) = delete;

  absl::Status Connect();
  bool connected() const { return fd_.valid(); }
  size_t inflight() const { return pending_.size(); }
  uint64_t reconnects() const { return reconnects_; }

  // Sends one whole frame. REQUIRES: `unique` is not outstanding. On error nothing is pending
  // for `unique` and the caller answers the request itself; other requests in flight on a
  // broken connection are answered with EIO through the sink.
  absl::Status Send(uint64_t unique, const PendingReply* reply, const iovec* iov, int iovcnt);

  // Routes a completion whose user_data carried this channel's kind.
  void OnCompletion(uint64_t user_data, int res);

  // Fails everything in flight with `err` and closes the socket.
  void Fail(int err, std::string_view why);

 private:
  enum class RecvMode { kIdle, kStaging, kDirect };

  void ArmRecv();
  void ParseStaging();
  bool BeginReply(const fuse_out_header& header);
  void FinishReply();
  // Bytes of dir-attr trailers in a `body`-byte success reply to `expect`, or -1 if the size
  // fits neither the plain reply nor the plain reply plus trailers.
  long TrailerBytes(const PendingReply& expect, size_t body) const;
  // Hands the trailers of the finished reply to the cache; returns the plain body size.
  size_t TakeTrailers();
  void Answer(uint32_t slot, uint64_t unique, int error, size_t body_size);
  uint64_t Tag() const;

  BackendConfig config_;
  io_uring* ring_;
  uint8_t recv_kind_;
  ReplySink* sink_;
  UniqueFd fd_;
  uint32_t generation_ = 0;
  uint64_t reconnects_ = 0;
  bool dir_attrs_on_ = false;  // negotiated on the current connection
  std::chrono::steady_clock::time_point last_connect_failure_{};

  absl::flat_hash_map<uint64_t, PendingReply> pending_;

  std::vector<char> staging_;
  size_t staging_begin_ = 0;
  size_t staging_end_ = 0;
  RecvMode mode_ = RecvMode::kIdle;
  bool recv_outstanding_ = false;
  // A direct receive writes into a request's own buffer; if the connection dies meanwhile, that
  // request is answered only once the kernel has finished with the buffer (its stale completion).
  struct Retired {
    std::vector<char> staging;
    bool has_orphan = false;
    PendingReply orphan{};
    uint64_t orphan_unique = 0;
  };
  absl::flat_hash_map<uint32_t, Retired> retired_;  // by generation

  // The reply being received.
  fuse_out_header current_{};
  PendingReply current_reply_{};
  size_t current_body_ = 0;
  size_t current_received_ = 0;
};

}  // namespace ringfs::frontend
