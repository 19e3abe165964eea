// The off-node trail: ForwardAudit against a real rsyslogd (the collector the
// test cluster and production run), CompareWithCollector against every way a
// node's root can rewrite its log.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "hpcml/common/sha256.hpp"
#include "hpcml/guard/audit.hpp"

namespace hpcml::guard {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kRsyslogd = "/usr/sbin/rsyslogd";

AuditRecord Rec(int i, bool allow = true) {
  AuditRecord r;
  r.context = "node";
  r.enforce = "mount";
  r.node = "n1";
  r.job_id = std::to_string(100 + i);
  r.step_id = "0";
  r.uid = 1001;
  r.user = "alice";
  r.role = "ml-engineer";
  r.zone = "ae";
  r.datasets = {"/data/ae/caf\xc3\xa9-" + std::to_string(i) + ".h5"};
  r.allow = allow;
  r.reason = allow ? "ok" : "zone";
  r.reason_code = allow ? "" : "zone";
  return r;
}

std::string Read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Write(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

std::size_t CountLines(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

std::string Problems(const CollectorCheck& c) {
  std::string out;
  for (const auto& p : c.problems)
    out += p.file + ":" + std::to_string(p.line) + ": " + p.reason + "\n";
  return out;
}

// A free TCP port on 127.0.0.1 (bound, then released for rsyslogd).
std::uint16_t FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// rsyslogd with the collector's configuration (as tests/cluster/hpcml-cluster
// writes it): one file per sending host, each message's MSG a line.
class Collector {
 public:
  explicit Collector(fs::path dir) : dir_(std::move(dir)), port_(FreePort()) {
    fs::create_directories(dir_ / "work");
    Write(dir_ / "rsyslog.conf",
          "global(workDirectory=\"" + (dir_ / "work").string() +
              "\" maxMessageSize=\"64k\" parser.escapeControlCharactersOnReceive=\"off\")\n"
              "module(load=\"imtcp\")\n"
              "template(name=\"f\" type=\"string\" string=\"" +
              dir_.string() + "/%hostname:::secpath-replace%.jsonl\")\n" +
              "template(name=\"l\" type=\"string\" string=\"%msg%\\n\")\n"
              "ruleset(name=\"r\") { action(type=\"omfile\" dynaFile=\"f\" template=\"l\") }\n"
              "input(type=\"imtcp\" address=\"127.0.0.1\" port=\"" +
              std::to_string(port_) + "\" ruleset=\"r\")\n");
  }
  ~Collector() { Stop(); }

  bool Start() {
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string conf = (dir_ / "rsyslog.conf").string(),
                        pid = (dir_ / "rsyslogd.pid").string();
      ::execl(kRsyslogd, kRsyslogd, "-n", "-f", conf.c_str(), "-i", pid.c_str(), nullptr);
      ::_exit(127);
    }
    for (int i = 0; i < 100; ++i) {  // until it listens
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(port_);
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
      ::close(fd);
      if (up) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }

  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  std::uint16_t port() const { return port_; }
  fs::path CopyOf(const std::string& host) const { return dir_ / (host + ".jsonl"); }

  // The copy of `host` once it has `lines` lines (rsyslog writes after it
  // has queued what it read).
  std::string WaitFor(const std::string& host, std::size_t lines) const {
    std::string text;
    for (int i = 0; i < 100; ++i) {
      text = Read(CopyOf(host));
      if (CountLines(text) >= lines) break;
      std::this_thread::sleep_for(20ms);
    }
    return text;
  }

 private:
  fs::path dir_;
  std::uint16_t port_;
  pid_t pid_ = -1;
};

class AuditForwardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("guard_forward_test." + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    log_ = (dir_ / "audit.jsonl").string();
    copy_ = (dir_ / "collector.jsonl").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Append(int from, int to, bool allow = true) {
    for (int i = from; i < to; ++i) ASSERT_TRUE(AppendAudit(log_, Rec(i, allow)).ok());
  }

  CollectorCheck Compare(const std::vector<std::string>& paths) {
    auto c = CompareWithCollector(paths, copy_);
    EXPECT_TRUE(c.ok()) << c.status().message();
    return c.ok() ? *c : CollectorCheck{};
  }

  fs::path dir_;
  std::string log_, copy_;
};

TEST_F(AuditForwardTest, TheCollectorGetsEveryLineOnceAndInOrder) {
  if (!fs::exists(kRsyslogd))
    GTEST_SKIP() << kRsyslogd << " not installed (scripts/install-deps.sh)";
  Collector collector(dir_ / "collector");
  ASSERT_TRUE(collector.Start());
  Append(0, 3);
  auto sent = ForwardAudit(log_, "127.0.0.1", collector.port(), "n1");
  ASSERT_TRUE(sent.ok()) << sent.status().message();
  EXPECT_EQ(*sent, 3u);
  Append(3, 5);
  // A collector named by its host name (looked up; an address is not).
  sent = ForwardAudit(log_, "localhost", collector.port(), "n1");
  ASSERT_TRUE(sent.ok()) << sent.status().message();
  EXPECT_EQ(*sent, 2u);  // only what is new
  EXPECT_EQ(*ForwardAudit(log_, "127.0.0.1", collector.port(), "n1"), 0u);
  // Byte for byte: what the collector wrote is the log (UTF-8 included).
  EXPECT_EQ(collector.WaitFor("n1", 5), Read(log_));
  copy_ = collector.CopyOf("n1").string();
  CollectorCheck c = Compare({log_});
  EXPECT_EQ(c.matched, 5u);
  EXPECT_EQ(c.lines, 5u);
  EXPECT_TRUE(c.problems.empty()) << Problems(c);
}

TEST_F(AuditForwardTest, LinesWrittenWhileTheCollectorIsDownGoWithTheNextSend) {
  if (!fs::exists(kRsyslogd))
    GTEST_SKIP() << kRsyslogd << " not installed (scripts/install-deps.sh)";
  Collector collector(dir_ / "collector");
  Append(0, 2);
  auto refused = ForwardAudit(log_, "127.0.0.1", collector.port(), "n1", 500, /*retry_after_ms=*/0);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("audit collector 127.0.0.1:"), std::string::npos)
      << refused.status().message();
  ASSERT_TRUE(collector.Start());
  Append(2, 3);
  EXPECT_EQ(*ForwardAudit(log_, "127.0.0.1", collector.port(), "n1", 3000, 0), 3u);
  // The log rotated: the rest of the old file goes first.
  Append(3, 5);
  fs::rename(log_, log_ + ".1");
  Append(5, 6);
  EXPECT_EQ(*ForwardAudit(log_, "127.0.0.1", collector.port(), "n1"), 3u);
  copy_ = collector.CopyOf("n1").string();
  collector.WaitFor("n1", 6);
  CollectorCheck c = Compare({log_ + ".1", log_});
  EXPECT_EQ(c.matched, 6u);
  EXPECT_TRUE(c.problems.empty()) << Problems(c);
}

// A listening socket on 127.0.0.1 that never accepts (its host's kernel
// still completes connections into its queue and acknowledges their data).
struct Listener {
  explicit Listener(int backlog, int rcvbuf = 0) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (rcvbuf > 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd, backlog), 0);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~Listener() { ::close(fd); }
  int fd = -1;
  std::uint16_t port = 0;
};

TEST_F(AuditForwardTest, ATimeoutIsAFailure) {
  // A collector's host that does not answer: the listener's queue (backlog
  // 0) holds one connection, so the next SYN is dropped.
  Listener silent(0);
  int filler = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(silent.port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(filler, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  Append(0, 1);
  auto start = std::chrono::steady_clock::now();
  auto sent = ForwardAudit(log_, "127.0.0.1", silent.port, "n1", 300);
  EXPECT_FALSE(sent.ok());
  EXPECT_NE(sent.status().message().find("timed out"), std::string::npos)
      << sent.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  EXPECT_TRUE(Read(log_ + ".sent").starts_with("- 0 "));  // nothing counted as sent
  // Tried again at once, it fails at once, without waiting: a burst of
  // steps is not held for the timeout each.
  start = std::chrono::steady_clock::now();
  auto again = ForwardAudit(log_, "127.0.0.1", silent.port, "n1", 300, 60'000);
  EXPECT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("unreachable"), std::string::npos)
      << again.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 100ms);
  ::close(filler);
}

TEST_F(AuditForwardTest, SentOnceTheCollectorsHostAcknowledgesWithoutWaitingForItsReader) {
  // The lines are off the node when the collector's host has them: a
  // collector process that has not read them yet does not hold the step.
  Listener unread(4);
  Append(0, 3);
  auto start = std::chrono::steady_clock::now();
  auto sent = ForwardAudit(log_, "127.0.0.1", unread.port, "n1", 2000);
  ASSERT_TRUE(sent.ok()) << sent.status().message();
  EXPECT_EQ(*sent, 3u);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  // And they are there, framed, for the reader when it comes.
  int conn = ::accept(unread.fd, nullptr, nullptr);
  ASSERT_GE(conn, 0);
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::read(conn, buf, sizeof buf)) > 0;)
    got.append(buf, static_cast<std::size_t>(n));
  ::close(conn);
  EXPECT_EQ(CountLines(got), 0u);  // octet-counted frames, no newlines
  const std::string log = Read(log_);
  std::size_t lines = 0;
  for (std::size_t at = 0, nl; (nl = log.find('\n', at)) != std::string::npos; at = nl + 1, ++lines)
    EXPECT_NE(got.find(log.substr(at, nl - at)), std::string::npos) << "line " << lines;
  EXPECT_EQ(lines, 3u);
}

TEST_F(AuditForwardTest, UnacknowledgedBytesAreAFailure) {
  // A collector's host that takes the connection but not the lines (its
  // receive window full, nobody reading): the send times out and nothing
  // counts as sent.
  Listener full(4, /*rcvbuf=*/1024);
  Append(0, 400);  // about 200 KB of lines, far more than the window
  auto sent = ForwardAudit(log_, "127.0.0.1", full.port, "n1", 300, 0);
  ASSERT_FALSE(sent.ok());
  EXPECT_NE(sent.status().message().find("timed out"), std::string::npos)
      << sent.status().message();
  EXPECT_TRUE(Read(log_ + ".sent").starts_with("- 0 "));
}

// The collector's copy is the log as it was sent; each rewrite on the node
// shows.
class TamperTest : public AuditForwardTest {
 protected:
  void SetUp() override {
    AuditForwardTest::SetUp();
    Append(0, 6, /*allow=*/false);
    Write(copy_, Read(log_));
    ASSERT_TRUE(Compare({log_}).problems.empty());
  }
  std::vector<std::string> Lines() {
    std::vector<std::string> out;
    std::istringstream in(Read(log_));
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }
};

TEST_F(TamperTest, AnEmptiedLogMissesEveryLine) {
  Write(log_, "");
  fs::remove(log_ + ".head");
  CollectorCheck c = Compare({log_});
  EXPECT_EQ(c.matched, 0u);
  EXPECT_EQ(c.problems.size(), 6u) << Problems(c);
  EXPECT_NE(Problems(c).find("seq 0 is not in the node's log"), std::string::npos) << Problems(c);
}

TEST_F(TamperTest, ADeletedLogMissesEveryLine) {
  fs::remove(log_);
  CollectorCheck c = Compare({log_});
  EXPECT_EQ(c.problems.size(), 6u) << Problems(c);
}

TEST_F(TamperTest, ARewrittenChainFromAnotherSeqMissesAndAddsLines) {
  // The node's root rewrites the whole chain with new numbers, denials turned
  // into allows: a valid chain, but none of it is what the collector has.
  fs::remove(log_);
  fs::remove(log_ + ".head");
  std::string text;
  std::string prev(64, '0');
  for (int i = 0; i < 6; ++i) {
    std::string line = FormatAuditLine(Rec(i, true), 1000 + i, prev);
    text += line + "\n";
    prev = Sha256::Hex(line);
  }
  Write(log_, text);
  CollectorCheck c = Compare({log_});
  EXPECT_EQ(c.matched, 0u);
  EXPECT_EQ(c.problems.size(), 12u) << Problems(c);  // 6 removed, 6 never sent
  EXPECT_NE(Problems(c).find("seq 1000 never reached the collector"), std::string::npos);
}

TEST_F(TamperTest, DroppedFirstLinesAreMissing) {
  auto lines = Lines();
  std::string text;
  for (std::size_t i = 2; i < lines.size(); ++i) text += lines[i] + "\n";
  Write(log_, text);
  CollectorCheck c = Compare({log_});
  EXPECT_EQ(c.matched, 4u);
  EXPECT_EQ(c.problems.size(), 2u) << Problems(c);
  EXPECT_NE(Problems(c).find("seq 0 is not in the node's log (nor in the rotated files given)"),
            std::string::npos)
      << Problems(c);
}

TEST_F(TamperTest, AnEditedLineDiffers) {
  auto lines = Lines();
  std::string text;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string l = lines[i];
    if (i == 3) l.replace(l.find("\"deny\""), 6, "\"allow\"");
    text += l + "\n";
  }
  Write(log_, text);
  CollectorCheck c = Compare({log_});
  ASSERT_EQ(c.problems.size(), 1u) << Problems(c);
  EXPECT_EQ(c.problems[0].line, 4u);
  EXPECT_NE(c.problems[0].reason.find("seq 3 differs from the collector's copy"),
            std::string::npos);
}

TEST_F(TamperTest, AResentRewrittenLineIsAConflictAtTheCollector) {
  // The node's root sends its rewritten line to the collector too.
  auto lines = Lines();
  std::string forged = lines[2];
  forged.replace(forged.find("\"deny\""), 6, "\"allow\"");
  Write(copy_, Read(copy_) + forged + "\n");
  CollectorCheck c = Compare({log_});
  ASSERT_EQ(c.problems.size(), 1u) << Problems(c);
  EXPECT_EQ(c.problems[0].file, copy_);
  EXPECT_EQ(c.problems[0].line, 7u);
  EXPECT_NE(c.problems[0].reason.find("a second, different line with seq 2"), std::string::npos);
  // The same line sent twice (a send whose end was lost) is no problem.
  Write(copy_, Read(log_) + lines[2] + "\n");
  EXPECT_TRUE(Compare({log_}).problems.empty());
}

}  // namespace
}  // namespace hpcml::guard
