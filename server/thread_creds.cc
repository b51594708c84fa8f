#include "server/thread_creds.h"

#include <linux/capability.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "common/status.h"

namespace ringfs::server {
namespace {

struct ThreadState {
  bool known = false;  // false: the thread still has the process's own credentials
  bool server = true;  // acting as the server (root, capabilities effective)
  uid_t uid = 0;
  gid_t gid = 0;
  const GroupList* groups = nullptr;  // identity of the list last set (kept alive below)
  std::shared_ptr<const GroupList> groups_hold;
  uint64_t switches = 0;
};

thread_local ThreadState state;

int Capget(__user_cap_data_struct (&data)[2]) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  return static_cast<int>(syscall(SYS_capget, &header, data));
}

// The permitted set never changes while the server runs: read once per thread.
int SetEffective(bool all_permitted) {
  thread_local __user_cap_data_struct permitted[2]{};
  thread_local bool known = false;
  if (!known) {
    if (Capget(permitted) != 0) return -1;
    known = true;
  }
  __user_cap_data_struct data[2]{};
  for (int i = 0; i < 2; ++i) {
    data[i].permitted = permitted[i].permitted;
    data[i].inheritable = permitted[i].inheritable;
    data[i].effective = all_permitted ? permitted[i].permitted : 0;
  }
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  return static_cast<int>(syscall(SYS_capset, &header, data));
}

bool Permitted(const __user_cap_data_struct (&data)[2], int cap) {
  return (data[cap / 32].permitted & (1u << (cap % 32))) != 0;
}

// Back to root with every permitted capability effective. Order: capabilities first (setgroups
// needs CAP_SETGID), then the ids.
int BecomeRoot() {
  if (SetEffective(true) != 0) return -1;
  if (syscall(SYS_setgroups, 0, nullptr) != 0) return -1;
  setfsgid(0);
  setfsuid(0);
  if (setfsuid(static_cast<uid_t>(-1)) != 0) return -1;
  return 0;
}

}  // namespace

bool CanActAsCallers() {
  if (getuid() != 0 || geteuid() != 0) return false;
  __user_cap_data_struct data[2]{};
  if (Capget(data) != 0) return false;
  for (int cap : {CAP_SETUID, CAP_SETGID, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER,
                  CAP_CHOWN, CAP_FSETID}) {
    if (!Permitted(data, cap)) return false;
  }
  return true;
}

absl::Status ActAs(const CallerIdentity& who) {
  if (state.known && !state.server && state.uid == who.uid && state.gid == who.gid &&
      state.groups == who.groups.get()) {
    return absl::OkStatus();
  }
  const bool root = who.uid == 0;
  ++state.switches;
  // Straight from one identity to the next: the capabilities first (setgroups needs
  // CAP_SETGID), then groups, gid and uid; a non-root identity then drops them all.
  int err = 0;
  if (SetEffective(true) != 0) {
    err = errno;
  } else if (syscall(SYS_setgroups, who.groups->size(), who.groups->data()) != 0) {
    err = errno;
  } else {
    setfsgid(who.gid);
    setfsuid(who.uid);
    // setfsuid/setfsgid report nothing: read both back.
    if (static_cast<uid_t>(setfsuid(static_cast<uid_t>(-1))) != who.uid ||
        static_cast<gid_t>(setfsgid(static_cast<gid_t>(-1))) != who.gid) {
      err = EPERM;
    } else if (!root && SetEffective(false) != 0) {
      err = errno;
    }
  }
  if (err != 0) {
    BecomeRoot();
    state = ThreadState{.known = true, .switches = state.switches};
    return ErrnoError(err, "act as the caller");
  }
  state.known = true;
  state.server = false;
  state.uid = who.uid;
  state.gid = who.gid;
  state.groups = who.groups.get();
  state.groups_hold = who.groups;
  return absl::OkStatus();
}

void ActAsServer() {
  if (state.known && state.server) return;
  if (!state.known && getuid() != 0) return;  // never switched: nothing to undo
  ++state.switches;
  BecomeRoot();
  state = ThreadState{.known = true, .switches = state.switches};
}

ServerCredsScope::ServerCredsScope() {
  if (!state.known || state.server) return;  // already the server
  // Acting as a root caller is fsuid 0 with every permitted capability effective (ActAs drops
  // them only for others): all the scope would set. Skipping it saves a capset and two
  // setfsuids (each a new set of credentials freed through RCU) per small write of root's.
  if (state.uid == 0) return;
  // Only the file-system uid and the capabilities matter to what the scope does.
  SetEffective(true);
  setfsuid(0);
  switched_ = true;
}

ServerCredsScope::~ServerCredsScope() {
  if (!switched_) return;
  setfsuid(state.uid);
  if (state.uid != 0) SetEffective(false);
}

uint64_t ThreadCredSwitches() { return state.switches; }

}  // namespace ringfs::server
