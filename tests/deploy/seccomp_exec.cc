// seccomp_exec: runs a command under a seccomp profile in the JSON form the kubelet hands to
// the container runtime (defaultAction, defaultErrnoRet, architectures, syscalls with names,
// action, errnoRet, args), loaded with libseccomp as runc and crun do. Test tool only: it lets
// it_seccomp run the real ringfs-server under deploy/k8s/seccomp/ringfs-io-uring.json.
//
//   seccomp_exec PROFILE [--without NAME,NAME...] -- COMMAND [ARGS...]
//   seccomp_exec PROFILE --unknown        names libseccomp cannot resolve, one per line
//
// --without drops those names from every rule (e.g. io_uring_setup: the runtimes' default).
// Names libseccomp does not know are skipped, as runc does; --unknown lists them.
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <seccomp.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"

namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "seccomp_exec: %s\n", message.c_str());
  std::exit(2);
}

const Value* Field(const Value& v, const std::string& key) {
  if (!v.has_struct_value()) return nullptr;
  auto it = v.struct_value().fields().find(key);
  return it == v.struct_value().fields().end() ? nullptr : &it->second;
}

std::string Text(const Value* v) { return v == nullptr ? "" : v->string_value(); }

uint32_t Action(const std::string& name, const Value* errno_ret, uint32_t default_errno) {
  if (name == "SCMP_ACT_ALLOW") return SCMP_ACT_ALLOW;
  if (name == "SCMP_ACT_ERRNO") {
    return SCMP_ACT_ERRNO(errno_ret != nullptr ? static_cast<uint16_t>(errno_ret->number_value())
                                               : default_errno);
  }
  if (name == "SCMP_ACT_KILL_PROCESS") return SCMP_ACT_KILL_PROCESS;
  if (name == "SCMP_ACT_LOG") return SCMP_ACT_LOG;
  Fail("unsupported action " + name);
}

scmp_compare Compare(const std::string& op) {
  if (op == "SCMP_CMP_EQ") return SCMP_CMP_EQ;
  if (op == "SCMP_CMP_NE") return SCMP_CMP_NE;
  if (op == "SCMP_CMP_MASKED_EQ") return SCMP_CMP_MASKED_EQ;
  if (op == "SCMP_CMP_LT") return SCMP_CMP_LT;
  if (op == "SCMP_CMP_LE") return SCMP_CMP_LE;
  if (op == "SCMP_CMP_GT") return SCMP_CMP_GT;
  if (op == "SCMP_CMP_GE") return SCMP_CMP_GE;
  Fail("unsupported comparison " + op);
}

uint32_t Arch(const std::string& name) {
  static const std::pair<const char*, uint32_t> kArchs[] = {
      {"SCMP_ARCH_X86_64", SCMP_ARCH_X86_64},
      {"SCMP_ARCH_X86", SCMP_ARCH_X86},
      {"SCMP_ARCH_X32", SCMP_ARCH_X32},
      {"SCMP_ARCH_AARCH64", SCMP_ARCH_AARCH64},
      {"SCMP_ARCH_ARM", SCMP_ARCH_ARM}};
  for (const auto& [text, arch] : kArchs) {
    if (name == text) return arch;
  }
  Fail("unsupported architecture " + name);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) Fail("usage: seccomp_exec PROFILE [--without A,B] -- COMMAND... | --unknown");
  std::ifstream in(argv[1]);
  if (!in) Fail(std::string("cannot read ") + argv[1]);
  std::stringstream json;
  json << in.rdbuf();
  Value profile;
  if (auto s =
          google::protobuf::util::JsonStringToMessage(json.str(), profile.mutable_struct_value());
      !s.ok()) {
    Fail("bad profile: " + s.ToString());
  }
  std::set<std::string> without;
  bool list_unknown = false;
  int command = -1;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--unknown") {
      list_unknown = true;
    } else if (arg == "--without" && i + 1 < argc) {
      for (absl::string_view name : absl::StrSplit(argv[++i], ',')) without.emplace(name);
    } else if (arg == "--") {
      command = i + 1;
      break;
    } else {
      Fail("unexpected argument " + arg);
    }
  }
  if (!list_unknown && (command < 0 || command >= argc)) Fail("no command after --");

  const Value* default_errno = Field(profile, "defaultErrnoRet");
  const uint32_t errno_ret =
      default_errno != nullptr ? static_cast<uint32_t>(default_errno->number_value()) : EPERM;
  scmp_filter_ctx filter =
      seccomp_init(Action(Text(Field(profile, "defaultAction")), default_errno, errno_ret));
  if (filter == nullptr) Fail("seccomp_init failed");
  if (const Value* archs = Field(profile, "architectures")) {
    for (const Value& arch : archs->list_value().values()) {
      int rc = seccomp_arch_add(filter, Arch(arch.string_value()));
      if (rc != 0 && rc != -EEXIST)
        Fail("seccomp_arch_add " + arch.string_value() + ": " + std::strerror(-rc));
    }
  }
  std::set<std::string> unknown;
  if (const Value* rules = Field(profile, "syscalls")) {
    for (const Value& rule : rules->list_value().values()) {
      const uint32_t action =
          Action(Text(Field(rule, "action")), Field(rule, "errnoRet"), errno_ret);
      std::vector<scmp_arg_cmp> cmps;
      if (const Value* args = Field(rule, "args")) {
        for (const Value& arg : args->list_value().values()) {
          const Value* two = Field(arg, "valueTwo");
          cmps.push_back({static_cast<unsigned>(Field(arg, "index")->number_value()),
                          Compare(Text(Field(arg, "op"))),
                          static_cast<scmp_datum_t>(Field(arg, "value")->number_value()),
                          two != nullptr ? static_cast<scmp_datum_t>(two->number_value()) : 0});
        }
      }
      for (const Value& name : Field(rule, "names")->list_value().values()) {
        if (without.count(name.string_value()) != 0) continue;
        int nr = seccomp_syscall_resolve_name(name.string_value().c_str());
        if (nr == __NR_SCMP_ERROR) {
          unknown.insert(name.string_value());
          continue;
        }
        int rc = seccomp_rule_add_array(filter, action, nr, static_cast<unsigned>(cmps.size()),
                                        cmps.empty() ? nullptr : cmps.data());
        if (rc != 0) Fail("rule for " + name.string_value() + ": " + std::strerror(-rc));
      }
    }
  }
  if (list_unknown) {
    for (const std::string& name : unknown) std::printf("%s\n", name.c_str());
    return 0;
  }
  if (int rc = seccomp_load(filter); rc != 0)
    Fail(std::string("seccomp_load: ") + std::strerror(-rc));
  seccomp_release(filter);
  execvp(argv[command], argv + command);
  Fail(std::string("exec ") + argv[command] + ": " + std::strerror(errno));
}
