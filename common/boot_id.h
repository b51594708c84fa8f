// This host's boot id: a random UUID the kernel draws at every boot
// (/proc/sys/kernel/random/boot_id). Every container and network namespace of the host reads the
// same one; another host, or a VM on this one, reads another. A mount sends it in its hello
// (ClientHello.boot_id) so that the server tells a mount that shares its CPUs from a remote one
// whatever lies between them: a proxy on this host (a sidecar, `ssh -L`) that makes a remote
// client's address look local, or a container's own network namespace that makes a local one's
// look remote (server/cpu_placement.h).
#pragma once

#include <string>
#include <string_view>

namespace ringfs {

// The boot id as the kernel writes it (36 characters, no newline); empty when it cannot be read
// (no /proc). Read once; any thread.
const std::string& ThisBootId();

// The id from the text of the boot_id file: its first line, when it is a 36-character UUID;
// empty otherwise.
std::string ParseBootId(std::string_view text);

}  // namespace ringfs
