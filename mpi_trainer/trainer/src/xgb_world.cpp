#include "xgb_world.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <pthread.h>
#include <signal.h>

#include <charconv>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "hpcml/common/mpi.hpp"
#include "hpcml/common/unique_fd.hpp"

namespace hpcml::trainer {
namespace {

using std::chrono::seconds;

// Debian's Python, which sees python3-xgboost (another python3 may be first
// on PATH).
constexpr const char* kPython = "/usr/bin/python3";

// The tracker: prints its port, then serves until every rank has left. When
// the ranks have not all joined within argv[3] seconds (one cannot reach
// it), it exits, so the ranks waiting on it fail instead of waiting forever.
// 1.7's tracker logs "@tracker All of N nodes getting started" once all
// have joined; that record is the signal. Its other output goes to stderr.
constexpr const char* kTrackerScript = R"(import logging, os, sys, threading
from xgboost.tracker import RabitTracker
host, n, limit = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
started = threading.Event()
class Started(logging.Handler):
    def emit(self, record):
        if "getting started" in record.getMessage():
            started.set()
logging.getLogger().addHandler(Started())
logging.getLogger().setLevel(logging.INFO)
tracker = RabitTracker(host, n, sortby="task")
print(tracker.port, flush=True)
sys.stdout = sys.stderr
tracker.start(n)
if not started.wait(limit):
    print(f"XGBoost tracker on {host}: {n} ranks did not all join within {limit:g} s", flush=True)
    os._exit(3)
tracker.join()
)";

constexpr seconds kJoinLimit{120};     // for every rank to reach the tracker
constexpr seconds kStartLimit{60};     // for the tracker to print its port
constexpr seconds kShutdownLimit{30};  // for the tracker to end after the last rank left

// The first IPv4 address of an interface that is up and not loopback; "".
std::string FirstAddress() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (const ifaddrs* a = list; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    if ((a->ifa_flags & IFF_UP) == 0 || (a->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char text[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) != nullptr) found = text;
  }
  freeifaddrs(list);
  return found;
}

// The local address the kernel would send to `peer` from; "" when none.
std::string RouteTo(const std::string& peer) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(9);  // any port: a UDP connect sends nothing
  if (inet_pton(AF_INET, peer.c_str(), &to.sin_addr) != 1) return "";
  UniqueFd s(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s || connect(s.get(), reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) return "";
  sockaddr_in me{};
  socklen_t len = sizeof me;
  if (getsockname(s.get(), reinterpret_cast<sockaddr*>(&me), &len) != 0) return "";
  char text[INET_ADDRSTRLEN] = {};
  return inet_ntop(AF_INET, &me.sin_addr, text, sizeof text) ? text : "";
}

std::string HostName() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

}  // namespace

// The thread is started before the mask changes, so it keeps the signals
// unblocked; it waits on a condition variable (glibc resumes the wait after
// a handler runs).
struct SignalsAside::State {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  sigset_t old{};
  std::thread thread;
};

SignalsAside::SignalsAside() : state_(std::make_unique<State>()) {
  State* s = state_.get();
  s->thread = std::thread([s] {
    std::unique_lock<std::mutex> lock(s->mu);
    s->cv.wait(lock, [s] { return s->done; });
  });
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &stop, &s->old);
}

SignalsAside::~SignalsAside() {
  // Signals that came meanwhile went to the catcher (or another thread that
  // does not block them, such as MPI's): none is left pending here.
  pthread_sigmask(SIG_SETMASK, &state_->old, nullptr);
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->done = true;
  }
  state_->cv.notify_one();
  state_->thread.join();
}

std::string ChooseTrackerHost(const std::vector<std::string>& hosts,
                              const std::vector<std::string>& addresses) {
  for (size_t r = 1; r < hosts.size(); ++r) {
    if (hosts[r] == hosts[0]) continue;
    const std::string mine = RouteTo(addresses[r]);
    return mine.empty() ? addresses[0] : mine;
  }
  return "127.0.0.1";
}

std::string TrackerHost(MPI_Comm comm) {
  const std::vector<std::string> hosts = GatherStrings(comm, HostName());
  const std::vector<std::string> addresses = GatherStrings(comm, FirstAddress());
  if (hosts.empty()) return "";  // not rank 0
  if (const char* set = std::getenv("HPCML_XGB_TRACKER_HOST"); set != nullptr && *set != '\0') {
    return set;
  }
  return ChooseTrackerHost(hosts, addresses);
}

Result<XgbWorld> XgbWorld::Join(MPI_Comm comm, Logger& log) {
  int rank = 0, world = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &world);
  XgbWorld w;
  if (world == 1) return w;
  const std::string host = TrackerHost(comm);
  std::string where;  // "host port", rank 0's
  Status started = Status::Ok();
  if (rank == 0) {
    auto tracker = ChildProcess::Spawn({kPython, "-c", kTrackerScript, host, std::to_string(world),
                                        std::to_string(kJoinLimit.count())});
    Result<std::string> port =
        tracker.ok() ? tracker->ReadLine(kStartLimit) : Result<std::string>(tracker.status());
    int number = 0;
    if (port.ok()) {
      const auto [end, ec] = std::from_chars(port->data(), port->data() + port->size(), number);
      if (ec != std::errc() || end != port->data() + port->size() || number <= 0) {
        port = Internal("it printed \"{}\", not a port", *port);
      }
    }
    if (!port.ok()) {
      started = Unavailable(
          "XGBoost's tracker (xgboost.tracker of Debian's python3-xgboost, run by {}) did not "
          "start on {}: {}",
          kPython, host, port.status().message());
    } else {
      w.tracker_ = std::move(*tracker);
      where = fmt::format("{} {}", host, number);
    }
  }
  HPCML_RETURN_IF_ERROR(AgreeOnStatus(comm, started));
  where = AllGatherStrings(comm, where)[0];
  const std::string tracker_host = where.substr(0, where.find(' '));
  const int port = std::atoi(where.c_str() + where.find(' ') + 1);
  if (rank == 0) log.info("XGBoost tracker on {}:{} for {} ranks", tracker_host, port, world);
  w.signals_ = std::make_unique<SignalsAside>();
  Result<trees::Communicator> joined = trees::JoinCommunicator(tracker_host, port, rank, world);
  HPCML_RETURN_IF_ERROR(AgreeOnStatus(comm, joined.ok() ? Status::Ok() : joined.status()));
  w.joined_ = std::move(*joined);
  return w;
}

Status XgbWorld::Leave() {
  joined_.reset();
  signals_.reset();
  if (!tracker_.running()) return Status::Ok();
  return tracker_.WaitFor(kShutdownLimit);
}

}  // namespace hpcml::trainer
