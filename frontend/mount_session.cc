#include "frontend/mount_session.h"

#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <thread>

#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/status.h"
#include "frontend/client_auth.h"
#include "frontend/cpu_list.h"
#include "frontend/fusectl.h"
#include "frontend/kernel_mount.h"

namespace ringfs::frontend {
namespace {

constexpr auto kProbeTimeout = std::chrono::seconds(10);
constexpr auto kStatsInterval = std::chrono::milliseconds(200);
// Reads from /dev/fuse must offer room for the largest WRITE plus headers.
constexpr size_t kDevFuseBufferBytes = kMaxWrite + 8192;
constexpr size_t kRingPayloadBytes = std::max<size_t>({fuse::kMinReadBuffer, kMaxWrite,
                                                       size_t{kMaxPages} * 4096});
// FORGET, INTERRUPT and the few requests sent before the ring is ready need little parallelism.
constexpr uint32_t kSideChannelSlots = 4;
// How long the side channel waits after it read a FORGET before its next read (DevFuseWorker):
// at 20,000 unlinks a second about 20 forgets come as one BATCH_FORGET, and an INTERRUPT is
// late by at most this.
constexpr uint64_t kSideChannelForgetGatherNs = 1'000'000;

std::string MakeClientId(const std::string& mountpoint) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  auto now = std::chrono::system_clock::now().time_since_epoch().count();
  return absl::StrFormat("%s:%s:%d:%x", host, mountpoint, getpid(), now);
}

}  // namespace

MountSession::MountSession(MountOptions options, std::string token)
    : options_(std::move(options)), token_(std::move(token)) {
  client_id_ = MakeClientId(options_.mountpoint);
}

MountSession::~MountSession() {
  if (mounted_ && !ConnectionEnded()) {
    (void)UnmountFuse(options_.mountpoint, device_, fuse_fd_.get());
  }
  devfuse_workers_.clear();  // they end once the connection is gone
  if (engine_) engine_->Stop();
  if (notifier_) notifier_->Stop();
  if (page_drops_) page_drops_->Stop();
}

StatsSnapshot MountSession::Snapshot() const {
  std::vector<const WorkerStats*> devfuse;
  for (const auto& s : stats_) devfuse.push_back(s.get());
  if (engine_) {
    std::vector<const WorkerStats*> queues;
    for (size_t i = 0; i < engine_->topology().size(); ++i) queues.push_back(&engine_->stats(i));
    StatsSnapshot snapshot = SnapshotQueueEngine(engine_->topology(), queues, devfuse);
    std::vector<uint64_t> resident = engine_->ResidentBytesByQueue();
    for (size_t i = 0; i < snapshot.queues.size(); ++i) {
      snapshot.queues[i].ring_entries = engine_->EntriesOf(i);
      snapshot.queues[i].ring_memory_bytes = resident[i];
    }
    return WithMountCounters(std::move(snapshot));
  }
  // stats_[i] belongs to devfuse_workers_[i] (StartWorkers adds them in pairs).
  std::vector<std::pair<int, const WorkerStats*>> classic;
  for (size_t i = 0; i < devfuse_workers_.size() && i < stats_.size(); ++i) {
    classic.emplace_back(devfuse_workers_[i]->cpu(), stats_[i].get());
  }
  return WithMountCounters(SnapshotClassic(classic));
}

StatsSnapshot MountSession::WithMountCounters(StatsSnapshot snapshot) const {
  if (binding_) {
    snapshot.reclaims = binding_->reclaims();
    snapshot.reclaim_refused = binding_->reclaim_refused();
  }
  if (ledger_) {
    snapshot.held_nodes = ledger_->nodes();
    snapshot.held_open_files = ledger_->open_files();
  }
  snapshot.local_open_dirs = local_dirs_->open_count();
  if (notifier_) {
    KernelNotifier::Counters counters = notifier_->counters();
    snapshot.invalidations_written = counters.written;
    snapshot.invalidations_not_cached = counters.not_cached;
    snapshot.invalidations_repeated = counters.repeated;
    snapshot.invalidations_lost = counters.dropped;
    snapshot.cache_resets = counters.resets;
    snapshot.cache_resets_names_kept = counters.names_kept;
  }
  if (complete_dirs_) {
    snapshot.complete_dirs = complete_dirs_->dirs();
    snapshot.changes_unsettled = complete_dirs_->unsettled();
  }
  if (kept_entries_) {
    snapshot.kept_entries = kept_entries_->entries();
    snapshot.kept_lookups = kept_entries_->kept();
  }
  if (kept_pages_) snapshot.pages_kept = kept_pages_->kept();
  if (page_drops_) {
    snapshot.page_drops = page_drops_->written();
    snapshot.page_drops_put_off = page_drops_->retried();
  }
  if (async_removals_) {
    snapshot.async_unlinks = async_removals_->started();
    snapshot.async_unlink_failures = async_removals_->failed();
    snapshot.async_setattrs = async_removals_->setattrs_started();
    snapshot.async_setattr_failures = async_removals_->setattrs_failed();
    snapshot.async_setattrs_folded = async_removals_->setattrs_folded();
    snapshot.async_writes = async_removals_->writes_started();
    snapshot.noop_setattrs = async_removals_->noop_setattrs_answered();
    snapshot.async_write_failures = async_removals_->writes_failed();
  }
  return snapshot;
}

BackendConfig MountSession::MakeBackendConfig(uint32_t queue, uint32_t max_inflight) const {
  BackendConfig config;
  config.address = server_addresses_.front();
  config.client_id = client_id_;
  config.client_name =
      options_.client_name.empty() ? DefaultClientName() : options_.client_name;
  config.token = token_;
  config.queue = queue;
  config.fuse_minor = init_.minor == 0 ? fuse::kKernelMinor : init_.minor;
  config.max_inflight = max_inflight;
  const std::chrono::nanoseconds default_timeout =
      options_.invalidations ? std::chrono::nanoseconds(kCoherentCacheTimeout)
                             : std::chrono::nanoseconds(kUncoherentCacheTimeout);
  config.entry_timeout = options_.entry_timeout.value_or(default_timeout);
  config.attr_timeout = options_.attr_timeout.value_or(default_timeout);
  config.notifier = notifier_.get();
  config.xattrs = xattrs_.get();
  config.dirs = complete_dirs_.get();
  config.kept = kept_entries_.get();
  config.dir_ends = dir_ends_.get();
  config.local_dirs = options_.handleless_listings ? local_dirs_.get() : nullptr;
  config.direct_write_only = (init_.agreed_flags & FUSE_WRITEBACK_CACHE) == 0;
  config.writeback_cache = (init_.agreed_flags & FUSE_WRITEBACK_CACHE) != 0;
  config.async_dio = (init_.agreed_flags & FUSE_ASYNC_DIO) != 0;
  config.connect_timeout = options_.connect_timeout;
  config.dir_attrs = options_.dir_attrs ? dir_attr_cache_.get() : nullptr;
  config.write_attrs = options_.write_attrs;
  config.kept_pages = kept_pages_.get();
  config.page_drops = page_drops_.get();
  config.async = async_removals_.get();
  config.detach_releases = !options_.sync_release;
  config.request_timeout =
      options_.hard ? std::chrono::milliseconds(0) : options_.request_timeout;
  config.interrupts = interrupts_.get();
  config.ledger = ledger_.get();
  config.binding = binding_.get();
  config.tls = tls_;
  config.tls_name = options_.tls_name;
  return config;
}

absl::Status MountSession::Start() {
  for (const std::string& server : options_.servers) {
    ASSIGN_OR_RETURN(std::vector<SocketAddress> addresses, ResolveSocketAddresses(server));
    for (SocketAddress& address : addresses) server_addresses_.push_back(std::move(address));
  }
  if (server_addresses_.empty()) return absl::InvalidArgumentError("no server given");
  if (options_.tls) {
    ASSIGN_OR_RETURN(tls_, tls::Context::ForClient(
                               {options_.tls_ca, options_.tls_cert, options_.tls_key}));
  }
  {
    // Fail before mounting when no server can be reached or all refuse us: a mount that only
    // answers EIO helps nobody. The first that answers is where the channels start.
    absl::Status first_error;
    size_t reached = server_addresses_.size();
    for (size_t i = 0; i < server_addresses_.size() && reached == server_addresses_.size(); ++i) {
      BackendConfig probe_config = MakeBackendConfig(0, options_.queue_depth);
      probe_config.address = server_addresses_[i];
      absl::StatusOr<ServerSession> probe = ConnectToServer(probe_config);
      if (probe.ok()) {
        reached = i;
      } else {
        if (server_addresses_.size() > 1) {
          RINGFS_LOG_WARN("server %s: %s", server_addresses_[i].text, probe.status().message());
        }
        if (first_error.ok()) first_error = probe.status();
      }
    }
    if (reached == server_addresses_.size()) return first_error;
    if (options_.reclaim) ledger_ = std::make_unique<NodeLedger>();
    binding_ = std::make_unique<ServerBinding>(server_addresses_);
    binding_->SetCurrent(reached);
  }
  ASSIGN_OR_RETURN(bool detached, DetachDeadRingfsMount(options_.mountpoint));
  if (detached) {
    RINGFS_LOG_WARN("detached the dead ringfs mount on %s (its ringfs-mount was gone)",
                    options_.mountpoint);
  }
  ASSIGN_OR_RETURN(fuse_fd_, MountFuse({options_.source, options_.mountpoint,
                                        options_.read_only}));
  mounted_ = true;
  // The device identifies this mount for UnmountFuse; right after mount(2) the path holds it.
  if (absl::StatusOr<dev_t> device = MountedDevice(options_.mountpoint); device.ok()) {
    device_ = *device;
  } else {
    RINGFS_LOG_WARN("cannot find the new mount of %s in mountinfo: %s", options_.mountpoint,
                    device.status().message());
  }
  absl::Status status = Negotiate();
  if (status.ok() && options_.invalidations) status = StartNotifier();
  if (status.ok() && kept_pages_) status = StartPageDrops();
  if (status.ok()) status = StartWorkers();
  if (status.ok()) status = ProbeMount();
  if (notifier_) notifier_->Release();
  started_ = std::chrono::steady_clock::now();
  if (!status.ok()) {
    AbortConnection();
    (void)UnmountFuse(options_.mountpoint, device_);
    mounted_ = false;
    return status;
  }
  return absl::OkStatus();
}

absl::Status MountSession::Negotiate() {
  std::vector<char> buffer(kDevFuseBufferBytes);
  ssize_t n;
  do {
    n = read(fuse_fd_.get(), buffer.data(), buffer.size());
  } while (n < 0 && (errno == EINTR || errno == ENOENT));
  if (n < 0) return ErrnoError(errno, "read INIT from /dev/fuse");
  fuse_in_header in;
  if (static_cast<size_t>(n) < sizeof(in)) return absl::InternalError("short INIT request");
  std::memcpy(&in, buffer.data(), sizeof(in));
  if (in.opcode != FUSE_INIT) {
    return absl::InternalError(absl::StrFormat("expected INIT, kernel sent opcode %u", in.opcode));
  }
  fuse_init_in init{};
  std::memcpy(&init, buffer.data() + sizeof(in),
              std::min(sizeof(init), static_cast<size_t>(n) - sizeof(in)));
  absl::StatusOr<InitDecision> decision =
      NegotiateInit(init, {.transport = options_.transport,
                           .writeback_cache = options_.writeback_cache,
                           .uring_module_enabled = UringModuleParameterEnabled(),
                           .reduced_queues = options_.reduced_queues,
                           .async_dio = !options_.hard || options_.async_dio_on_hard});
  struct {
    fuse_out_header header;
    fuse::InitOut body;
  } reply{};
  reply.header.unique = in.unique;
  if (!decision.ok()) {
    reply.header.len = sizeof(reply.header);
    reply.header.error = -EPROTO;
    (void)!write(fuse_fd_.get(), &reply, sizeof(reply.header));
    return decision.status();
  }
  init_ = *decision;
  reply.header.len = sizeof(reply);
  reply.body = init_.reply;
  if (write(fuse_fd_.get(), &reply, sizeof(reply)) != static_cast<ssize_t>(sizeof(reply))) {
    return ErrnoError(errno, "write INIT reply");
  }
  if (options_.transport == Transport::kAuto && !init_.use_ring) {
    RINGFS_LOG_WARN("FUSE-over-io_uring unavailable (%s); using classic /dev/fuse",
                    init_.ring_unavailable_reason);
  }
  return absl::OkStatus();
}

absl::Status MountSession::StartPageDrops() {
  ASSIGN_OR_RETURN(UniqueFd clone, CloneFuseFd(fuse_fd_.get()));
  page_drops_ = std::make_unique<PageDrops>(std::move(clone), kept_pages_.get());
  page_drops_->Start();
  return absl::OkStatus();
}

absl::Status MountSession::StartNotifier() {
  ASSIGN_OR_RETURN(UniqueFd clone, CloneFuseFd(fuse_fd_.get()));
  // Absences are trusted as long as attributes: invalidations cover changes through ringfs.
  xattrs_ = std::make_unique<XattrAbsenceCache>(static_cast<uint64_t>(
      options_.attr_timeout.value_or(std::chrono::nanoseconds(kCoherentCacheTimeout)).count()));
  // With several servers (one distributed filesystem behind each) a name made through another
  // server reaches this one only by its export watch, which does not see other hosts' changes.
  if (options_.complete_dirs && options_.servers.size() <= 1) {
    // Known as long as a negative entry from the server would be.
    const auto lifetime = static_cast<uint64_t>(
        options_.entry_timeout.value_or(std::chrono::nanoseconds(kCoherentCacheTimeout)).count());
    // Listings are kept for as long as the names' dentries they came with (KeptListings), and
    // only where the mount answers OPENDIR itself.
    const bool keep_listings = options_.kept_listings && options_.handleless_listings;
    // 65,536 directories (about 10 MB with their history, besides the names' own bound): with
    // 4,096, the third extraction of a 2,000-directory tree within the lifetime found none known
    // complete, and every file it made cost a LOOKUP again.
    complete_dirs_ = std::make_unique<CompleteDirs>(lifetime, size_t{1} << 16, size_t{1} << 18,
                                                    keep_listings ? lifetime : 0);
    // It relies on CompleteDirs' count of unsettled name-space changes.
    if (options_.kept_entries) kept_entries_ = std::make_unique<KeptEntries>();
  }
  notifier_ = std::make_unique<KernelNotifier>(
      std::move(clone), options_.dir_attrs ? dir_attr_cache_.get() : nullptr, xattrs_.get(),
      complete_dirs_.get(), kept_entries_.get());
  if (ledger_) notifier_->set_held_nodes([ledger = ledger_.get()] { return ledger->NodeIds(); });
  if (options_.reset_names) {
    notifier_->set_submounts([device = device_]() -> absl::StatusOr<size_t> {
      if (device == 0) return absl::UnavailableError("the mount's device is not known");
      return MountsInside(device);
    });
  }
  notifier_->Hold();  // until ProbeMount has primed the root's attributes
  notifier_->Start();
  return absl::OkStatus();
}

absl::Status MountSession::StartWorkers() {
  ASSIGN_OR_RETURN(std::vector<int> cpus, PossibleCpus());
  auto add_devfuse = [&](int cpu, uint32_t slots, uint32_t queue, const char* role,
                         uint64_t forget_gather_ns) {
    ASSIGN_OR_RETURN(UniqueFd clone, CloneFuseFd(fuse_fd_.get()));
    DevFuseWorkerConfig config;
    config.fuse_fd = std::move(clone);
    config.cpu = cpu;
    config.slots = slots;
    config.buffer_bytes = kDevFuseBufferBytes;
    config.backend = MakeBackendConfig(queue, slots);
    config.role = role;
    config.forget_gather_ns = forget_gather_ns;
    stats_.push_back(std::make_unique<WorkerStats>(0));
    devfuse_workers_.push_back(
        std::make_unique<DevFuseWorker>(std::move(config), stats_.back().get()));
    return devfuse_workers_.back()->Start();
  };
  if (!init_.use_ring) {
    for (int cpu : cpus) {
      RETURN_IF_ERROR(add_devfuse(cpu, options_.queue_depth, cpu, "classic", 0));
    }
    return absl::OkStatus();
  }
  // The kernel keeps using /dev/fuse for FORGET and INTERRUPT: one small worker serves it.
  RETURN_IF_ERROR(add_devfuse(-1, kSideChannelSlots, cpus.size(), "devfuse side channel",
                              kSideChannelForgetGatherNs));
  ASSIGN_OR_RETURN(queue::Topology topology, queue::Topology::FromSysfs());
  queue::QueueConfig config = queue::DefaultQueueConfig(topology);
  for (const auto& [key, value] : options_.queue_options) {
    RETURN_IF_ERROR(queue::ParseQueueOption(key, value, &config));
  }
  // Without reduced queues the kernel uses the ring only once every possible CPU's queue has an
  // entry; those entries cost memory on CPUs that may never call (ring_memory.h).
  RINGFS_LOG_INFO("ring queues: %s",
                  init_.reduced_queues
                      ? "reduced to the active set (the kernel offers FUSE_URING_REDUCED_Q)"
                      : absl::StrFormat("one per possible CPU (%u; the kernel %s)",
                                        topology.size(),
                                        (init_.kernel_flags & fuse::kInitUringReducedQ) != 0
                                            ? "offers FUSE_URING_REDUCED_Q, ring_queues=all"
                                            : "does not offer FUSE_URING_REDUCED_Q"));
  QueueEngine::Entries entries{.depth = options_.queue_depth,
                               .initial_depth = options_.initial_depth,
                               .payload_bytes = kRingPayloadBytes,
                               .reduced_queues = init_.reduced_queues,
                               .return_idle_pages = options_.return_idle_pages};
  engine_ = std::make_unique<QueueEngine>(
      std::move(topology), fuse_fd_.get(), entries, [this](uint32_t queue) {
        BackendConfig config = MakeBackendConfig(queue, options_.queue_depth);
        config.probe_signals = true;
        return config;
      });
  return engine_->Start(config);
}

absl::Status MountSession::ProbeMount() {
  // Until every queue has an entry the kernel holds requests back; a statfs answered by the
  // server proves the whole path works. It runs on its own thread so a kernel that never
  // becomes ready cannot hang the mount command.
  // Then a stat primes the root's attributes, with invalidations held (StartNotifier). The
  // kernel makes the root inode from the mount options (rootmode=40000: no permission bits,
  // already stale) and asks for the real attributes at the first permission check; if an
  // INVAL_INODE of the root reaches it while that GETATTR is in flight, it drops the reply
  // (fuse_change_attributes: the inode's attr_version moved past the request's) and
  // generic_permission checks a non-root caller against mode 0000: EACCES, with no second try
  // (fuse_permission retries only when it has not just refreshed). Once primed, a dropped reply
  // leaves the root's last real attributes in place, like any other inode's.
  auto done = std::make_shared<std::promise<int>>();
  std::future<int> result = done->get_future();
  std::string path = options_.mountpoint;
  std::thread([done, path] {
    struct statfs info {};
    if (statfs(path.c_str(), &info) != 0) {
      done->set_value(errno);
      return;
    }
    struct stat root {};
    done->set_value(stat(path.c_str(), &root) == 0 ? 0 : errno);
  }).detach();
  if (result.wait_for(kProbeTimeout) != std::future_status::ready) {
    return absl::DeadlineExceededError(absl::StrFormat(
        "the mount did not answer within %d s (ring queues not ready?%s)",
        static_cast<int>(kProbeTimeout.count()),
        init_.reduced_queues ? " bit 43 was taken as FUSE_URING_REDUCED_Q; if this kernel "
                               "means another feature by it, mount with ring_queues=all"
                             : ""));
  }
  if (int err = result.get(); err != 0) return ErrnoError(err, "statfs/stat on the new mount");
  return absl::OkStatus();
}

dev_t MountSession::device() const {
  return device_ != 0 && fuse_fd_.valid() && ConnectionAlive(fuse_fd_.get()) ? device_ : 0;
}

void MountSession::AbortConnection() {
  const dev_t device = this->device();
  if (device == 0) {
    if (device_ != 0) RINGFS_LOG_INFO("the FUSE connection has ended already: nothing to abort");
    return;
  }
  if (absl::Status status = frontend::AbortConnection(device, fuse_fd_.get()); !status.ok()) {
    RINGFS_LOG_ERROR("cannot abort the FUSE connection: %s", status.ToString());
  }
}

bool MountSession::ConnectionEnded() const {
  // /dev/fuse readers end only when the kernel connection is gone (a read's ENODEV or
  // ECONNABORTED, or POLLERR); in ring mode the side channel is such a reader for the whole
  // mount.
  for (const auto& worker : devfuse_workers_) {
    if (!worker->finished()) return false;
  }
  return true;
}

void MountSession::Run() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  int stop_requests = 0;
  while (!ConnectionEnded()) {
    timespec wait{0, std::chrono::nanoseconds(kStatsInterval).count()};
    int sig = sigtimedwait(&signals, nullptr, &wait);
    if (sig > 0) {
      ++stop_requests;
      if (stop_requests == 1 && !ConnectionAlive(fuse_fd_.get())) {
        // Unmounted or aborted from outside: nothing of the path is ours to detach any more (a
        // new mount there may even have this mount's number).
        RINGFS_LOG_WARN(
            "signal %d: the FUSE connection has ended already (unmounted, or aborted through "
            "fusectl: then its dead mount may still be on %s; umount -l it, or the next "
            "ringfs-mount there detaches it); finishing what was answered early",
            sig, options_.mountpoint);
      } else if (stop_requests == 1) {
        RINGFS_LOG_INFO("signal %d: unmounting %s", sig, options_.mountpoint);
        absl::StatusOr<bool> unmounted = UnmountFuse(options_.mountpoint, device_, fuse_fd_.get());
        if (!unmounted.ok()) {
          RINGFS_LOG_ERROR("%s", unmounted.status().ToString());
        } else if (!*unmounted) {
          // Detached already (umount -l): the kernel ends the connection when the last file
          // open on it is closed, and whatever the path holds now is not ours.
          RINGFS_LOG_WARN(
              "%s no longer holds this mount (unmounted lazily?); serving its open "
              "files until the last is closed; signal again to abort them",
              options_.mountpoint);
        }
      } else {
        // The mount is busy (lazily detached) and the user insists: end it now.
        RINGFS_LOG_WARN("signal %d again: aborting the FUSE connection", sig);
        AbortConnection();
      }
    }
    // Ring workers leave SCHED_IDLE while other work keeps their CPU busy
    // (common/cpu_contention.h).
    if (engine_) engine_->WatchContention();
    WriteStats();
  }
  for (auto& worker : devfuse_workers_) worker->Join();
  if (engine_) engine_->Stop();
  if (notifier_) notifier_->Stop();  // the connection is gone: a pending write fails at once
  if (page_drops_) page_drops_->Stop();
  mounted_ = false;
  WriteStats();
  const WorkerCounters total = Snapshot().Total();
  RINGFS_LOG_INFO("unmounted %s: %u requests over the ring, %u over /dev/fuse",
                  options_.mountpoint, total.ring_requests, total.devfuse_requests);
}

void MountSession::WriteStats() const {
  if (options_.stats_file.empty()) return;
  const StatsSnapshot snapshot = Snapshot();
  const WorkerCounters total = snapshot.Total();
  // INIT was read before any worker existed; count it so devfuse_requests is complete.
  std::string text = absl::StrFormat(
      "transport=%s\nring_requests=%u\ndevfuse_requests=%u\nforgets=%u\nfailures=%u\n"
      "replies=%u\nanswered_locally=%u\nqueues=%u\nreclaims=%u\nreclaim_refused=%u\n"
      "held_nodes=%u\nheld_open_files=%u\nlocal_open_dirs=%u\ninvalidations=%u\n"
      "invalidations_not_cached=%u\n"
      "async_unlinks=%u\n"
      "async_unlink_failures=%u\nasync_setattrs=%u\nasync_setattr_failures=%u\n"
      "async_setattrs_folded=%u\nasync_writes=%u\nasync_write_failures=%u\nnoop_setattrs=%u\n"
      "pages_kept=%u\npage_drops=%u\npage_drops_put_off=%u\n",
      init_.use_ring ? "uring" : "classic", total.ring_requests, total.devfuse_requests + 1,
      total.forgets, total.TotalFailures(), total.replies, total.answered_locally,
      snapshot.queues.size(), snapshot.reclaims, snapshot.reclaim_refused, snapshot.held_nodes,
      snapshot.held_open_files, snapshot.local_open_dirs, snapshot.invalidations_written,
      snapshot.invalidations_not_cached, snapshot.async_unlinks, snapshot.async_unlink_failures,
      snapshot.async_setattrs, snapshot.async_setattr_failures, snapshot.async_setattrs_folded,
      snapshot.async_writes, snapshot.async_write_failures, snapshot.noop_setattrs,
      snapshot.pages_kept, snapshot.page_drops, snapshot.page_drops_put_off);
  if (snapshot.queue_engine) {
    // Per-worker counters of the queue engine, `worker.<cpu>.<name>=<value>`.
    static const char* const kStateNames[] = {"stopped", "active", "retiring"};
    for (const QueueSnapshot& q : snapshot.queues) {
      const WorkerCounters& w = q.worker;
      auto line = [&](const char* name, uint64_t value) {
        text += absl::StrFormat("worker.%d.%s=%u\n", q.cpu, name, value);
      };
      text += absl::StrFormat("worker.%d.state=%s\n", q.cpu,
                              kStateNames[static_cast<uint32_t>(w.state) % 3]);
      line("forwarded", w.forwarded);
      line("forwarded_foreground", w.forwarded_foreground);
      line("forwarded_background", w.forwarded_background);
      line("inflight", w.inflight);
      line("background_inflight", w.background_inflight);
      line("background_queued", w.background_queued);
      line("background_inflight_max", w.background_inflight_max);
      line("background_limit", w.background_limit);
      line("handoffs_in", w.handoffs_in);
      line("handoffs_out", w.handoffs_out);
      line("entries_held", w.entries_held);
      line("sched_idle", w.sched_idle);
      line("entries_added", w.entries_added);
      line("payload_trims", w.payload_trims);
      line("ring_requests", w.ring_requests);
      // Of the queue (qid = this CPU), wherever its entries are held.
      line("ring_entries", q.ring_entries);
      line("ring_memory_bytes", q.ring_memory_bytes);
    }
  }
  std::string temporary = options_.stats_file + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << text;
    if (!out) return;
  }
  rename(temporary.c_str(), options_.stats_file.c_str());
}

MountDescription MountSession::description() const {
  MountDescription d;
  d.source = options_.source;
  d.mountpoint = options_.mountpoint;
  d.server = options_.server;
  d.transport = init_.use_ring ? "uring" : "classic";
  d.client_id = client_id_;
  d.fuse_minor = init_.minor;
  d.fuse_flags = init_.agreed_flags;
  d.queue_depth = options_.queue_depth;
  d.initial_depth = init_.use_ring ? options_.initial_depth : options_.queue_depth;
  d.ring_queues = !init_.use_ring          ? ""
                  : init_.reduced_queues   ? "reduced"
                                           : "all-possible";
  d.started = started_;
  return d;
}

std::string MountSession::Describe() const {
  size_t queues = engine_ ? engine_->topology().size() : devfuse_workers_.size();
  return absl::StrFormat(
      "mounted %s on %s: transport=%s, %u queues x %u requests, FUSE 7.%u",
      options_.source, options_.mountpoint, init_.use_ring ? "uring" : "classic", queues,
      options_.queue_depth, init_.minor);
}

}  // namespace ringfs::frontend
