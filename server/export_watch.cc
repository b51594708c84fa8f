#include "server/export_watch.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/fanotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "common/log.h"
#include "common/status.h"

namespace ringfs::server {
namespace {

using wire::Invalidation;
using wire::InvalidationKind;

constexpr uint64_t kEntryEvents = FAN_CREATE | FAN_DELETE | FAN_MOVED_FROM | FAN_MOVED_TO;
constexpr uint64_t kNodeEvents = FAN_MODIFY | FAN_ATTRIB;

constexpr size_t kMaxResolved = 4096;

std::optional<InodeKey> KeyOfHandle(int mount_fd, const file_handle* handle) {
  // open_by_handle_at wants a writable, aligned struct of the handle's size.
  alignas(file_handle) char buf[sizeof(file_handle) + MAX_HANDLE_SZ];
  if (handle->handle_bytes > MAX_HANDLE_SZ) return std::nullopt;
  std::memcpy(buf, handle, sizeof(file_handle) + handle->handle_bytes);
  UniqueFd fd(open_by_handle_at(mount_fd, reinterpret_cast<file_handle*>(buf),
                                O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return std::nullopt;
  return InodeKey(st.st_dev, st.st_ino);
}

}  // namespace

ExportWatch::ExportWatch(std::string export_dir, const Coherence* coherence)
    : export_dir_(std::move(export_dir)), coherence_(coherence) {}

ExportWatch::~ExportWatch() { Stop(); }

absl::Status ExportWatch::Start() {
  mount_fd_.Reset(open(export_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!mount_fd_.valid()) return ErrnoError(errno, "export_watch: open export");
  fanotify_.Reset(fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK |
                                    FAN_REPORT_DFID_NAME | FAN_REPORT_FID,
                                O_RDONLY | O_LARGEFILE | O_CLOEXEC));
  if (!fanotify_.valid()) return ErrnoError(errno, "fanotify_init");
  if (fanotify_mark(fanotify_.get(), FAN_MARK_ADD | FAN_MARK_FILESYSTEM,
                    kEntryEvents | kNodeEvents | FAN_ONDIR, AT_FDCWD, export_dir_.c_str()) != 0) {
    return ErrnoError(errno, "fanotify_mark of the export's filesystem");
  }
  stop_.Reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop_.valid()) return ErrnoError(errno, "eventfd");
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void ExportWatch::Stop() {
  if (!thread_.joinable()) return;
  uint64_t one = 1;
  (void)!write(stop_.get(), &one, sizeof(one));
  thread_.join();
}

void ExportWatch::Loop() {
  alignas(fanotify_event_metadata) char buf[64 * 1024];
  while (true) {
    pollfd fds[2] = {{fanotify_.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      RINGFS_LOG_ERROR("export watch: poll: %s; changes on the server are no longer seen",
                       std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    while (true) {
      ssize_t n = read(fanotify_.get(), buf, sizeof(buf));
      if (n < 0) {
        if (errno != EAGAIN && errno != EINTR) {
          RINGFS_LOG_ERROR("export watch: read: %s", std::strerror(errno));
        }
        break;
      }
      Handle({buf, static_cast<size_t>(n)});
    }
  }
}

std::optional<InodeKey> ExportWatch::Resolve(const file_handle* handle) {
  if (handle->handle_bytes > MAX_HANDLE_SZ) return std::nullopt;
  std::string id(reinterpret_cast<const char*>(handle), sizeof(file_handle) + handle->handle_bytes);
  if (auto it = resolved_.find(id); it != resolved_.end()) return it->second;
  std::optional<InodeKey> key = KeyOfHandle(mount_fd_.get(), handle);
  if (!key) return std::nullopt;  // gone: not remembered
  if (resolved_.size() >= kMaxResolved) resolved_.clear();
  resolved_.emplace(std::move(id), *key);
  return key;
}

void ExportWatch::Handle(std::span<const char> events) {
  const pid_t self = getpid();
  const bool listened = coherence_->HasListeners();
  std::vector<Coherence::KeyedChange> changes;
  size_t at = 0;
  while (at + sizeof(fanotify_event_metadata) <= events.size()) {
    fanotify_event_metadata meta;
    std::memcpy(&meta, events.data() + at, sizeof(meta));
    if (meta.event_len < sizeof(meta) || at + meta.event_len > events.size()) break;
    const char* event = events.data() + at;
    at += meta.event_len;
    events_.fetch_add(1, std::memory_order_relaxed);
    if (meta.fd >= 0) close(meta.fd);  // not with FID reporting, but never leak one
    if (meta.mask & FAN_Q_OVERFLOW) {
      overflows_.fetch_add(1, std::memory_order_relaxed);
      // Which changes were lost is not known: every client drops all it caches.
      const size_t told = coherence_->PublishReset();
      RINGFS_LOG_WARN(
          "export watch: the kernel's event queue overflowed (more than "
          "/proc/sys/fs/fanotify/max_queued_events changes waited); %zu clients were "
          "told to drop their caches (older clients see the changes when their caches "
          "expire)",
          told);
      continue;
    }
    if (meta.pid == self) continue;  // a client's request: published by its worker
    if (!listened) continue;         // nobody caches anything
    // The info records: the directory and name (DFID_NAME) and the object itself (FID).
    std::optional<InodeKey> dir, node;
    std::string name;
    for (size_t off = meta.metadata_len; off + sizeof(fanotify_event_info_header) <= meta.event_len;) {
      fanotify_event_info_header header;
      std::memcpy(&header, event + off, sizeof(header));
      if (header.len < sizeof(fanotify_event_info_fid) || off + header.len > meta.event_len) break;
      const auto* fid = reinterpret_cast<const fanotify_event_info_fid*>(event + off);
      const auto* handle = reinterpret_cast<const file_handle*>(fid->handle);
      const size_t handle_end = sizeof(fanotify_event_info_fid) + sizeof(file_handle) +
                                handle->handle_bytes;
      if (handle_end <= header.len) {
        if (header.info_type == FAN_EVENT_INFO_TYPE_DFID_NAME) {
          dir = Resolve(handle);
          name.assign(event + off + handle_end, strnlen(event + off + handle_end,
                                                        header.len - handle_end));
        } else if (header.info_type == FAN_EVENT_INFO_TYPE_FID &&
                   (meta.mask & kNodeEvents) != 0) {
          node = Resolve(handle);
        }
      }
      off += header.len;
    }
    if ((meta.mask & kEntryEvents) != 0 && dir && !name.empty() && name != "." && name != "..") {
      // The name only, as for a client's create (ChangesOf): the directory's attributes go
      // stale with it in the receiving kernel.
      changes.push_back({*dir, Invalidation{InvalidationKind::kEntry, 0, -1, 0, name}});
    }
    if ((meta.mask & kNodeEvents) != 0 && node) {
      // A modify does not say which bytes: all of the file's cached data goes.
      const int64_t offset = (meta.mask & FAN_MODIFY) ? 0 : -1;
      changes.push_back({*node, Invalidation{InvalidationKind::kInode, 0, offset, 0, {}}});
    }
  }
  if (!changes.empty()) {
    published_.fetch_add(coherence_->PublishKeyed(changes), std::memory_order_relaxed);
  }
}

}  // namespace ringfs::server
