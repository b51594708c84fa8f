#include "common/invalidation.h"

#include <cstring>

namespace ringfs::wire {
namespace {

size_t Padded(size_t n) { return (n + 7) & ~size_t{7}; }

}  // namespace

size_t InvalidationWireBytes(const Invalidation& inv) {
  return sizeof(InvalidationRecord) + Padded(inv.name.size());
}

void AppendInvalidation(const Invalidation& inv, std::string& out) {
  InvalidationRecord rec;
  rec.nodeid = inv.nodeid;
  rec.offset = inv.offset;
  rec.length = inv.length;
  rec.kind = static_cast<uint32_t>(inv.kind);
  rec.namelen = static_cast<uint32_t>(inv.name.size());
  out.append(reinterpret_cast<const char*>(&rec), sizeof(rec));
  out.append(inv.name);
  out.append(Padded(inv.name.size()) - inv.name.size(), '\0');
}

bool ParseInvalidations(std::span<const char> body, std::vector<Invalidation>* out) {
  out->clear();
  size_t at = 0;
  while (at < body.size()) {
    if (body.size() - at < sizeof(InvalidationRecord)) return false;
    InvalidationRecord rec;
    std::memcpy(&rec, body.data() + at, sizeof(rec));
    at += sizeof(rec);
    Invalidation inv;
    inv.nodeid = rec.nodeid;
    inv.offset = rec.offset;
    inv.length = rec.length;
    if (rec.kind == static_cast<uint32_t>(InvalidationKind::kReset)) {
      if (rec.nodeid != 0 || rec.namelen != 0 || rec.offset != -1 || rec.length != 0) {
        return false;
      }
      inv.kind = InvalidationKind::kReset;
      out->push_back(std::move(inv));
      continue;
    }
    if (rec.nodeid == 0) return false;
    if (rec.kind == static_cast<uint32_t>(InvalidationKind::kInode)) {
      if (rec.namelen != 0 || rec.offset < -1 || rec.length < 0) return false;
      inv.kind = InvalidationKind::kInode;
    } else if (rec.kind == static_cast<uint32_t>(InvalidationKind::kEntry)) {
      if (rec.namelen == 0 || rec.namelen > kMaxInvalidationName) return false;
      const size_t padded = Padded(rec.namelen);
      if (body.size() - at < padded) return false;
      std::string_view name(body.data() + at, rec.namelen);
      if (name.find('/') != name.npos || name.find('\0') != name.npos || name == "." ||
          name == "..") {
        return false;
      }
      for (size_t i = rec.namelen; i < padded; ++i) {
        if (body[at + i] != '\0') return false;
      }
      inv.kind = InvalidationKind::kEntry;
      inv.name = std::string(name);
      at += padded;
    } else {
      return false;
    }
    out->push_back(std::move(inv));
  }
  return !out->empty();
}

}  // namespace ringfs::wire
