// Renders deploy/k8s with `kubectl kustomize` (offline: no cluster is needed or contacted) and
// checks the objects an operator relies on: the kinds, the headless Service in front of the
// StatefulSet and the ClusterIP Service the mounts name, the client's Bidirectional host mount,
// privileges, /dev/fuse, the seccomp profile that allows io_uring, probes, scrape annotations,
// the token Secret, and that the daemons' real flag parsers accept the rendered command lines.
// What no test here can show is that a cluster runs them: nothing is applied anywhere.
//
// The YAML is turned into JSON by python3-yaml (scripts/install-deps.sh) and read into
// google.protobuf.Value. Without kubectl on PATH (or RINGFS_KUBECTL) every test is skipped.
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "frontend/options.h"
#include "server/flags.h"

namespace {

namespace fs = std::filesystem;
namespace frontend = ringfs::frontend;
using google::protobuf::ListValue;
using google::protobuf::Struct;
using google::protobuf::Value;

const fs::path kSourceDir = RINGFS_SOURCE_DIR;
const fs::path kK8sDir = kSourceDir / "deploy" / "k8s";
constexpr std::string_view kNamespace = "ringfs";

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

// Runs `command` through sh; returns its exit status and fills `out` with its stdout.
int Shell(const std::string& command, std::string* out) {
  out->clear();
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out->append(buffer, n);
  int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string Quote(const std::string& s) {
  std::string quoted = "'";
  for (char c : s) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// A directory of this process for rendered files and stand-ins, removed at exit.
const std::string& WorkDir() {
  static const std::string* dir = [] {
    std::string path = testing::TempDir() + "/k8s_manifests_test.XXXXXX";
    if (mkdtemp(path.data()) == nullptr) {
      std::perror("k8s_manifests_test: mkdtemp");
      std::abort();
    }
    std::atexit([] { fs::remove_all(WorkDir()); });
    return new std::string(path);
  }();
  return *dir;
}

std::string Kubectl() {
  if (const char* given = getenv("RINGFS_KUBECTL"); given != nullptr && *given != '\0') {
    return given;
  }
  std::string path;
  if (Shell("command -v kubectl", &path) != 0) return "";
  while (!path.empty() && (path.back() == '\n' || path.back() == ' ')) path.pop_back();
  return path;
}

// Renders a kustomization directory into its objects. Fails the test (with kubectl's message)
// if it does not render.
std::vector<Value> Render(const std::string& kubectl, const fs::path& dir) {
  std::vector<Value> objects;
  const std::string yaml_file = WorkDir() + "/render.yaml";
  const std::string err_file = WorkDir() + "/render.err";
  std::string out;
  int rc = Shell(Quote(kubectl) + " kustomize " + Quote(dir.string()) + " > " + Quote(yaml_file) +
                     " 2> " + Quote(err_file),
                 &out);
  EXPECT_EQ(rc, 0) << "kubectl kustomize " << dir << " failed: " << ReadFile(err_file);
  if (rc != 0) return objects;
  rc = Shell(
      "python3 -c 'import sys, json, yaml; json.dump({\"items\": [d for d in "
      "yaml.safe_load_all(sys.stdin) if d]}, sys.stdout)' < " +
          Quote(yaml_file) + " 2> " + Quote(err_file),
      &out);
  EXPECT_EQ(rc, 0) << "YAML to JSON failed (python3-yaml missing? scripts/install-deps.sh): "
                   << ReadFile(err_file);
  if (rc != 0) return objects;
  Struct doc;
  auto parsed = google::protobuf::util::JsonStringToMessage(out, &doc);
  EXPECT_TRUE(parsed.ok()) << parsed.ToString();
  for (const Value& item : doc.fields().at("items").list_value().values()) objects.push_back(item);
  return objects;
}

// The value at a dotted path of struct fields ("spec.template.spec"), or nullptr.
const Value* At(const Value* v, std::string_view path) {
  for (absl::string_view key : absl::StrSplit(absl::string_view(path.data(), path.size()), '.')) {
    if (v == nullptr || !v->has_struct_value()) return nullptr;
    auto it = v->struct_value().fields().find(std::string(key));
    if (it == v->struct_value().fields().end()) return nullptr;
    v = &it->second;
  }
  return v;
}
const Value* At(const Value& v, std::string_view path) { return At(&v, path); }

std::string Str(const Value* v) {
  if (v == nullptr) return "";
  if (v->has_number_value()) return std::to_string(static_cast<long long>(v->number_value()));
  if (v->has_bool_value()) return v->bool_value() ? "true" : "false";
  return v->string_value();
}

std::vector<const Value*> List(const Value* v) {
  std::vector<const Value*> items;
  if (v == nullptr || !v->has_list_value()) return items;
  for (const Value& item : v->list_value().values()) items.push_back(&item);
  return items;
}

std::vector<std::string> Strings(const Value* v) {
  std::vector<std::string> out;
  for (const Value* item : List(v)) out.push_back(Str(item));
  return out;
}

// The element of a list whose `key` field equals `value`, or nullptr.
const Value* Named(const Value* list, std::string_view value, std::string_view key = "name") {
  for (const Value* item : List(list)) {
    if (Str(At(item, key)) == value) return item;
  }
  return nullptr;
}

// The value of `--flag=value` in a server command line, or "" if absent.
std::string FlagValue(const std::vector<std::string>& args, std::string_view flag) {
  for (const std::string& arg : args) {
    if (absl::StartsWith(arg, std::string(flag) + "=")) return arg.substr(flag.size() + 1);
  }
  return "";
}

// The port of HOST:PORT.
std::string PortOf(const std::string& address) {
  size_t colon = address.rfind(':');
  return colon == std::string::npos ? "" : address.substr(colon + 1);
}

bool IsUnder(const std::string& path, const std::string& dir) {
  return absl::StartsWith(path, dir + "/");
}

class K8sManifestsTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    kubectl_ = new std::string(Kubectl());
    objects_ = new std::vector<Value>();
    if (!kubectl_->empty()) *objects_ = Render(*kubectl_, kK8sDir);
  }
  static void TearDownTestSuite() {
    delete objects_;
    delete kubectl_;
  }
  void SetUp() override {
    if (kubectl_->empty()) {
      GTEST_SKIP() << "kubectl not found (PATH or RINGFS_KUBECTL): deploy/k8s is not rendered";
    }
    ASSERT_FALSE(objects_->empty()) << "deploy/k8s rendered no objects";
  }

  // The rendered object of this kind named `name`; for a Secret, whose generator appends a
  // hash, the one named `name-<hash>`.
  static const Value* Object(std::string_view kind, std::string_view name) {
    for (const Value& object : *objects_) {
      if (Str(At(object, "kind")) != kind) continue;
      std::string object_name = Str(At(object, "metadata.name"));
      if (object_name == name ||
          (kind == "Secret" && absl::StartsWith(object_name, std::string(name) + "-"))) {
        return &object;
      }
    }
    return nullptr;
  }
  static const Value* ServerPod() {
    return At(Object("StatefulSet", "ringfs-server"), "spec.template");
  }
  static const Value* ClientPod() {
    return At(Object("DaemonSet", "ringfs-client"), "spec.template");
  }
  static const Value* ServerContainer() {
    return Named(At(ServerPod(), "spec.containers"), "server");
  }
  static const Value* ClientContainer() {
    return Named(At(ClientPod(), "spec.containers"), "mount");
  }
  static std::vector<std::string> ServerArgs() { return Strings(At(ServerContainer(), "args")); }
  static std::vector<std::string> ClientArgs() {
    std::vector<std::string> args = Strings(At(ClientContainer(), "args"));
    // The kubelet expands $(NODE_NAME) from the env the container declares.
    for (std::string& arg : args) {
      size_t at = arg.find("$(NODE_NAME)");
      if (at != std::string::npos) arg.replace(at, 12, "node-1");
    }
    return args;
  }
  static frontend::MountOptions ClientOptions() {
    auto parsed = frontend::ParseCommandLine(ClientArgs(), /*as_mount_helper=*/false);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    return parsed.ok() ? *parsed : frontend::MountOptions{};
  }
  // The mount path of the secret volume that carries the token, in this pod's container.
  static std::string TokenMountPath(const Value* pod, const Value* container) {
    const Value* secret = Object("Secret", "ringfs-token");
    if (secret == nullptr) return "";
    for (const Value* volume : List(At(pod, "spec.volumes"))) {
      if (Str(At(volume, "secret.secretName")) != Str(At(secret, "metadata.name"))) continue;
      const Value* mount = Named(At(container, "volumeMounts"), Str(At(volume, "name")));
      if (mount != nullptr) return Str(At(mount, "mountPath"));
    }
    return "";
  }
  static std::string ContainerPort(const Value* container, std::string_view name) {
    return Str(At(Named(At(container, "ports"), name), "containerPort"));
  }

  static std::string* kubectl_;
  static std::vector<Value>* objects_;
};

std::string* K8sManifestsTest::kubectl_ = nullptr;
std::vector<Value>* K8sManifestsTest::objects_ = nullptr;

TEST_F(K8sManifestsTest, RendersEveryObjectInTheRingfsNamespace) {
  const std::pair<std::string_view, std::string_view> kExpected[] = {
      {"Namespace", "ringfs"},          {"Secret", "ringfs-token"},
      {"Service", "ringfs-server"},     {"Service", "ringfs-server-0"},
      {"StatefulSet", "ringfs-server"}, {"DaemonSet", "ringfs-client"}};
  for (auto [kind, name] : kExpected) {
    EXPECT_NE(Object(kind, name), nullptr) << kind << " " << name << " not rendered";
  }
  EXPECT_EQ(objects_->size(), std::size(kExpected));
  for (const Value& object : *objects_) {
    if (Str(At(object, "kind")) == "Namespace") continue;
    EXPECT_EQ(Str(At(object, "metadata.namespace")), kNamespace)
        << Str(At(object, "kind")) << " " << Str(At(object, "metadata.name"));
  }
  // A privileged DaemonSet is refused by the baseline and restricted Pod Security levels.
  const Value* labels = At(Object("Namespace", "ringfs"), "metadata.labels");
  ASSERT_NE(labels, nullptr);
  auto enforce = labels->struct_value().fields().find("pod-security.kubernetes.io/enforce");
  ASSERT_NE(enforce, labels->struct_value().fields().end());
  EXPECT_EQ(enforce->second.string_value(), "privileged");
}

TEST_F(K8sManifestsTest, HeadlessServiceFrontsTheStatefulSet) {
  const Value* service = Object("Service", "ringfs-server");
  const Value* sts = Object("StatefulSet", "ringfs-server");
  ASSERT_NE(service, nullptr);
  ASSERT_NE(sts, nullptr);
  EXPECT_EQ(Str(At(service, "spec.clusterIP")), "None");
  EXPECT_EQ(Str(At(sts, "spec.serviceName")), Str(At(service, "metadata.name")));
  // The Service selects the StatefulSet's pods.
  const Value* selector = At(service, "spec.selector");
  ASSERT_NE(selector, nullptr);
  for (const auto& [key, value] : selector->struct_value().fields()) {
    auto label = At(ServerPod(), "metadata.labels")->struct_value().fields().find(key);
    ASSERT_NE(label, At(ServerPod(), "metadata.labels")->struct_value().fields().end()) << key;
    EXPECT_EQ(label->second.string_value(), value.string_value()) << key;
  }
  // Its data port reaches the port the server listens on.
  const Value* data = Named(At(service, "spec.ports"), "data");
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(Str(At(data, "targetPort")), "data");
  EXPECT_EQ(ContainerPort(ServerContainer(), "data"), PortOf(FlagValue(ServerArgs(), "--listen")));
  EXPECT_EQ(Str(At(data, "port")), PortOf(FlagValue(ServerArgs(), "--listen")));
}

TEST_F(K8sManifestsTest, ServerExportsItsVolumeWithFlagsItAccepts) {
  const Value* sts = Object("StatefulSet", "ringfs-server");
  ASSERT_NE(ServerContainer(), nullptr);
  std::vector<std::string> args = ServerArgs();
  EXPECT_EQ(Strings(At(ServerContainer(), "command")), std::vector<std::string>{"ringfs-server"});
  const std::string export_dir = FlagValue(args, "--export");
  EXPECT_EQ(export_dir, "/export");
  EXPECT_EQ(FlagValue(args, "--listen"), "0.0.0.0:7700");
  // The export is the StatefulSet's own volume (a PVC per replica).
  const Value* export_mount = Named(At(ServerContainer(), "volumeMounts"), export_dir, "mountPath");
  ASSERT_NE(export_mount, nullptr) << "nothing mounted on " << export_dir;
  EXPECT_NE(
      Named(At(sts, "spec.volumeClaimTemplates"), Str(At(export_mount, "name")), "metadata.name"),
      nullptr)
      << export_dir << " is not a volumeClaimTemplate";
  // The handle key persists on the volume but outside the export.
  const std::string key = FlagValue(args, "--handle-key");
  EXPECT_FALSE(key.empty());
  EXPECT_FALSE(IsUnder(key, export_dir));
  bool key_on_volume = false;
  for (const Value* mount : List(At(ServerContainer(), "volumeMounts"))) {
    if (Str(At(mount, "name")) == Str(At(export_mount, "name")) &&
        IsUnder(key, Str(At(mount, "mountPath")))) {
      key_on_volume = true;
    }
  }
  EXPECT_TRUE(key_on_volume) << key << " is not on the claim's volume";
  // The token file comes from the Secret, mode 0400.
  const std::string token_mount = TokenMountPath(ServerPod(), ServerContainer());
  ASSERT_FALSE(token_mount.empty()) << "the token Secret is not mounted in the server";
  EXPECT_TRUE(IsUnder(FlagValue(args, "--token-file"), token_mount));
  for (const Value* volume : List(At(ServerPod(), "spec.volumes"))) {
    if (At(volume, "secret") != nullptr) {
      EXPECT_EQ(Str(At(volume, "secret.defaultMode")), "256");  // 0400
    }
  }
  // Not privileged: the server needs no more than root with DAC_READ_SEARCH.
  EXPECT_NE(Str(At(ServerContainer(), "securityContext.privileged")), "true");
  EXPECT_EQ(Strings(At(ServerContainer(), "securityContext.capabilities.add")),
            std::vector<std::string>{"DAC_READ_SEARCH"});

  // ringfs-server's own parser accepts the command line, with the paths that must exist here
  // (the export, a readable token) pointed at stand-ins.
  const std::string dir = WorkDir() + "/server-flags";
  fs::create_directories(dir + "/export");
  std::ofstream(dir + "/token") << "0123456789abcdef0123456789abcdef\n";
  std::vector<std::string> local = {"ringfs-server"};
  for (const std::string& arg : args) {
    if (absl::StartsWith(arg, "--export=")) {
      local.push_back("--export=" + dir + "/export");
    } else if (absl::StartsWith(arg, "--token-file=")) {
      local.push_back("--token-file=" + dir + "/token");
    } else {
      local.push_back(arg);
    }
  }
  std::vector<const char*> argv;
  for (const std::string& arg : local) argv.push_back(arg.c_str());
  auto config = ringfs::server::ParseFlags(static_cast<int>(argv.size()), argv.data());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->metrics, FlagValue(args, "--metrics"));
  EXPECT_EQ(config->ready_file, FlagValue(args, "--ready-file"));
}

TEST_F(K8sManifestsTest, ClientMountsOnTheHostWithBidirectionalPropagation) {
  const Value* container = ClientContainer();
  ASSERT_NE(container, nullptr);
  EXPECT_EQ(Str(At(container, "securityContext.privileged")), "true");
  EXPECT_EQ(Strings(At(container, "command")), std::vector<std::string>{"ringfs-mount"});
  frontend::MountOptions options = ClientOptions();
  EXPECT_TRUE(options.foreground) << "ringfs-mount must stay in the foreground (-f) as the "
                                     "container's process";

  // Exactly one Bidirectional mount, a hostPath, and the mountpoint is below it (not on it: a
  // hostPath that is itself a dead FUSE mount would keep the next pod from starting).
  const Value* propagated = nullptr;
  for (const Value* mount : List(At(container, "volumeMounts"))) {
    if (Str(At(mount, "mountPropagation")) == "Bidirectional") {
      EXPECT_EQ(propagated, nullptr) << "more than one Bidirectional mount";
      propagated = mount;
    }
  }
  ASSERT_NE(propagated, nullptr) << "no Bidirectional mount";
  const Value* volume = Named(At(ClientPod(), "spec.volumes"), Str(At(propagated, "name")));
  ASSERT_NE(At(volume, "hostPath"), nullptr) << "the Bidirectional mount is not a hostPath";
  EXPECT_TRUE(IsUnder(options.mountpoint, Str(At(propagated, "mountPath"))))
      << options.mountpoint << " is not below " << Str(At(propagated, "mountPath"));
  EXPECT_TRUE(IsUnder(options.mountpoint, Str(At(volume, "hostPath.path"))))
      << "the container path and the host path differ: " << Str(At(volume, "hostPath.path"));

  // /dev/fuse from the host, as a character device.
  const Value* fuse_mount = Named(At(container, "volumeMounts"), "/dev/fuse", "mountPath");
  ASSERT_NE(fuse_mount, nullptr);
  const Value* fuse = Named(At(ClientPod(), "spec.volumes"), Str(At(fuse_mount, "name")));
  EXPECT_EQ(Str(At(fuse, "hostPath.path")), "/dev/fuse");
  EXPECT_EQ(Str(At(fuse, "hostPath.type")), "CharDevice");

  // The source is replica 0 through a ClusterIP Service of its own, on the data port: the mount
  // resolves the name once, and a ClusterIP outlives the pod's IP.
  const Value* service = Object("Service", "ringfs-server-0");
  ASSERT_NE(service, nullptr);
  EXPECT_EQ(options.server, Str(At(service, "metadata.name")) + ":" +
                                Str(At(Named(At(service, "spec.ports"), "data"), "port")));
  EXPECT_EQ(options.servers, std::vector<std::string>{options.server});
  EXPECT_EQ(options.export_path, "/");
  EXPECT_EQ(Str(At(service, "spec.type")), "ClusterIP");
  EXPECT_NE(Str(At(service, "spec.clusterIP")), "None");
  EXPECT_EQ(Str(At(Named(At(service, "spec.ports"), "data"), "targetPort")), "data");
  const Value* selector = At(service, "spec.selector");
  ASSERT_NE(selector, nullptr);
  auto pod_name = selector->struct_value().fields().find("statefulset.kubernetes.io/pod-name");
  ASSERT_NE(pod_name, selector->struct_value().fields().end()) << "not pinned to one replica";
  EXPECT_EQ(pod_name->second.string_value(),
            Str(At(Object("StatefulSet", "ringfs-server"), "metadata.name")) + "-0");
  for (const auto& [key, value] : selector->struct_value().fields()) {
    if (key == "statefulset.kubernetes.io/pod-name") continue;
    const auto& labels = At(ServerPod(), "metadata.labels")->struct_value().fields();
    ASSERT_NE(labels.find(key), labels.end()) << key;
    EXPECT_EQ(labels.at(key).string_value(), value.string_value()) << key;
  }
  // Token from the Secret; the node's name as the client's name.
  const std::string token_mount = TokenMountPath(ClientPod(), container);
  ASSERT_FALSE(token_mount.empty()) << "the token Secret is not mounted in the client";
  EXPECT_TRUE(IsUnder(options.token_file, token_mount));
  EXPECT_EQ(options.client_name, "node-1");
  EXPECT_EQ(Str(At(Named(At(container, "env"), "NODE_NAME"), "valueFrom.fieldRef.fieldPath")),
            "spec.nodeName");
}

TEST_F(K8sManifestsTest, ClientPreStopUnmountsAndInitEnablesTheRing) {
  frontend::MountOptions options = ClientOptions();
  std::vector<std::string> pre_stop =
      Strings(At(ClientContainer(), "lifecycle.preStop.exec.command"));
  ASSERT_FALSE(pre_stop.empty()) << "no preStop";
  std::string joined = absl::StrJoin(pre_stop, " ");
  EXPECT_TRUE(absl::StrContains(joined, "umount " + options.mountpoint)) << joined;

  const Value* init = List(At(ClientPod(), "spec.initContainers")).empty()
                          ? nullptr
                          : List(At(ClientPod(), "spec.initContainers")).front();
  ASSERT_NE(init, nullptr) << "no init container";
  std::string script = absl::StrJoin(Strings(At(init, "command")), " ");
  EXPECT_TRUE(absl::StrContains(script, "/sys/module/fuse/parameters/enable_uring")) << script;
  EXPECT_TRUE(absl::StrContains(script, "mkdir -p " + options.mountpoint)) << script;
  EXPECT_EQ(Str(At(init, "securityContext.privileged")), "true");
  // An image update must not replace every node's mount at once.
  EXPECT_EQ(Str(At(Object("DaemonSet", "ringfs-client"), "spec.updateStrategy.type")), "OnDelete");
}

TEST_F(K8sManifestsTest, SeccompProfileIsReferencedAndAllowsIoUring) {
  // Pod level for the server, container level for the client's mount.
  std::vector<const Value*> users = {At(ServerPod(), "spec.securityContext.seccompProfile"),
                                     At(ClientContainer(), "securityContext.seccompProfile")};
  std::string profile_name;
  for (const Value* profile : users) {
    ASSERT_NE(profile, nullptr);
    EXPECT_EQ(Str(At(profile, "type")), "Localhost");
    profile_name = Str(At(profile, "localhostProfile"));
    EXPECT_EQ(profile_name, "ringfs/ringfs-io-uring.json");
  }
  // The file the README installs as /var/lib/kubelet/seccomp/<localhostProfile>.
  const fs::path file = kK8sDir / "seccomp" / fs::path(profile_name).filename();
  ASSERT_TRUE(fs::exists(file)) << file;
  Struct profile;
  auto parsed = google::protobuf::util::JsonStringToMessage(ReadFile(file), &profile);
  ASSERT_TRUE(parsed.ok()) << parsed.ToString();
  Value root;
  *root.mutable_struct_value() = profile;
  EXPECT_EQ(Str(At(root, "defaultAction")), "SCMP_ACT_ERRNO");
  for (std::string_view call : {"io_uring_setup", "io_uring_enter", "io_uring_register"}) {
    bool allowed = false;
    for (const Value* rule : List(At(root, "syscalls"))) {
      std::vector<std::string> names = Strings(At(rule, "names"));
      if (std::find(names.begin(), names.end(), call) == names.end()) continue;
      EXPECT_EQ(Str(At(rule, "action")), "SCMP_ACT_ALLOW") << call;
      EXPECT_TRUE(List(At(rule, "args")).empty()) << call << " is allowed only for some args";
      allowed = true;
    }
    EXPECT_TRUE(allowed) << call << " is not in the profile";
  }
}

TEST_F(K8sManifestsTest, ProbesTellWhetherTheDaemonsServe) {
  // Server: ready once the data port listens (the --ready-file it writes then), alive while
  // /metrics answers.
  std::vector<std::string> ready = Strings(At(ServerContainer(), "readinessProbe.exec.command"));
  ASSERT_FALSE(ready.empty()) << "no server readiness probe";
  EXPECT_EQ(ready.back(), FlagValue(ServerArgs(), "--ready-file"));
  EXPECT_EQ(At(ServerContainer(), "readinessProbe.tcpSocket"), nullptr)
      << "a tcpSocket probe is a failed handshake every period";
  EXPECT_EQ(Str(At(ServerContainer(), "livenessProbe.httpGet.path")), "/metrics");
  EXPECT_EQ(Str(At(ServerContainer(), "livenessProbe.httpGet.port")), "metrics");
  EXPECT_EQ(ContainerPort(ServerContainer(), "metrics"),
            PortOf(FlagValue(ServerArgs(), "--metrics")));

  // Client: ready while the mountpoint is mounted, alive while the mount process answers.
  frontend::MountOptions options = ClientOptions();
  EXPECT_EQ(Strings(At(ClientContainer(), "readinessProbe.exec.command")),
            (std::vector<std::string>{"mountpoint", "-q", options.mountpoint}));
  EXPECT_EQ(Str(At(ClientContainer(), "livenessProbe.httpGet.path")), "/metrics");
  EXPECT_EQ(Str(At(ClientContainer(), "livenessProbe.httpGet.port")), "metrics");
  EXPECT_EQ(ContainerPort(ClientContainer(), "metrics"), PortOf(options.metrics));
}

TEST_F(K8sManifestsTest, BothPodsCarryScrapeAnnotationsForTheirMetricsPort) {
  struct Pod {
    const Value* pod;
    std::string metrics;
  };
  for (const Pod& p : {Pod{ServerPod(), FlagValue(ServerArgs(), "--metrics")},
                       Pod{ClientPod(), ClientOptions().metrics}}) {
    ASSERT_NE(p.pod, nullptr);
    ASSERT_FALSE(p.metrics.empty());
    EXPECT_TRUE(absl::StartsWith(p.metrics, "0.0.0.0:")) << p.metrics << " is not reachable";
    const Value* annotations = At(p.pod, "metadata.annotations");
    ASSERT_NE(annotations, nullptr);
    auto get = [&](const std::string& key) {
      auto it = annotations->struct_value().fields().find(key);
      return it == annotations->struct_value().fields().end() ? std::string("<absent>")
                                                              : it->second.string_value();
    };
    EXPECT_EQ(get("prometheus.io/scrape"), "true");
    EXPECT_EQ(get("prometheus.io/port"), PortOf(p.metrics));
    EXPECT_EQ(get("prometheus.io/path"), "/metrics");
  }
}

TEST_F(K8sManifestsTest, EveryContainerRunsTheRingfsImage) {
  for (const Value* pod : {ServerPod(), ClientPod()}) {
    for (const char* list : {"spec.containers", "spec.initContainers"}) {
      for (const Value* container : List(At(pod, list))) {
        // One image name, so an overlay's `images:` entry retags all of them.
        EXPECT_EQ(Str(At(container, "image")), "ringfs:VERSION") << Str(At(container, "name"));
      }
    }
  }
}

// The repository's token is empty (both daemons refuse it), and an overlay as
// deploy/k8s/README.md describes replaces it in every pod.
TEST_F(K8sManifestsTest, TokenIsEmptyHereAndAnOverlayReplacesIt) {
  const Value* secret = Object("Secret", "ringfs-token");
  ASSERT_NE(secret, nullptr);
  EXPECT_EQ(Str(At(secret, "data.token")), "") << "deploy/k8s must not carry a real secret";

  const fs::path site = WorkDir() + "/site";
  fs::remove_all(site);
  fs::create_directories(site);
  std::ofstream(site / "token") << "3f1c0a9e5b7d2c4e6f8a0b1c2d3e4f50\n";
  std::ofstream(site / "kustomization.yaml")
      << "resources:\n- " << fs::relative(kK8sDir, site).string() << "\n"
      << "secretGenerator:\n- name: ringfs-token\n  behavior: replace\n  files:\n  - token=token\n"
      << "images:\n- name: ringfs\n  newName: registry.example/ringfs\n  newTag: \"1.0\"\n";
  std::vector<Value> site_objects = Render(*kubectl_, site);
  ASSERT_FALSE(site_objects.empty());
  std::string secret_name;
  for (const Value& object : site_objects) {
    if (Str(At(object, "kind")) != "Secret") continue;
    secret_name = Str(At(object, "metadata.name"));
    // base64 of the token file
    EXPECT_EQ(Str(At(object, "data.token")), "M2YxYzBhOWU1YjdkMmM0ZTZmOGEwYjFjMmQzZTRmNTAK");
  }
  ASSERT_FALSE(secret_name.empty());
  EXPECT_NE(secret_name, Str(At(secret, "metadata.name")));
  int references = 0;
  for (const Value& object : site_objects) {
    const Value* pod = At(object, "spec.template");
    if (pod == nullptr) continue;
    for (const Value* volume : List(At(pod, "spec.volumes"))) {
      if (At(volume, "secret") == nullptr) continue;
      EXPECT_EQ(Str(At(volume, "secret.secretName")), secret_name);
      ++references;
    }
    for (const Value* container : List(At(pod, "spec.containers"))) {
      EXPECT_EQ(Str(At(container, "image")), "registry.example/ringfs:1.0");
    }
  }
  EXPECT_EQ(references, 2);
}

}  // namespace
