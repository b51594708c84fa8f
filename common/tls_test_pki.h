// Throwaway certificates for tests and the bench, made at run time (never committed): a CA, a
// server certificate for "localhost" and 127.0.0.1, a client certificate, and an unrelated CA.
// Stateless; any thread.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace ringfs::tls {

struct TestPki {
  std::string ca;           // PEM of the CA that signed the server and client certificates
  std::string other_ca;     // a CA that signed nothing here
  std::string server_cert;  // CN=localhost, SAN DNS:localhost, IP:127.0.0.1, IP:::1
  std::string server_key;
  std::string client_cert;  // CN=ringfs-test-client
  std::string client_key;
};

// Writes the files into `dir` (which must exist) and returns their paths.
absl::StatusOr<TestPki> MakeTestPki(const std::string& dir);

}  // namespace ringfs::tls
