// Two mounts of one server (issue 13): a change made through mount A is seen through mount B,
// whose kernel has the old state cached for 60 s, because the server pushes B an invalidation.
// A third mount with no_invalidations (same 60 s timeouts) is the control: it must still show
// the old state, so a pass here cannot come from expired caches. Each change's latency (from A's
// syscall returning to B seeing it) is printed; the target is 50 ms, checked by the
// bench-like report rather than asserted (VMs drift), while the test asserts visibility well
// within the cache timeout. Fault cases: B stopped (SIGSTOP) while A changes thousands of files,
// B killed, and a warm stat pass that sends nothing to the server.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/harness/ringfs_test.h"

namespace ringfs::testing {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kSeenWithin = std::chrono::seconds(5);  // far below the 60 s cache timeout

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool WriteFile(const std::string& path, const std::string& data, int flags = O_TRUNC) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | flags, 0644);
  if (fd < 0) return false;
  bool ok = write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
  return close(fd) == 0 && ok;
}

struct Stat {
  bool exists = false;
  off_t size = 0;
  mode_t mode = 0;
  int64_t mtime_ns = 0;
  nlink_t nlink = 0;
};

Stat StatOf(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return {};
  return {true, st.st_size, st.st_mode & 07777,
          st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec, st.st_nlink};
}

std::string XattrOf(const std::string& path, const char* name) {
  char buf[256];
  ssize_t n = getxattr(path.c_str(), name, buf, sizeof(buf));
  return n < 0 ? std::string() : std::string(buf, n);
}

// Polls `seen` until true or kSeenWithin; returns the latency, or -1 ms when never seen.
std::chrono::microseconds WaitSeen(const std::function<bool()>& seen) {
  const auto start = Clock::now();
  while (Clock::now() - start < kSeenWithin) {
    if (seen()) {
      return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return std::chrono::microseconds(-1);
}

// The names a listing of `dir` shows, by getdents only (no stat of the directory).
std::set<std::string> ListedNames(const std::string& dir) {
  std::set<std::string> out;
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return out;
  alignas(8) char buf[4096];
  for (long n; (n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0;) {
    for (long at = 0; at < n;) {
      const auto* d = reinterpret_cast<const struct dirent64*>(buf + at);
      out.insert(d->d_name);
      at += d->d_reclen;
    }
  }
  close(fd);
  return out;
}

// GetParam(): A's transport / B's transport.
class CoherenceTest : public RingfsTestBase,
                      public ::testing::WithParamInterface<std::pair<std::string, std::string>> {
 protected:
  void SetUp() override {
    RingfsTestBase::SetUp();
    ASSERT_TRUE(NewEnv());
    ServerOptions server;
    server.extra_args = {"--export-watch"};  // ChangesMadeOnTheExportDirectlyAreSeen
    ASSERT_TRUE(env_->StartServer(server));
    MountOptions a;
    a.transport = GetParam().first;
    ASSERT_TRUE(env_->Mount(a));
    b_ = MountAnother(GetParam().second, {});
    ASSERT_NE(b_, nullptr);
    // The control: no invalidations, the same long timeouts as A and B's defaults.
    control_ = MountAnother("uring", {"no_invalidations", "entry_timeout=60", "attr_timeout=60"});
    ASSERT_NE(control_, nullptr);
  }
  void TearDown() override {
    if (env_ && env_->server_process()) env_->server_process()->Signal(SIGCONT);
    for (auto* env : {&control_, &b_}) {
      if (*env) {
        (*env)->Teardown();
        EXPECT_EQ((*env)->teardown_notes(), "") << (*env)->final_logs();
        env->reset();
      }
    }
    RingfsTestBase::TearDown();
  }

  std::unique_ptr<RingfsEnv> MountAnother(const std::string& transport,
                                          std::vector<std::string> extra) {
    auto env = std::make_unique<RingfsEnv>();
    if (!env->Init()) return nullptr;
    MountOptions o;
    o.transport = transport;
    o.extra = std::move(extra);
    if (!env->Mount(o, env_->server_address())) return nullptr;
    if (!env->WaitMountServing()) return nullptr;
    return env;
  }

  std::string A(const std::string& rel) const { return env_->Mnt(rel); }
  std::string B(const std::string& rel) const { return b_->Mnt(rel); }
  std::string C(const std::string& rel) const { return control_->Mnt(rel); }

  // Records a latency for the summary line.
  void Note(const std::string& what, std::chrono::microseconds latency) {
    ASSERT_GE(latency.count(), 0) << what << ": the other mount never saw the change (" << kSeenWithin.count()
                                  << " s)\n" << env_->DescribeLogs();
    latencies_.emplace_back(what, latency);
  }

  void Report() {
    std::string line;
    std::chrono::microseconds worst{0};
    for (const auto& [what, latency] : latencies_) {
      line += what + " " + std::to_string(latency.count() / 1000.0).substr(0, 5) + " ms, ";
      worst = std::max(worst, latency);
    }
    std::printf("[ coherence ] %s -> %s: %sworst %.2f ms\n", GetParam().first.c_str(),
                GetParam().second.c_str(), line.c_str(), worst.count() / 1000.0);
    RecordProperty("worst_latency_us", static_cast<int>(worst.count()));
  }

  std::unique_ptr<RingfsEnv> b_;
  std::unique_ptr<RingfsEnv> control_;
  std::vector<std::pair<std::string, std::chrono::microseconds>> latencies_;
};

TEST_P(CoherenceTest, ChangesThroughOneMountAreSeenThroughTheOther) {
  ASSERT_EQ(mkdir(A("d").c_str(), 0755), 0);
  ASSERT_TRUE(WriteFile(A("d/file"), "old contents"));
  ASSERT_TRUE(WriteFile(A("d/gone"), "x"));
  ASSERT_TRUE(WriteFile(A("d/from"), "r"));
  // B and the control cache everything they will be asked about: attributes, data, entries
  // (positive and negative), xattrs.
  for (RingfsEnv* view : {b_.get(), control_.get()}) {
    auto at = [&](const char* rel) { return view->Mnt(rel); };
    ASSERT_TRUE(StatOf(at("d/file")).exists);
    ASSERT_EQ(Slurp(at("d/file")), "old contents");
    // Reading marks atime stale, and stat() then asks the server: take fresh attributes now.
    ASSERT_TRUE(StatOf(at("d/file")).exists);
    ASSERT_TRUE(StatOf(at("d/gone")).exists);
    ASSERT_TRUE(StatOf(at("d/from")).exists);
    ASSERT_FALSE(StatOf(at("d/new")).exists);  // a negative entry
    ASSERT_FALSE(StatOf(at("d/to")).exists);
    ASSERT_EQ(XattrOf(at("d/file"), "user.k"), "");
  }
  const Stat before = StatOf(B("d/file"));
  const Stat dir_before = StatOf(B("d"));

  // create
  ASSERT_TRUE(WriteFile(A("d/new"), "n"));
  Note("create", WaitSeen([&] { return StatOf(B("d/new")).exists; }));
  // unlink
  ASSERT_EQ(unlink(A("d/gone").c_str()), 0);
  Note("unlink", WaitSeen([&] { return !StatOf(B("d/gone")).exists; }));
  // rename
  ASSERT_EQ(rename(A("d/from").c_str(), A("d/to").c_str()), 0);
  Note("rename", WaitSeen([&] { return StatOf(B("d/to")).exists && !StatOf(B("d/from")).exists; }));
  // The directory's own attributes, after changes of names B never looked up (B's kernel holds
  // no dentry of them, so the entry invalidation alone does not reach the directory).
  ASSERT_TRUE(WriteFile(A("d/unseen"), "u"));
  Note("create-dir-mtime",
       WaitSeen([&] { return StatOf(B("d")).mtime_ns != dir_before.mtime_ns; }));
  ASSERT_EQ(mkdir(A("d/sub").c_str(), 0755), 0);
  Note("mkdir-dir-nlink", WaitSeen([&] { return StatOf(B("d")).nlink == dir_before.nlink + 1; }));
  // write: size, mtime and data (B read the old data into its page cache)
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // a distinct mtime
  ASSERT_TRUE(WriteFile(A("d/file"), "new contents, longer"));
  Note("write-size", WaitSeen([&] { return StatOf(B("d/file")).size == 20; }));
  Note("write-mtime", WaitSeen([&] { return StatOf(B("d/file")).mtime_ns != before.mtime_ns; }));
  Note("write-data", WaitSeen([&] { return Slurp(B("d/file")) == "new contents, longer"; }));
  // chmod
  ASSERT_EQ(chmod(A("d/file").c_str(), 0600), 0);
  Note("chmod", WaitSeen([&] { return StatOf(B("d/file")).mode == 0600; }));
  // setxattr
  ASSERT_EQ(setxattr(A("d/file").c_str(), "user.k", "v1", 2, 0), 0);
  Note("setxattr", WaitSeen([&] { return XattrOf(B("d/file"), "user.k") == "v1"; }));
  // truncate through B, seen through A (the other direction)
  ASSERT_EQ(truncate(B("d/file").c_str(), 3), 0);
  Note("truncate-back", WaitSeen([&] { return StatOf(A("d/file")).size == 3; }));
  Report();

  // The control still shows the state it cached: B's view came from the push. (Without
  // invalidations the server gives no negative entries, so the control sees d/new at once.)
  EXPECT_TRUE(StatOf(C("d/gone")).exists);
  EXPECT_TRUE(StatOf(C("d/from")).exists);
  EXPECT_EQ(StatOf(C("d/file")).size, static_cast<off_t>(std::string("old contents").size()));
  EXPECT_EQ(StatOf(C("d/file")).mode, 0644u);
}

// Regression (stale-directory-mode EACCES): d is 0700 in B's cache; A widens it to 0755 while
// another process keeps creating and removing names in d through A. Each of those name changes
// used to push B an INVAL_INODE of d, which makes B's kernel drop the GETATTR reply of d in
// flight (fuse_reverse_inval_inode bumps attr_version); fuse_permission does not refresh twice,
// so a non-root walk through B/d was checked against the stale 0700 (with 60 tries and the old
// server: 4 and 7 EACCES with a ring B, 0 with a classic B; 0 now).
TEST_P(CoherenceTest, AWidenedDirectoryIsEnteredWhileAnotherMountCreatesInIt) {
  constexpr uid_t kNobody = 65534;
  constexpr int kTries = 200;
  ASSERT_EQ(mkdir(A("d").c_str(), 0700), 0);
  ASSERT_TRUE(WriteFile(A("d/f"), "f"));
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    for (unsigned i = 0; !stop.load(std::memory_order_relaxed); ++i) {
      const std::string name = A("d/c" + std::to_string(i % 8));
      int fd = open(name.c_str(), O_CREAT | O_WRONLY, 0600);
      if (fd >= 0) close(fd);
      unlink(name.c_str());
    }
  });
  int denied = 0;
  std::string failures;
  for (int i = 0; i < kTries && failures.empty(); ++i) {
    ASSERT_EQ(chmod(A("d").c_str(), 0700), 0);
    if (WaitSeen([&] { return StatOf(B("d")).mode == 0700; }).count() < 0) {
      failures = "B never saw 0700";
      break;
    }
    ASSERT_EQ(chmod(A("d").c_str(), 0755), 0);
    // root's stat through B reports 0755 once B was told (even when B's kernel then dropped
    // that reply and kept 0700 cached: stat reports the reply it got).
    if (WaitSeen([&] { return StatOf(B("d")).mode == 0755; }).count() < 0) {
      failures = "B never saw 0755";
      break;
    }
    const std::string f = B("d/f");
    std::string result = RunAsUser(kNobody, kNobody, [&]() -> std::string {
      int fd = open(f.c_str(), O_RDONLY);
      if (fd >= 0) {
        close(fd);
        return "";
      }
      return errno == EACCES ? "EACCES" : std::string("open: ") + std::strerror(errno);
    });
    if (result == "EACCES") {
      ++denied;
    } else if (!result.empty()) {
      failures = result;
    }
  }
  stop = true;
  churn.join();
  EXPECT_EQ(failures, "");
  EXPECT_EQ(denied, 0) << "uid " << kNobody << " was denied B/d/f after d became 0755, in "
                       << denied << " of " << kTries << " tries";
}

// ringfs-mount answers the kernel's GETXATTR of security.capability itself for nodes known to
// have none (frontend/xattr_cache.h). A capability set through the same mount or another one
// must be seen at once all the same.
TEST_P(CoherenceTest, FileCapabilitiesAreNeverHiddenByTheAbsenceCache) {
  // vfs_cap_data revision 2: magic, then permitted/inheritable for capabilities 0-31 and 32-63;
  // CAP_NET_RAW (13) permitted.
  const uint32_t cap[5] = {0x02000000u, 1u << 13, 0, 0, 0};
  auto capability = [](const std::string& path) -> ssize_t {
    char buf[64];
    ssize_t n = getxattr(path.c_str(), "security.capability", buf, sizeof(buf));
    return n < 0 ? -errno : n;
  };
  // Through B: created (B learns it has no capability), written (the kernel's check before the
  // first write is answered by B), asked.
  ASSERT_TRUE(WriteFile(B("cap"), "x"));
  ASSERT_TRUE(WriteFile(B("cap"), "more", O_APPEND));
  ASSERT_EQ(capability(B("cap")), -ENODATA);
  // Set through A: B sees it.
  ASSERT_EQ(setxattr(A("cap").c_str(), "security.capability", cap, sizeof(cap), 0), 0)
      << strerror(errno);
  Note("setcap", WaitSeen([&] { return capability(B("cap")) == static_cast<ssize_t>(sizeof(cap)); }));
  // Set through B itself on a file it created: seen at once.
  ASSERT_TRUE(WriteFile(B("cap2"), "x"));
  ASSERT_EQ(capability(B("cap2")), -ENODATA);
  ASSERT_EQ(setxattr(B("cap2").c_str(), "security.capability", cap, sizeof(cap), 0), 0);
  EXPECT_EQ(capability(B("cap2")), static_cast<ssize_t>(sizeof(cap)));
  EXPECT_EQ(capability(A("cap2")), static_cast<ssize_t>(sizeof(cap)));
  // Removed through A: B sees the absence again.
  ASSERT_EQ(removexattr(A("cap2").c_str(), "security.capability"), 0);
  Note("removecap", WaitSeen([&] { return capability(B("cap2")) == -ENODATA; }));
}

// `ls -l` asks every file for security.selinux and system.posix_acl_access; ringfs-mount answers
// both from the absences it learned (frontend/xattr_cache.h). An ACL set through another mount,
// or through this one, must be seen all the same.
TEST_P(CoherenceTest, AnAclIsNeverHiddenByTheAbsenceCache) {
  auto acl_size = [](const std::string& path) -> ssize_t {
    char buf[256];
    ssize_t n = getxattr(path.c_str(), "system.posix_acl_access", buf, sizeof(buf));
    return n < 0 ? -errno : n;
  };
  auto answered_locally = [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(450));  // stats: every 200 ms
    return StatNumber(b_->ReadStats(), "answered_locally").value_or(0);
  };
  // An ACL beyond the mode (user 4242 may read), which the export's filesystem stores: version
  // 2, then (tag, perm, id) entries sorted by tag.
  struct Entry {
    uint16_t tag, perm;
    uint32_t id;
  };
  struct {
    uint32_t version = 2;
    Entry entries[5] = {
        {0x01, 6, ~0u}, {0x02, 4, 4242}, {0x04, 4, ~0u}, {0x10, 4, ~0u}, {0x20, 4, ~0u}};
  } acl;
  ASSERT_TRUE(WriteFile(B("acl"), "x"));
  ASSERT_EQ(acl_size(B("acl")), -ENODATA);  // learned by B
  const uint64_t before = answered_locally();
  ASSERT_EQ(acl_size(B("acl")), -ENODATA);
  char label[256];
  ASSERT_LT(lgetxattr(B("acl").c_str(), "security.selinux", label, sizeof(label)), 0);
  ASSERT_LT(lgetxattr(B("acl").c_str(), "security.selinux", label, sizeof(label)), 0);
  EXPECT_GE(answered_locally(), before + 2) << "ls -l's questions went to the server";
  // Set through A: B sees it.
  if (setxattr(A("acl").c_str(), "system.posix_acl_access", &acl, sizeof(acl), 0) != 0) {
    GTEST_SKIP() << "the export's filesystem takes no ACL: " << strerror(errno);
  }
  Note("setfacl",
       WaitSeen([&] { return acl_size(B("acl")) == static_cast<ssize_t>(sizeof(acl)); }));
  // Set through B itself on a file whose absence B learned: seen at once.
  ASSERT_TRUE(WriteFile(B("acl2"), "x"));
  ASSERT_EQ(acl_size(B("acl2")), -ENODATA);
  ASSERT_EQ(setxattr(B("acl2").c_str(), "system.posix_acl_access", &acl, sizeof(acl), 0), 0)
      << strerror(errno);
  EXPECT_EQ(acl_size(B("acl2")), static_cast<ssize_t>(sizeof(acl)));
  // Removed through A: B sees the absence again.
  ASSERT_EQ(removexattr(A("acl2").c_str(), "system.posix_acl_access"), 0) << strerror(errno);
  Note("removefacl", WaitSeen([&] { return acl_size(B("acl2")) == -ENODATA; }));
}

// A process on the storage node changes the export directly: the server's fanotify watch
// (server/export_watch.h) pushes the same invalidations a client's change would.
TEST_P(CoherenceTest, ChangesMadeOnTheExportDirectlyAreSeen) {
  ASSERT_EQ(mkdir(A("x").c_str(), 0755), 0);
  ASSERT_TRUE(WriteFile(A("x/file"), "old"));
  ASSERT_TRUE(WriteFile(A("x/gone"), "x"));
  for (RingfsEnv* view : {b_.get(), control_.get()}) {
    ASSERT_EQ(Slurp(view->Mnt("x/file")), "old");
    ASSERT_TRUE(StatOf(view->Mnt("x/file")).exists);
    ASSERT_TRUE(StatOf(view->Mnt("x/gone")).exists);
  }
  ASSERT_FALSE(StatOf(B("x/new")).exists);
  ASSERT_TRUE(WriteFile(env_->Exp("x/new"), "n"));
  Note("local-create", WaitSeen([&] { return StatOf(B("x/new")).exists; }));
  ASSERT_EQ(unlink(env_->Exp("x/gone").c_str()), 0);
  Note("local-unlink", WaitSeen([&] { return !StatOf(B("x/gone")).exists; }));
  ASSERT_EQ(chmod(env_->Exp("x/file").c_str(), 0600), 0);
  Note("local-chmod", WaitSeen([&] { return StatOf(B("x/file")).mode == 0600; }));
  ASSERT_TRUE(WriteFile(env_->Exp("x/file"), "new data"));
  Note("local-write", WaitSeen([&] { return Slurp(B("x/file")) == "new data"; }));
  Report();
  EXPECT_TRUE(StatOf(C("x/gone")).exists) << "the control mount must still show its cache";
  EXPECT_EQ(StatOf(C("x/file")).mode, 0644u);
}

// B lists a directory: the listing's answer brought the directory's attributes along (listing
// attrs, common/dir_attrs.h), kept to answer the GETATTR the kernel sends next. A change through
// A then must void them: B's stat shows the new mtime, never the one the listing saw.
TEST_P(CoherenceTest, ADirectoryListedThroughOneMountShowsChangesMadeThroughTheOther) {
  ASSERT_EQ(mkdir(A("l").c_str(), 0755), 0);
  ASSERT_TRUE(WriteFile(A("l/first"), "1"));
  auto list = [](const std::string& dir) {
    int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    alignas(8) char buf[4096];
    int names = 0;
    for (long n; (n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0;) {
      for (long at = 0; at < n; at += reinterpret_cast<struct dirent64*>(buf + at)->d_reclen) {
        ++names;
      }
    }
    close(fd);
    return names;
  };
  for (int round = 0; round < 3; ++round) {
    ASSERT_EQ(list(B("l")), 3 + round);
    const int64_t listed = StatOf(B("l")).mtime_ns;
    ASSERT_NE(listed, 0);
    ASSERT_EQ(list(B("l")), 3 + round) << "B holds the listing's record again";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // a later mtime
    ASSERT_TRUE(WriteFile(A("l/made" + std::to_string(round)), "m"));
    const int64_t now = StatOf(env_->Exp("l")).mtime_ns;
    ASSERT_NE(now, listed);
    Note("listed-dir-mtime", WaitSeen([&] { return StatOf(B("l")).mtime_ns == now; }));
    EXPECT_EQ(StatOf(B("l")).mtime_ns, now) << "round " << round;
  }
  Report();
}

// B keeps a directory's listing across opens (frontend/kept_listings.h). A name A makes in it,
// which B never looked up, reaches B's kernel as an entry invalidation that finds no dentry, so
// the kernel leaves the kept listing alone; and the directory's own invalidation that B's mount
// then writes is held back for a second after A's chmod of the directory (KernelNotifier),
// while B's kernel holds the directory's attributes fresh from after the chmod (its mtime check
// sees nothing). B's next opendir must list the name all the same.
TEST_P(CoherenceTest, AListingKeptByOneMountShowsNamesMadeThroughTheOther) {
  ASSERT_EQ(mkdir(A("k").c_str(), 0755), 0);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(WriteFile(A("k/f" + std::to_string(i)), "x"));
  const auto names = ListedNames;
  ASSERT_EQ(names(B("k")).size(), 12u);
  for (int round = 0; round < 3; ++round) {
    const unsigned mode = 0750 + round;
    ASSERT_EQ(chmod(A("k").c_str(), mode), 0);
    Note("kept-listing-chmod", WaitSeen([&] { return StatOf(B("k")).mode == mode; }));
    const std::set<std::string> before = names(B("k"));
    ASSERT_EQ(names(B("k")), before) << "kept";
    const std::string made = "made" + std::to_string(round);
    ASSERT_TRUE(WriteFile(A("k/" + made), "m"));
    const auto latency = WaitSeen([&] { return names(B("k")).contains(made); });
    Note("kept-listing-create", latency);
    EXPECT_LT(latency.count(), 50'000) << "round " << round;
    const std::string gone = "f" + std::to_string(round);
    ASSERT_EQ(unlink(A("k/" + gone).c_str()), 0);
    Note("kept-listing-unlink", WaitSeen([&] { return !names(B("k")).contains(gone); }));
  }
  Report();
}

// B's mount keeps the page of a listing B only looked into (one getdents, as rm -rf does before
// it lists a directory: frontend/kept_listings.h) and answers B's next listing from it. A name A
// makes or removes in the directory meanwhile must be in, or gone from, that listing.
TEST_P(CoherenceTest, APageKeptByOneMountShowsNamesMadeAndRemovedThroughTheOther) {
  ASSERT_EQ(mkdir(A("p").c_str(), 0755), 0);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(WriteFile(A("p/f" + std::to_string(i)), "x"));
  ASSERT_EQ(ListedNames(B("p")).size(), 7u);
  // The look reads as much as the listing (4 KiB getdents): the page answers it.
  const auto listed_after_look = [&] {
    ReadFirstPage(B("p"), 4096);
    return ListedNames(B("p"));
  };
  for (int round = 0; round < 3; ++round) {
    ASSERT_GT(ReadFirstPage(B("p"), 4096), 0);
    const std::string made = "made" + std::to_string(round);
    ASSERT_TRUE(WriteFile(A("p/" + made), "m"));
    const auto latency = WaitSeen([&] { return listed_after_look().contains(made); });
    Note("kept-page-create", latency);
    EXPECT_LT(latency.count(), 50'000) << "round " << round;
    ASSERT_GT(ReadFirstPage(B("p"), 4096), 0);
    const std::string gone = "f" + std::to_string(round);
    ASSERT_EQ(unlink(A("p/" + gone).c_str()), 0);
    const auto removed = WaitSeen([&] { return !listed_after_look().contains(gone); });
    Note("kept-page-unlink", removed);
    EXPECT_LT(removed.count(), 50'000) << "round " << round;
  }
  Report();
}

// The export watch's event queue overflows while the server is stopped (a burst of changes on
// the storage node): the changes made after that are never reported. The server tells every
// client to drop its caches (a reset record), so B's kept listing and cached attributes go, and
// the changes are seen at once instead of after the 60 s lifetimes (seen failing that way when
// the overflow was only logged).
TEST_P(CoherenceTest, ChangesLostWhenTheExportWatchOverflowsAreSeen) {
  ASSERT_EQ(mkdir(A("o").c_str(), 0755), 0);
  ASSERT_TRUE(WriteFile(A("o/file"), "old"));
  ASSERT_EQ(mkdir(env_->Exp("flood").c_str(), 0755), 0);
  for (int i = 0; i < 2; ++i) ASSERT_EQ(ListedNames(B("o")).size(), 3u);  // kept by B's kernel
  ASSERT_EQ(StatOf(B("o/file")).mode, 0644u);
  long queue = 16384;
  std::ifstream("/proc/sys/fs/fanotify/max_queued_events") >> queue;
  ASSERT_TRUE(StopAndWait(env_->server_process()));
  for (long i = 0; i <= queue + 100; ++i) {
    const int fd =
        open(env_->Exp("flood/" + std::to_string(i)).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << strerror(errno);
    close(fd);
  }
  // After the queue filled: the watch never hears of these.
  ASSERT_TRUE(WriteFile(env_->Exp("o/new"), "n"));
  ASSERT_EQ(chmod(env_->Exp("o/file").c_str(), 0600), 0);
  env_->server_process()->Signal(SIGCONT);
  Note("overflow-create", WaitSeen([&] { return ListedNames(B("o")).contains("new"); }));
  Note("overflow-chmod", WaitSeen([&] { return StatOf(B("o/file")).mode == 0600; }));
  Report();
  // The reset went out before the warning is written: wait for it. Its count says the reset
  // reached both clients (the older message, which only logged the overflow, had none).
  EXPECT_GE(WaitSeen([&] {
              return ReadFileOrEmpty(env_->server_log())
                         .find(
                             "overflowed (more than /proc/sys/fs/fanotify/max_queued_events "
                             "changes waited); 2 clients were told to drop their caches") !=
                     std::string::npos;
            }).count(),
            0);  // the fixture prints the server's log when a test fails
}

// Write attrs: A's writes leave A a record of the file, kept for A's next stat (a second at
// most). B's changes of the file after them must be what that stat shows, at once: the
// invalidation B's change pushes to A drops A's record before the kernel hears of it.
TEST_P(CoherenceTest, AFileWrittenThroughOneMountShowsChangesMadeThroughTheOther) {
  ASSERT_TRUE(WriteFile(A("w"), "a"));
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(WriteFile(A("w"), std::string(100 + round, 'a')));  // no stat: A holds its record
    ASSERT_TRUE(WriteFile(B("w"), std::string(5000 + round, 'b'), O_APPEND));
    const Stat exported = StatOf(env_->Exp("w"));
    ASSERT_EQ(exported.size, 5100 + 2 * round);
    const auto latency = WaitSeen([&] {
      const Stat seen = StatOf(A("w"));
      return seen.size == exported.size && seen.mtime_ns == exported.mtime_ns;
    });
    Note("written-file", latency);
    // The record lives a second: a stat answered from it would have held this long.
    EXPECT_LT(latency.count(), 500'000) << "round " << round;
    ASSERT_TRUE(WriteFile(A("w"), "x", O_TRUNC));
    ASSERT_EQ(chmod(B("w").c_str(), 0600 + round), 0);
    Note("written-file-chmod", WaitSeen([&] { return StatOf(A("w")).mode == 0600u + round; }));
  }
  Report();
}

// A file whose name A removes or replaces keeps its other names (hard links) and B's open
// descriptors: B must see its link count fall. The UNLINK and RENAME name only the directory
// entry, so the server finds the file before it runs them and pushes its attributes too.
TEST_P(CoherenceTest, ALinkCountThatARemovalOrReplacementLoweredIsSeen) {
  ASSERT_EQ(mkdir(A("l").c_str(), 0755), 0);
  for (const char* name : {"l/h", "l/t", "l/x"}) ASSERT_TRUE(WriteFile(A(name), "contents"));
  ASSERT_EQ(link(A("l/h").c_str(), A("l/h2").c_str()), 0);
  ASSERT_EQ(link(A("l/t").c_str(), A("l/t2").c_str()), 0);
  for (RingfsEnv* view : {b_.get(), control_.get()}) {
    ASSERT_EQ(StatOf(view->Mnt("l/h2")).nlink, 2u);
    ASSERT_EQ(StatOf(view->Mnt("l/t2")).nlink, 2u);
  }
  const int held = open(B("l/t2").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(held, 0);
  auto held_nlink = [&] {
    struct stat st;
    return fstat(held, &st) == 0 ? st.st_nlink : 0;
  };
  ASSERT_EQ(held_nlink(), 2u);

  ASSERT_EQ(unlink(A("l/h").c_str()), 0);
  Note("unlink-other-link", WaitSeen([&] { return StatOf(B("l/h2")).nlink == 1; }));
  ASSERT_EQ(rename(A("l/x").c_str(), A("l/t").c_str()), 0);
  Note("rename-over-open-file", WaitSeen([&] { return held_nlink() == 1; }));
  Note("rename-over-other-link", WaitSeen([&] { return StatOf(B("l/t2")).nlink == 1; }));
  close(held);
  Report();
  // The control kept what it cached: B's view came from the pushes.
  EXPECT_EQ(StatOf(C("l/h2")).nlink, 2u);
  EXPECT_EQ(StatOf(C("l/t2")).nlink, 2u);
}

// An append through A's page cache after B appended: A's kernel places it at the end it had
// cached (the push marked the size stale without reloading it) while the server appends at the
// real end. A read() refetches; A's mapping kept A's bytes at B's offset until something made
// A's kernel ask for the size again (found by a red-team pass). The write's post-op size shows
// the difference, and A's mount drops the file's pages.
TEST_P(CoherenceTest, AnAppendAfterAnotherMountsAppendLeavesNoWrongPagesInAMapping) {
  ASSERT_TRUE(WriteFile(A("a"), std::string(8192, '0')));
  const int fd = open(A("a").c_str(), O_RDWR | O_APPEND | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::string first(8192, '\0');
  ASSERT_EQ(pread(fd, first.data(), first.size(), 0), 8192);
  void* mapped = mmap(nullptr, 65536, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(mapped, MAP_FAILED);
  const auto* view = static_cast<const char*>(mapped);
  ASSERT_TRUE(WriteFile(B("a"), std::string(8192, 'B'), O_APPEND));
  // The push has reached A's kernel: its size is stale (the cached pages are all still right).
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::string mine(8192, 'A');
  ASSERT_EQ(write(fd, mine.data(), mine.size()), 8192);
  const std::string exported = Slurp(env_->Exp("a"));
  ASSERT_EQ(exported.size(), 3 * 8192u);
  EXPECT_EQ(exported.substr(8192, 8192), std::string(8192, 'B'));
  EXPECT_EQ(exported.substr(16384), mine);
  Note("append-after-other-append", WaitSeen([&] { return view[8192] == 'B'; }));
  EXPECT_EQ(std::string(view + 8192, 8192), std::string(8192, 'B'));
  munmap(mapped, 65536);
  close(fd);
  Report();
}

// B made the directory, so B answers LOOKUPs of names absent from it itself
// (frontend/complete_dirs.h). Names made in it through A, and on the export directly, must still
// be found through B: each pushed entry invalidation sends that name's next LOOKUP to the server.
TEST_P(CoherenceTest, NamesMadeElsewhereInADirectoryThisMountMadeAreSeen) {
  ASSERT_EQ(mkdir(B("n").c_str(), 0755), 0);
  ASSERT_TRUE(WriteFile(B("n/own"), "b"));
  auto answered_locally = [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(450));  // stats: every 200 ms
    return StatNumber(b_->ReadStats(), "answered_locally").value_or(0);
  };
  const uint64_t before = answered_locally();
  for (const char* name : {"n/f", "n/sub", "n/to", "n/hard", "n/soft", "n/local", "n/never"}) {
    ASSERT_FALSE(StatOf(B(name)).exists) << name;
  }
  ASSERT_GE(answered_locally() - before, 7u) << "B asked the server about names absent from n";
  // The kernel now holds negative dentries for those names, as it would from the server's
  // answers; the pushes must reach both the kernel and the mount's own knowledge.
  ASSERT_TRUE(WriteFile(A("n/f"), "a"));
  Note("create-in-made-dir", WaitSeen([&] { return StatOf(B("n/f")).exists; }));
  ASSERT_EQ(mkdir(A("n/sub").c_str(), 0755), 0);
  Note("mkdir-in-made-dir", WaitSeen([&] { return StatOf(B("n/sub")).exists; }));
  ASSERT_EQ(rename(A("n/f").c_str(), A("n/to").c_str()), 0);
  Note("rename-in-made-dir", WaitSeen([&] { return StatOf(B("n/to")).exists; }));
  ASSERT_EQ(link(A("n/to").c_str(), A("n/hard").c_str()), 0);
  Note("link-in-made-dir", WaitSeen([&] { return StatOf(B("n/hard")).exists; }));
  ASSERT_EQ(symlink("to", A("n/soft").c_str()), 0);
  Note("symlink-in-made-dir", WaitSeen([&] { return StatOf(B("n/soft")).exists; }));
  ASSERT_TRUE(WriteFile(env_->Exp("n/local"), "l"));  // the server's export watch
  Note("local-create-in-made-dir", WaitSeen([&] { return StatOf(B("n/local")).exists; }));
  // Names B looked up before and that nobody made stay answered.
  EXPECT_FALSE(StatOf(B("n/never")).exists);
  // Names never looked up through B: only the mount's knowledge decides them.
  ASSERT_TRUE(WriteFile(A("n/fresh"), "a"));
  Note("create-never-looked-up", WaitSeen([&] { return StatOf(B("n/fresh")).exists; }));
  Report();
}

// A directory B did not make becomes known complete when a LOOKUP in it finds no entry and the
// server finds it empty (common/dir_attrs.h): B then answers the next absent names itself, and
// names made in it through A, on the export, and through B itself must all still be found.
TEST_P(CoherenceTest, NamesMadeInADirectoryFoundEmptyAreSeen) {
  // Every push B's kernel was given, whether it held the name or not.
  auto pushes_taken = [&] {
    const Stats stats = b_->ReadStats();
    return StatNumber(stats, "invalidations").value_or(0) +
           StatNumber(stats, "invalidations_not_cached").value_or(0);
  };
  std::this_thread::sleep_for(std::chrono::milliseconds(450));  // stats: every 200 ms
  const uint64_t pushes_before = pushes_taken();
  ASSERT_EQ(mkdir(A("e").c_str(), 0755), 0);
  // The server's push of the new name reaches B on its own schedule. Landing after B's lookups
  // below, it would drop B's dentry of e, the kernel would forget e, and with it B's knowledge
  // that e is empty: one more LOOKUP would go to the server (seen on a loaded CI machine).
  const auto pushed_by = Clock::now() + std::chrono::seconds(10);
  while (pushes_taken() == pushes_before && Clock::now() < pushed_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GT(pushes_taken(), pushes_before) << "the server never pushed A's mkdir to B";
  auto answered_locally = [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(450));  // stats: every 200 ms
    return StatNumber(b_->ReadStats(), "answered_locally").value_or(0);
  };
  ASSERT_TRUE(StatOf(B("e")).exists);
  ASSERT_FALSE(StatOf(B("e/first")).exists);  // to the server, which finds e empty
  const uint64_t before = answered_locally();
  for (const char* name : {"e/f", "e/sub", "e/local", "e/own", "e/never", "e/x"}) {
    ASSERT_FALSE(StatOf(B(name)).exists) << name;
  }
  ASSERT_GE(answered_locally() - before, 6u) << "B asked the server about names absent from e";
  ASSERT_TRUE(WriteFile(A("e/f"), "a"));
  Note("create-in-found-empty-dir", WaitSeen([&] { return StatOf(B("e/f")).exists; }));
  ASSERT_EQ(mkdir(A("e/sub").c_str(), 0755), 0);
  Note("mkdir-in-found-empty-dir", WaitSeen([&] { return StatOf(B("e/sub")).exists; }));
  ASSERT_TRUE(WriteFile(env_->Exp("e/local"), "l"));  // the server's export watch
  Note("local-create-in-found-empty-dir", WaitSeen([&] { return StatOf(B("e/local")).exists; }));
  ASSERT_TRUE(WriteFile(B("e/own"), "b"));
  EXPECT_EQ(Slurp(B("e/own")), "b");
  // A made e, so A answers for its absent names too: B's create reaches A as a push, which
  // travels on its own (over 100 ms seen on a loaded machine).
  Note("create-seen-back-in-made-dir", WaitSeen([&] { return Slurp(A("e/own")) == "b"; }));
  ASSERT_TRUE(WriteFile(A("e/fresh"), "a"));  // never looked up through B
  Note("create-never-looked-up-found-empty",
       WaitSeen([&] { return StatOf(B("e/fresh")).exists; }));
  EXPECT_FALSE(StatOf(B("e/never")).exists);
  Report();
}

// Makes every mount's kernel forget the inodes nobody uses (as memory pressure would); the
// FORGETs reach the mounts within the wait.
void DropKernelCaches() {
  sync();
  std::ofstream("/proc/sys/vm/drop_caches") << "2\n";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
}

// B keeps the entries of nodes its kernel forgot (frontend/kept_entries.h), withholding their
// FORGETs, and answers their next LOOKUP itself. What another mount or the export changes
// meanwhile, and what B itself changes, must all still be seen.
TEST_P(CoherenceTest, EntriesKeptAfterTheKernelForgetsThemStayCoherent) {
  ASSERT_EQ(mkdir(B("k").c_str(), 0755), 0);
  constexpr int kFiles = 40;
  auto f = [](int i) { return "k/f" + std::to_string(i); };
  for (int i = 0; i < kFiles; ++i) ASSERT_TRUE(WriteFile(B(f(i)), "v1-" + std::to_string(i)));
  // Written through B, so their attributes are not known until the server answers a LOOKUP
  // of them again: one pass with cold caches records them, the next is answered by B.
  DropKernelCaches();
  for (int i = 0; i < kFiles; ++i) ASSERT_TRUE(StatOf(B(f(i))).exists);
  DropKernelCaches();
  auto answered_locally = [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(450));  // stats: every 200 ms
    return StatNumber(b_->ReadStats(), "answered_locally").value_or(0);
  };
  const uint64_t before = answered_locally();
  for (int i = 0; i < 20; ++i) {
    Stat st = StatOf(B(f(i)));
    ASSERT_TRUE(st.exists) << f(i);
    EXPECT_EQ(st.size, static_cast<off_t>(("v1-" + std::to_string(i)).size()));
  }
  EXPECT_GE(answered_locally() - before, 20u) << "B sent the lookups of names it kept";

  // Changes made elsewhere to files B's kernel forgot once more.
  DropKernelCaches();
  ASSERT_EQ(unlink(A(f(20)).c_str()), 0);
  Note("unlink-of-kept", WaitSeen([&] { return !StatOf(B(f(20))).exists; }));
  ASSERT_EQ(rename(A(f(21)).c_str(), A("k/r21").c_str()), 0);
  Note("rename-of-kept",
       WaitSeen([&] { return !StatOf(B(f(21))).exists && StatOf(B("k/r21")).exists; }));
  ASSERT_TRUE(WriteFile(A(f(22)), "v2-a-longer-content"));
  Note("rewrite-of-kept", WaitSeen([&] { return Slurp(B(f(22))) == "v2-a-longer-content"; }));
  ASSERT_EQ(chmod(A(f(23)).c_str(), 0600), 0);
  Note("chmod-of-kept", WaitSeen([&] { return StatOf(B(f(23))).mode == 0600; }));
  ASSERT_EQ(rename(A(f(24)).c_str(), A(f(25)).c_str()), 0);
  Note("rename-over-kept", WaitSeen([&] {
         return !StatOf(B(f(24))).exists && Slurp(B(f(25))) == "v1-24";
       }));
  ASSERT_EQ(unlink(env_->Exp(f(26)).c_str()), 0);  // the server's export watch
  Note("local-unlink-of-kept", WaitSeen([&] { return !StatOf(B(f(26))).exists; }));
  ASSERT_TRUE(WriteFile(env_->Exp(f(27)), "v3-export"));
  Note("local-rewrite-of-kept", WaitSeen([&] { return Slurp(B(f(27))) == "v3-export"; }));

  // B's own changes to names it kept.
  DropKernelCaches();
  ASSERT_EQ(unlink(B(f(30)).c_str()), 0);
  EXPECT_FALSE(StatOf(env_->Exp(f(30))).exists);
  EXPECT_FALSE(StatOf(B(f(30))).exists);
  ASSERT_EQ(rename(B(f(31)).c_str(), B("k/r31").c_str()), 0);
  EXPECT_FALSE(StatOf(B(f(31))).exists);
  EXPECT_EQ(Slurp(B("k/r31")), "v1-31");
  EXPECT_EQ(Slurp(A("k/r31")), "v1-31");
  ASSERT_EQ(chmod(B(f(32)).c_str(), 0640), 0);
  ASSERT_TRUE(WriteFile(B(f(33)), "v4-written-through-b"));
  DropKernelCaches();  // forgotten again after this mount changed them: kept, attributes not
  EXPECT_EQ(StatOf(B(f(32))).mode, 0640u);
  EXPECT_EQ(StatOf(B(f(33))).size, static_cast<off_t>(std::string("v4-written-through-b").size()));
  EXPECT_EQ(Slurp(B(f(33))), "v4-written-through-b");
  for (int i = 34; i < kFiles; ++i) EXPECT_EQ(Slurp(B(f(i))), "v1-" + std::to_string(i));
  Report();
}

TEST_P(CoherenceTest, AWarmStatPassSendsNothingToTheServer) {
  constexpr int kFiles = 500;
  ASSERT_EQ(mkdir(B("w").c_str(), 0755), 0);
  for (int i = 0; i < kFiles; ++i) ASSERT_TRUE(WriteFile(B("w/f" + std::to_string(i)), "x"));
  auto pass = [&] {
    for (int i = 0; i < kFiles; ++i) ASSERT_TRUE(StatOf(B("w/f" + std::to_string(i))).exists);
  };
  // Requests the kernel sent, and FORGETs among them (the stats file is rewritten every 200 ms;
  // wait for a fresh one).
  auto requests = [&]() -> std::pair<uint64_t, uint64_t> {
    std::this_thread::sleep_for(std::chrono::milliseconds(450));
    Stats s = b_->ReadStats();
    return {
        StatNumber(s, "ring_requests").value_or(0) + StatNumber(s, "devfuse_requests").value_or(0),
        StatNumber(s, "forgets").value_or(0)};
  };
  // A test running beside this one (ctest -j) may drop the kernel's caches (drop_caches), which
  // makes it forget these nodes: such a pass is not warm, and is tried again. A mount that makes
  // its kernel forget on its own fails every attempt.
  std::pair<uint64_t, uint64_t> before, after;
  for (int attempt = 0; attempt < 5; ++attempt) {
    pass();
    before = requests();
    pass();
    after = requests();
    if (after.second == before.second) break;
  }
  EXPECT_EQ(after.second, before.second) << "the kernel forgot nodes during every attempt";
  EXPECT_EQ(after.first - before.first, 0u)
      << "a warm pass over " << kFiles << " files sent requests";
}

// A chown or chmod that sets what a file already has is answered by the mount, nothing sent
// (AsyncRemovals::Unchanged: tar and cp -p as root give root's files back to root). What the
// mount knew of the owner must not outlive a change made through another mount, or on the export
// (the export watch): A's chown back to root after it reaches the server, although by what A
// knew a moment before it would have changed nothing.
TEST_P(CoherenceTest, AnOwnerChangedElsewhereIsChangedBackThroughThisMount) {
  auto uid_on_export = [&](const std::string& rel) {
    struct stat st;
    return stat(env_->Exp(rel).c_str(), &st) == 0 ? static_cast<int64_t>(st.st_uid) : -1;
  };
  auto noops = [&] { return StatNumber(env_->ReadStats(), "noop_setattrs").value_or(0); };
  const uint64_t noops_before = noops();
  int checked = 0;
  // Each round must run within the second A trusts what it learned from the create
  // (AsyncRemovals::kFreshNs), or its chown goes to the server anyway: a slow round is retried.
  for (int round = 0; round < 20 && checked < 2; ++round) {
    const bool through_b = checked == 0;
    const std::string rel = "owned" + std::to_string(round);
    const auto start = Clock::now();
    const int fd = open(A(rel).c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
    ASSERT_GE(fd, 0) << strerror(errno);
    ASSERT_EQ(fchown(fd, 0, 0), 0) << "changes nothing: answered by A";
    ASSERT_EQ(fchmod(fd, 0644), 0) << "changes nothing: answered by A";
    if (through_b) {
      ASSERT_EQ(chown(B(rel).c_str(), 1234, 1234), 0) << strerror(errno);
    } else {
      ASSERT_EQ(chown(env_->Exp(rel).c_str(), 1234, 1234), 0) << strerror(errno);
    }
    // The bound for a change to be seen through another mount.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_EQ(fchown(fd, 0, 0), 0) << strerror(errno);
    const auto took = Clock::now() - start;
    close(fd);
    if (took > std::chrono::milliseconds(700)) continue;  // A's knowledge may have aged out
    EXPECT_EQ(uid_on_export(rel), 0)
        << (through_b ? "B's" : "the export's") << " chown hid A's chown back to root";
    EXPECT_EQ(StatOf(A(rel)).mode, 0644u);
    ++checked;
  }
  ASSERT_EQ(checked, 2) << "no round ran within 700 ms";
  // The chowns and chmods that changed nothing were answered by A (counted about every 200 ms).
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (noops() < noops_before + 4 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GE(noops(), noops_before + 4);
}

// The chown of an extraction run as root, answered by the mount, does not wait for the server:
// stopped, it holds up only what must reach it.
TEST_P(CoherenceTest, AChownThatChangesNothingIsAnsweredWhileTheServerIsStopped) {
  for (int round = 0; round < 20; ++round) {
    const std::string rel = "stopped" + std::to_string(round);
    const int fd = open(A(rel).c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
    ASSERT_GE(fd, 0) << strerror(errno);
    const auto start = Clock::now();
    env_->server_process()->Signal(SIGSTOP);
    // Sent to the server (A's knowledge aged out), the chown waits for it: resumed after 2 s.
    std::atomic<bool> done{false};
    std::thread resume([&] {
      while (!done.load() && Clock::now() - start < std::chrono::seconds(2)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      env_->server_process()->Signal(SIGCONT);
    });
    const int rc = fchown(fd, 0, 0);
    const int saved = errno;
    const auto took = Clock::now() - start;
    done = true;
    resume.join();
    ASSERT_EQ(rc, 0) << strerror(saved);
    ASSERT_EQ(fchmod(fd, 0640), 0) << "a real change, once the server runs again";
    close(fd);
    struct stat st;
    ASSERT_EQ(stat(env_->Exp(rel).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0640u);
    EXPECT_EQ(st.st_uid, 0u);
    if (took < std::chrono::milliseconds(700)) return;  // answered within A's fresh second
  }
  FAIL() << "every no-op chown took 700 ms or more while the server was stopped";
}

TEST_P(CoherenceTest, AStoppedOrKilledListenerNeverHoldsUpTheWriter) {
  ASSERT_EQ(mkdir(A("s").c_str(), 0755), 0);
  constexpr int kFiles = 2000;
  for (int i = 0; i < kFiles; ++i) ASSERT_TRUE(WriteFile(A("s/f" + std::to_string(i)), "1"));
  for (int i = 0; i < kFiles; ++i) ASSERT_TRUE(StatOf(B("s/f" + std::to_string(i))).exists);
  // B stops reading its connections: the server queues B's invalidations; A goes on.
  ASSERT_EQ(kill(b_->mount_process()->pid(), SIGSTOP), 0);
  const auto start = Clock::now();
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < kFiles; ++i) {
      ASSERT_TRUE(WriteFile(A("s/f" + std::to_string(i)), std::to_string(round) + "-data"));
    }
  }
  const auto took = Clock::now() - start;
  ASSERT_EQ(kill(b_->mount_process()->pid(), SIGCONT), 0);
  EXPECT_LT(took, std::chrono::seconds(60)) << "A was held up by the stopped B";
  // B wakes up and sees the last round.
  Note("after-sigcont", WaitSeen([&] { return Slurp(B("s/f1999")) == "2-data"; }));
  EXPECT_EQ(Slurp(B("s/f0")), "2-data");
  // B killed: A's changes go on; the server drops B's sessions.
  ASSERT_EQ(kill(b_->mount_process()->pid(), SIGKILL), 0);
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(WriteFile(A("s/f" + std::to_string(i)), "after-kill"));
  EXPECT_EQ(Slurp(A("s/f7")), "after-kill");
  b_->Teardown();  // forced: the mount process is dead
  b_.reset();
}

// Pages kept across opens (frontend/kept_pages.h): a file read again through B or through the
// control mount (which hears no pushes) is not read from the server again, yet every change --
// through A right before the open, through A long enough before it that only the change time
// tells, on the export directly, and on the export while the server was killed -- is read by
// the next open. Same-size contents, so the control mount's cached size stays right.
TEST_P(CoherenceTest, PagesKeptAcrossOpensNeverHideAChange) {
  // The option is off by default: B and the control mount again, with it.
  std::unique_ptr<RingfsEnv> kept_b = MountAnother(GetParam().second, {"kept_pages"});
  ASSERT_NE(kept_b, nullptr);
  std::unique_ptr<RingfsEnv> kept_control = MountAnother(
      "uring", {"kept_pages", "no_invalidations", "entry_timeout=60", "attr_timeout=60"});
  ASSERT_NE(kept_control, nullptr);
  const std::vector<RingfsEnv*> views = {kept_b.get(), kept_control.get()};
  // Longer than the server's kOpenAttrsSettledNs: a change this old gets its record at an open.
  constexpr auto kSettled = std::chrono::milliseconds(2200);
  // A content as a failure prints it (every content here is one byte repeated).
  auto brief = [](const std::string& data) {
    const bool uniform = !data.empty() && data.find_first_not_of(data[0]) == std::string::npos;
    return (uniform ? std::string(1, data[0]) : "mixed " + data.substr(0, 8) + "...") + " x " +
           std::to_string(data.size());
  };
  auto pages_kept = [](RingfsEnv* view) {
    Stats stats = view->ReadStats();
    return stats.count("pages_kept") ? std::stoull(stats["pages_kept"]) : 0ull;
  };
  // Reads the file twice through `view`; the second open must keep the pages the first read.
  auto read_twice_kept = [&](RingfsEnv* view, const std::string& want) {
    const uint64_t before = pages_kept(view);
    EXPECT_EQ(brief(Slurp(view->Mnt("p/f"))), brief(want));
    EXPECT_EQ(brief(Slurp(view->Mnt("p/f"))), brief(want));
    const auto deadline = Clock::now() + std::chrono::seconds(5);  // the stats file lags 200 ms
    while (pages_kept(view) <= before && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_GT(pages_kept(view), before) << "the second open did not keep the pages";
  };
  const std::string one(3000, '1'), two(3000, '2'), three(3000, '3'), four(3000, '4'),
      five(3000, '5');
  ASSERT_EQ(mkdir(A("p").c_str(), 0755), 0);
  ASSERT_TRUE(WriteFile(A("p/f"), one));
  std::this_thread::sleep_for(kSettled);
  for (RingfsEnv* view : views) read_twice_kept(view, one);

  // Through A, opened at once after A's close: too fresh for a record, the pages go.
  ASSERT_TRUE(WriteFile(A("p/f"), two));
  for (RingfsEnv* view : views) {
    EXPECT_EQ(brief(Slurp(view->Mnt("p/f"))), brief(two)) << view->mount_dir();
  }

  // Through A after the pages were kept, opened once the change settled: the record's change
  // time differs from the one the pages were read at.
  std::this_thread::sleep_for(kSettled);
  for (RingfsEnv* view : views) {
    EXPECT_EQ(brief(Slurp(view->Mnt("p/f"))), brief(two));  // the record sets the baseline
    read_twice_kept(view, two);
  }
  ASSERT_TRUE(WriteFile(A("p/f"), three));
  std::this_thread::sleep_for(kSettled);
  for (RingfsEnv* view : views) {
    EXPECT_EQ(brief(Slurp(view->Mnt("p/f"))), brief(three)) << view->mount_dir();
  }

  // On the export directly.
  for (RingfsEnv* view : views) read_twice_kept(view, three);
  ASSERT_TRUE(WriteFile(env_->Exp("p/f"), four));
  std::this_thread::sleep_for(kSettled);
  for (RingfsEnv* view : views) {
    EXPECT_EQ(brief(Slurp(view->Mnt("p/f"))), brief(four)) << view->mount_dir();
  }

  // On the export while the server is killed; read after its restart.
  for (RingfsEnv* view : views) read_twice_kept(view, four);
  ASSERT_TRUE(env_->KillServer());
  ASSERT_TRUE(WriteFile(env_->Exp("p/f"), five));
  std::this_thread::sleep_for(kSettled);
  ServerOptions server;
  server.extra_args = {"--export-watch"};
  ASSERT_TRUE(env_->RestartServer(server));
  for (RingfsEnv* view : views) {
    EXPECT_EQ(brief(Slurp(view->Mnt("p/f"))), brief(five)) << view->mount_dir() << "\n"
                                                           << view->DescribeLogs();
  }

  // Stores through a shared mapping on the storage node: the change time moves at the first
  // store at most (ext4 sets it at the write fault, tmpfs never), and the later ones leave it.
  // Only the server's rule -- no record while the file is open for writing, which the mapping
  // keeps it after its descriptor is closed -- makes these opens drop the pages.
  int fd = ::open(env_->Exp("p/f").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  char* map =
      static_cast<char*>(mmap(nullptr, five.size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  ::close(fd);
  ASSERT_NE(map, MAP_FAILED);
  map[0] = '6';
  std::this_thread::sleep_for(kSettled);
  const std::string six_at_0 = "6" + five.substr(1);
  for (RingfsEnv* view : views) {
    EXPECT_EQ(Slurp(view->Mnt("p/f")).substr(0, 4), six_at_0.substr(0, 4)) << view->mount_dir();
  }
  const std::string six(five.size(), '6');
  std::memset(map, '6', six.size());
  for (RingfsEnv* view : views) {
    EXPECT_EQ(brief(Slurp(view->Mnt("p/f"))), brief(six)) << view->mount_dir();
  }
  ASSERT_EQ(munmap(map, six.size()), 0);
  for (auto* env : {&kept_b, &kept_control}) {
    (*env)->Teardown();
    EXPECT_EQ((*env)->teardown_notes(), "") << (*env)->final_logs();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Pairs, CoherenceTest,
    ::testing::Values(std::make_pair(std::string("uring"), std::string("uring")),
                      std::make_pair(std::string("uring"), std::string("classic")),
                      std::make_pair(std::string("classic"), std::string("uring"))),
    [](const auto& info) { return info.param.first + "_to_" + info.param.second; });

}  // namespace
}  // namespace ringfs::testing
