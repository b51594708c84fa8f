// Fixed vectors for the transcript and both proofs (computed independently with Python's
// hashlib/hmac from the byte layout in proto/wire_format.md section 1), and the properties the
// protocol relies on: labels separate the proofs, every input changes the transcript.
#include "common/auth_proof.h"

#include <gtest/gtest.h>

#include "absl/strings/escaping.h"

namespace ringfs::auth {
namespace {

std::string Hex(const std::string& bytes) { return absl::BytesToHexString(bytes); }

std::string Nonce0To31() {
  std::string nonce;
  for (int i = 0; i < 32; ++i) nonce.push_back(static_cast<char>(i));
  return nonce;
}

const std::string kHello("\x08\x01\x12\x04test", 8);

TEST(AuthProofTest, TranscriptFixedVectors) {
  EXPECT_EQ(Hex(Transcript(kHello, Nonce0To31(), "")),
            "ec2b3fb90fa5877eb439b56a2486429d239d8202d3dcc4d31372ca2f185f05f0");
  EXPECT_EQ(Hex(Transcript(kHello, Nonce0To31(), "exporter")),
            "7a6be810639e187cf77aa936a7722eb1c9e7828158e8a240778e7f43a508bb8e");
}

TEST(AuthProofTest, ProofFixedVectors) {
  const std::string transcript = Transcript(kHello, Nonce0To31(), "");
  EXPECT_EQ(Hex(ServerProof("s3cret", transcript)),
            "35ed53ae346509117e958e9ab4cfbfedbb2e9d039d637d96693cbadf376f3e29");
  EXPECT_EQ(Hex(ClientProof("s3cret", transcript)),
            "6bbf4417902ea98ae8d17cb8dcb8082468d2d393a375f7e05b79aab03d75e68b");
}

TEST(AuthProofTest, EveryInputChangesTheResult) {
  const std::string nonce = Nonce0To31();
  const std::string base = Transcript(kHello, nonce, "");
  EXPECT_NE(base, Transcript(kHello + "x", nonce, ""));
  EXPECT_NE(base, Transcript(kHello, nonce.substr(1) + "x", ""));
  EXPECT_NE(base, Transcript(kHello, nonce, "x"));
  // Length prefixes: moving a byte from one field to the next is another transcript.
  EXPECT_NE(Transcript("ab", "c", ""), Transcript("a", "bc", ""));
  EXPECT_NE(ServerProof("s3cret", base), ClientProof("s3cret", base));
  EXPECT_NE(ClientProof("s3cret", base), ClientProof("s3creT", base));
  EXPECT_EQ(ServerProof("s3cret", base).size(), kProofBytes);
}

TEST(AuthProofTest, NoncesAreFreshAndSized) {
  auto a = DrawNonce();
  auto b = DrawNonce();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), kNonceBytes);
  EXPECT_NE(*a, *b);
}

TEST(AuthProofTest, ProofEquals) {
  EXPECT_TRUE(ProofEquals("abc", "abc"));
  EXPECT_FALSE(ProofEquals("abc", "abd"));
  EXPECT_FALSE(ProofEquals("abc", "ab"));
  EXPECT_FALSE(ProofEquals("", "a"));
}

}  // namespace
}  // namespace ringfs::auth
