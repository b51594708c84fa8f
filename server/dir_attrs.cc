#include "server/dir_attrs.h"

#include <variant>

#include "server/attr.h"
#include "server/export_fs.h"
#include "server/ops_util.h"

namespace ringfs::server {
namespace {

void AppendOne(const OpContext& ctx, uint64_t nodeid, ReplyBody& body) {
  absl::StatusOr<NodeRef> node = GetNode(ctx, nodeid);
  if (!node.ok()) return;
  absl::StatusOr<struct stat> st = StatFd((*node)->fd.get());
  if (!st.ok()) return;
  wire::DirAttrTrailer trailer;
  trailer.nodeid = nodeid;
  trailer.attr = ToAttrOut(*st, ctx.times);
  body.Put(trailer);
}

}  // namespace

void AppendDirAttrs(const OpContext& ctx, const Request& request, ReplyBody& body) {
  AppendOne(ctx, request.nodeid, body);
  if (const auto* rename = std::get_if<RenameArgs>(&request.args);
      rename != nullptr && rename->newdir != request.nodeid) {
    AppendOne(ctx, rename->newdir, body);
  }
}

}  // namespace ringfs::server
