#include "server/open_for_writing.h"

#include <fcntl.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <mutex>

#include "common/log.h"
#include "server/thread_creds.h"

namespace ringfs::server {

bool OpenForWriting(int read_only_fd) {
  // A writer that opens the file while the lease is held makes the kernel signal this process
  // (SIGIO, whose default ends it) before it waits for the release.
  static std::once_flag ignore_break;
  std::call_once(ignore_break, [] { signal(SIGIO, SIG_IGN); });
  // A lease on a file the caller does not own needs CAP_LEASE, which acting as a caller drops.
  ServerCredsScope server;
  if (fcntl(read_only_fd, F_SETLEASE, F_RDLCK) != 0) {
    // EAGAIN: open for writing. Anything else: no leases here, so no open gets a record.
    if (errno != EAGAIN) {
      static std::atomic<bool> told{false};
      if (!told.exchange(true)) {
        RINGFS_LOG_WARN(
            "read leases are not available on the export (errno %d: the filesystem refuses "
            "them, fs.leases-enable is 0, or the server lacks CAP_LEASE): opens carry no "
            "record of their file, and mounts with kept_pages read every file again",
            errno);
      }
    }
    return true;
  }
  (void)fcntl(read_only_fd, F_SETLEASE, F_UNLCK);
  return false;
}

}  // namespace ringfs::server
