// Which host a mount runs on, as its hello tells the server (ClientHello.host_id): a digest of
// the kernel's boot id, a random UUID drawn at every boot (/proc/sys/kernel/random/boot_id).
// Every container and network namespace of a host reads the same boot id; another host, or a VM
// on this one, reads another. So the server tells a mount that shares its CPUs from a remote one
// whatever lies between them: a proxy on this host (a sidecar, `ssh -L`) that makes a remote
// mount's address look local, or a container's own network namespace that makes a local one's
// look remote (server/cpu_placement.h). The digest, not the id: the id itself never leaves the
// host, and servers cannot link it to what else uses it.
#pragma once

#include <string>
#include <string_view>

namespace ringfs {

// This host's id: HostIdFromBootId of the boot id; empty when that cannot be read (no /proc).
// Read once; any thread.
const std::string& ThisHostId();

// 32 lowercase hex digits (128 bits of SHA-256 over a ringfs label and the boot id); empty for
// an empty boot id.
std::string HostIdFromBootId(std::string_view boot_id);

// The boot id from the text of the boot_id file: its first line, when it is a 36-character
// UUID; empty otherwise.
std::string ParseBootId(std::string_view text);

}  // namespace ringfs
