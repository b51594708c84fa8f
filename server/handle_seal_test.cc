// HandleSeal: a sealed record verifies; any change to the handle, the MAC, the key or the export
// root makes it fail.
#include "server/handle_seal.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>

namespace ringfs::server {
namespace {

InodeHandle SomeHandle() {
  InodeHandle handle;
  handle.type = 1;
  handle.bytes = std::string("\x11\x22\x33\x44\x55\x66\x77\x88", 8);
  return handle;
}

const std::string kKey(32, 'k');
const std::string kRoot("root-handle-bytes");

TEST(HandleSealTest, SealedRecordVerifiesAndCarriesTheHandle) {
  HandleSeal seal(kKey, kRoot);
  const InodeHandle handle = SomeHandle();
  wire::NodeHandleRecord record = seal.Seal(42, &handle);
  EXPECT_EQ(record.nodeid, 42u);
  EXPECT_EQ(record.handle_type, 1);
  EXPECT_EQ(record.handle_bytes, 8u);
  EXPECT_TRUE(seal.Verify(record));
  EXPECT_TRUE(HandleSeal::HandleOf(record).SameFile(handle));
}

// The layout of common/node_handle.h, checked against HMAC-SHA256 computed elsewhere (Python's
// hmac over b"root-handle-bytes" + pack("<iI", 1, 8) + f_handle, key b"k" * 32).
TEST(HandleSealTest, MacIsTruncatedHmacSha256OverRootTypeLengthAndHandle) {
  HandleSeal seal(kKey, kRoot);
  const InodeHandle handle = SomeHandle();
  const wire::NodeHandleRecord record = seal.Seal(42, &handle);
  const uint8_t expected[16] = {0x86, 0x69, 0xd8, 0xda, 0xcb, 0x41, 0xc9, 0x97,
                                0xb4, 0x12, 0x75, 0xb0, 0xc4, 0x23, 0x8d, 0x41};
  EXPECT_EQ(std::memcmp(record.mac, expected, sizeof(expected)), 0);
}

TEST(HandleSealTest, SealsAgreeAcrossThreadsAndInstances) {
  const InodeHandle handle = SomeHandle();
  HandleSeal first(kKey, kRoot);
  HandleSeal second(kKey, kRoot);  // another server with the same key and export
  const wire::NodeHandleRecord here = first.Seal(42, &handle);
  wire::NodeHandleRecord there;
  std::thread([&] { there = second.Seal(42, &handle); }).join();
  EXPECT_EQ(std::memcmp(here.mac, there.mac, sizeof(here.mac)), 0);
  EXPECT_TRUE(second.Verify(here));
  EXPECT_TRUE(first.Verify(there));
}

TEST(HandleSealTest, NodeWithoutHandleHasZeroBytesAndVerifies) {
  HandleSeal seal(kKey, kRoot);
  wire::NodeHandleRecord record = seal.Seal(7, nullptr);
  EXPECT_EQ(record.handle_bytes, 0u);
  EXPECT_TRUE(seal.Verify(record));
}

TEST(HandleSealTest, AnyChangeBreaksTheSeal) {
  HandleSeal seal(kKey, kRoot);
  const InodeHandle handle = SomeHandle();
  const wire::NodeHandleRecord good = seal.Seal(42, &handle);

  wire::NodeHandleRecord mac = good;
  mac.mac[5] ^= 1;
  EXPECT_FALSE(seal.Verify(mac));
  wire::NodeHandleRecord bytes = good;
  bytes.f_handle[0] ^= 1;
  EXPECT_FALSE(seal.Verify(bytes));
  wire::NodeHandleRecord type = good;
  type.handle_type = 2;
  EXPECT_FALSE(seal.Verify(type));
  wire::NodeHandleRecord shorter = good;
  shorter.handle_bytes = 7;
  EXPECT_FALSE(seal.Verify(shorter));
  wire::NodeHandleRecord oversized = good;
  oversized.handle_bytes = wire::kMaxNodeHandleBytes + 1;
  EXPECT_FALSE(seal.Verify(oversized));

  EXPECT_FALSE(HandleSeal(std::string(32, 'K'), kRoot).Verify(good)) << "another key";
  EXPECT_FALSE(HandleSeal(kKey, "another-export").Verify(good)) << "another export root";
}

TEST(HandleSealTest, NodeIdIsNotSealed) {
  // The id is the client's own name for the node in its own table; only the handle is sealed.
  HandleSeal seal(kKey, kRoot);
  const InodeHandle handle = SomeHandle();
  wire::NodeHandleRecord record = seal.Seal(42, &handle);
  record.nodeid = 43;
  EXPECT_TRUE(seal.Verify(record));
}

}  // namespace
}  // namespace ringfs::server
