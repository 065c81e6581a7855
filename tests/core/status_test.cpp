#include "core/status.h"

#include <gtest/gtest.h>

#include "core/mapped_file.h"

namespace helium {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return Status::error("value " + std::to_string(v) + " is not positive");
  return v;
}

Result<int> doubled(int v) {
  HELIUM_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}

TEST(Status, ResultCarriesValueOrError) {
  EXPECT_EQ(*doubled(4), 8);
  auto bad = doubled(-1);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.error_message(), "value -1 is not positive");
  EXPECT_EQ(bad.status().with_context("config.json").message(), "config.json: value -1 is not positive");
}

TEST(MappedFile, MissingFileNamesThePath) {
  auto f = MappedFile::open("/nonexistent/helium/file.bin");
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(f.error_message().find("/nonexistent/helium/file.bin"), std::string::npos);
}

}  // namespace
}  // namespace helium
