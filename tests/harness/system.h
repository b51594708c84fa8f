// Host-level helpers for the integration tests: root and enable_uring checks, /proc/self/mountinfo,
// forced unmounts, the frontend's stats file, running a function as another user, loopback TCP
// (a free port, an HTTP GET).
// Thread-compatible free functions; ForceUnmount and the mount table readers may be called from
// the watchdog thread.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ringfs::testing {

// Directory of the built binaries (${CMAKE_BINARY_DIR}/bin), from a compile definition.
std::string BinDir();
std::string BinPath(const std::string& name);

::testing::AssertionResult CheckRoot();
// Writes 1/0 to /sys/module/fuse/parameters/enable_uring and reads it back.
::testing::AssertionResult SetUringEnabled(bool on);

struct MountEntry {
  std::string mount_point;
  std::string fstype;
  std::string source;
  unsigned dev_major = 0;
  unsigned dev_minor = 0;
};
std::vector<MountEntry> ReadMountInfo();
std::optional<MountEntry> FindMount(const std::string& mount_point);
bool IsMounted(const std::string& mount_point);

// Best effort, bounded: aborts the FUSE connection behind mount_point (fusectl), then lazily
// unmounts every mount stacked there (umount2 MNT_DETACH, then `fusermount3 -uz` if
// `allow_fork`). Returns what it did, for the test log.
std::string ForceUnmount(const std::string& mount_point, bool allow_fork = true);

// Pids (never our own) whose command line has an argument containing `needle`.
std::vector<pid_t> FindProcessesWithArg(const std::string& needle);

// The frontend's stats file: key=value lines.
using Stats = std::map<std::string, std::string>;
Stats ParseStats(const std::string& text);
std::optional<uint64_t> StatNumber(const Stats& stats, const std::string& key);

// Forks; the child drops every group, becomes gid then uid, runs fn and sends back its result
// ("" means success, anything else is a failure message). The parent waits up to `timeout`
// and returns the child's message or how it failed. fn must not use gtest assertions.
std::string RunAsUser(uid_t uid, gid_t gid, const std::function<std::string()>& fn,
                      std::chrono::seconds timeout = std::chrono::seconds(60));
// The same with supplementary `groups`.
std::string RunAsUserWithGroups(uid_t uid, gid_t gid, const std::vector<gid_t>& groups,
                                const std::function<std::string()>& fn,
                                std::chrono::seconds timeout = std::chrono::seconds(60));

// A TCP port on 127.0.0.1 that nothing listens on right now.
int UnusedLoopbackPort();

// HTTP GET http://127.0.0.1:port<path>: the body of a 200 answer, else "".
std::string HttpGet(int port, const std::string& path);

// Removes a directory tree without crossing into other filesystems (a forgotten mount
// inside is left alone rather than emptied). Returns false if something was left.
bool RemoveTree(const std::string& path);

}  // namespace ringfs::testing
