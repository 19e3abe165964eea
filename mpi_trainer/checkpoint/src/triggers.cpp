#include "hpcml/checkpoint/triggers.hpp"

#include <slurm/slurm.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cmath>
#include <csignal>
#include <cstdlib>

namespace hpcml::checkpoint {

namespace {
volatile std::sig_atomic_t g_pending = 0;

extern "C" void OnStopSignal(int sig) {
  if (g_pending == 0) g_pending = sig;
}
}  // namespace

void StopSignals::Install() {
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // MPI and I/O calls resume; the loop checks the flag
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
}

int StopSignals::Pending() {
  return g_pending;
}
void StopSignals::Reset() {
  g_pending = 0;
}

std::string_view Name(SpotNoticePoller::Kind k) {
  return k == SpotNoticePoller::Kind::kGcp ? "gcp" : "aws";
}

Result<std::unique_ptr<SpotNoticePoller>> SpotNoticePoller::Start(
    const std::string& url, Kind kind, std::chrono::milliseconds interval) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0)
    return InvalidArgument("spot notice URL '{}' must start with http://", url);
  std::string rest = url.substr(scheme.size());
  size_t slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  std::string target = slash == std::string::npos ? "/" : rest.substr(slash);
  size_t colon = hostport.rfind(':');
  std::string host = hostport.substr(0, colon);
  std::string port = colon == std::string::npos ? "80" : hostport.substr(colon + 1);
  if (host.empty() || port.empty() || port.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgument("spot notice URL '{}': bad host or port", url);
  }
  if (interval.count() <= 0) return InvalidArgument("spot notice poll interval must be positive");
  std::unique_ptr<SpotNoticePoller> p(new SpotNoticePoller(host, port, target, kind, interval));
  p->thread_ = std::thread([raw = p.get()] { raw->Run(); });
  return p;
}

SpotNoticePoller::SpotNoticePoller(std::string host, std::string port, std::string target,
                                   Kind kind, std::chrono::milliseconds interval)
    : host_(std::move(host)),
      port_(std::move(port)),
      target_(std::move(target)),
      kind_(kind),
      interval_(interval) {}

SpotNoticePoller::~SpotNoticePoller() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string SpotNoticePoller::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

void SpotNoticePoller::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_ && !noticed_) {
    lock.unlock();
    bool notice = PollOnce();
    polls_++;
    lock.lock();
    if (notice) {
      noticed_ = true;
      break;
    }
    cv_.wait_for(lock, interval_, [this] { return stop_; });
  }
}

bool SpotNoticePoller::PollOnce() {
  namespace beast = boost::beast;
  namespace http = beast::http;
  using tcp = boost::asio::ip::tcp;
  try {
    boost::asio::io_context io;
    tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    // Metadata services answer in milliseconds; never let a poll hang.
    stream.expires_after(std::chrono::seconds(2));
    stream.connect(resolver.resolve(host_, port_));
    http::request<http::empty_body> req{http::verb::get, target_, 11};
    req.set(http::field::host, host_);
    if (kind_ == Kind::kGcp) req.set("Metadata-Flavor", "Google");
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(stream, buffer, res);
    beast::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    if (kind_ == Kind::kAws) return res.result() == http::status::ok;
    return res.result() == http::status::ok && res.body().rfind("TRUE", 0) == 0;
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mu_);
    last_error_ = fmt::format("http://{}:{}{}: {}", host_, port_, target_, e.what());
    return false;
  }
}

long SlurmSecondsLeft(std::uint32_t job_id) {
  if (job_id == 0) return -1;
  long left = slurm_get_rem_time(job_id);
  return left < 0 ? -1 : left;
}

Result<std::unique_ptr<StopTriggers>> StopTriggers::Start(const StopTriggerOptions& options) {
  auto t = std::make_unique<StopTriggers>();
  t->opt_ = options;
  StopSignals::Install();
  if (!options.spot_url.empty()) {
    HPCML_ASSIGN_OR_RETURN(
        t->poller_, SpotNoticePoller::Start(options.spot_url, options.spot_kind,
                                            std::chrono::milliseconds(options.spot_poll_ms)));
  }
  return t;
}

std::string StopTriggers::Poll() {
  if (const int sig = StopSignals::Pending(); sig != 0) {
    return sig == SIGTERM ? "SIGTERM" : sig == SIGUSR1 ? "SIGUSR1" : fmt::format("signal {}", sig);
  }
  if (poller_ && poller_->noticed()) return "spot notice";
  if (opt_.stop_before_end_seconds <= 0) return "";
  // slurm_get_rem_time asks slurmctld: at most every 30 s.
  if (Clock::now() - last_time_check_ >= std::chrono::seconds(30)) {
    last_time_check_ = Clock::now();
    const char* job = std::getenv("SLURM_JOB_ID");
    time_left_s_ =
        job ? SlurmSecondsLeft(static_cast<std::uint32_t>(std::strtoul(job, nullptr, 10))) : -1;
  }
  if (time_left_s_ >= 0 && static_cast<double>(time_left_s_) < opt_.stop_before_end_seconds) {
    return fmt::format("time limit ({} s left)", time_left_s_);
  }
  return "";
}

double DalyInterval(double cost_s, double mtbi_s) {
  if (cost_s <= 0 || mtbi_s <= 0) return mtbi_s > 0 ? mtbi_s : 0;
  if (cost_s >= 2 * mtbi_s) return mtbi_s;
  double r = cost_s / (2 * mtbi_s);
  return std::sqrt(2 * cost_s * mtbi_s) * (1 + std::sqrt(r) / 3 + r / 9) - cost_s;
}

void AdaptiveInterval::ObserveCheckpointCost(double seconds) {
  cost_s_ = cost_s_ == 0 ? seconds : 0.7 * cost_s_ + 0.3 * seconds;
}

void AdaptiveInterval::ObserveInterruptions(int interruptions, double elapsed_s) {
  mtbi_s_ = interruptions > 0 && elapsed_s > 0 ? elapsed_s / interruptions : 0;
}

double AdaptiveInterval::interval_s() const {
  double mtbi = mtbi_s_ > 0 ? mtbi_s_ : prior_mtbi_s_;
  double t = cost_s_ > 0 ? DalyInterval(cost_s_, mtbi) : max_s_;
  return std::clamp(t, min_s_, max_s_);
}

}  // namespace hpcml::checkpoint
