// Fixtures for the control-plane tests, on top of tests/harness: ControlTest runs a real
// ringfs-server and ringfs-mount (RingfsEnv: temp tree, watchdog, forced cleanup) with the
// control service on a Unix socket in the temp tree or on loopback TCP with a token, and
// optionally -o metrics=; it waits until those endpoints answer. Plus what the harness does
// not have: running a program with stdout and stderr captured apart (ringfsctl's JSON), pinning
// to a CPU. REQUIRES: root. One test thread.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "proto/control.grpc.pb.h"
#include "tests/harness/ringfs_test.h"

namespace ringfs::controller::testing {

struct CommandResult {
  int exit_code = -1;  // -1: killed (timeout) or did not run
  std::string out;
  std::string err;
};

// Runs `argv` (argv[0] a path) to completion or `timeout`, stdout and stderr captured apart.
// `setup` runs in the child before exec (e.g. to drop privileges); it must be fork-safe.
CommandResult RunCapture(const std::vector<std::string>& argv,
                         std::chrono::milliseconds timeout = std::chrono::seconds(20),
                         void (*setup)() = nullptr);

// build/bin/ringfsctl + args.
CommandResult RunCtl(const std::vector<std::string>& args);

// The program `name` found in $PATH, or "" (fio is optional for some tests).
std::string FindInPath(const std::string& name);

// Pins the calling thread to `cpu`.
bool PinToCpu(int cpu);

struct ControlSpec {
  std::string transport = "uring";
  enum class Control { kUnix, kTcp } control = Control::kUnix;
  bool metrics = false;
  std::vector<std::string> extra_mount_options;  // e.g. "writeback_cache"
};

class ControlTest : public ringfs::testing::RingfsTestBase {
 protected:
  void SetUp() override;
  virtual ControlSpec Spec() const { return ControlSpec{}; }

  const std::string& mountpoint() const { return env_->mount_dir(); }
  // The control endpoint as ringfsctl takes it: unix:PATH or 127.0.0.1:PORT.
  const std::string& control_address() const { return control_address_; }
  const std::string& socket_path() const { return socket_path_; }  // "" on TCP
  const std::string& token() const { return token_; }              // "" on Unix
  int metrics_port() const { return metrics_port_; }

  std::unique_ptr<control::QueueControl::Stub> NewStub() const;
  // Adds the bearer token on TCP.
  void Authorize(grpc::ClientContext* context) const;
  // ringfsctl --control <endpoint> [--token-file F] + args.
  CommandResult Ctl(const std::vector<std::string>& args) const;

  std::string control_address_, socket_path_, token_, token_file_;
  int metrics_port_ = 0;
};

// ListQueues over `stub`; a failed call is a test failure (and an empty state).
control::QueueState ListQueuesOrFail(control::QueueControl::Stub* stub);

// The queue `qid` of `state`; a missing one is a test failure (and an empty QueueInfo).
control::QueueInfo QueueOf(const control::QueueState& state, uint32_t qid);

}  // namespace ringfs::controller::testing
