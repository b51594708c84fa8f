// TLS for the gRPC services over TCP (ringfs-server's admin service, ringfs-mount's control
// service) and for ringfsctl, from the same PEM files as the data wire. Unix sockets stay
// plaintext: their file mode is the access control. Stateless; any thread.
#pragma once

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/rpc/endpoint.h"

namespace ringfs::rpc {

struct TlsFiles {
  std::string cert;  // server: its certificate; client: a client certificate (optional)
  std::string key;
  std::string ca;    // server: require client certificates from it; client: trust it
};

// Insecure on a Unix socket or without `files.cert`; else TLS with that certificate (and with
// `files.ca`, client certificates required). Errors name the file.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(
    const Endpoint& endpoint, const TlsFiles& files);
// Insecure on a Unix socket or without `files.ca`; else TLS trusting `files.ca` (and presenting
// cert/key when given).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const Endpoint& endpoint, const TlsFiles& files);

}  // namespace ringfs::rpc
