#include "server/test_client.h"

#include <poll.h>
#include <sched.h>
#include <sys/socket.h>

#include <cerrno>

#include "common/auth_proof.h"
#include "common/net.h"
#include "common/status.h"
#include "common/wire.h"

namespace ringfs::server::testing {

TempDir::TempDir() {
  char pattern[] = "/tmp/ringfs-server-test-XXXXXX";
  if (mkdtemp(pattern) != nullptr) path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
}

std::string Frame(uint32_t opcode, uint64_t unique, uint64_t nodeid, const std::string& args,
                  uint32_t uid, uint32_t gid) {
  fuse_in_header header{};
  header.len = static_cast<uint32_t>(sizeof(header) + args.size());
  header.opcode = opcode;
  header.unique = unique;
  header.nodeid = nodeid;
  header.uid = uid;
  header.gid = gid;
  header.pid = 1;
  return Bytes(header) + args;
}

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return out;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) out.push_back(cpu);
  }
  return out;
}

wire::ClientHello DefaultHello(const std::string& client_id) {
  wire::ClientHello hello;
  hello.set_wire_version(wire::kWireVersion);
  hello.set_client_id(client_id);
  hello.set_export_name("/");
  hello.set_max_inflight(64);
  hello.set_max_frame_bytes(wire::kMaxFrameBytes);
  hello.set_fuse_minor(45);
  return hello;
}

absl::StatusOr<std::unique_ptr<TestClient>> TestClient::ConnectRaw(const std::string& address) {
  ASSIGN_OR_RETURN(SocketAddress parsed, ParseSocketAddress(address));
  ASSIGN_OR_RETURN(UniqueFd fd, ConnectTo(parsed, std::chrono::seconds(5)));
  return std::unique_ptr<TestClient>(new TestClient(std::move(fd)));
}

absl::StatusOr<std::unique_ptr<TestClient>> TestClient::Connect(const std::string& address,
                                                                const wire::ClientHello& hello,
                                                                wire::ServerHello* reply,
                                                                const std::string& secret) {
  ASSIGN_OR_RETURN(auto client, ConnectRaw(address));
  wire::ClientHello sent = hello;
  if (!secret.empty() && sent.client_nonce().empty()) {
    ASSIGN_OR_RETURN(std::string nonce, auth::DrawNonce());
    sent.set_client_nonce(nonce);
  }
  ASSIGN_OR_RETURN(std::string frame, wire::EncodeHandshake(sent));
  RETURN_IF_ERROR(client->Send(frame));
  RETURN_IF_ERROR(wire::ReceiveHandshake(client->fd(), reply));
  if (!reply->has_challenge()) return client;
  // The exchange of proto/wire_format.md section 1, written apart from the frontend's so each
  // checks the other.
  const std::string transcript =
      auth::Transcript(frame.substr(8), reply->challenge().server_nonce(), "");
  if (secret.empty() ||
      !auth::ProofEquals(reply->challenge().server_proof(), auth::ServerProof(secret, transcript))) {
    return absl::PermissionDeniedError("the server's proof is wrong (or no secret to check it)");
  }
  wire::ClientProof proof;
  proof.set_client_proof(auth::ClientProof(secret, transcript));
  RETURN_IF_ERROR(wire::SendHandshake(client->fd(), proof));
  reply->Clear();
  RETURN_IF_ERROR(wire::ReceiveHandshake(client->fd(), reply));
  return client;
}

absl::Status TestClient::Send(const std::string& bytes) {
  return SendAll(fd_.get(), bytes.data(), bytes.size(), std::chrono::seconds(10));
}

absl::StatusOr<Reply> TestClient::Receive(std::chrono::milliseconds timeout) {
  Reply reply;
  RETURN_IF_ERROR(ReceiveAll(fd_.get(), &reply.header, sizeof(reply.header), timeout));
  if (reply.header.len < sizeof(reply.header) || reply.header.len > (2u << 20)) {
    return absl::DataLossError("bad reply length");
  }
  reply.body.resize(reply.header.len - sizeof(reply.header));
  RETURN_IF_ERROR(ReceiveAll(fd_.get(), reply.body.data(), reply.body.size(), timeout));
  return reply;
}

absl::StatusOr<Reply> TestClient::Call(const std::string& frame) {
  RETURN_IF_ERROR(Send(frame));
  fuse_in_header in{};
  std::memcpy(&in, frame.data(), sizeof(in));
  ASSIGN_OR_RETURN(Reply reply, Receive());
  if (reply.header.unique != in.unique) return absl::InternalError("reply to another unique");
  return reply;
}

bool TestClient::WaitClosed(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_.get(), POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    ssize_t n = recv(fd_.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0) return true;
    if (n < 0 && errno != EAGAIN && errno != EINTR) return true;
  }
}

}  // namespace ringfs::server::testing
