#include "hpcml/common/log.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace hpcml {
namespace {

// Captures what a Logger writes through a pipe.
class Capture {
 public:
  Capture() { EXPECT_EQ(::pipe(fds_), 0); }
  ~Capture() {
    ::close(fds_[0]);
    if (fds_[1] >= 0) ::close(fds_[1]);
  }
  int fd() const { return fds_[1]; }
  std::string Take() {
    ::close(fds_[1]);
    fds_[1] = -1;
    std::string out;
    char buf[512];
    ssize_t n;
    while ((n = ::read(fds_[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    return out;
  }

 private:
  int fds_[2] = {-1, -1};
};

TEST(Logger, PrefixesComponentAndLevel) {
  Capture cap;
  Logger log("hpcml-test");
  log.set_fd(cap.fd());
  log.info("loaded {} rows", 42);
  log.warn("slow disk");
  log.error("{}: not found", "/x.h5");
  EXPECT_EQ(cap.Take(),
            "hpcml-test: loaded 42 rows\n"
            "hpcml-test: warning: slow disk\n"
            "hpcml-test: error: /x.h5: not found\n");
}

TEST(Logger, ThresholdFiltersLowerLevels) {
  Capture cap;
  Logger log("c");
  log.set_fd(cap.fd());
  log.set_level(LogLevel::kWarning);
  log.debug("d");
  log.info("i");
  log.warn("w");
  EXPECT_EQ(cap.Take(), "c: warning: w\n");
}

TEST(Logger, LevelFromEnvironment) {
  ::setenv("HPCML_LOG_LEVEL", "debug", 1);
  Logger log("c");
  ::unsetenv("HPCML_LOG_LEVEL");
  EXPECT_EQ(log.level(), LogLevel::kDebug);
}

TEST(Logger, ParseLogLevel) {
  LogLevel l = LogLevel::kInfo;
  EXPECT_TRUE(ParseLogLevel("error", &l));
  EXPECT_EQ(l, LogLevel::kError);
  EXPECT_TRUE(ParseLogLevel("warn", &l));
  EXPECT_EQ(l, LogLevel::kWarning);
  EXPECT_FALSE(ParseLogLevel("loud", &l));
  EXPECT_EQ(l, LogLevel::kWarning);
}

}  // namespace
}  // namespace hpcml
