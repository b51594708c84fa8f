// The op executors one by one, in-process (decode + execute, file I/O done synchronously).
#include "server/executor.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "server/executor_fixture.h"

namespace ringfs::server {
namespace {

using testing::Bytes;
using testing::CName;
using testing::ExecResult;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string ReadIn(uint64_t fh, uint64_t offset, uint32_t size) {
  fuse_read_in in{};
  in.fh = fh;
  in.offset = offset;
  in.size = size;
  return Bytes(in);
}

// The (name, entry_out) pairs of a READDIRPLUS answer.
std::vector<std::pair<std::string, fuse_entry_out>> PlusEntries(const std::string& body) {
  std::vector<std::pair<std::string, fuse_entry_out>> entries;
  for (size_t pos = 0; pos + FUSE_NAME_OFFSET_DIRENTPLUS <= body.size();) {
    fuse_entry_out entry;
    fuse_dirent dirent;
    std::memcpy(&entry, body.data() + pos, sizeof(entry));
    std::memcpy(&dirent, body.data() + pos + sizeof(entry), FUSE_NAME_OFFSET);
    entries.emplace_back(
        std::string(body.data() + pos + FUSE_NAME_OFFSET_DIRENTPLUS, dirent.namelen), entry);
    pos += FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET_DIRENTPLUS + dirent.namelen);
  }
  return entries;
}

// Every test runs with both node tables: "path" (one fd per node) and "handles" (nodes reopened
// by file handle for every request, no fd cached).
class ExecutorTest : public testing::ExecutorFixture,
                     public ::testing::WithParamInterface<std::string> {
 protected:
  ClientRegistry::Options RegistryOptions() const override {
    return GetParam() == "path" ? ClientRegistry::Options{} : ExecutorFixture::RegistryOptions();
  }
  bool handles() const { return GetParam() == "handles"; }

  // CREATE as uid/gid; returns {nodeid, fh}.
  std::pair<uint64_t, uint64_t> Create(uint64_t parent, const std::string& name, uint32_t mode,
                                       uint32_t flags = O_RDWR, uint32_t uid = 0,
                                       uint32_t gid = 0) {
    fuse_create_in in{};
    in.flags = flags | O_CREAT;
    in.mode = S_IFREG | mode;
    ExecResult r = Exec(FUSE_CREATE, parent, Bytes(in) + CName(name), uid, gid);
    EXPECT_EQ(r.error, 0) << name;
    return {r.As<fuse_entry_out>().nodeid, r.As<fuse_open_out>(sizeof(fuse_entry_out)).fh};
  }
  uint64_t Open(uint64_t node, uint32_t flags) {
    fuse_open_in in{};
    in.flags = flags;
    ExecResult r = Exec(FUSE_OPEN, node, Bytes(in));
    EXPECT_EQ(r.error, 0);
    return r.As<fuse_open_out>().fh;
  }
  struct stat Stat(const std::string& name) {
    struct stat st {};
    EXPECT_EQ(lstat(dir_.Join(name).c_str(), &st), 0) << name;
    return st;
  }
};

TEST_P(ExecutorTest, CreateOwnershipAndExclusive) {
  auto [node, fh] = Create(1, "f", 04755, O_RDWR, 1000, 1000);
  EXPECT_NE(node, 0u);
  struct stat st = Stat("f");
  EXPECT_EQ(st.st_uid, 1000u);
  EXPECT_EQ(st.st_gid, 1000u);
  EXPECT_EQ(st.st_mode & 07777, 04755u) << "an owner keeps the setuid bit it asked for";
  fuse_create_in in{};
  in.flags = O_RDWR | O_CREAT | O_EXCL;
  in.mode = S_IFREG | 0600;
  EXPECT_EQ(Exec(FUSE_CREATE, 1, Bytes(in) + CName("f")).error, EEXIST);
  // Without O_EXCL an existing file is opened, not re-owned, and only as its mode allows.
  in.flags = O_RDWR | O_CREAT;
  EXPECT_EQ(Exec(FUSE_CREATE, 1, Bytes(in) + CName("f"), 2000, 2000).error, EACCES);
  in.flags = O_RDONLY | O_CREAT;
  ExecResult r = Exec(FUSE_CREATE, 1, Bytes(in) + CName("f"), 2000, 2000);
  ASSERT_EQ(r.error, 0);
  EXPECT_EQ(r.As<fuse_entry_out>().nodeid, node);
  EXPECT_EQ(Stat("f").st_uid, 1000u);
  EXPECT_EQ(client_->nodes->LookupCount(node), 2u);
}

TEST_P(ExecutorTest, SetgidDirectoryKeepsGroup) {
  ASSERT_EQ(mkdir(dir_.Join("g").c_str(), 02777), 0);
  ASSERT_EQ(chown(dir_.Join("g").c_str(), 0, 4242), 0);
  ASSERT_EQ(chmod(dir_.Join("g").c_str(), 02777), 0);
  uint64_t g = LookupId(1, "g");
  Create(g, "file", 0644, O_RDWR, 1000, 1000);
  EXPECT_EQ(Stat("g/file").st_uid, 1000u);
  EXPECT_EQ(Stat("g/file").st_gid, 4242u);
  fuse_mkdir_in mk{0755, 0};
  ASSERT_EQ(Exec(FUSE_MKDIR, g, Bytes(mk) + CName("sub"), 1000, 1000).error, 0);
  EXPECT_EQ(Stat("g/sub").st_gid, 4242u);
  EXPECT_TRUE(Stat("g/sub").st_mode & S_ISGID);
}

TEST_P(ExecutorTest, OpenTruncReadWrite) {
  std::ofstream(dir_.Join("t")) << "0123456789";
  uint64_t node = LookupId(1, "t");
  uint64_t fh = Open(node, O_RDONLY);
  ExecResult r = Exec(FUSE_READ, node, ReadIn(fh, 2, 3));
  ASSERT_EQ(r.error, 0);
  EXPECT_EQ(r.body, "234");
  EXPECT_EQ(Exec(FUSE_READ, node, ReadIn(fh, 100, 3)).body, "");  // EOF
  uint64_t wfh = Open(node, O_WRONLY | O_TRUNC);
  EXPECT_EQ(Stat("t").st_size, 0);
  fuse_write_in w{};
  w.fh = wfh;
  w.size = 3;
  r = Exec(FUSE_WRITE, node, Bytes(w) + "abc");
  ASSERT_EQ(r.error, 0);
  EXPECT_EQ(r.As<fuse_write_out>().size, 3u);
  EXPECT_EQ(Slurp(dir_.Join("t")), "abc");
  fuse_getattr_in g{};
  g.getattr_flags = FUSE_GETATTR_FH;
  g.fh = wfh;
  EXPECT_EQ(Exec(FUSE_GETATTR, node, Bytes(g)).As<fuse_attr_out>().attr.size, 3u);
  fuse_flush_in flush{};
  flush.fh = wfh;
  EXPECT_EQ(Exec(FUSE_FLUSH, node, Bytes(flush)).error, 0);
  // Reading through the write-only handle is the kernel's EBADF.
  EXPECT_EQ(Exec(FUSE_READ, node, ReadIn(wfh, 0, 3)).error, EBADF);
  fuse_open_in dir_open{};
  EXPECT_EQ(Exec(FUSE_OPEN, 1, Bytes(dir_open)).error, EISDIR);
}

TEST_P(ExecutorTest, Setattr) {
  auto [node, fh] = Create(1, "s", 0644);
  fuse_setattr_in in{};
  in.valid = FATTR_MODE;
  in.mode = 0600;
  ExecResult r = Exec(FUSE_SETATTR, node, Bytes(in));
  ASSERT_EQ(r.error, 0);
  EXPECT_EQ(r.As<fuse_attr_out>().attr.mode, static_cast<uint32_t>(S_IFREG | 0600));
  in = {};
  in.valid = FATTR_SIZE;
  in.size = 12345;
  r = Exec(FUSE_SETATTR, node, Bytes(in));  // no fh: reopened for writing
  ASSERT_EQ(r.error, 0);
  EXPECT_EQ(r.As<fuse_attr_out>().attr.size, 12345u);
  in.valid = FATTR_SIZE | FATTR_FH;
  in.fh = fh;
  in.size = 10;
  EXPECT_EQ(Exec(FUSE_SETATTR, node, Bytes(in)).As<fuse_attr_out>().attr.size, 10u);
  in = {};
  in.valid = FATTR_UID | FATTR_GID;
  in.uid = 77;
  in.gid = 88;
  EXPECT_EQ(Exec(FUSE_SETATTR, node, Bytes(in)).error, 0);
  EXPECT_EQ(Stat("s").st_uid, 77u);
  EXPECT_EQ(Stat("s").st_gid, 88u);
  in = {};
  in.valid = FATTR_GID;  // uid unchanged (-1)
  in.gid = 99;
  EXPECT_EQ(Exec(FUSE_SETATTR, node, Bytes(in)).error, 0);
  EXPECT_EQ(Stat("s").st_uid, 77u);
  EXPECT_EQ(Stat("s").st_gid, 99u);
  in = {};
  in.valid = FATTR_ATIME | FATTR_MTIME;
  in.atime = 1000;
  in.atimensec = 5;
  in.mtime = 2000;
  in.mtimensec = 7;
  r = Exec(FUSE_SETATTR, node, Bytes(in));
  ASSERT_EQ(r.error, 0);
  EXPECT_EQ(r.As<fuse_attr_out>().attr.atime, 1000u);
  EXPECT_EQ(r.As<fuse_attr_out>().attr.mtime, 2000u);
  EXPECT_EQ(r.As<fuse_attr_out>().attr.mtimensec, 7u);
  in.valid = FATTR_MTIME | FATTR_MTIME_NOW;
  r = Exec(FUSE_SETATTR, node, Bytes(in));
  EXPECT_GT(r.As<fuse_attr_out>().attr.mtime, 2000u);
  EXPECT_EQ(r.As<fuse_attr_out>().attr.atime, 1000u);  // untouched
  ASSERT_EQ(chmod(dir_.Join("s").c_str(), 06755), 0);
  in = {};
  in.valid = FATTR_KILL_SUIDGID;
  r = Exec(FUSE_SETATTR, node, Bytes(in));
  EXPECT_EQ(r.As<fuse_attr_out>().attr.mode & 07777, 0755u);
}

// FUSE_HANDLE_KILLPRIV_V2: the kernel asks the server to strip setuid/setgid for callers without
// CAP_FSETID; without the flag (a privileged writer) the bits stay.
TEST_P(ExecutorTest, KillSuidSgidOnFlaggedWriteAndTruncatingOpen) {
  auto [node, fh] = Create(1, "k", 06755, O_RDWR);
  fuse_write_in w{};
  w.fh = fh;
  w.size = 1;
  ASSERT_EQ(Exec(FUSE_WRITE, node, Bytes(w) + "a").error, 0);
  EXPECT_EQ(Stat("k").st_mode & 07777, 06755u) << "unflagged write keeps the bits";
  w.write_flags = FUSE_WRITE_KILL_SUIDGID;
  ASSERT_EQ(Exec(FUSE_WRITE, node, Bytes(w) + "b").error, 0);
  EXPECT_EQ(Stat("k").st_mode & 07777, 0755u);

  ASSERT_EQ(chmod(dir_.Join("k").c_str(), 02745), 0);  // setgid without group-execute stays
  fuse_open_in open{};
  open.flags = O_WRONLY | O_TRUNC;
  open.open_flags = FUSE_OPEN_KILL_SUIDGID;
  ASSERT_EQ(Exec(FUSE_OPEN, node, Bytes(open)).error, 0);
  EXPECT_EQ(Stat("k").st_mode & 07777, 02745u);
  ASSERT_EQ(chmod(dir_.Join("k").c_str(), 04755), 0);
  ASSERT_EQ(Exec(FUSE_OPEN, node, Bytes(open)).error, 0);
  EXPECT_EQ(Stat("k").st_mode & 07777, 0755u);

  // CREATE of an existing file with O_TRUNC.
  ASSERT_EQ(chmod(dir_.Join("k").c_str(), 06775), 0);
  fuse_create_in create{};
  create.flags = O_WRONLY | O_CREAT | O_TRUNC;
  create.mode = S_IFREG | 0644;
  create.open_flags = FUSE_OPEN_KILL_SUIDGID;
  ASSERT_EQ(Exec(FUSE_CREATE, 1, Bytes(create) + CName("k")).error, 0);
  EXPECT_EQ(Stat("k").st_mode & 07777, 0775u);
}

TEST_P(ExecutorTest, SymlinkReadlinkLinkMknod) {
  ExecResult r = Exec(FUSE_SYMLINK, 1, CName("l") + CName("some/where"), 1000, 1000);
  ASSERT_EQ(r.error, 0);
  uint64_t l = r.As<fuse_entry_out>().nodeid;
  EXPECT_TRUE(S_ISLNK(r.As<fuse_entry_out>().attr.mode));
  EXPECT_EQ(Stat("l").st_uid, 1000u);
  EXPECT_EQ(Exec(FUSE_READLINK, l, "").body, "some/where");
  EXPECT_EQ(Exec(FUSE_READLINK, 1, "").error, EINVAL);

  auto [f, fh] = Create(1, "orig", 0644);
  fuse_link_in link{f};
  r = Exec(FUSE_LINK, 1, Bytes(link) + CName("hard"));
  ASSERT_EQ(r.error, 0);
  EXPECT_EQ(r.As<fuse_entry_out>().nodeid, f);
  EXPECT_EQ(r.As<fuse_entry_out>().attr.nlink, 2u);
  fuse_link_in dirlink{1};
  EXPECT_EQ(Exec(FUSE_LINK, 1, Bytes(dirlink) + CName("x")).error, EPERM);

  fuse_mknod_in fifo{};
  fifo.mode = S_IFIFO | 0640;
  r = Exec(FUSE_MKNOD, 1, Bytes(fifo) + CName("fifo"), 1000, 1000);
  ASSERT_EQ(r.error, 0);
  EXPECT_TRUE(S_ISFIFO(Stat("fifo").st_mode));
  EXPECT_EQ(Stat("fifo").st_uid, 1000u);
  fuse_open_in open_in{};
  EXPECT_EQ(Exec(FUSE_OPEN, r.As<fuse_entry_out>().nodeid, Bytes(open_in)).error, ENXIO);
  // Device nodes: for a root the export does not squash, as on the export itself; anyone else
  // gets the export kernel's EPERM.
  fuse_mknod_in chr{};
  chr.mode = S_IFCHR | 0600;
  chr.rdev = makedev(1, 3);
  EXPECT_EQ(Exec(FUSE_MKNOD, 1, Bytes(chr) + CName("usernull"), 1000, 1000).error, EPERM);
  ASSERT_EQ(Exec(FUSE_MKNOD, 1, Bytes(chr) + CName("null")).error, 0);
  EXPECT_TRUE(S_ISCHR(Stat("null").st_mode));
  EXPECT_EQ(Stat("null").st_rdev, makedev(1, 3));
  EXPECT_EQ(Exec(FUSE_SYMLINK, 1, CName("l") + CName("x")).error, EEXIST);
}

TEST_P(ExecutorTest, UnlinkRmdirRename) {
  std::ofstream(dir_.Join("a")) << "a";
  std::ofstream(dir_.Join("b")) << "b";
  ASSERT_EQ(mkdir(dir_.Join("d").c_str(), 0755), 0);
  uint64_t d = LookupId(1, "d");
  fuse_rename2_in in{};
  in.newdir = 1;
  in.flags = RENAME_NOREPLACE;
  EXPECT_EQ(Exec(FUSE_RENAME2, 1, Bytes(in) + CName("a") + CName("b")).error, EEXIST);
  in.flags = RENAME_EXCHANGE;
  EXPECT_EQ(Exec(FUSE_RENAME2, 1, Bytes(in) + CName("a") + CName("b")).error, 0);
  EXPECT_EQ(Slurp(dir_.Join("a")), "b");
  in.flags = RENAME_WHITEOUT;
  EXPECT_EQ(Exec(FUSE_RENAME2, 1, Bytes(in) + CName("a") + CName("c")).error, EINVAL);
  fuse_rename_in mv{d};
  EXPECT_EQ(Exec(FUSE_RENAME, 1, Bytes(mv) + CName("a") + CName("moved")).error, 0);
  EXPECT_EQ(Slurp(dir_.Join("d/moved")), "b");
  EXPECT_EQ(Exec(FUSE_RMDIR, 1, CName("d")).error, ENOTEMPTY);
  EXPECT_EQ(Exec(FUSE_UNLINK, 1, CName("d")).error, EISDIR);
  EXPECT_EQ(Exec(FUSE_UNLINK, d, CName("moved")).error, 0);
  EXPECT_EQ(Exec(FUSE_RMDIR, 1, CName("d")).error, 0);
  EXPECT_EQ(Exec(FUSE_UNLINK, 1, CName("nope")).error, ENOENT);
}

TEST_P(ExecutorTest, ReaddirOffsetsContinue) {
  for (int i = 0; i < 50; ++i) std::ofstream(dir_.Join("entry_" + std::to_string(i))) << i;
  fuse_open_in open_in{};
  ExecResult r = Exec(FUSE_OPENDIR, 1, Bytes(open_in));
  ASSERT_EQ(r.error, 0);
  uint64_t fh = r.As<fuse_open_out>().fh;
  std::map<std::string, int> names;
  uint64_t offset = 0;
  for (int round = 0; round < 100; ++round) {
    r = Exec(FUSE_READDIR, 1, ReadIn(fh, offset, 200));  // a few entries per call
    ASSERT_EQ(r.error, 0);
    ASSERT_LE(r.body.size(), 200u);
    if (r.body.empty()) break;
    size_t pos = 0;
    while (pos < r.body.size()) {
      fuse_dirent dirent;
      std::memcpy(&dirent, r.body.data() + pos, FUSE_NAME_OFFSET);
      names[std::string(r.body.data() + pos + FUSE_NAME_OFFSET, dirent.namelen)]++;
      offset = dirent.off;
      pos += FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET + dirent.namelen);
    }
    if (round == 2) std::ofstream(dir_.Join("late")) << "";  // snapshot: offsets stay stable
  }
  EXPECT_EQ(names.size(), 52u);  // 50 + . + ..
  for (auto& [name, count] : names) EXPECT_EQ(count, 1) << name;
  // A buffer too small for one entry returns nothing rather than overflowing.
  EXPECT_EQ(Exec(FUSE_READDIR, 1, ReadIn(fh, 0, 10)).body.size(), 0u);
  fuse_release_in rel{};
  rel.fh = fh;
  EXPECT_EQ(Exec(FUSE_RELEASEDIR, 1, Bytes(rel)).error, 0);
  EXPECT_EQ(Exec(FUSE_READDIR, 1, ReadIn(fh, 0, 4096)).error, ESTALE);
}

TEST_P(ExecutorTest, ReaddirplusCountsLookupsAndForgetDrops) {
  std::ofstream(dir_.Join("x")) << "x";
  uint64_t x = LookupId(1, "x");
  fuse_open_in open_in{};
  uint64_t fh = Exec(FUSE_OPENDIR, 1, Bytes(open_in)).As<fuse_open_out>().fh;
  ExecResult r = Exec(FUSE_READDIRPLUS, 1, ReadIn(fh, 0, 4096));
  ASSERT_EQ(r.error, 0);
  EXPECT_EQ(client_->nodes->LookupCount(x), 2u);
  // A buffer too small for any entry returns nothing and adds no lookup.
  r = Exec(FUSE_READDIRPLUS, 1, ReadIn(fh, 0, FUSE_NAME_OFFSET_DIRENTPLUS));
  ASSERT_EQ(r.error, 0);
  EXPECT_EQ(r.body.size(), 0u);
  EXPECT_EQ(client_->nodes->LookupCount(x), 2u);
  fuse_forget_in forget{1};
  Exec(FUSE_FORGET, x, Bytes(forget));
  EXPECT_EQ(client_->nodes->LookupCount(x), 1u);
  fuse_batch_forget_in batch{};
  batch.count = 1;
  fuse_forget_one one{x, 1};
  Exec(FUSE_BATCH_FORGET, 0, Bytes(batch) + Bytes(one));
  EXPECT_EQ(client_->nodes->LookupCount(x), 0u);
  fuse_getattr_in g{};
  EXPECT_EQ(Exec(FUSE_GETATTR, x, Bytes(g)).error, ESTALE);
}

// READDIRPLUS counts an entry whose file the table holds from one stat by name
// (NodeTable::HeldNode). A name renamed over since the listing's snapshot must still give the
// file it names now, with a lookup counted on that file's node and none on the held one.
TEST_P(ExecutorTest, ReaddirplusOfANameRenamedOverGivesTheFileItNamesNow) {
  std::ofstream(dir_.Join("x")) << "old";
  std::ofstream(dir_.Join("y")) << "new";
  const uint64_t x = LookupId(1, "x");
  // Held while this ref lives (the fixture's fd cache keeps nothing), as by a busy executor.
  absl::StatusOr<NodeRef> held = client_->nodes->Get(x);
  ASSERT_TRUE(held.ok()) << held.status();
  fuse_open_in open_in{};
  const uint64_t fh = Exec(FUSE_OPENDIR, 1, Bytes(open_in)).As<fuse_open_out>().fh;
  // The snapshot is taken at offset 0; x's cookie there is its index + 1.
  ExecResult plain = Exec(FUSE_READDIR, 1, ReadIn(fh, 0, 4096));
  ASSERT_EQ(plain.error, 0);
  uint64_t before_x = 0;
  bool found = false;
  for (size_t pos = 0; pos < plain.body.size() && !found;) {
    fuse_dirent dirent;
    std::memcpy(&dirent, plain.body.data() + pos, FUSE_NAME_OFFSET);
    if (std::string(plain.body.data() + pos + FUSE_NAME_OFFSET, dirent.namelen) == "x") {
      found = true;
    } else {
      before_x = dirent.off;
    }
    pos += FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET + dirent.namelen);
  }
  ASSERT_TRUE(found);
  ASSERT_GT(before_x, 0u) << "x listed first: the READDIRPLUS below would take a new snapshot";
  struct stat y_st {};
  ASSERT_EQ(stat(dir_.Join("y").c_str(), &y_st), 0);
  ASSERT_EQ(rename(dir_.Join("y").c_str(), dir_.Join("x").c_str()), 0);
  // Continues the old snapshot, whose x still carries the held file's inode number.
  ExecResult plus = Exec(FUSE_READDIRPLUS, 1, ReadIn(fh, before_x, 8192));
  ASSERT_EQ(plus.error, 0);
  uint64_t listed = 0;
  for (const auto& [name, entry] : PlusEntries(plus.body)) {
    if (name == "x" && entry.nodeid != 0) {
      listed = entry.nodeid;
      EXPECT_EQ(entry.attr.ino, y_st.st_ino);
      EXPECT_EQ(entry.attr.size, 3u);
    }
  }
  ASSERT_NE(listed, 0u);
  EXPECT_NE(listed, x);
  EXPECT_EQ(client_->nodes->LookupCount(x), 1u);
  EXPECT_EQ(client_->nodes->LookupCount(listed), 1u);
}

TEST_P(ExecutorTest, Xattrs) {
  auto [node, fh] = Create(1, "x", 0644);
  fuse_setxattr_in set{};
  set.size = 5;
  ASSERT_EQ(Exec(FUSE_SETXATTR, node, Bytes(set).substr(0, FUSE_COMPAT_SETXATTR_IN_SIZE) + CName("user.color") + "green").error, 0);
  set.flags = XATTR_CREATE;
  EXPECT_EQ(Exec(FUSE_SETXATTR, node, Bytes(set).substr(0, FUSE_COMPAT_SETXATTR_IN_SIZE) + CName("user.color") + "green").error, EEXIST);
  fuse_getxattr_in get{};
  ExecResult r = Exec(FUSE_GETXATTR, node, Bytes(get) + CName("user.color"));
  ASSERT_EQ(r.error, 0);
  EXPECT_EQ(r.As<fuse_getxattr_out>().size, 5u);
  get.size = 64;
  EXPECT_EQ(Exec(FUSE_GETXATTR, node, Bytes(get) + CName("user.color")).body, "green");
  get.size = 2;
  EXPECT_EQ(Exec(FUSE_GETXATTR, node, Bytes(get) + CName("user.color")).error, ERANGE);
  get.size = 64;
  EXPECT_EQ(Exec(FUSE_GETXATTR, node, Bytes(get) + CName("user.none")).error, ENODATA);
  r = Exec(FUSE_LISTXATTR, node, Bytes(get));
  ASSERT_EQ(r.error, 0);
  EXPECT_NE(r.body.find("user.color"), std::string::npos);
  EXPECT_EQ(Exec(FUSE_REMOVEXATTR, node, CName("user.color")).error, 0);
  EXPECT_EQ(Exec(FUSE_REMOVEXATTR, node, CName("user.color")).error, ENODATA);
}

TEST_P(ExecutorTest, XattrOnSymlinkDoesNotFollow) {
  std::ofstream(dir_.Join("target")) << "t";
  ASSERT_EQ(setxattr(dir_.Join("target").c_str(), "user.k", "v", 1, 0), 0);
  ASSERT_EQ(symlink("target", dir_.Join("sl").c_str()), 0);
  uint64_t sl = LookupId(1, "sl");
  fuse_getxattr_in get{};
  get.size = 16;
  EXPECT_NE(Exec(FUSE_GETXATTR, sl, Bytes(get) + CName("user.k")).body, "v");
}

TEST_P(ExecutorTest, StatfsAccessSeekAllocateCopy) {
  ExecResult r = Exec(FUSE_STATFS, 1, "");
  ASSERT_EQ(r.error, 0);
  EXPECT_GT(r.As<fuse_statfs_out>().st.bsize, 0u);
  EXPECT_EQ(r.As<fuse_statfs_out>().st.namelen, 255u);

  auto [node, fh] = Create(1, "data", 0640, O_RDWR, 1000, 1000);
  fuse_access_in access{};
  access.mask = R_OK | W_OK;
  EXPECT_EQ(Exec(FUSE_ACCESS, node, Bytes(access), 1000, 1000).error, 0);
  EXPECT_EQ(Exec(FUSE_ACCESS, node, Bytes(access), 2000, 1000).error, EACCES);
  access.mask = R_OK;
  EXPECT_EQ(Exec(FUSE_ACCESS, node, Bytes(access), 2000, 1000).error, 0);
  EXPECT_EQ(Exec(FUSE_ACCESS, node, Bytes(access), 2000, 2000).error, EACCES);
  access.mask = X_OK;
  EXPECT_EQ(Exec(FUSE_ACCESS, node, Bytes(access), 0, 0).error, EACCES);
  EXPECT_EQ(Exec(FUSE_ACCESS, 4711, Bytes(access)).error, ESTALE);

  fuse_fallocate_in falloc{};
  falloc.fh = fh;
  falloc.offset = 0;
  falloc.length = 8192;
  ASSERT_EQ(Exec(FUSE_FALLOCATE, node, Bytes(falloc)).error, 0);
  EXPECT_EQ(Stat("data").st_size, 8192);
  fuse_write_in w{};
  w.fh = fh;
  w.size = 4;
  ASSERT_EQ(Exec(FUSE_WRITE, node, Bytes(w) + "head").error, 0);
  w.offset = 1 << 20;
  ASSERT_EQ(Exec(FUSE_WRITE, node, Bytes(w) + "tail").error, 0);

  fuse_lseek_in seek{};
  seek.fh = fh;
  seek.offset = 0;
  seek.whence = SEEK_DATA;
  r = Exec(FUSE_LSEEK, node, Bytes(seek));
  ASSERT_EQ(r.error, 0);
  EXPECT_EQ(r.As<fuse_lseek_out>().offset, 0u);
  seek.offset = (1 << 20) + 100;
  EXPECT_EQ(Exec(FUSE_LSEEK, node, Bytes(seek)).error, ENXIO);

  auto [copy, copy_fh] = Create(1, "copy", 0644);
  fuse_copy_file_range_in cfr{};
  cfr.fh_in = fh;
  cfr.off_in = 1 << 20;
  cfr.nodeid_out = copy;
  cfr.fh_out = copy_fh;
  cfr.off_out = 2;
  cfr.len = 4;
  r = Exec(FUSE_COPY_FILE_RANGE, node, Bytes(cfr));
  ASSERT_EQ(r.error, 0);
  ASSERT_EQ(r.body.size(), sizeof(fuse_write_out));
  EXPECT_EQ(r.As<fuse_write_out>().size, 4u);
  r = Exec(fuse::kOpCopyFileRange64, node, Bytes(cfr));
  ASSERT_EQ(r.error, 0);
  ASSERT_EQ(r.body.size(), sizeof(fuse::CopyFileRangeOut));
  EXPECT_EQ(r.As<fuse::CopyFileRangeOut>().bytes_copied, 4u);
  EXPECT_EQ(Slurp(dir_.Join("copy")), std::string("\0\0tail", 6));
  cfr.fh_out = 999;
  EXPECT_EQ(Exec(FUSE_COPY_FILE_RANGE, node, Bytes(cfr)).error, ESTALE);

  fuse_fsync_in fs{};
  fs.fh = fh;
  EXPECT_EQ(Exec(FUSE_FSYNC, node, Bytes(fs)).error, 0);
  EXPECT_EQ(Exec(FUSE_FSYNCDIR, node, Bytes(fs)).error, ENOTDIR);
}

// fstat, ftruncate, fchmod and fgetxattr on a file that was unlinked while open: with FH flags
// the open file is used; without, the node (reopened by handle while the inode lives).
TEST_P(ExecutorTest, UnlinkedOpenFileKeepsItsAttributes) {
  auto [node, fh] = Create(1, "u", 0644);
  ASSERT_EQ(Exec(FUSE_UNLINK, 1, CName("u")).error, 0);
  fuse_setattr_in set{};
  set.valid = FATTR_SIZE | FATTR_FH;
  set.fh = fh;
  set.size = 4096;
  ExecResult r = Exec(FUSE_SETATTR, node, Bytes(set));
  ASSERT_EQ(r.error, 0);
  EXPECT_EQ(r.As<fuse_attr_out>().attr.size, 4096u);
  EXPECT_EQ(r.As<fuse_attr_out>().attr.nlink, 0u);
  fuse_getattr_in get{};
  get.getattr_flags = FUSE_GETATTR_FH;
  get.fh = fh;
  r = Exec(FUSE_GETATTR, node, Bytes(get));
  ASSERT_EQ(r.error, 0);
  EXPECT_EQ(r.As<fuse_attr_out>().attr.size, 4096u);
  set = {};
  set.valid = FATTR_MODE;
  set.mode = 0600;
  r = Exec(FUSE_SETATTR, node, Bytes(set));
  ASSERT_EQ(r.error, 0);
  EXPECT_EQ(r.As<fuse_attr_out>().attr.mode & 07777, 0600u);
  fuse_setxattr_in xattr{};
  xattr.size = 1;
  EXPECT_EQ(Exec(FUSE_SETXATTR, node, Bytes(xattr).substr(0, FUSE_COMPAT_SETXATTR_IN_SIZE) +
                                          CName("user.k") + "v")
                .error,
            0);
  // A handle of another node is refused, not used for this one.
  auto [other, other_fh] = Create(1, "other", 0644);
  set = {};
  set.valid = FATTR_SIZE | FATTR_FH;
  set.fh = other_fh;
  EXPECT_EQ(Exec(FUSE_SETATTR, node, Bytes(set)).error, EBADF);
}

// Deleted behind the client's back with no handle open: the path table still holds the inode;
// the handle table answers ESTALE (so the kernel looks the name up again).
TEST_P(ExecutorTest, NodeOfDeletedFile) {
  std::ofstream(dir_.Join("gone")) << "x";
  const uint64_t node = LookupId(1, "gone");
  ASSERT_NE(node, 0u);
  ASSERT_EQ(unlink(dir_.Join("gone").c_str()), 0);
  ExecResult r = Exec(FUSE_GETATTR, node, Bytes(fuse_getattr_in{}));
  if (handles()) {
    EXPECT_EQ(r.error, ESTALE);
  } else {
    ASSERT_EQ(r.error, 0);
    EXPECT_EQ(r.As<fuse_attr_out>().attr.nlink, 0u);
  }
  EXPECT_EQ(LookupId(1, "gone"), 0u);
  Exec(FUSE_FORGET, node, Bytes(fuse_forget_in{1}));
  EXPECT_EQ(Exec(FUSE_GETATTR, node, Bytes(fuse_getattr_in{})).error, ESTALE);
}

// A NodeTable that answers ESTALE for one node: a filesystem that will not reopen an unlinked
// file by handle even while it is open.
class StaleNodeTable final : public NodeTable {
 public:
  StaleNodeTable(std::unique_ptr<NodeTable> inner, uint64_t stale)
      : inner_(std::move(inner)), stale_(stale) {}
  absl::StatusOr<NodeRef> Get(uint64_t nodeid) const override {
    if (nodeid == stale_) return ErrnoError(ESTALE, "test: stale");
    return inner_->Get(nodeid);
  }
  bool Contains(uint64_t nodeid) const override { return inner_->Contains(nodeid); }
  absl::StatusOr<EntryIds> AddLookup(UniqueFd fd, const struct stat& st,
                                     InodeHandle* new_handle = nullptr) override {
    return inner_->AddLookup(std::move(fd), st, new_handle);
  }
  void Forget(uint64_t nodeid, uint64_t nlookup) override { inner_->Forget(nodeid, nlookup); }
  NodeRef HeldNode(const InodeKey& key) const override { return inner_->HeldNode(key); }
  std::optional<EntryIds> AddLookupOf(const Node& node) override {
    return inner_->AddLookupOf(node);
  }
  std::optional<InodeKey> KeyOf(uint64_t nodeid) const override { return inner_->KeyOf(nodeid); }
  std::optional<uint64_t> FindByInode(const InodeKey& key) const override {
    return inner_->FindByInode(key);
  }
  uint64_t LookupCount(uint64_t nodeid) const override { return inner_->LookupCount(nodeid); }
  size_t size() const override { return inner_->size(); }

 private:
  std::unique_ptr<NodeTable> inner_;
  const uint64_t stale_;
};

TEST_P(ExecutorTest, StaleNodeServedThroughAnOpenHandle) {
  auto [node, fh] = Create(1, "open", 0644);
  ASSERT_EQ(Exec(FUSE_UNLINK, 1, CName("open")).error, 0);
  client_->nodes = std::make_unique<StaleNodeTable>(std::move(client_->nodes), node);
  ExecResult r = Exec(FUSE_GETATTR, node, Bytes(fuse_getattr_in{}));
  ASSERT_EQ(r.error, 0);
  EXPECT_EQ(r.As<fuse_attr_out>().attr.nlink, 0u);
  fuse_setattr_in set{};
  set.valid = FATTR_MODE;
  set.mode = 0640;
  r = Exec(FUSE_SETATTR, node, Bytes(set));
  ASSERT_EQ(r.error, 0);
  EXPECT_EQ(r.As<fuse_attr_out>().attr.mode & 07777, 0640u);
  fuse_getxattr_in get{};
  EXPECT_EQ(Exec(FUSE_GETXATTR, node, Bytes(get) + CName("user.none")).error, ENODATA);
  set = {};
  set.valid = FATTR_SIZE | FATTR_FH;
  set.fh = fh;
  set.size = 7;
  EXPECT_EQ(Exec(FUSE_SETATTR, node, Bytes(set)).As<fuse_attr_out>().attr.size, 7u);
  fuse_getattr_in with_fh{};
  with_fh.getattr_flags = FUSE_GETATTR_FH;
  with_fh.fh = fh;
  EXPECT_EQ(Exec(FUSE_GETATTR, node, Bytes(with_fh)).As<fuse_attr_out>().attr.size, 7u);
  fuse_release_in release{};
  release.fh = fh;
  ASSERT_EQ(Exec(FUSE_RELEASE, node, Bytes(release)).error, 0);
  EXPECT_EQ(Exec(FUSE_GETATTR, node, Bytes(fuse_getattr_in{})).error, ESTALE);
}

// Issue 10: ids the client did not get from this table (here: from an older server instance)
// answer ESTALE for every kind of request, never reach another object, and leave no trace.
TEST_P(ExecutorTest, UnknownNodeIdsAndFhAreEstale) {
  auto [node, fh] = Create(1, "mine", 0644);
  ASSERT_NE(node, 0u);
  uint64_t unknown_node = node ^ 0x5a5a5a5a5a5a5a5aull;
  uint64_t unknown_fh = fh ^ 0x5a5a5a5a5a5a5a5aull;
  for (uint64_t id : {unknown_node, uint64_t{2}, uint64_t{3}}) {
    SCOPED_TRACE(id);
    EXPECT_EQ(Exec(FUSE_LOOKUP, id, CName("mine")).error, ESTALE);
    EXPECT_EQ(Exec(FUSE_GETATTR, id, Bytes(fuse_getattr_in{})).error, ESTALE);
    fuse_open_in open_in{};
    open_in.flags = O_RDWR;
    EXPECT_EQ(Exec(FUSE_OPEN, id, Bytes(open_in)).error, ESTALE);
    EXPECT_EQ(Exec(FUSE_OPENDIR, id, Bytes(open_in)).error, ESTALE);
    fuse_create_in create{};
    create.flags = O_RDWR | O_CREAT;
    create.mode = S_IFREG | 0644;
    EXPECT_EQ(Exec(FUSE_CREATE, id, Bytes(create) + CName("x")).error, ESTALE);
    fuse_mkdir_in mkdir_in{};
    mkdir_in.mode = 0755;
    EXPECT_EQ(Exec(FUSE_MKDIR, id, Bytes(mkdir_in) + CName("d")).error, ESTALE);
    EXPECT_EQ(Exec(FUSE_UNLINK, id, CName("mine")).error, ESTALE);
    Exec(FUSE_FORGET, id, Bytes(fuse_forget_in{1}));  // ignored
  }
  for (uint64_t id : {unknown_fh, uint64_t{1}, uint64_t{2}}) {
    SCOPED_TRACE(id);
    EXPECT_EQ(Exec(FUSE_READ, node, ReadIn(id, 0, 10)).error, ESTALE);
    fuse_write_in w{};
    w.fh = id;
    w.size = 1;
    EXPECT_EQ(Exec(FUSE_WRITE, node, Bytes(w) + "w").error, ESTALE);
    fuse_flush_in flush{};
    flush.fh = id;
    EXPECT_EQ(Exec(FUSE_FLUSH, node, Bytes(flush)).error, ESTALE);
    fuse_fsync_in fsync_in{};
    fsync_in.fh = id;
    EXPECT_EQ(Exec(FUSE_FSYNC, node, Bytes(fsync_in)).error, ESTALE);
    EXPECT_EQ(Exec(FUSE_READDIR, 1, ReadIn(id, 0, 4096)).error, ESTALE);
    fuse_release_in release{};
    release.fh = id;
    EXPECT_EQ(Exec(FUSE_RELEASE, node, Bytes(release)).error, ESTALE);
  }
  EXPECT_EQ(Stat("mine").st_size, 0);
  EXPECT_EQ(access(dir_.Join("x").c_str(), F_OK), -1);
  EXPECT_EQ(access(dir_.Join("d").c_str(), F_OK), -1);
  EXPECT_EQ(client_->nodes->LookupCount(node), 1u);
}

// An offset above INT64_MAX is negative as off_t; io_uring would even take -1 as "the current
// file position" (a READ at -1 returned data).
TEST_P(ExecutorTest, NegativeOffsetsAreEinval) {
  auto [node, fh] = Create(1, "n", 0644);
  fuse_write_in w{};
  w.fh = fh;
  w.size = 4;
  ASSERT_EQ(Exec(FUSE_WRITE, node, Bytes(w) + "data").error, 0);
  for (uint64_t offset : {~uint64_t{0}, uint64_t{1} << 63}) {
    SCOPED_TRACE(offset);
    EXPECT_EQ(Exec(FUSE_READ, node, ReadIn(fh, offset, 4)).error, EINVAL);
    w.offset = offset;
    EXPECT_EQ(Exec(FUSE_WRITE, node, Bytes(w) + "evil").error, EINVAL);
    fuse_fallocate_in falloc{};
    falloc.fh = fh;
    falloc.offset = offset;
    falloc.length = 1;
    EXPECT_EQ(Exec(FUSE_FALLOCATE, node, Bytes(falloc)).error, EINVAL);
    falloc.offset = 0;
    falloc.length = offset;
    EXPECT_EQ(Exec(FUSE_FALLOCATE, node, Bytes(falloc)).error, EINVAL);
    fuse_copy_file_range_in cfr{};
    cfr.fh_in = fh;
    cfr.fh_out = fh;
    cfr.nodeid_out = node;
    cfr.len = 4;
    cfr.off_in = offset;
    cfr.off_out = 8;
    EXPECT_EQ(Exec(FUSE_COPY_FILE_RANGE, node, Bytes(cfr)).error, EINVAL);
    cfr.off_in = 0;
    cfr.off_out = offset;
    EXPECT_EQ(Exec(fuse::kOpCopyFileRange64, node, Bytes(cfr)).error, EINVAL);
  }
  // The largest valid offset is still served.
  EXPECT_EQ(Exec(FUSE_READ, node, ReadIn(fh, uint64_t{1} << 62, 4)).body, "");
  EXPECT_EQ(Slurp(dir_.Join("n")), "data");
}

// fuse_entry_out.generation comes from the file: non-zero, the same however the file is reached
// (LOOKUP, CREATE, LINK, READDIRPLUS), different between files.
TEST_P(ExecutorTest, EntryGenerationComesFromTheFile) {
  fuse_create_in create{};
  create.flags = O_RDWR | O_CREAT;
  create.mode = S_IFREG | 0644;
  ExecResult created = Exec(FUSE_CREATE, 1, Bytes(create) + CName("g"));
  ASSERT_EQ(created.error, 0);
  const fuse_entry_out g = created.As<fuse_entry_out>();
  EXPECT_NE(g.generation, 0u);
  ExecResult looked_up = Exec(FUSE_LOOKUP, 1, CName("g"));
  ASSERT_EQ(looked_up.error, 0);
  EXPECT_EQ(looked_up.As<fuse_entry_out>().generation, g.generation);
  fuse_link_in link_in{};
  link_in.oldnodeid = g.nodeid;
  ExecResult linked = Exec(FUSE_LINK, 1, Bytes(link_in) + CName("g2"));
  ASSERT_EQ(linked.error, 0);
  EXPECT_EQ(linked.As<fuse_entry_out>().generation, g.generation);

  fuse_mkdir_in mkdir_in{};
  mkdir_in.mode = 0755;
  ExecResult dir = Exec(FUSE_MKDIR, 1, Bytes(mkdir_in) + CName("d"));
  ASSERT_EQ(dir.error, 0);
  EXPECT_NE(dir.As<fuse_entry_out>().generation, 0u);
  EXPECT_NE(dir.As<fuse_entry_out>().generation, g.generation);
  ExecResult sym = Exec(FUSE_SYMLINK, 1, CName("s") + CName("target"));
  ASSERT_EQ(sym.error, 0);
  EXPECT_NE(sym.As<fuse_entry_out>().generation, 0u);
  fuse_mknod_in mknod_in{};
  mknod_in.mode = S_IFIFO | 0644;
  ExecResult fifo = Exec(FUSE_MKNOD, 1, Bytes(mknod_in) + CName("p"));
  ASSERT_EQ(fifo.error, 0);
  EXPECT_NE(fifo.As<fuse_entry_out>().generation, 0u);

  fuse_open_in open_in{};
  const uint64_t dir_fh = Exec(FUSE_OPENDIR, 1, Bytes(open_in)).As<fuse_open_out>().fh;
  ExecResult plus = Exec(FUSE_READDIRPLUS, 1, ReadIn(dir_fh, 0, 8192));
  ASSERT_EQ(plus.error, 0);
  int seen = 0;
  for (const auto& [name, entry] : PlusEntries(plus.body)) {
    if (name == "g" || name == "g2") {
      EXPECT_EQ(entry.generation, g.generation) << name;
      ++seen;
    }
  }
  EXPECT_EQ(seen, 2);
}

INSTANTIATE_TEST_SUITE_P(Tables, ExecutorTest, ::testing::Values("path", "handles"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ringfs::server
