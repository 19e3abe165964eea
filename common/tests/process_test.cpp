#include "hpcml/common/process.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <string>

namespace hpcml {
namespace {

std::string ReadAll(int fd) {
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

TEST(ChildProcess, StreamsStdoutAndReportsSuccess) {
  Result<ChildProcess> c = ChildProcess::Spawn({"printf", "a|b\\nc|d\\n"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(ReadAll(c->stdout_fd()), "a|b\nc|d\n");
  EXPECT_TRUE(c->Wait().ok());
  EXPECT_FALSE(c->Wait().ok());  // already waited for
}

TEST(ChildProcess, NonZeroExitIsAnErrorNamingTheProgram) {
  Result<ChildProcess> c = ChildProcess::Spawn({"sh", "-c", "exit 3"});
  ASSERT_TRUE(c.ok());
  Status st = c->Wait();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("sh: exited with status 3"), std::string::npos) << st.message();
}

TEST(ChildProcess, MissingProgram) {
  Result<ChildProcess> c = ChildProcess::Spawn({"/nonexistent/sacct"});
  ASSERT_TRUE(c.ok());
  Status st = c->Wait();
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("/nonexistent/sacct"), std::string::npos);
}

TEST(ChildProcess, DestructorEndsAndReapsTheChild) {
  pid_t pid;
  {
    Result<ChildProcess> c = ChildProcess::Spawn({"sh", "-c", "echo $$; exec sleep 30"});
    ASSERT_TRUE(c.ok());
    char buf[32] = {};
    ASSERT_GT(read(c->stdout_fd(), buf, sizeof buf - 1), 0);
    pid = static_cast<pid_t>(std::stol(buf));
    EXPECT_EQ(kill(pid, 0), 0);
  }
  // Reaped: the pid no longer exists (not even as a zombie).
  EXPECT_EQ(kill(pid, 0), -1);
}

TEST(ChildProcess, ReadLineTakesOneLineAndTimesOut) {
  using std::chrono::milliseconds;
  Result<ChildProcess> c = ChildProcess::Spawn({"sh", "-c", "echo 4242; echo next; exec sleep 30"});
  ASSERT_TRUE(c.ok());
  Result<std::string> first = c->ReadLine(milliseconds(5000));
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(*first, "4242");
  Result<std::string> second = c->ReadLine(milliseconds(5000));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, "next");
  Result<std::string> none = c->ReadLine(milliseconds(100));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no line of output within 100 ms"), std::string::npos);
  // Still running after the limit: stopped, and said so.
  Status st = c->WaitFor(milliseconds(100));
  EXPECT_NE(st.message().find("still running after 100 ms"), std::string::npos) << st.message();
}

TEST(ChildProcess, ReadLineSeesTheEndAndWaitForTheExit) {
  using std::chrono::milliseconds;
  Result<ChildProcess> c = ChildProcess::Spawn({"sh", "-c", "printf partial; exit 3"});
  ASSERT_TRUE(c.ok());
  Result<std::string> line = c->ReadLine(milliseconds(5000));
  ASSERT_FALSE(line.ok());
  EXPECT_NE(line.status().message().find("ended its output"), std::string::npos);
  Status st = c->WaitFor(milliseconds(5000));
  EXPECT_NE(st.message().find("exited with status 3"), std::string::npos) << st.message();
}

TEST(RunAndCapture, ReturnsStdoutOrTheMessage) {
  Result<std::string> ok = RunAndCapture({"echo", "hello"});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, "hello\n");
  Result<std::string> bad = RunAndCapture({"sh", "-c", "echo 'no such job' >&2; exit 1"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no such job"), std::string::npos);
  EXPECT_FALSE(RunAndCapture({}).ok());
}

}  // namespace
}  // namespace hpcml
