// ringfs-test-pki DIR: writes throwaway test certificates into DIR (tests, bench/run.sh).
#include <cstdio>

#include "common/tls_test_pki.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: ringfs-test-pki DIR\n");
    return 2;
  }
  auto pki = ringfs::tls::MakeTestPki(argv[1]);
  if (!pki.ok()) {
    std::fprintf(stderr, "ringfs-test-pki: %s\n", std::string(pki.status().message()).c_str());
    return 1;
  }
  return 0;
}
