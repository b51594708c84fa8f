// Tells systemd (or any service manager speaking its notify protocol) where a daemon stands:
// "READY=1" once it serves, "STOPPING=1" when it begins to stop. A unit of Type=notify then
// starts its dependents only when the export is listening or the mount answers. Outside such a
// unit ($NOTIFY_SOCKET unset) it does nothing.
#pragma once

#include <string>

namespace ringfs {

// `state`: newline-separated assignments (sd_notify(3)), e.g. "READY=1\nSTATUS=listening".
// Failures are logged, never fatal: the daemon works without its manager hearing of it.
void NotifyServiceManager(const std::string& state);

}  // namespace ringfs
