// Test-only fixture: a temp export, one client state, and Exec() that runs a hand-built frame
// through DecodeRequest + Executor (file I/O done synchronously with pread/pwrite/fsync).
// The client state keeps its nodes by file handle with no fd cached, so every node an executor
// uses is reopened by handle (RegistryOptions() changes that).
// Requests run as their callers with no_root_squash (as root, the test's process switches to
// the caller for each request and back afterwards); the export directory is 0777 so that any
// caller may create in it.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "common/status.h"
#include "server/client_registry.h"
#include "server/executor.h"
#include "server/request.h"
#include "server/thread_creds.h"
#include "server/test_client.h"

namespace ringfs::server::testing {

struct ExecResult {
  int error = 0;  // errno, 0 on success
  std::string body;
  template <typename T>
  T As(size_t offset = 0) const {
    T value{};
    if (body.size() >= offset + sizeof(T)) std::memcpy(&value, body.data() + offset, sizeof(T));
    return value;
  }
};

class ExecutorFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(chmod(dir_.path().c_str(), 0777), 0);
    root_fd_.Reset(open(dir_.path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(root_fd_.valid());
    registry_ = std::make_unique<ClientRegistry>(root_fd_.get(), RegistryOptions());
    auto state = registry_->GetOrCreate("fixture");
    ASSERT_TRUE(state.ok()) << state.status();
    client_ = *state;
  }

  virtual ClientRegistry::Options RegistryOptions() const {
    ClientRegistry::Options options;
    options.node_fds = std::make_shared<NodeFdCache>(0);
    return options;
  }

  ExecResult Exec(uint32_t opcode, uint64_t nodeid, const std::string& args, uint32_t uid = 0,
                  uint32_t gid = 0) {
    std::string frame = Frame(opcode, ++unique_, nodeid, args, uid, gid);
    ExecResult result;
    auto request = DecodeRequest(frame);
    if (!request.ok()) {
      result.error = ToErrno(request.status());
      return result;
    }
    OpContext ctx;
    ctx.client = client_.get();
    ctx.export_options = &export_options_;
    ctx.nodeid = request->nodeid;
    ctx.uid = request->uid;
    ctx.gid = request->gid;
    std::vector<char> buffer(request->reply_capacity + 1);
    ReplyBody body(buffer.data(), request->reply_capacity);
    Outcome outcome = executor_.Execute(ctx, *request, body);
    absl::Status status = outcome.status;
    if (status.ok() && outcome.io) {
      const AsyncIo& io = *outcome.io;
      int fd = io.handle->fd.get();
      ssize_t n = 0;
      switch (io.kind) {
        case AsyncIo::Kind::kRead:
          n = pread(fd, buffer.data(), io.length, static_cast<off_t>(io.offset));
          break;
        case AsyncIo::Kind::kWrite:
          n = pwrite(fd, io.write_data, io.length, static_cast<off_t>(io.offset));
          break;
        case AsyncIo::Kind::kFsync:
          n = io.datasync ? fdatasync(fd) : fsync(fd);
          break;
      }
      status = Executor::CompleteIo(io, n < 0 ? -errno : static_cast<int>(n), body);
    }
    // The test itself goes on as root.
    if (CanActAsCallers()) ActAsServer();
    result.error = ToErrno(status);
    if (status.ok()) result.body.assign(buffer.data(), body.size());
    return result;
  }

  // LOOKUP/CREATE helpers returning the node id (0 on failure).
  uint64_t LookupId(uint64_t parent, const std::string& name) {
    ExecResult r = Exec(FUSE_LOOKUP, parent, CName(name));
    return r.error == 0 ? r.As<fuse_entry_out>().nodeid : 0;
  }

  TempDir dir_;
  UniqueFd root_fd_;
  std::unique_ptr<ClientRegistry> registry_;
  std::shared_ptr<ClientState> client_;
  ExportOptions export_options_{.squash = ExportOptions::Squash::kNone};
  Executor executor_{Executor::Options{.act_as_callers = CanActAsCallers()}};
  uint64_t unique_ = 0;
};

}  // namespace ringfs::server::testing
