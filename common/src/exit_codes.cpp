#include "hpcml/common/exit_codes.hpp"

#include <fmt/format.h>

namespace hpcml {

std::string ExitStatusHelp(std::initializer_list<ExitCodeHelp> extra) {
  std::string out = fmt::format(
      "Exit status:\n"
      "  {:<3} success\n"
      "  {:<3} error: the work failed (a file missing, unreadable or malformed,\n"
      "      I/O, refused by the access policy); the message names the file\n"
      "  {:<3} usage error: the command line is wrong (an unknown option, a\n"
      "      missing argument, a bad value); the message names the option\n",
      kExitOk, kExitError, kExitUsage);
  for (const ExitCodeHelp& e : extra) out += fmt::format("  {:<3} {}\n", e.code, e.meaning);
  return out;
}

}  // namespace hpcml
