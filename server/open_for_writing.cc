#include "server/open_for_writing.h"

#include <fcntl.h>
#include <signal.h>

#include <mutex>

#include "server/thread_creds.h"

namespace ringfs::server {

bool OpenForWriting(int read_only_fd) {
  // A writer that opens the file while the lease is held makes the kernel signal this process
  // (SIGIO, whose default ends it) before it waits for the release.
  static std::once_flag ignore_break;
  std::call_once(ignore_break, [] { signal(SIGIO, SIG_IGN); });
  // A lease on a file the caller does not own needs CAP_LEASE, which acting as a caller drops.
  ServerCredsScope server;
  if (fcntl(read_only_fd, F_SETLEASE, F_RDLCK) != 0) return true;  // EAGAIN: open for writing
  (void)fcntl(read_only_fd, F_SETLEASE, F_UNLCK);
  return false;
}

}  // namespace ringfs::server
