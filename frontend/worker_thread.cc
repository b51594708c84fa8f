#include "frontend/worker_thread.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <future>

#include "common/log.h"

namespace ringfs::frontend {

absl::Status StartWorkerThread(std::thread* thread, std::function<absl::Status()> setup,
                               std::function<void()> loop) {
  std::promise<absl::Status> started;
  std::future<absl::Status> result = started.get_future();
  *thread = std::thread([&started, setup = std::move(setup), loop = std::move(loop)] {
    absl::Status status = setup();
    bool ok = status.ok();
    started.set_value(std::move(status));  // `started` must not be touched after this
    if (ok) loop();
  });
  absl::Status status = result.get();
  if (!status.ok()) thread->join();
  return status;
}

}  // namespace ringfs::frontend
