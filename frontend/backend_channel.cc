#include "frontend/backend_channel.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "common/dir_attrs.h"
#include "common/log.h"
#include "common/status.h"
#include "common/wire.h"

namespace ringfs::frontend {
namespace {

constexpr size_t kStagingBytes = 256 * 1024;
constexpr uint32_t kGenerationMask = 0xffffff;
constexpr auto kReconnectBackoff = std::chrono::seconds(1);
constexpr int kMaxIov = 8;

}  // namespace

absl::StatusOr<UniqueFd> ConnectToServer(const BackendConfig& config, bool* dir_attrs_on) {
  ASSIGN_OR_RETURN(UniqueFd fd, ConnectTo(config.address, config.connect_timeout));
  wire::ClientHello hello;
  hello.set_wire_version(wire::kWireVersion);
  hello.set_client_id(config.client_id);
  hello.set_export_name("/");
  hello.set_token(config.token);
  hello.set_max_inflight(config.max_inflight);
  hello.set_max_frame_bytes(wire::kMaxFrameBytes);
  hello.set_fuse_minor(config.fuse_minor);
  hello.set_queue(config.queue);
  hello.set_entry_timeout_ns(config.entry_timeout.count());
  hello.set_attr_timeout_ns(config.attr_timeout.count());
  hello.set_want_dir_attrs(config.dir_attrs != nullptr);
  RETURN_IF_ERROR(wire::SendHandshake(fd.get(), hello));
  wire::ServerHello reply;
  if (absl::Status status = wire::ReceiveHandshake(fd.get(), &reply); !status.ok()) {
    return absl::UnavailableError(absl::StrFormat("handshake with %s failed: %s",
                                                  config.address.text, status.ToString()));
  }
  if (reply.result() != wire::ServerHello::OK) {
    std::string reason = wire::ServerHello::Result_Name(reply.result());
    auto message = absl::StrFormat("server %s refused the connection (%s): %s",
                                   config.address.text, reason, reply.message());
    if (reply.result() == wire::ServerHello::AUTH_FAILED) {
      return absl::PermissionDeniedError(message);
    }
    return absl::FailedPreconditionError(message);
  }
  if (reply.max_inflight() < config.max_inflight) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "server %s accepts only %u requests in flight per connection; this mount needs %u "
        "(lower queue_depth or raise the server's --max-inflight)",
        config.address.text, reply.max_inflight(), config.max_inflight));
  }
  timeval send_timeout{};
  auto ms = config.send_timeout.count();
  send_timeout.tv_sec = ms / 1000;
  send_timeout.tv_usec = (ms % 1000) * 1000;
  setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
  if (dir_attrs_on != nullptr) *dir_attrs_on = config.dir_attrs != nullptr && reply.dir_attrs();
  return fd;
}

BackendChannel::BackendChannel(BackendConfig config, io_uring* ring, uint8_t recv_kind,
                               ReplySink* sink)
    : config_(std::move(config)),
      ring_(ring),
      recv_kind_(recv_kind),
      sink_(sink),
      staging_(kStagingBytes) {}

BackendChannel::~BackendChannel() = default;

uint64_t BackendChannel::Tag() const {
  return (static_cast<uint64_t>(recv_kind_) << 56) |
         (static_cast<uint64_t>(generation_ & kGenerationMask) << 32);
}

absl::Status BackendChannel::Connect() {
  auto now = std::chrono::steady_clock::now();
  if (now - last_connect_failure_ < kReconnectBackoff) {
    return absl::UnavailableError(
        absl::StrFormat("server %s unreachable; retrying shortly", config_.address.text));
  }
  absl::StatusOr<UniqueFd> fd = ConnectToServer(config_, &dir_attrs_on_);
  if (!fd.ok()) {
    last_connect_failure_ = now;
    return fd.status();
  }
  if (generation_ > 0) ++reconnects_;
  ++generation_;
  fd_ = std::move(*fd);
  staging_begin_ = staging_end_ = 0;
  mode_ = RecvMode::kStaging;
  ArmRecv();
  return absl::OkStatus();
}

absl::Status BackendChannel::Send(uint64_t unique, const PendingReply* reply, const iovec* iov,
                                  int iovcnt) {
  if (!fd_.valid()) {
    if (absl::Status status = Connect(); !status.ok()) return status;
  }
  if (reply != nullptr && pending_.contains(unique)) {
    return absl::InternalError(absl::StrFormat("unique %u already in flight", unique));
  }
  if (iovcnt > kMaxIov) return absl::InternalError("too many iovecs");
  iovec parts[kMaxIov];
  std::copy(iov, iov + iovcnt, parts);
  msghdr message{};
  message.msg_iov = parts;
  message.msg_iovlen = iovcnt;
  // Blocking send: the server never stops reading while we have fewer than the accepted
  // max_inflight requests outstanding, so this cannot deadlock; SO_SNDTIMEO bounds it anyway.
  while (message.msg_iovlen > 0) {
    ssize_t sent = sendmsg(fd_.get(), &message, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      int err = errno == EAGAIN ? ETIMEDOUT : errno;
      Fail(EIO, absl::StrFormat("send to server failed: %s", std::strerror(err)));
      return ErrnoError(err, "send to server");
    }
    size_t left = static_cast<size_t>(sent);
    while (message.msg_iovlen > 0 && left >= message.msg_iov[0].iov_len) {
      left -= message.msg_iov[0].iov_len;
      ++message.msg_iov;
      --message.msg_iovlen;
    }
    if (message.msg_iovlen > 0) {
      message.msg_iov[0].iov_base = static_cast<char*>(message.msg_iov[0].iov_base) + left;
      message.msg_iov[0].iov_len -= left;
    }
  }
  if (reply != nullptr) pending_.emplace(unique, *reply);
  return absl::OkStatus();
}

void BackendChannel::ArmRecv() {
  io_uring_sqe* sqe = io_uring_get_sqe(ring_);
  if (sqe == nullptr) {
    io_uring_submit(ring_);
    sqe = io_uring_get_sqe(ring_);
  }
  if (mode_ == RecvMode::kDirect) {
    io_uring_prep_recv(sqe, fd_.get(), current_reply_.body + current_received_,
                       current_body_ - current_received_, 0);
  } else {
    io_uring_prep_recv(sqe, fd_.get(), staging_.data() + staging_end_,
                       staging_.size() - staging_end_, 0);
  }
  io_uring_sqe_set_data64(sqe, Tag());
  recv_outstanding_ = true;
}

void BackendChannel::OnCompletion(uint64_t user_data, int res) {
  uint32_t generation = static_cast<uint32_t>(user_data >> 32) & kGenerationMask;
  if (generation != (generation_ & kGenerationMask)) {
    // The last receive of a connection that already failed: its buffer is ours again.
    auto it = retired_.find(generation);
    if (it != retired_.end()) {
      if (it->second.has_orphan) {
        Answer(it->second.orphan.slot, it->second.orphan_unique, -EIO, 0);
      }
      retired_.erase(it);
    }
    return;
  }
  recv_outstanding_ = false;
  if (res == -EINTR || res == -EAGAIN) {
    ArmRecv();
    return;
  }
  if (res <= 0) {
    Fail(EIO, res == 0 ? std::string("server closed the connection")
                       : absl::StrFormat("receive from server failed: %s", std::strerror(-res)));
    return;
  }
  if (mode_ == RecvMode::kDirect) {
    current_received_ += static_cast<size_t>(res);
    if (current_received_ < current_body_) {
      ArmRecv();
      return;
    }
    FinishReply();
    mode_ = RecvMode::kStaging;
    staging_begin_ = staging_end_ = 0;
    ArmRecv();
    return;
  }
  staging_end_ += static_cast<size_t>(res);
  ParseStaging();
}

void BackendChannel::ParseStaging() {
  while (staging_end_ - staging_begin_ >= sizeof(fuse_out_header)) {
    fuse_out_header header;
    std::memcpy(&header, staging_.data() + staging_begin_, sizeof(header));
    if (!BeginReply(header)) return;  // the connection was failed
    staging_begin_ += sizeof(header);
    size_t take = std::min(staging_end_ - staging_begin_, current_body_);
    if (take > 0) std::memcpy(current_reply_.body, staging_.data() + staging_begin_, take);
    staging_begin_ += take;
    current_received_ = take;
    if (current_received_ < current_body_) {
      // The rest of a large body goes straight into the request's own buffer.
      staging_begin_ = staging_end_ = 0;
      mode_ = RecvMode::kDirect;
      ArmRecv();
      return;
    }
    FinishReply();
  }
  size_t left = staging_end_ - staging_begin_;
  if (left > 0 && staging_begin_ > 0) {
    std::memmove(staging_.data(), staging_.data() + staging_begin_, left);
  }
  staging_begin_ = 0;
  staging_end_ = left;
  mode_ = RecvMode::kStaging;
  ArmRecv();
}

bool BackendChannel::BeginReply(const fuse_out_header& header) {
  if (header.len < sizeof(fuse_out_header) ||
      header.len > sizeof(fuse_out_header) + wire::kMaxFrameBytes) {
    Fail(EIO, absl::StrFormat("invalid reply length %u", header.len));
    return false;
  }
  auto it = pending_.find(header.unique);
  if (it == pending_.end()) {
    Fail(EIO, absl::StrFormat("reply for unknown request %u", header.unique));
    return false;
  }
  size_t body = header.len - sizeof(fuse_out_header);
  const PendingReply& expect = it->second;
  bool valid = header.error <= 0 && header.error > -512 &&
               (header.error == 0 ? TrailerBytes(expect, body) >= 0 && body <= expect.capacity
                                  : body == 0);
  if (!valid) {
    Fail(EIO, absl::StrFormat("invalid reply to %s request %u: error %d, %u body bytes",
                              std::string(fuse::OpName(expect.opcode)), header.unique,
                              header.error, body));
    return false;
  }
  current_ = header;
  current_reply_ = expect;
  current_body_ = body;
  current_received_ = 0;
  pending_.erase(it);
  return true;
}

void BackendChannel::FinishReply() {
  size_t body = current_.error == 0 ? TakeTrailers() : current_body_;
  Answer(current_reply_.slot, current_.unique, current_.error, body);
}

long BackendChannel::TrailerBytes(const PendingReply& expect, size_t body) const {
  if (body >= expect.min_body && body <= expect.max_body) return 0;
  // Only fixed-size replies carry trailers, so the plain body ends at max_body.
  if (!dir_attrs_on_ || !wire::CarriesDirAttrs(expect.opcode) || body < expect.max_body) return -1;
  size_t extra = body - expect.max_body;
  if (extra % sizeof(wire::DirAttrTrailer) != 0 ||
      extra > wire::kMaxDirAttrTrailers * sizeof(wire::DirAttrTrailer)) {
    return -1;
  }
  return static_cast<long>(extra);
}

size_t BackendChannel::TakeTrailers() {
  long extra = TrailerBytes(current_reply_, current_body_);
  if (extra <= 0) return current_body_;
  size_t plain = current_body_ - static_cast<size_t>(extra);
  const uint64_t now_ns = MonotonicNs();
  for (size_t at = plain; at < current_body_; at += sizeof(wire::DirAttrTrailer)) {
    wire::DirAttrTrailer trailer;
    std::memcpy(&trailer, current_reply_.body + at, sizeof(trailer));
    config_.dir_attrs->Offer(trailer.nodeid, trailer.attr, now_ns);
  }
  return plain;
}

void BackendChannel::Answer(uint32_t slot, uint64_t unique, int error, size_t body_size) {
  fuse_out_header header{};
  header.len = static_cast<uint32_t>(sizeof(header) + body_size);
  header.error = error;
  header.unique = unique;
  sink_->OnReply(slot, header, body_size);
}

void BackendChannel::Fail(int err, std::string_view why) {
  RINGFS_LOG_WARN("queue %u: connection to %s lost (%s); %u requests in flight answered with %s",
                  config_.queue, config_.address.text, why, pending_.size(),
                  std::strerror(err));
  if (fd_.valid() && recv_outstanding_) {
    Retired& retired = retired_[generation_ & kGenerationMask];
    if (mode_ == RecvMode::kDirect) {
      retired.has_orphan = true;
      retired.orphan = current_reply_;
      retired.orphan_unique = current_.unique;
    } else {
      retired.staging = std::move(staging_);
      staging_.assign(kStagingBytes, 0);
    }
  } else if (mode_ == RecvMode::kDirect) {
    Answer(current_reply_.slot, current_.unique, -err, 0);
  }
  if (fd_.valid()) {
    shutdown(fd_.get(), SHUT_RDWR);
    fd_.Reset();
  }
  ++generation_;
  mode_ = RecvMode::kIdle;
  recv_outstanding_ = false;
  staging_begin_ = staging_end_ = 0;
  auto pending = std::move(pending_);
  pending_.clear();
  for (const auto& [unique, reply] : pending) Answer(reply.slot, unique, -err, 0);
}

}  // namespace ringfs::frontend
