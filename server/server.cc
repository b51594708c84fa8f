#include "server/server.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "absl/strings/str_format.h"
#include "common/status.h"

namespace ringfs::server {

Server::Server(ServerConfig config) : config_(std::move(config)) {}

Server::~Server() { Stop(); }

absl::Status Server::Start() {
  export_fd_.Reset(open(config_.export_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!export_fd_.valid()) {
    return ErrnoError(errno, absl::StrFormat("open export '%s'", config_.export_dir));
  }
  registry_ = std::make_unique<ClientRegistry>(export_fd_.get());
  for (uint32_t i = 0; i < config_.workers; ++i) {
    Worker::Options options;
    options.index = i;
    options.floor = config_.floor;
    workers_.push_back(std::make_unique<Worker>(options));
    RETURN_IF_ERROR(workers_.back()->Start());
  }
  Listener::Options options;
  options.listen = config_.listen;
  options.token = config_.token;
  options.max_inflight = config_.max_inflight;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  options.server_id = absl::StrFormat("%s:%d", host, getpid());
  listener_ = std::make_unique<Listener>(options, registry_.get(), [this](ConnectionSetup setup) {
    uint64_t n = next_worker_.fetch_add(1) % workers_.size();
    workers_[n]->Adopt(std::move(setup));
  });
  return listener_->Start();
}

void Server::Stop() {
  if (listener_) listener_->Stop();
  for (auto& worker : workers_) worker->Stop();
}

const std::string& Server::bound_address() const {
  static const std::string kNone;
  return listener_ ? listener_->bound_address() : kNone;
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& line) {
  std::string tmp = absl::StrFormat("%s.tmp.%d", path, getpid());
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return ErrnoError(errno, absl::StrFormat("create %s", tmp));
  bool ok = std::fprintf(f, "%s\n", line.c_str()) >= 0;
  ok = std::fflush(f) == 0 && ok;
  ok = fsync(fileno(f)) == 0 && ok;
  int err = errno;
  std::fclose(f);
  if (!ok) {
    unlink(tmp.c_str());
    return ErrnoError(err, absl::StrFormat("write %s", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    unlink(tmp.c_str());
    return ErrnoError(err, absl::StrFormat("rename to %s", path));
  }
  return absl::OkStatus();
}

}  // namespace ringfs::server
