// Who may do what, through a real mount over both transports: the server runs every request as
// its caller (squashed as --export-options say), so what a user may do through the mount is what
// the same user may do on the export itself — checked by running one battery of operations on
// two identical trees, one directly in the export and one through the mount, and comparing every
// result. And supplementary groups the client kernel allowed work on the server too.
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/harness/ringfs_test.h"

namespace ringfs::testing {
namespace {

constexpr uid_t kNobody = 65534;
constexpr gid_t kNogroup = 65534;
constexpr gid_t kTeam = 47011;  // group of the team directories (no such group needed here)

// The tree both sides start from, made by root directly in the export.
void MakeTree(const std::string& root) {
  auto dir = [](const std::string& path, mode_t mode, uid_t uid, gid_t gid) {
    ASSERT_EQ(::mkdir(path.c_str(), mode), 0) << path;
    ASSERT_EQ(::chown(path.c_str(), uid, gid), 0);
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
  };
  auto file = [](const std::string& path, mode_t mode, uid_t uid, gid_t gid) {
    ASSERT_EQ(WriteFile(path, "contents of " + path.substr(path.rfind('/') + 1)), 0) << path;
    ASSERT_EQ(::chown(path.c_str(), uid, gid), 0);
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
  };
  dir(root, 0755, 0, 0);
  dir(root + "/private", 0700, 0, 0);
  dir(root + "/shared", 0755, 0, 0);
  dir(root + "/pub", 0777, 0, 0);
  dir(root + "/sticky", 01777, 0, 0);
  dir(root + "/team", 0770, 0, kTeam);
  file(root + "/private/f", 0644, 0, 0);
  file(root + "/shared/secret", 0600, 0, 0);
  file(root + "/shared/readable", 0644, 0, 0);
  file(root + "/shared/writable", 0666, 0, 0);
  file(root + "/shared/nobodys", 0600, kNobody, kNogroup);
  file(root + "/shared/exec", 0711, 0, 0);
  file(root + "/sticky/roots", 0666, 0, 0);
  file(root + "/team/f", 0660, 0, kTeam);
}

// The battery: every operation's errno (or "ok") in order, one line each, under `root`.
std::string Battery(const std::string& root) {
  std::string out;
  auto note = [&](const std::string& what, int rc) {
    out += what + ": " + (rc >= 0 ? std::string("ok") : ErrnoName(errno)) + "\n";
  };
  auto open_close = [&](const std::string& rel, int flags) {
    int fd = ::open((root + "/" + rel).c_str(), flags | O_CLOEXEC, 0644);
    note("open " + rel + " " + std::to_string(flags), fd);
    if (fd >= 0) ::close(fd);
  };
  const std::vector<std::string> files = {"private/f", "shared/secret", "shared/readable",
                                          "shared/writable", "shared/nobodys", "shared/exec",
                                          "sticky/roots", "team/f"};
  const std::vector<std::string> dirs = {"private", "shared", "pub", "sticky", "team"};
  for (const std::string& f : files) {
    struct stat st {};
    note("stat " + f, ::stat((root + "/" + f).c_str(), &st));
    open_close(f, O_RDONLY);
    open_close(f, O_WRONLY);
    open_close(f, O_RDWR | O_APPEND);
    note("access R " + f, ::access((root + "/" + f).c_str(), R_OK));
    note("access W " + f, ::access((root + "/" + f).c_str(), W_OK));
    note("access X " + f, ::access((root + "/" + f).c_str(), X_OK));
    note("setxattr " + f, ::setxattr((root + "/" + f).c_str(), "user.k", "v", 1, 0));
    note("utimes-now " + f, ::utimes((root + "/" + f).c_str(), nullptr));
    const timeval old[2] = {{1, 0}, {1, 0}};
    note("utimes-set " + f, ::utimes((root + "/" + f).c_str(), old));
    note("chmod " + f, ::chmod((root + "/" + f).c_str(), 0640));
    note("chown-self " + f, ::chown((root + "/" + f).c_str(), ::getuid(), -1));
    note("chown-0 " + f, ::chown((root + "/" + f).c_str(), 0, -1));
  }
  for (const std::string& d : dirs) {
    // Listed, not only opened: through the mount the server checks the permission at the
    // first readdir (handle-less listings), on the export opendir does.
    DIR* dp = ::opendir((root + "/" + d).c_str());
    int listed = dp != nullptr ? 0 : -1;
    if (dp != nullptr) {
      errno = 0;
      while (::readdir(dp) != nullptr) {
      }
      if (errno != 0) listed = -1;
      const int saved = errno;
      ::closedir(dp);
      errno = saved;
    }
    note("list " + d, listed);
    open_close(d + "/new", O_CREAT | O_EXCL | O_WRONLY);
    note("mkdir " + d, ::mkdir((root + "/" + d + "/newdir").c_str(), 0755));
    note("symlink " + d, ::symlink("x", (root + "/" + d + "/newlink").c_str()));
    note("mknod-fifo " + d, ::mknod((root + "/" + d + "/fifo").c_str(), S_IFIFO | 0644, 0));
    note("rename " + d, ::rename((root + "/" + d + "/new").c_str(),
                                 (root + "/" + d + "/renamed").c_str()));
  }
  for (const std::string& f : files) note("unlink " + f, ::unlink((root + "/" + f).c_str()));
  // What is left, and who owns it.
  for (const std::string& d : dirs) {
    for (const char* name : {"renamed", "newdir", "newlink", "fifo"}) {
      struct stat st {};
      if (::lstat((root + "/" + d + "/" + name).c_str(), &st) == 0) {
        out += "owner " + d + "/" + name + ": " + std::to_string(st.st_uid) + ":" +
               std::to_string(st.st_gid) + " mode " + std::to_string(st.st_mode & 07777) + "\n";
      }
    }
  }
  return out;
}

std::string Without(const std::string& lines, const std::vector<std::string>& prefixes) {
  std::string out;
  size_t start = 0;
  while (start < lines.size()) {
    size_t end = lines.find('\n', start);
    std::string line = lines.substr(start, end - start + 1);
    bool skip = false;
    for (const std::string& p : prefixes) skip = skip || line.rfind(p, 0) == 0;
    if (!skip) out += line;
    start = end + 1;
  }
  return out;
}

class ParityTest : public MountedTest {
 protected:
  ServerOptions ServerOpts() const override {
    ServerOptions o;
    o.export_options = export_options_;
    return o;
  }
  // `skip`: battery lines (by prefix) left out of the comparison.
  void Compare(uid_t mount_uid, uid_t export_uid, gid_t mount_gid, gid_t export_gid,
               const std::vector<std::string>& skip = {}) {
    ASSERT_NO_FATAL_FAILURE(MakeTree(Exp("a")));
    ASSERT_NO_FATAL_FAILURE(MakeTree(Exp("b")));
    const std::string direct = Exp("a"), mounted = Mnt("b");
    std::string on_export =
        RunAsUser(export_uid, export_gid, [&] { return Battery(direct); });
    std::string through_mount =
        RunAsUser(mount_uid, mount_gid, [&] { return Battery(mounted); });
    ASSERT_FALSE(on_export.empty());
    EXPECT_EQ(Without(through_mount, skip), Without(on_export, skip));
  }
  std::string export_options_ = "no_root_squash";
};

class NoRootSquashParityTest : public ParityTest {};
class RootSquashParityTest : public ParityTest {
 protected:
  RootSquashParityTest() { export_options_ = "root_squash"; }
};

TEST_P(NoRootSquashParityTest, NobodyGetsTheExportsOwnAnswers) {
  Compare(kNobody, kNobody, kNogroup, kNogroup);
}

TEST_P(NoRootSquashParityTest, RootGetsTheExportsOwnAnswers) { Compare(0, 0, 0, 0); }

// Under root_squash root on the client is nobody on the export. Two kinds of line differ by
// design and are left out: access(), which the client kernel answers itself for its root
// (default_permissions; NFS would ask the server), and chown to the caller's own uid, which is
// 0 through the mount and 65534 on the export (the server refuses chown to 0 with EPERM).
TEST_P(RootSquashParityTest, RootThroughTheMountIsNobodyOnTheExport) {
  Compare(0, kNobody, 0, kNogroup, {"access ", "chown-self "});
}

TEST_P(RootSquashParityTest, NobodyIsStillNobody) { Compare(kNobody, kNobody, kNogroup, kNogroup); }

// A user whose only way into a 0770 directory is a supplementary group: the client kernel lets
// them in (their process has the group), and the server (which learns the group from its own
// user database, --manage-gids) too. The user and group are made for the test (useradd) and
// removed after it.
class SupplementaryGroupTest : public MountedTest {
 protected:
  static constexpr const char* kUser = "ringfs-t-member";
  static constexpr const char* kGroup = "ringfs-t-team";
  static constexpr uid_t kMemberUid = 47012;
  static constexpr uid_t kOutsiderUid = 47013;  // not in the user database at all

  void SetUp() override {
    RemoveAccounts();
    ASSERT_EQ(Run({"/usr/sbin/groupadd", "-g", std::to_string(kTeam), kGroup}), 0);
    ASSERT_EQ(Run({"/usr/sbin/useradd", "-M", "-N", "-u", std::to_string(kMemberUid), "-g",
                   std::to_string(kNogroup), "-G", kGroup, "-s", "/usr/sbin/nologin", kUser}),
              0);
    MountedTest::SetUp();
  }
  void TearDown() override {
    MountedTest::TearDown();
    RemoveAccounts();
  }
  int Run(const std::vector<std::string>& argv) {
    std::optional<int> status = RunCommand(argv, "/dev/null", std::chrono::seconds(30));
    return status.has_value() && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
  }
  void RemoveAccounts() {
    RunCommand({"/usr/sbin/userdel", kUser}, "/dev/null", std::chrono::seconds(30));
    RunCommand({"/usr/sbin/groupdel", kGroup}, "/dev/null", std::chrono::seconds(30));
  }
};

TEST_P(SupplementaryGroupTest, AGroupMemberWorksInTheTeamDirectoryAnOutsiderDoesNot) {
  ASSERT_EQ(::mkdir(Exp("team").c_str(), 0770), 0);
  ASSERT_EQ(::chown(Exp("team").c_str(), 0, kTeam), 0);
  ASSERT_EQ(::chmod(Exp("team").c_str(), 0770), 0);
  ASSERT_EQ(WriteFile(Exp("team/notes"), "team notes"), 0);
  ASSERT_EQ(::chown(Exp("team/notes").c_str(), 0, kTeam), 0);
  ASSERT_EQ(::chmod(Exp("team/notes").c_str(), 0660), 0);
  const std::string team = Mnt("team");
  std::string member = RunAsUserWithGroups(kMemberUid, kNogroup, {kTeam}, [&] {
    std::string err;
    if (ReadFile(team + "/notes") != "team notes") err += "read: " + ErrnoName(errno) + "\n";
    if (WriteFile(team + "/mine", "member data") != 0) err += "create: " + ErrnoName(errno) + "\n";
    int fd = ::open((team + "/notes").c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0 || ::write(fd, "+", 1) != 1) err += "append: " + ErrnoName(errno) + "\n";
    if (fd >= 0) ::close(fd);
    return err;
  });
  EXPECT_EQ(member, "");
  struct stat st {};
  ASSERT_EQ(::stat(Exp("team/mine").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kMemberUid);
  EXPECT_EQ(ReadFile(Exp("team/notes")), "team notes+");
  // Not in the group (and unknown to the user database): refused by both kernels.
  std::string outsider = RunAsUser(kOutsiderUid, kNogroup, [&] {
    std::string err;
    if (::open((team + "/notes").c_str(), O_RDONLY | O_CLOEXEC) >= 0 || errno != EACCES)
      err += "outsider read: " + ErrnoName(errno) + "\n";
    if (::open((team + "/x").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644) >= 0 ||
        errno != EACCES)
      err += "outsider create: " + ErrnoName(errno) + "\n";
    return err;
  });
  EXPECT_EQ(outsider, "");
  // A process of the member without the group (a stale session) is refused by its own kernel;
  // the server would also refuse a claim of the group the database does not give: the member
  // claims nothing on the wire but its uid and gid, and the server decides from the database.
  std::string without = RunAsUser(kMemberUid, kNogroup, [&] {
    return ::open((team + "/notes").c_str(), O_RDONLY | O_CLOEXEC) >= 0 ? "read without the group\n"
                                                                         : "";
  });
  EXPECT_EQ(without, "");
}

// With --no-manage-gids the server knows only the gid of the request: the member's client
// kernel lets it in, the server does not (which shows the server really checks).
class NoManageGidsTest : public SupplementaryGroupTest {
 protected:
  ServerOptions ServerOpts() const override {
    ServerOptions o;
    o.extra_args = {"--no-manage-gids"};
    return o;
  }
};

TEST_P(NoManageGidsTest, TheServerRefusesWhatOnlyASupplementaryGroupAllows) {
  ASSERT_EQ(::mkdir(Exp("team").c_str(), 0770), 0);
  ASSERT_EQ(::chown(Exp("team").c_str(), 0, kTeam), 0);
  ASSERT_EQ(::chmod(Exp("team").c_str(), 0770), 0);
  ASSERT_EQ(WriteFile(Exp("team/notes"), "team notes"), 0);
  const std::string notes = Mnt("team/notes");
  std::string member = RunAsUserWithGroups(kMemberUid, kNogroup, {kTeam}, [&] {
    return ::open(notes.c_str(), O_RDONLY | O_CLOEXEC) < 0 && errno == EACCES
               ? ""
               : "read: " + ErrnoName(errno) + " (want EACCES from the server)\n";
  });
  EXPECT_EQ(member, "");
}

// Regression (it_squash's supplementary-group test with --export-watch: a transient EACCES from
// the client kernel in about half the runs). The kernel makes the mount's root inode from the
// mount options (rootmode=40000, no permission bits) and asks for the real attributes at the
// first permission check. An invalidation of the root (a create in it, made on the export or
// through another mount) written while that GETATTR was in flight made the kernel drop the
// reply, so a non-root caller was checked against mode 0000. ringfs-mount now primes the root's
// attributes before the mount is ready: on a fresh mount a non-root caller gets through the
// root without the kernel asking the server anything.
// A chown or chmod that sets what a file has is answered by the mount only where the server runs
// every caller as itself on a writable export (ServerHello.callers_as_themselves): under
// root_squash the server refuses root's change of root's file even when it changes nothing, and
// a read-only export refuses every change. Right after a stat (whose answer taught the mount the
// file's attributes), both get the server's own errno.
class NoopSetattrParityTest : public ParityTest {
 protected:
  void ExpectTheServersAnswers(int chown_errno, int chmod_errno) {
    ASSERT_EQ(WriteFile(Exp("roots"), "r"), 0);
    ASSERT_EQ(::chown(Exp("roots").c_str(), 0, 0), 0);
    ASSERT_EQ(::chmod(Exp("roots").c_str(), 0644), 0);
    for (int round = 0; round < 3; ++round) {
      struct stat st;
      ASSERT_EQ(::stat(Mnt("roots").c_str(), &st), 0) << ErrnoName(errno);
      ASSERT_EQ(st.st_uid, 0u);
      errno = 0;
      EXPECT_EQ(::chown(Mnt("roots").c_str(), 0, 0), chown_errno == 0 ? 0 : -1);
      EXPECT_EQ(errno, chown_errno) << "chown to the owner it has: " << ErrnoName(errno);
      errno = 0;
      EXPECT_EQ(::chmod(Mnt("roots").c_str(), 0644), chmod_errno == 0 ? 0 : -1);
      EXPECT_EQ(errno, chmod_errno) << "chmod to the mode it has: " << ErrnoName(errno);
    }
  }
};
class NoopSetattrRootSquashTest : public NoopSetattrParityTest {
 protected:
  NoopSetattrRootSquashTest() { export_options_ = "root_squash"; }
};
class NoopSetattrReadOnlyTest : public NoopSetattrParityTest {
 protected:
  NoopSetattrReadOnlyTest() { export_options_ = "ro,no_root_squash"; }
};

TEST_P(NoopSetattrRootSquashTest, RootsChangeOfNothingIsRefusedAsTheServerRefusesIt) {
  ExpectTheServersAnswers(EPERM, EPERM);
}

TEST_P(NoopSetattrReadOnlyTest, AChangeOfNothingIsRefusedOnAReadOnlyExport) {
  ExpectTheServersAnswers(EROFS, EROFS);
}

class FreshMountTest : public MountedTest {};

TEST_P(FreshMountTest, ANonRootCallerGetsThroughTheRootWithoutAskingTheServer) {
  ChildProcess* server = env_->server_process();
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(StopAndWait(server));
  const std::string root = Mnt(".");
  std::string result = RunAsUser(
      kNobody, kNogroup,
      [&] {
        return ::access(root.c_str(), X_OK) == 0 ? "" : "access: " + ErrnoName(errno) + "\n";
      },
      std::chrono::seconds(5));
  server->Signal(SIGCONT);
  EXPECT_EQ(result, "") << "the kernel had to ask the server for the root's attributes";
}

RINGFS_INSTANTIATE_TRANSPORTS(FreshMountTest);
RINGFS_INSTANTIATE_TRANSPORTS(NoRootSquashParityTest);
RINGFS_INSTANTIATE_TRANSPORTS(NoManageGidsTest);
RINGFS_INSTANTIATE_TRANSPORTS(NoopSetattrReadOnlyTest);
RINGFS_INSTANTIATE_TRANSPORTS(NoopSetattrRootSquashTest);
RINGFS_INSTANTIATE_TRANSPORTS(RootSquashParityTest);
RINGFS_INSTANTIATE_TRANSPORTS(SupplementaryGroupTest);

}  // namespace
}  // namespace ringfs::testing
