#include "server/handle_key.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/status.h"
#include "common/unique_fd.h"

namespace ringfs::server {
namespace {

absl::StatusOr<std::string> RandomKey() {
  std::string key(kHandleKeyBytes, '\0');
  size_t filled = 0;
  while (filled < key.size()) {
    ssize_t n = getrandom(key.data() + filled, key.size() - filled, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoError(errno, "getrandom for the handle key");
    filled += static_cast<size_t>(n);
  }
  return key;
}

absl::Status WriteAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(errno, "write handle key");
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) return ErrnoError(errno, "fsync handle key");
  return absl::OkStatus();
}

// Writes the key under a private temporary name (O_CREAT|O_EXCL, 0600) and publishes it with
// link(2), which fails with EEXIST if the name exists: a server starting at the same moment
// never reads a key file that is still being written, and the first one to link wins.
absl::StatusOr<std::string> CreateKeyFile(const std::string& path) {
  const std::string temp = absl::StrFormat("%s.new-%d-%d", path, getpid(), gettid());
  UniqueFd fd(open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return ErrnoError(errno, absl::StrFormat("create handle key '%s'", temp));
  absl::StatusOr<std::string> key = RandomKey();
  absl::Status written = key.ok() ? WriteAll(fd.get(), *key) : key.status();
  if (written.ok() && link(temp.c_str(), path.c_str()) != 0) {
    written = ErrnoError(errno, absl::StrFormat("create handle key '%s'", path));
  }
  unlink(temp.c_str());
  RETURN_IF_ERROR(written);
  RINGFS_LOG_INFO("created handle key '%s' (%u random bytes); servers of this export must share "
                  "it to reclaim each other's node handles",
                  path, key->size());
  return key;
}

absl::StatusOr<std::string> ReadKeyFile(const std::string& path, int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return ErrnoError(errno, absl::StrFormat("stat '%s'", path));
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrFormat("handle key '%s' is not a regular file", path));
  }
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "handle key '%s' has mode %04o: group and others must have no access (chmod 600)", path,
        st.st_mode & 07777));
  }
  if (st.st_size < static_cast<off_t>(kHandleKeyBytes) || st.st_size > 4096) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "handle key '%s' holds %d bytes; it must hold %u to 4096 random bytes", path, st.st_size,
        kHandleKeyBytes));
  }
  std::string key(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < key.size()) {
    ssize_t n = pread(fd, key.data() + done, key.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(errno, absl::StrFormat("read handle key '%s'", path));
    if (n == 0) return absl::FailedPreconditionError("handle key shrank while read");
    done += static_cast<size_t>(n);
  }
  return key;
}

}  // namespace

absl::StatusOr<std::string> LoadOrCreateHandleKey(const std::string& path) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
    if (fd.valid()) return ReadKeyFile(path, fd.get());
    if (errno == ELOOP) {
      return absl::FailedPreconditionError(absl::StrFormat("handle key '%s' is a symlink", path));
    }
    if (errno != ENOENT) return ErrnoError(errno, absl::StrFormat("open handle key '%s'", path));
    absl::StatusOr<std::string> created = CreateKeyFile(path);
    // Another server of the export created it first: read theirs.
    if (!created.ok() && ToErrno(created.status()) == EEXIST) continue;
    return created;
  }
  return absl::FailedPreconditionError(absl::StrFormat("handle key '%s' keeps vanishing", path));
}

absl::StatusOr<std::string> HandleKeyForServer(const std::string& path, bool explicit_path) {
  if (path.empty()) return RandomKey();
  if (explicit_path) return LoadOrCreateHandleKey(path);
  const std::string dir = std::filesystem::path(path).parent_path();
  if (!dir.empty() && mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    RINGFS_LOG_WARN("cannot create '%s' for the handle key (%s): using a key for this process "
                    "only; node handles will not survive a restart (set --handle-key)",
                    dir, std::strerror(errno));
    return RandomKey();
  }
  absl::StatusOr<std::string> key = LoadOrCreateHandleKey(path);
  if (key.ok()) return key;
  const int err = ToErrno(key.status());
  if (err == EACCES || err == EPERM || err == EROFS) {
    RINGFS_LOG_WARN("cannot use the default handle key (%s): using a key for this process only; "
                    "node handles will not survive a restart (set --handle-key)",
                    key.status().message());
    return RandomKey();
  }
  return key;
}

}  // namespace ringfs::server
