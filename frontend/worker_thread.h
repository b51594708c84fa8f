// Helpers every frontend worker thread uses: start a thread that reports its setup status
// back to the starter, pin the calling thread to a CPU, and block process signals.
#pragma once

#include <sys/types.h>

#include <functional>
#include <thread>

#include "absl/status/status.h"

namespace ringfs::frontend {

// Runs `setup` then `loop` on a new thread; returns once `setup` has finished, with its status.
// On a setup error the thread ends without running `loop`.
absl::Status StartWorkerThread(std::thread* thread, std::function<absl::Status()> setup,
                               std::function<void()> loop);

// Pins the calling thread; false on failure (CPU offline, outside the process's cpuset), which is
// logged.
bool PinCurrentThread(int cpu);

// Makes thread `tid` of this process (0: the calling thread) SCHED_IDLE (`idle`) or
// SCHED_OTHER; false on failure, the first of which is logged unless the thread has ended
// (ESRCH). See
// queue::WorkerPriority for why ring workers are idle.
bool SetThreadIdle(pid_t tid, bool idle);

}  // namespace ringfs::frontend
