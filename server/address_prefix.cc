#include "server/address_prefix.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

namespace ringfs::server {
namespace {

bool PrefixMatches(const uint8_t* want, const uint8_t* have, int bits) {
  int whole = bits / 8;
  if (std::memcmp(want, have, whole) != 0) return false;
  int rest = bits % 8;
  if (rest == 0) return true;
  uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (want[whole] & mask) == (have[whole] & mask);
}

}  // namespace

absl::StatusOr<AddressPrefix> ParseAddressPrefix(std::string_view text) {
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrFormat("'%s' is not an address prefix (ADDRESS or ADDRESS/BITS)", text));
  };
  std::string address(text.substr(0, text.find('/')));
  AddressPrefix prefix;
  if (inet_pton(AF_INET, address.c_str(), prefix.bytes.data()) == 1) {
    prefix.family = AF_INET;
    prefix.bits = 32;
  } else if (inet_pton(AF_INET6, address.c_str(), prefix.bytes.data()) == 1) {
    prefix.family = AF_INET6;
    prefix.bits = 128;
  } else {
    return bad();
  }
  if (size_t slash = text.find('/'); slash != std::string_view::npos) {
    int bits = -1;
    std::string digits(text.substr(slash + 1));
    if (!absl::SimpleAtoi(digits, &bits) || bits < 0 || bits > prefix.bits) {
      return bad();
    }
    prefix.bits = bits;
  }
  return prefix;
}

bool AddressPrefix::Contains(const sockaddr_storage& peer) const {
  if (peer.ss_family == AF_INET) {
    if (family != AF_INET) return false;
    const auto* in = reinterpret_cast<const sockaddr_in*>(&peer);
    return PrefixMatches(bytes.data(), reinterpret_cast<const uint8_t*>(&in->sin_addr), bits);
  }
  if (peer.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&peer);
    const uint8_t* addr = reinterpret_cast<const uint8_t*>(&in6->sin6_addr);
    if (family == AF_INET6) return PrefixMatches(bytes.data(), addr, bits);
    return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && PrefixMatches(bytes.data(), addr + 12, bits);
  }
  return false;  // a Unix socket has no address: only a client without from= may use it
}

std::string AddressPrefix::ToString() const {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(family, bytes.data(), text, sizeof(text));
  return absl::StrFormat("%s/%d", text, bits);
}

}  // namespace ringfs::server
