// Which worker serves a connection from this host, and on which CPU. With as many workers as
// CPUs the process may use (the default), worker i belongs to the i-th of them. A connection
// from a mount on this host goes to the worker of the CPU of the mount's kernel queue
// (ClientHello.queue is that CPU), which pins itself there while it serves such a connection:
// the caller, the mount's ring worker and the server's worker share one CPU and no request
// crosses to another, a cross-CPU wake-up being what a small request costs most (README, "A
// server on the same host"). Connections from elsewhere are spread round robin (another
// host's CPU numbers say nothing about ours), and a worker serving only those is not pinned.
// Nor is one while it moves bulk data (Worker::JudgeWindow: large requests at a high rate),
// whose cost is copying at both ends, which one CPU would serialise.
// Immutable after Plan(); any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ringfs::server {

class CpuPlacement {
 public:
  // Pins nothing unless `pin` is set and the process may run on exactly `workers` CPUs.
  static CpuPlacement Plan(uint32_t workers, bool pin);

  // The CPU of worker `worker`; -1: none.
  int cpu(uint32_t worker) const;
  // The worker of CPU `cpu`, if any.
  std::optional<uint32_t> WorkerOn(uint32_t cpu) const;
  // For the startup log: where the workers run and why.
  const std::string& description() const { return description_; }

 private:
  std::vector<int> cpus_;  // by worker; empty: none pinned
  std::string description_;
};

// Whether the client of connection `fd` runs on this host. By the host id it sent, if any
// (ClientHello.host_id, common/host_id.h): what any address between them says does not count.
// Else (older clients) by PeerIsLocal.
bool ClientIsLocal(int fd, std::string_view client_host_id);

// Whether the peer of the connected socket `fd` runs on this host: a Unix socket, or a TCP
// peer whose address is the local end's or a loopback one (IPv4-mapped included). A proxy on
// this host (a sidecar, ssh -L) makes a remote client look local, which the host id settles.
bool PeerIsLocal(int fd);

}  // namespace ringfs::server
