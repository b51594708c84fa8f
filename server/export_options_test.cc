#include "server/export_options.h"

#include <gtest/gtest.h>

namespace ringfs::server {
namespace {

TEST(ExportOptionsTest, DefaultsAreRootSquashReadWriteNobody) {
  auto options = ParseExportOptions("");
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->squash, ExportOptions::Squash::kRoot);
  EXPECT_FALSE(options->read_only);
  EXPECT_EQ(options->anonuid, 65534u);
  EXPECT_EQ(options->anongid, 65534u);
}

TEST(ExportOptionsTest, ParsesEveryWordAndLaterWordsWin) {
  auto options = ParseExportOptions(" ro, all_squash ,anonuid=1000,anongid=100,no_root_squash");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->read_only);
  EXPECT_EQ(options->squash, ExportOptions::Squash::kNone);
  EXPECT_EQ(options->anonuid, 1000u);
  EXPECT_EQ(options->anongid, 100u);
}

TEST(ExportOptionsTest, RefusesUnknownWordsAndBadIds) {
  for (const char* bad : {"rw,sync", "anonuid=", "anonuid=-1", "anonuid=4294967295",
                          "anongid=x", "root-squash"}) {
    auto options = ParseExportOptions(bad);
    EXPECT_FALSE(options.ok()) << bad;
  }
  EXPECT_NE(ParseExportOptions("rw,bogus").status().message().find("'bogus'"), std::string::npos);
}

TEST(ExportOptionsTest, FormatRoundTrips) {
  for (const char* text : {"", "ro", "all_squash,anonuid=7", "no_root_squash,anongid=9,ro"}) {
    auto options = ParseExportOptions(text);
    ASSERT_TRUE(options.ok());
    auto again = ParseExportOptions(FormatExportOptions(*options));
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, *options) << text;
  }
}

}  // namespace
}  // namespace ringfs::server
