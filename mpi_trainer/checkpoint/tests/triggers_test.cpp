#include "hpcml/checkpoint/triggers.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <thread>

namespace hpcml::checkpoint {
namespace {

TEST(StopSignals, SigtermAndSigusr1SetTheFlag) {
  StopSignals::Install();
  StopSignals::Reset();
  EXPECT_EQ(StopSignals::Pending(), 0);
  std::raise(SIGUSR1);
  EXPECT_EQ(StopSignals::Pending(), SIGUSR1);
  std::raise(SIGTERM);  // the first signal is kept
  EXPECT_EQ(StopSignals::Pending(), SIGUSR1);
  StopSignals::Reset();
  std::raise(SIGTERM);
  EXPECT_EQ(StopSignals::Pending(), SIGTERM);
  StopSignals::Reset();
}

// A metadata endpoint on loopback: answers 404 (AWS: no notice) or 200 with
// a body, as told; counts requests and records the last one.
class FakeMetadataServer {
 public:
  FakeMetadataServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeMetadataServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  int port() const { return port_; }
  int requests() const { return requests_; }
  void Answer(int status, std::string body) {
    std::lock_guard<std::mutex> l(mu_);
    status_ = status;
    body_ = std::move(body);
  }
  std::string last_request() {
    std::lock_guard<std::mutex> l(mu_);
    return last_;
  }

 private:
  void Serve() {
    while (!stop_) {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char buf[2048];
      ssize_t n = ::read(c, buf, sizeof buf);
      std::string resp;
      {
        std::lock_guard<std::mutex> l(mu_);
        last_ = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
        resp = fmt::format("HTTP/1.1 {} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
                           status_, body_.size(), body_);
      }
      ++requests_;
      (void)!::write(c, resp.data(), resp.size());
      ::close(c);
    }
  }
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::mutex mu_;
  int status_ = 404;
  std::string body_ = "Not Found";
  std::string last_;
  std::thread thread_;
};

bool WaitFor(const std::function<bool()>& cond) {
  for (int i = 0; i < 500 && !cond(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return cond();
}

TEST(SpotNoticePoller, AwsNoticeAfterSomeQuietPolls) {
  FakeMetadataServer server;
  auto poller = SpotNoticePoller::Start(
      fmt::format("http://127.0.0.1:{}/latest/meta-data/spot/instance-action", server.port()),
      SpotNoticePoller::Kind::kAws, std::chrono::milliseconds(20));
  ASSERT_TRUE(poller.ok()) << poller.status().message();
  ASSERT_TRUE(WaitFor([&] { return (*poller)->polls() >= 3; }));
  EXPECT_FALSE((*poller)->noticed());  // 404: no notice yet
  server.Answer(200, R"({"action": "terminate", "time": "2026-11-22T03:00:00Z"})");
  ASSERT_TRUE(WaitFor([&] { return (*poller)->noticed(); }));
  EXPECT_NE(server.last_request().find("GET /latest/meta-data/spot/instance-action"),
            std::string::npos);
}

TEST(SpotNoticePoller, GcpNeedsTrueAndSendsTheFlavorHeader) {
  FakeMetadataServer server;
  server.Answer(200, "FALSE");
  auto poller = SpotNoticePoller::Start(
      fmt::format("http://127.0.0.1:{}/computeMetadata/v1/instance/preempted", server.port()),
      SpotNoticePoller::Kind::kGcp, std::chrono::milliseconds(20));
  ASSERT_TRUE(poller.ok());
  ASSERT_TRUE(WaitFor([&] { return (*poller)->polls() >= 2; }));
  EXPECT_FALSE((*poller)->noticed());
  EXPECT_NE(server.last_request().find("Metadata-Flavor: Google"), std::string::npos);
  server.Answer(200, "TRUE");
  EXPECT_TRUE(WaitFor([&] { return (*poller)->noticed(); }));
}

TEST(SpotNoticePoller, UnreachableEndpointIsNotANotice) {
  // A port nobody listens on (bound then closed).
  int port;
  {
    FakeMetadataServer s;
    port = s.port();
  }
  auto poller =
      SpotNoticePoller::Start(fmt::format("http://127.0.0.1:{}/x", port),
                              SpotNoticePoller::Kind::kAws, std::chrono::milliseconds(10));
  ASSERT_TRUE(poller.ok());
  ASSERT_TRUE(WaitFor([&] { return (*poller)->polls() >= 2; }));
  EXPECT_FALSE((*poller)->noticed());
  EXPECT_FALSE((*poller)->last_error().empty());
}

TEST(SpotNoticePoller, BadUrls) {
  for (const char* url : {"https://x/y", "ftp://x", "http://:80/", "http://host:port/"}) {
    EXPECT_FALSE(
        SpotNoticePoller::Start(url, SpotNoticePoller::Kind::kAws, std::chrono::milliseconds(10))
            .ok())
        << url;
  }
  EXPECT_EQ(Name(SpotNoticePoller::Kind::kGcp), "gcp");
}

TEST(Interval, DalyMatchesTheFormula) {
  // cost 60 s, MTBI 1 day: sqrt(2*60*86400) = 3219.9; Daly's correction
  // adds (1 + sqrt(r)/3 + r/9) with r = 60/172800, minus the cost.
  double r = 60.0 / (2 * 86400);
  double expect = std::sqrt(2 * 60.0 * 86400) * (1 + std::sqrt(r) / 3 + r / 9) - 60;
  EXPECT_NEAR(DalyInterval(60, 86400), expect, 1e-9);
  EXPECT_NEAR(DalyInterval(60, 86400), 3180.0, 0.5);  // about 53 minutes
  EXPECT_EQ(DalyInterval(100, 40), 40);               // checkpointing costs more than it saves
}

TEST(Interval, AdaptsToCostAndInterruptions) {
  AdaptiveInterval a(30, 3600, 86400);
  EXPECT_EQ(a.interval_s(), 3600);  // no cost measured yet: the upper bound
  a.ObserveCheckpointCost(2.0);
  double calm = a.interval_s();
  a.ObserveInterruptions(4, 4 * 600.0);  // an interruption every 10 minutes
  double stormy = a.interval_s();
  EXPECT_LT(stormy, calm);
  EXPECT_NEAR(stormy, DalyInterval(2.0, 600.0), 1e-9);
  a.ObserveCheckpointCost(0.0001);
  EXPECT_EQ(a.interval_s(),
            DalyInterval(a.cost_s(), 600.0) < 30 ? 30 : DalyInterval(a.cost_s(), 600.0));
}

}  // namespace
}  // namespace hpcml::checkpoint
