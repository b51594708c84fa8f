// A source-address prefix of the clients file's from= ("10.0.0.0/8", "::1/128", or a bare
// address for exactly that host), and the test of a peer against it. A plain value; any thread.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ringfs::server {

struct AddressPrefix {
  int family = AF_INET;  // AF_INET or AF_INET6
  std::array<uint8_t, 16> bytes{};
  int bits = 0;

  // An IPv4 peer seen as an IPv4-mapped IPv6 address (::ffff:a.b.c.d) matches IPv4 prefixes.
  bool Contains(const sockaddr_storage& peer) const;
  std::string ToString() const;
};

// InvalidArgument naming the text when it is not ADDRESS or ADDRESS/BITS.
absl::StatusOr<AddressPrefix> ParseAddressPrefix(std::string_view text);

}  // namespace ringfs::server
