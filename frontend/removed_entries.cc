#include "frontend/removed_entries.h"

#include <cstdint>
#include <cstring>
#include <string>

namespace ringfs::frontend {

std::vector<wire::Invalidation> EntriesItRemoves(const fuse_in_header& header, const iovec* iov,
                                                 int iovcnt) {
  std::string args;
  for (int k = 1; k < iovcnt; ++k)
    args.append(static_cast<const char*>(iov[k].iov_base), iov[k].iov_len);
  auto name_at = [&](size_t at) -> std::string {
    if (at >= args.size()) return {};
    return args.substr(at, strnlen(args.data() + at, args.size() - at));
  };
  auto entry = [](uint64_t dir, std::string name) {
    wire::Invalidation record;
    record.kind = wire::InvalidationKind::kEntry;
    record.nodeid = dir;
    record.name = std::move(name);
    return record;
  };
  std::vector<wire::Invalidation> entries;
  if (header.opcode == FUSE_UNLINK || header.opcode == FUSE_RMDIR) {
    if (std::string name = name_at(0); !name.empty()) entries.push_back(entry(header.nodeid, name));
  } else if (header.opcode == FUSE_RENAME || header.opcode == FUSE_RENAME2) {
    const size_t fixed =
        header.opcode == FUSE_RENAME ? sizeof(fuse_rename_in) : sizeof(fuse_rename2_in);
    if (args.size() <= fixed) return entries;
    uint64_t newdir;  // first in fuse_rename_in and fuse_rename2_in
    std::memcpy(&newdir, args.data(), sizeof(newdir));
    const std::string from = name_at(fixed);
    const std::string to = name_at(fixed + from.size() + 1);
    if (from.empty() || to.empty()) return entries;
    entries.push_back(entry(header.nodeid, from));
    entries.push_back(entry(newdir, to));
  }
  return entries;
}

}  // namespace ringfs::frontend
