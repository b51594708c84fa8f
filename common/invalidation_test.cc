#include "common/invalidation.h"

#include <gtest/gtest.h>

#include <cstring>

namespace ringfs::wire {
namespace {

std::span<const char> Span(const std::string& s) { return {s.data(), s.size()}; }

TEST(InvalidationTest, RoundTrip) {
  std::vector<Invalidation> in = {
      {InvalidationKind::kInode, 7, -1, 0, ""},
      {InvalidationKind::kEntry, 1, -1, 0, "a"},
      {InvalidationKind::kInode, 9, 4096, 8192, ""},
      {InvalidationKind::kEntry, 12, -1, 0, std::string(255, 'x')},
      {InvalidationKind::kEntry, 12, -1, 0, "eight888"},
      {InvalidationKind::kReset, 0, -1, 0, ""},
  };
  std::string body;
  size_t expected = 0;
  for (const auto& inv : in) {
    AppendInvalidation(inv, body);
    expected += InvalidationWireBytes(inv);
  }
  EXPECT_EQ(body.size(), expected);
  EXPECT_EQ(body.size() % 8, 0u);
  std::vector<Invalidation> out;
  ASSERT_TRUE(ParseInvalidations(Span(body), &out));
  EXPECT_EQ(out, in);
}

TEST(InvalidationTest, RejectsMalformed) {
  std::vector<Invalidation> out;
  EXPECT_FALSE(ParseInvalidations({}, &out));  // no record
  std::string good;
  AppendInvalidation({InvalidationKind::kEntry, 1, -1, 0, "name"}, good);
  EXPECT_FALSE(ParseInvalidations(Span(good).first(good.size() - 1), &out));  // cut short
  EXPECT_FALSE(ParseInvalidations(Span(good).first(20), &out));

  auto mutate = [&](auto change) {
    std::string body = good;
    InvalidationRecord rec;
    std::memcpy(&rec, body.data(), sizeof(rec));
    change(rec, body);
    std::memcpy(body.data(), &rec, sizeof(rec));
    return ParseInvalidations(Span(body), &out);
  };
  EXPECT_FALSE(mutate([](InvalidationRecord& r, std::string&) { r.kind = 4; }));
  EXPECT_FALSE(mutate([](InvalidationRecord& r, std::string&) { r.kind = 3; }))
      << "a reset with a node and a name";
  EXPECT_FALSE(mutate([](InvalidationRecord& r, std::string&) { r.nodeid = 0; }));
  EXPECT_FALSE(mutate([](InvalidationRecord& r, std::string&) { r.namelen = 0; }));
  EXPECT_FALSE(mutate([](InvalidationRecord& r, std::string&) { r.namelen = 300; }));
  EXPECT_FALSE(mutate([](InvalidationRecord& r, std::string&) { r.namelen = 9; }));  // past end
  EXPECT_FALSE(mutate([](InvalidationRecord&, std::string& b) { b[32] = '/'; }));
  EXPECT_FALSE(mutate([](InvalidationRecord&, std::string& b) { b[39] = 'x'; }));  // padding
  EXPECT_FALSE(mutate([](InvalidationRecord& r, std::string& b) {
    r.namelen = 2;
    b[32] = '.';
    b[33] = '.';
    b[34] = b[35] = 0;
  }));
  // An inode record with a name or a negative length.
  std::string inode;
  AppendInvalidation({InvalidationKind::kInode, 5, -1, 0, ""}, inode);
  InvalidationRecord rec;
  std::memcpy(&rec, inode.data(), sizeof(rec));
  rec.length = -1;
  std::memcpy(inode.data(), &rec, sizeof(rec));
  EXPECT_FALSE(ParseInvalidations(Span(inode), &out));
  rec.length = 0;
  rec.offset = -2;
  std::memcpy(inode.data(), &rec, sizeof(rec));
  EXPECT_FALSE(ParseInvalidations(Span(inode), &out));
  // A reset names nothing: no node, no range.
  for (auto change :
       {+[](InvalidationRecord& r) { r.nodeid = 1; }, +[](InvalidationRecord& r) { r.offset = 0; },
        +[](InvalidationRecord& r) { r.length = 1; }}) {
    std::string reset;
    AppendInvalidation({InvalidationKind::kReset, 0, -1, 0, ""}, reset);
    std::memcpy(&rec, reset.data(), sizeof(rec));
    change(rec);
    std::memcpy(reset.data(), &rec, sizeof(rec));
    EXPECT_FALSE(ParseInvalidations(Span(reset), &out));
  }
}

}  // namespace
}  // namespace ringfs::wire
