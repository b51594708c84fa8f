#include "server/clients_file.h"

#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace ringfs::server {
namespace {

absl::Status Bad(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

// A secret readable by others is no secret; refuse to start rather than run with it.
absl::Status CheckPrivate(const std::string& path, const char* what) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return Bad(absl::StrFormat("cannot stat %s '%s': %s", what, path, std::strerror(errno)));
  }
  if ((st.st_mode & 077) != 0) {
    return Bad(
        absl::StrFormat("%s '%s' has mode %04o: group and others must have no access "
                        "(chmod 600 '%s')",
                        what, path, st.st_mode & 07777, path));
  }
  return absl::OkStatus();
}

}  // namespace

bool IsValidClientName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

namespace {

std::string DirectoryOf(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

bool ClientEntry::AllowsSource(const sockaddr_storage& peer) const {
  if (from.empty()) return true;
  for (const AddressPrefix& prefix : from) {
    if (prefix.Contains(peer)) return true;
  }
  return false;
}

std::string ClientEntry::FromText() const {
  if (from.empty()) return "any";
  std::vector<std::string> parts;
  for (const AddressPrefix& prefix : from) parts.push_back(prefix.ToString());
  return absl::StrJoin(parts, ",");
}

absl::StatusOr<std::string> ReadSecretFile(const std::string& path, bool private_only) {
  if (private_only) {
    if (absl::Status ok = CheckPrivate(path, "secret file"); !ok.ok()) return ok;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Bad(absl::StrFormat("cannot read secret file '%s': %s", path, std::strerror(errno)));
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string secret = buffer.str();
  while (!secret.empty() && std::isspace(static_cast<unsigned char>(secret.back()))) {
    secret.pop_back();
  }
  if (secret.empty()) return Bad(absl::StrFormat("secret file '%s' is empty", path));
  return secret;
}

absl::StatusOr<std::vector<ClientEntry>> ReadClientsFile(const std::string& path,
                                                         const ExportOptions& defaults) {
  if (absl::Status ok = CheckPrivate(path, "clients file"); !ok.ok()) return ok;
  std::ifstream in(path);
  if (!in)
    return Bad(absl::StrFormat("cannot read clients file '%s': %s", path, std::strerror(errno)));
  std::vector<ClientEntry> entries;
  absl::flat_hash_set<std::string> names;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    auto bad = [&](absl::string_view what) {
      return Bad(absl::StrFormat("%s:%d: %s", path, number, what));
    };
    absl::string_view text = line;
    if (size_t hash = text.find('#'); hash != absl::string_view::npos) text = text.substr(0, hash);
    std::vector<absl::string_view> words =
        absl::StrSplit(text, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (words.empty()) continue;
    ClientEntry entry;
    entry.name = std::string(words[0]);
    entry.options = defaults;
    if (!IsValidClientName(std::string_view(entry.name))) {
      return bad(
          absl::StrFormat("'%s' is not a client name (1..64 of A-Z a-z 0-9 . _ -)", entry.name));
    }
    if (!names.insert(entry.name).second) {
      return bad(absl::StrFormat("client '%s' is listed twice", entry.name));
    }
    bool have_options = false, have_from = false;
    for (size_t i = 1; i < words.size(); ++i) {
      absl::string_view word = words[i];
      size_t eq = word.find('=');
      if (eq == absl::string_view::npos) {
        return bad(absl::StrFormat("'%s' is not KEY=VALUE (secret=, options=, from=)", word));
      }
      absl::string_view key = word.substr(0, eq), value = word.substr(eq + 1);
      if (key == "secret") {
        if (!entry.secret.empty()) return bad("secret= given twice");
        if (absl::ConsumePrefix(&value, "hex:")) {
          bool hex = value.size() >= 32 && value.size() % 2 == 0;
          for (char c : value) hex = hex && std::isxdigit(static_cast<unsigned char>(c));
          if (!hex) return bad("secret=hex: wants an even number (32 or more) of hex digits");
          entry.secret = absl::HexStringToBytes(value);
        } else {
          if (value.empty()) return bad("secret= wants a file or hex:HEX");
          std::string file(value);
          if (file.front() != '/') file = DirectoryOf(path) + "/" + file;
          auto secret = ReadSecretFile(file, /*private_only=*/true);
          if (!secret.ok()) return bad(secret.status().message());
          entry.secret = *std::move(secret);
        }
      } else if (key == "options") {
        if (have_options) return bad("options= given twice");
        have_options = true;
        // Words apply over the server's defaults, as the words of one --export-options do.
        auto options = ParseExportOptions(FormatExportOptions(defaults) + "," + std::string(value));
        if (!options.ok()) return bad(absl::StrFormat("options=: %s", options.status().message()));
        entry.options = *options;
      } else if (key == "from") {
        if (have_from) return bad("from= given twice");
        have_from = true;
        for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipEmpty())) {
          auto prefix = ParseAddressPrefix(std::string_view(part.data(), part.size()));
          if (!prefix.ok()) return bad(absl::StrFormat("from=: %s", prefix.status().message()));
          entry.from.push_back(*prefix);
        }
        if (entry.from.empty()) return bad("from= wants at least one address prefix");
      } else {
        return bad(absl::StrFormat("unknown key '%s' (secret=, options=, from=)", key));
      }
    }
    if (entry.secret.empty()) return bad(absl::StrFormat("client '%s' has no secret=", entry.name));
    entries.push_back(std::move(entry));
  }
  if (entries.empty()) return Bad(absl::StrFormat("clients file '%s' lists no client", path));
  return entries;
}

}  // namespace ringfs::server
