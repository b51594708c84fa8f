// Helpers every frontend worker thread uses: start a thread that reports its setup status
// back to the starter, pin the calling thread to a CPU, and block process signals.
#pragma once

#include <sys/types.h>

#include <functional>
#include <thread>

#include "absl/status/status.h"
#include "common/cpu_contention.h"

namespace ringfs::frontend {

// Runs `setup` then `loop` on a new thread; returns once `setup` has finished, with its status.
// On a setup error the thread ends without running `loop`.
absl::Status StartWorkerThread(std::thread* thread, std::function<absl::Status()> setup,
                               std::function<void()> loop);

// PinCurrentThread and SetThreadIdle: common/cpu_contention.h (the server's workers use them too).

}  // namespace ringfs::frontend
