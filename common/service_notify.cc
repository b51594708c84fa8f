#include "common/service_notify.h"

#include <systemd/sd-daemon.h>

#include <cstring>

#include "common/log.h"

namespace ringfs {

void NotifyServiceManager(const std::string& state) {
  // unset_environment=0: STOPPING=1 follows READY=1 from the same process.
  int rc = sd_notify(0, state.c_str());
  if (rc < 0) RINGFS_LOG_WARN("cannot notify the service manager: %s", std::strerror(-rc));
}

}  // namespace ringfs
