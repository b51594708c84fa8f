#include "server/export_options.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ringfs::server {

absl::StatusOr<ExportOptions> ParseExportOptions(std::string_view text) {
  ExportOptions options;
  for (absl::string_view word : absl::StrSplit(absl::string_view(text.data(), text.size()), ',', absl::SkipWhitespace())) {
    word = absl::StripAsciiWhitespace(word);
    uint32_t id = 0;
    if (word == "ro") {
      options.read_only = true;
    } else if (word == "rw") {
      options.read_only = false;
    } else if (word == "root_squash") {
      options.squash = ExportOptions::Squash::kRoot;
    } else if (word == "no_root_squash") {
      options.squash = ExportOptions::Squash::kNone;
    } else if (word == "all_squash") {
      options.squash = ExportOptions::Squash::kAll;
    } else if (absl::ConsumePrefix(&word, "anonuid=") && absl::SimpleAtoi(word, &id) &&
               id != UINT32_MAX) {
      options.anonuid = id;
    } else if (absl::ConsumePrefix(&word, "anongid=") && absl::SimpleAtoi(word, &id) &&
               id != UINT32_MAX) {
      options.anongid = id;
    } else {
      return absl::InvalidArgumentError(absl::StrFormat(
          "export option '%s' is not one of ro, rw, root_squash, no_root_squash, all_squash, "
          "anonuid=N, anongid=N",
          std::string(word)));
    }
  }
  return options;
}

std::string FormatExportOptions(const ExportOptions& options) {
  const char* squash = options.squash == ExportOptions::Squash::kRoot   ? "root_squash"
                       : options.squash == ExportOptions::Squash::kNone ? "no_root_squash"
                                                                        : "all_squash";
  return absl::StrFormat("%s,%s,anonuid=%u,anongid=%u", options.read_only ? "ro" : "rw", squash,
                         options.anonuid, options.anongid);
}

}  // namespace ringfs::server
