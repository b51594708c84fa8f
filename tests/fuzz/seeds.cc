// Writes the seed corpora of the fuzz targets: fuzz_seeds DIR makes DIR/<target>/<seed>, a few
// small well-formed inputs per target (one request or reply of each shape), so that fuzzing
// starts from frames the decoders accept. The committed seeds in tests/fuzz/ are its output.
#include <linux/fuse.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/dir_attrs.h"
#include "common/invalidation.h"
#include "common/node_handle.h"
#include "common/wire.h"
#include "proto/fuse_abi.h"

namespace ringfs {
namespace {

std::filesystem::path out_dir;

void Write(const std::string& target, const std::string& name, const std::string& bytes) {
  std::filesystem::create_directories(out_dir / target);
  std::ofstream(out_dir / target / name, std::ios::binary) << bytes;
}

template <typename T>
std::string Bytes(const T& value) {
  return std::string(reinterpret_cast<const char*>(&value), sizeof(value));
}

std::string Cstr(const std::string& s) { return s + std::string(1, '\0'); }

// A request frame: header (len filled in) then `body`.
std::string Frame(uint32_t opcode, const std::string& body, uint64_t unique = 2,
                  uint64_t nodeid = FUSE_ROOT_ID) {
  fuse_in_header in{};
  in.len = static_cast<uint32_t>(sizeof(in) + body.size());
  in.opcode = opcode;
  in.unique = unique;
  in.nodeid = nodeid;
  in.uid = 1000;
  in.gid = 1000;
  in.pid = 42;
  return Bytes(in) + body;
}

std::string Reply(uint64_t unique, int32_t error, const std::string& body) {
  fuse_out_header out{};
  out.len = static_cast<uint32_t>(sizeof(out) + body.size());
  out.error = error;
  out.unique = unique;
  return Bytes(out) + body;
}

// One request of each shape the server decodes, as the wire carries them.
std::vector<std::pair<std::string, std::string>> Requests() {
  std::vector<std::pair<std::string, std::string>> r;
  r.emplace_back("lookup", Frame(FUSE_LOOKUP, Cstr("file.txt")));
  fuse_mkdir_in mkdir{0755, 022};
  r.emplace_back("mkdir", Frame(FUSE_MKDIR, Bytes(mkdir) + Cstr("dir")));
  fuse_rename2_in rename{};
  rename.newdir = 5;
  rename.flags = 1;
  r.emplace_back("rename2", Frame(FUSE_RENAME2, Bytes(rename) + Cstr("a") + Cstr("b")));
  r.emplace_back("symlink", Frame(FUSE_SYMLINK, Cstr("link") + Cstr("../target")));
  fuse_write_in write{};
  write.fh = 9;
  write.offset = 4096;
  write.size = 5;
  r.emplace_back("write", Frame(FUSE_WRITE, Bytes(write) + "hello", 3, 7));
  fuse_read_in read{};
  read.fh = 9;
  read.size = 4096;
  r.emplace_back("read", Frame(FUSE_READ, Bytes(read), 4, 7));
  uint32_t setxattr[2] = {3, 0};  // size, flags: the 8-byte compat struct
  r.emplace_back("setxattr", Frame(FUSE_SETXATTR, Bytes(setxattr) + Cstr("user.k") + "abc"));
  fuse_getxattr_in getxattr{};
  getxattr.size = 64;
  r.emplace_back("getxattr", Frame(FUSE_GETXATTR, Bytes(getxattr) + Cstr("user.k")));
  fuse_batch_forget_in batch{};
  batch.count = 2;
  fuse_forget_one one{7, 1};
  r.emplace_back("batch_forget", Frame(FUSE_BATCH_FORGET, Bytes(batch) + Bytes(one) + Bytes(one)));
  fuse_create_in create{};
  create.flags = 0101;
  create.mode = 0100644;
  r.emplace_back("create", Frame(FUSE_CREATE, Bytes(create) + Cstr("new")));
  fuse_copy_file_range_in copy{};
  copy.fh_in = 1;
  copy.nodeid_out = 8;
  copy.fh_out = 2;
  copy.len = 100;
  r.emplace_back("copy_file_range_64", Frame(fuse::kOpCopyFileRange64, Bytes(copy), 5, 7));
  wire::ReclaimBatch one_record{1, 0};
  wire::ReclaimNodeRecord node{};
  node.nlookup = 1;
  node.handle.nodeid = 7;
  node.handle.handle_bytes = 8;
  r.emplace_back("reclaim_nodes",
                 Frame(wire::kOpReclaimNodes, Bytes(one_record) + Bytes(node), 6, 0));
  wire::ReopenRecord reopen{9, 7, 2, 0};
  r.emplace_back("reopen_handles",
                 Frame(wire::kOpReopenHandles, Bytes(one_record) + Bytes(reopen), 7, 0));
  return r;
}

void ServerRequest() {
  for (const auto& [name, frame] : Requests()) Write("fuzz_server_request", name, frame);
}

void KernelRequest() {
  const std::string dev_fuse(1, '\0'), ring(1, '\1');
  for (const auto& [name, frame] : Requests()) {
    if (name == "reclaim_nodes" || name == "reopen_handles") continue;  // never from the kernel
    Write("fuzz_kernel_request", "devfuse_" + name, dev_fuse + frame);
  }
  fuse_init_in init{};
  init.major = 7;
  init.minor = 45;
  Write("fuzz_kernel_request", "devfuse_init", dev_fuse + Frame(FUSE_INIT, Bytes(init), 1, 0));
  // Ring entries: header in in_out, argument struct in op_in, the rest in the payload.
  auto entry = [&](uint32_t opcode, const std::string& op_in, const std::string& payload) {
    fuse::UringReqHeader header{};
    fuse_in_header in{};
    in.len = static_cast<uint32_t>(sizeof(in) + op_in.size() + payload.size());
    in.opcode = opcode;
    in.unique = 2;
    in.nodeid = FUSE_ROOT_ID;
    std::memcpy(header.in_out, &in, sizeof(in));
    std::memcpy(header.op_in, op_in.data(), op_in.size());
    header.ring_ent_in_out.commit_id = 2;
    header.ring_ent_in_out.payload_sz = static_cast<uint32_t>(payload.size());
    const uint8_t capacity_steps = 4;  // 64 bytes
    return ring + Bytes(header) + std::string(1, static_cast<char>(capacity_steps)) + payload;
  };
  Write("fuzz_kernel_request", "ring_lookup", entry(FUSE_LOOKUP, "", Cstr("file.txt")));
  fuse_write_in write{};
  write.size = 5;
  Write("fuzz_kernel_request", "ring_write", entry(FUSE_WRITE, Bytes(write), "hello"));
  fuse_mkdir_in mkdir{0755, 022};
  Write("fuzz_kernel_request", "ring_mkdir", entry(FUSE_MKDIR, Bytes(mkdir), Cstr("dir")));
}

void ReplyFrame() {
  // flags, opcode (one byte), capacity, argument struct, then frames.
  auto prologue = [](uint8_t flags, uint8_t opcode, uint32_t capacity, const std::string& op_in) {
    return std::string(1, static_cast<char>(flags)) + std::string(1, static_cast<char>(opcode)) +
           Bytes(capacity) + op_in;
  };
  fuse_entry_out entry{};
  entry.nodeid = 7;
  entry.attr.mode = 0100644;
  Write("fuzz_reply_frame", "lookup", prologue(0, FUSE_LOOKUP, 4096, "") + Reply(2, 0, Bytes(entry)));
  Write("fuzz_reply_frame", "lookup_enoent",
        prologue(0, FUSE_LOOKUP, 4096, "") + Reply(2, -ENOENT, ""));
  fuse_mkdir_in mkdir{0755, 022};
  wire::DirAttrTrailer trailer{};
  trailer.nodeid = FUSE_ROOT_ID;
  trailer.attr.attr.mode = 040755;
  Write("fuzz_reply_frame", "mkdir_dir_attrs",
        prologue(1, FUSE_MKDIR, 4096, Bytes(mkdir)) + Reply(2, 0, Bytes(entry) + Bytes(trailer)));
  fuse_rename_in rename{};
  rename.newdir = 5;
  Write("fuzz_reply_frame", "rename_two_trailers",
        prologue(1, FUSE_RENAME, 4096, Bytes(rename)) +
            Reply(2, 0, Bytes(trailer) + Bytes(trailer)));
  wire::NodeHandleRecord handle{};
  handle.nodeid = 7;
  handle.handle_bytes = 8;
  Write("fuzz_reply_frame", "notify_then_lookup",
        prologue(2, FUSE_LOOKUP, 4096, "") + Reply(0, wire::kNotifyNodeHandles, Bytes(handle)) +
            Reply(2, 0, Bytes(entry)));
  std::string invalidations;
  wire::AppendInvalidation({wire::InvalidationKind::kEntry, 1, -1, 0, "file.txt"}, invalidations);
  wire::AppendInvalidation({wire::InvalidationKind::kInode, 7, 0, 4096, ""}, invalidations);
  Write("fuzz_reply_frame", "invalidate_then_lookup",
        prologue(4, FUSE_LOOKUP, 4096, "") + Reply(0, wire::kNotifyInvalidate, invalidations) +
            Reply(2, 0, Bytes(entry)));
  fuse_read_in read{};
  read.size = 16;
  Write("fuzz_reply_frame", "read",
        prologue(0, FUSE_READ, 4096, Bytes(read)) + Reply(2, 0, "0123456789"));
}

void Handshake() {
  wire::ClientHello hello;
  hello.set_wire_version(wire::kWireVersion);
  hello.set_client_id("client-1");
  hello.set_export_name("/");
  hello.set_client_name("client");
  hello.set_client_nonce(std::string(32, 'n'));
  hello.set_max_inflight(16);
  hello.set_max_frame_bytes(wire::kMaxFrameBytes);
  hello.set_fuse_minor(45);
  hello.set_entry_timeout_ns(1'000'000'000);
  hello.set_attr_timeout_ns(1'000'000'000);
  hello.set_want_dir_attrs(true);
  hello.set_want_node_handles(true);
  Write("fuzz_handshake", "client_hello", std::string(1, '\7') + *wire::EncodeHandshake(hello));
  wire::ServerHello reply;
  reply.set_result(wire::ServerHello::OK);
  reply.set_wire_version(wire::kWireVersion);
  reply.set_max_inflight(16);
  reply.set_max_frame_bytes(wire::kMaxFrameBytes);
  reply.set_session_id(3);
  reply.set_server_id("server-1");
  reply.set_dir_attrs(true);
  reply.set_instance_id(0x0123456789abcdef);
  reply.set_node_handles(true);
  Write("fuzz_handshake", "server_hello", std::string(1, '\6') + *wire::EncodeHandshake(reply));
  reply.set_result(wire::ServerHello::AUTH_FAILED);
  reply.set_message("wrong token");
  Write("fuzz_handshake", "server_hello_refused",
        std::string(1, '\0') + *wire::EncodeHandshake(reply));
}

}  // namespace
}  // namespace ringfs

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seeds DIR\n");
    return 2;
  }
  ringfs::out_dir = argv[1];
  ringfs::ServerRequest();
  ringfs::KernelRequest();
  ringfs::ReplyFrame();
  ringfs::Handshake();
  return 0;
}
