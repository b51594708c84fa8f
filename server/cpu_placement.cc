#include "server/cpu_placement.h"

#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>

#include <cstring>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/host_id.h"
#include "common/log.h"

namespace ringfs::server {

CpuPlacement CpuPlacement::Plan(uint32_t workers, bool pin) {
  CpuPlacement placement;
  if (!pin) {
    placement.description_ = "workers unpinned (--no-pin-workers)";
    return placement;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    placement.description_ =
        absl::StrFormat("workers unpinned: sched_getaffinity: %s", std::strerror(errno));
    return placement;
  }
  std::vector<int> allowed;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) allowed.push_back(cpu);
  }
  if (allowed.size() != workers) {
    placement.description_ =
        absl::StrFormat("workers unpinned: %u workers for %u usable CPUs (placed only one per CPU)",
                        workers, allowed.size());
    return placement;
  }
  placement.cpus_ = std::move(allowed);
  placement.description_ =
      absl::StrFormat("a mount on this host is served on its queue's CPU (worker i on CPU %s)",
                      absl::StrJoin(placement.cpus_, ","));
  return placement;
}

int CpuPlacement::cpu(uint32_t worker) const { return worker < cpus_.size() ? cpus_[worker] : -1; }

std::optional<uint32_t> CpuPlacement::WorkerOn(uint32_t cpu) const {
  for (uint32_t i = 0; i < cpus_.size(); ++i) {
    if (cpus_[i] == static_cast<int>(cpu)) return i;
  }
  return std::nullopt;
}

bool ClientIsLocal(int fd, std::string_view client_host_id) {
  const std::string& ours = ThisHostId();
  if (!client_host_id.empty() && !ours.empty()) return client_host_id == ours;
  return PeerIsLocal(fd);
}

bool PeerIsLocal(int fd) {
  sockaddr_storage local{}, peer{};
  socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
      getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) {
    return false;
  }
  if (local.ss_family == AF_UNIX) return true;
  if (local.ss_family != peer.ss_family) return false;
  if (local.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(local);
    const auto& b = reinterpret_cast<const sockaddr_in&>(peer);
    return a.sin_addr.s_addr == b.sin_addr.s_addr ||
           (ntohl(b.sin_addr.s_addr) >> 24) == 127;  // 127.0.0.0/8 is this host
  }
  if (local.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(local);
    const auto& b = reinterpret_cast<const sockaddr_in6&>(peer);
    // ::ffff:127.x.y.z: an IPv4 loopback peer of a dual-stack listener.
    const bool mapped_loopback =
        IN6_IS_ADDR_V4MAPPED(&b.sin6_addr) && b.sin6_addr.s6_addr[12] == 127;
    return std::memcmp(&a.sin6_addr, &b.sin6_addr, sizeof(a.sin6_addr)) == 0 ||
           IN6_IS_ADDR_LOOPBACK(&b.sin6_addr) || mapped_loopback;
  }
  return false;
}

}  // namespace ringfs::server
