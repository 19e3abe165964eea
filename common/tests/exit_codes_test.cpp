#include "hpcml/common/exit_codes.hpp"

#include <gtest/gtest.h>

namespace hpcml {
namespace {

TEST(ExitStatusHelp, SharedLinesThenTheCommandsOwnInOrder) {
  const std::string help = ExitStatusHelp(
      {{kExitCheckFailed, "a check found a problem"}, {kExitSkipped, "nothing to check"}});
  EXPECT_EQ(help.rfind("Exit status:\n  0   success\n  1   error: ", 0), 0u) << help;
  const auto usage = help.find("\n  2   usage error: ");
  const auto check = help.find("\n  3   a check found a problem\n");
  const auto skipped = help.find("\n  77  nothing to check\n");
  ASSERT_NE(usage, std::string::npos) << help;
  ASSERT_NE(check, std::string::npos) << help;
  ASSERT_NE(skipped, std::string::npos) << help;
  EXPECT_LT(usage, check);
  EXPECT_LT(check, skipped);
  EXPECT_TRUE(help.ends_with("nothing to check\n"));
}

// help2man makes a tagged list of the lines: each code, then continuation
// lines indented to its text's column (6), none wider than a terminal.
TEST(ExitStatusHelp, FitsHelp2mansTaggedList) {
  const std::string help = ExitStatusHelp();
  std::size_t start = help.find('\n') + 1;
  while (start < help.size()) {
    const std::size_t end = help.find('\n', start);
    const std::string line = help.substr(start, end - start);
    EXPECT_LE(line.size(), 79u) << line;
    const bool tagged = line.size() > 6 && line.substr(0, 2) == "  " && line[2] != ' ';
    const bool continued = line.starts_with("      ") && line[6] != ' ';
    EXPECT_TRUE(tagged || continued) << line;
    start = end + 1;
  }
}

}  // namespace
}  // namespace hpcml
