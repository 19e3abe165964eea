#include "hpcml/common/identity.hpp"

#include <fmt/format.h>
#include <pwd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "hpcml/common/job_env.hpp"

namespace hpcml {

std::string CurrentPrincipal() {
  std::string user;
  struct passwd pw;
  struct passwd* res = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(::geteuid(), &pw, buf.data(), buf.size(), &res) == 0 && res != nullptr)
    user = pw.pw_name;
  if (user.empty()) user = fmt::format("uid{}", ::geteuid());
  char host[256] = {0};
  if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "unknown");
  std::string out = fmt::format("{}@{}", user, host);
  if (const char* job = std::getenv("SLURM_JOB_ID"); job != nullptr && *job != '\0')
    out += fmt::format(" job {}", job);
  if (const char* role = std::getenv(job_env::kRole); role != nullptr && *role != '\0')
    out += fmt::format(" role {}", role);
  return out;
}

std::string_view Version() {
  return HPCML_VERSION;
}

std::string VersionLine(std::string_view tool) {
  return fmt::format("{} {}", tool, Version());
}

int AnswerHelpOrVersion(int argc, char** argv, std::string_view tool, const char* help) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(help, stdout);
      return 0;
    }
    if (arg == "--version") {
      std::puts(VersionLine(tool).c_str());
      return 0;
    }
  }
  return -1;
}

}  // namespace hpcml
