// Names of the FUSE INIT flags (bits 0..63, flags2 shifted up by 32) for mount info and logs.
// Pure; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ringfs::controller {

// The FUSE_* names of the set bits, lowest bit first; a bit without a name is "bit<N>".
std::vector<std::string> FuseFlagNames(uint64_t flags);

}  // namespace ringfs::controller
