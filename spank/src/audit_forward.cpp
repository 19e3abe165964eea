// The off-node trail: ForwardAudit sends the log's new lines to a collector
// (rsyslog's TCP input), CompareWithCollector checks a node's chain against
// what the collector received.
#include <fcntl.h>
#include <linux/sockios.h>
#include <netdb.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hpcml/common/sha256.hpp"
#include "hpcml/common/unique_fd.hpp"
#include "hpcml/guard/audit.hpp"

namespace hpcml::guard {
namespace {

using Clock = std::chrono::steady_clock;

// What "<log>.sent" records: the file (dev:ino, "-" for none yet) and how
// far into it the collector has everything, and when a send last failed
// (ms since the epoch; 0: the last one worked).
struct SentMark {
  std::string file_id;
  std::uint64_t offset = 0;
  std::int64_t failed_ms = 0;
};

std::int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string IdOf(const struct stat& st) {
  return fmt::format("{}:{}", st.st_dev, st.st_ino);
}

int MsLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

// Waits for `events` on fd until the deadline.
Status Wait(int fd, short events, Clock::time_point deadline, const std::string& what) {
  for (;;) {
    struct pollfd p {
      fd, events, 0
    };
    int n = ::poll(&p, 1, MsLeft(deadline));
    if (n > 0) return Status::Ok();
    if (n == 0) return IoError("{}: timed out", what);
    if (errno != EINTR) return ErrnoError(what + ": poll", errno);
  }
}

// A TCP connection to host:port, non-blocking, within the deadline.
Result<UniqueFd> Connect(const std::string& host, std::uint16_t port, Clock::time_point deadline) {
  const std::string where = fmt::format("audit collector {}:{}", host, port);
  struct addrinfo hints {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  // An address is taken as it is, without the name service: its first
  // lookup in a process (each step's slurmstepd is a new one) costs about
  // 0.03 ms. A name is looked up.
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  struct addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc == EAI_NONAME) {
    hints.ai_flags = AI_NUMERICSERV;
    rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  }
  if (rc != 0) return IoError("{}: {}", where, ::gai_strerror(rc));
  std::unique_ptr<struct addrinfo, decltype(&::freeaddrinfo)> list(found, ::freeaddrinfo);
  Status last = IoError("{}: no address", where);
  for (struct addrinfo* a = list.get(); a; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) {
      last = ErrnoError(where + ": socket", errno);
      continue;
    }
    if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last = ErrnoError(where + ": connect", errno);
        continue;
      }
      if (Status w = Wait(fd.get(), POLLOUT, deadline, where + ": connect"); !w.ok()) {
        last = w;
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        last = ErrnoError(where + ": connect", err);
        continue;
      }
    }
    return fd;
  }
  return last;
}

Status SendAll(int fd, std::string_view data, Clock::time_point deadline, const std::string& what) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      HPCML_RETURN_IF_ERROR(Wait(fd, POLLOUT, deadline, what));
    } else {
      return ErrnoError(what + ": send", errno);
    }
  }
  return Status::Ok();
}

// Waits until the collector's host has acknowledged every byte sent (TCP's
// ACK; SIOCOUTQ counts what is unacknowledged): the lines are then off the
// node, whatever the node does next. The collector's process reads them
// later; waiting for it (its close after ours) put its scheduling into
// every step's launch, 0.3-1.5 ms on the 2-core test machine, and
// guarded against nothing a node's root can do.
Status AwaitAcknowledged(int fd, Clock::time_point deadline, const std::string& what) {
  for (long pause_us = 20;; pause_us = std::min(pause_us * 2, 1000L)) {
    int unacked = 0;
    if (::ioctl(fd, SIOCOUTQ, &unacked) != 0) return ErrnoError(what + ": SIOCOUTQ", errno);
    if (unacked == 0) return Status::Ok();
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err != 0)
      return ErrnoError(what + ": send", err);
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero())
      return IoError("{}: timed out waiting for the collector's host to acknowledge {} bytes", what,
                     unacked);
    // A reset ends the wait early (POLLERR); an acknowledgement does not
    // wake poll, hence the growing pause.
    const auto us = std::min<long>(
        pause_us, std::chrono::duration_cast<std::chrono::microseconds>(left).count() + 1);
    struct timespec ts {
      us / 1'000'000, (us % 1'000'000) * 1000
    };
    struct pollfd p {
      fd, 0, 0
    };
    if (::ppoll(&p, 1, &ts, nullptr) < 0 && errno != EINTR)
      return ErrnoError(what + ": poll", errno);
  }
}

// One RFC 5424 message per line, octet-counted (RFC 6587): facility
// authpriv, severity info, the node as HOSTNAME, the line as MSG.
std::string Frame(std::string_view lines, const std::string& node) {
  std::string out;
  const std::string header = fmt::format("<86>1 - {} hpcml-guard - audit - ", node);
  while (!lines.empty()) {
    std::size_t nl = lines.find('\n');
    std::string_view line = lines.substr(0, nl);
    lines.remove_prefix(nl == std::string_view::npos ? lines.size() : nl + 1);
    if (line.empty()) continue;
    out += fmt::format("{} {}{}", header.size() + line.size(), header, line);
  }
  return out;
}

// Complete lines of `fd` from `offset` on (at most `max` bytes, cut after
// the last newline).
Result<std::string> ReadLinesFrom(int fd, std::uint64_t offset, std::size_t max,
                                  const std::string& path) {
  std::string text;
  char buf[1 << 16];
  while (text.size() < max) {
    ssize_t n = ::pread(fd, buf, sizeof buf, static_cast<off_t>(offset + text.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("read " + path, errno);
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  std::size_t end = text.rfind('\n', max - 1);
  text.resize(end == std::string::npos ? 0 : end + 1);
  return text;
}

Result<SentMark> ReadMark(int fd, const std::string& path) {
  char buf[128] = {};
  ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n < 0) return ErrnoError("read " + path, errno);
  SentMark mark;
  char id[96] = {};
  unsigned long long offset = 0;
  long long failed = 0;
  if (n > 0 && std::sscanf(buf, "%95s %llu %lld", id, &offset, &failed) >= 2) {
    mark.file_id = std::string_view(id) == "-" ? "" : id;
    mark.offset = offset;
    mark.failed_ms = failed;
  }
  return mark;
}

Status WriteMark(int fd, const SentMark& mark, const std::string& path) {
  const std::string text = fmt::format("{} {} {}\n", mark.file_id.empty() ? "-" : mark.file_id,
                                       mark.offset, mark.failed_ms);
  if (::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()) ||
      ::ftruncate(fd, static_cast<off_t>(text.size())) != 0)
    return ErrnoError("write " + path, errno);
  return Status::Ok();
}

// An open log under a shared lock (whole lines only), with its identity.
struct OpenLog {
  UniqueFd fd;
  struct stat st {};
};

Result<std::optional<OpenLog>> OpenLocked(const std::string& path) {
  auto fd = OpenFd(path, O_RDONLY | O_NOFOLLOW);
  if (!fd.ok()) {
    if (fd.status().code() == StatusCode::kNotFound) return std::optional<OpenLog>();
    return fd.status();
  }
  OpenLog log{std::move(*fd), {}};
  while (::flock(log.fd.get(), LOCK_SH) != 0) {
    if (errno != EINTR) return ErrnoError("flock " + path, errno);
  }
  if (::fstat(log.fd.get(), &log.st) != 0) return ErrnoError("fstat " + path, errno);
  return std::optional<OpenLog>(std::move(log));
}

// The value of "seq" in a line, if it has one.
std::optional<std::uint64_t> SeqOf(const std::string& line) {
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (!j.is_object() || !j.contains("seq") || !j["seq"].is_number_unsigned()) return std::nullopt;
  return j["seq"].get<std::uint64_t>();
}

// Calls f(line, line_no) for each line of text (1-based, empty lines too).
template <typename F>
void EachLine(std::string_view text, F&& f) {
  std::size_t line_no = 0;
  while (!text.empty()) {
    std::size_t nl = text.find('\n');
    ++line_no;
    f(std::string(text.substr(0, nl)), line_no);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
  }
}

Result<std::string> ReadWhole(const std::string& path) {
  HPCML_ASSIGN_OR_RETURN(auto log, OpenLocked(path));
  if (!log) return NotFound("{}: no such file", path);
  return ReadLinesFrom(log->fd.get(), 0, static_cast<std::size_t>(log->st.st_size) + 1, path);
}

}  // namespace

Result<std::size_t> ForwardAudit(const std::string& path, const std::string& host,
                                 std::uint16_t port, const std::string& node, int timeout_ms,
                                 int retry_after_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  const std::string mark_path = path + ".sent";
  const std::string where = fmt::format("audit collector {}:{}", host, port);
  // A send that failed a moment ago is not tried again at once: a collector
  // that drops packets would hold each step for the timeout, one at a time.
  auto recently_failed = [&](const SentMark& m) -> Status {
    const std::int64_t ago = NowMs() - m.failed_ms;
    if (m.failed_ms == 0 || ago < 0 || ago >= retry_after_ms) return Status::Ok();
    return Unavailable("{}: unreachable {:.1f} s ago (tried again {:.0f} s after a failure)", where,
                       static_cast<double>(ago) / 1000, static_cast<double>(retry_after_ms) / 1000);
  };
  HPCML_ASSIGN_OR_RETURN(UniqueFd mark_fd, OpenFd(mark_path, O_RDWR | O_CREAT | O_NOFOLLOW, 0640));
  HPCML_ASSIGN_OR_RETURN(SentMark seen, ReadMark(mark_fd.get(), mark_path));
  HPCML_RETURN_IF_ERROR(recently_failed(seen));  // without waiting for the lock
  // One sender at a time per log: the next waits and finds less to send.
  while (::flock(mark_fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return ErrnoError("flock " + mark_path, errno);
  }
  HPCML_ASSIGN_OR_RETURN(SentMark mark, ReadMark(mark_fd.get(), mark_path));
  HPCML_RETURN_IF_ERROR(recently_failed(mark));  // the sender before us failed
  HPCML_ASSIGN_OR_RETURN(auto log, OpenLocked(path));
  if (!log) return NotFound("audit log {}: no such file", path);
  const std::string id = IdOf(log->st);

  // Pending: the rest of the rotated file (if the mark is in it), then the
  // log from where the mark says. A truncated log is sent again whole: the
  // collector then holds both versions, which CompareWithCollector reports.
  constexpr std::size_t kMax = 64u << 20;
  std::string pending;
  std::uint64_t offset = mark.file_id == id ? mark.offset : 0;
  if (!mark.file_id.empty() && mark.file_id != id) {
    HPCML_ASSIGN_OR_RETURN(auto rotated, OpenLocked(path + ".1"));
    if (rotated && IdOf(rotated->st) == mark.file_id) {
      HPCML_ASSIGN_OR_RETURN(pending,
                             ReadLinesFrom(rotated->fd.get(), mark.offset, kMax, path + ".1"));
    }
  }
  if (offset > static_cast<std::uint64_t>(log->st.st_size)) offset = 0;
  HPCML_ASSIGN_OR_RETURN(std::string tail, ReadLinesFrom(log->fd.get(), offset, kMax, path));
  log.reset();  // the writers may go on; what was read is whole lines
  if (pending.empty() && tail.empty() && mark.file_id == id) return std::size_t{0};

  const std::string lines = pending + tail;
  const std::string frames = Frame(lines, node);
  const auto count = static_cast<std::size_t>(std::count(lines.begin(), lines.end(), '\n'));
  if (!frames.empty()) {
    auto send = [&]() -> Status {
      HPCML_ASSIGN_OR_RETURN(UniqueFd sock, Connect(host, port, deadline));
      HPCML_RETURN_IF_ERROR(SendAll(sock.get(), frames, deadline, where));
      return AwaitAcknowledged(sock.get(), deadline, where);
    };
    if (Status sent = send(); !sent.ok()) {
      mark.failed_ms = NowMs();  // no progress, only when it failed
      (void)WriteMark(mark_fd.get(), mark, mark_path);
      return sent;
    }
  }
  HPCML_RETURN_IF_ERROR(WriteMark(mark_fd.get(), SentMark{id, offset + tail.size(), 0}, mark_path));
  HPCML_RETURN_IF_ERROR(mark_fd.Close());
  return count;
}

Result<CollectorCheck> CompareWithCollector(const std::vector<std::string>& paths,
                                            const std::string& collector_copy) {
  struct Local {
    std::string hash, file;
    std::size_t line = 0;
  };
  std::map<std::uint64_t, Local> local;
  for (const std::string& p : paths) {
    auto text = ReadWhole(p);
    if (!text.ok() && text.status().code() == StatusCode::kNotFound && &p == &paths.back())
      continue;  // a deleted log: its lines show as missing on the node
    if (!text.ok()) return text.status();
    EachLine(*text, [&](const std::string& line, std::size_t no) {
      if (auto seq = SeqOf(line)) local.emplace(*seq, Local{Sha256::Hex(line), p, no});
    });
  }
  HPCML_ASSIGN_OR_RETURN(std::string copy, ReadWhole(collector_copy));
  CollectorCheck out;
  std::map<std::uint64_t, std::pair<std::string, std::size_t>> received;  // seq -> hash, line
  EachLine(copy, [&](const std::string& line, std::size_t no) {
    ++out.lines;
    auto seq = SeqOf(line);
    if (!seq) {
      out.problems.push_back({collector_copy, no, "not an audit line"});
      return;
    }
    const std::string hash = Sha256::Hex(line);
    auto [it, fresh] = received.emplace(*seq, std::pair{hash, no});
    if (fresh || it->second.first == hash) return;  // a line sent twice is the same line
    out.problems.push_back(
        {collector_copy, no,
         fmt::format("a second, different line with seq {} (the first at line {}): the node sent "
                     "a rewritten line",
                     *seq, it->second.second)});
  });
  for (const auto& [seq, got] : received) {
    auto it = local.find(seq);
    if (it == local.end()) {
      out.problems.push_back(
          {collector_copy, got.second,
           fmt::format("seq {} is not in the node's log{}: removed on the node", seq,
                       local.empty() || seq < local.begin()->first
                           ? " (nor in the rotated files given)"
                           : "")});
    } else if (it->second.hash != got.first) {
      out.problems.push_back(
          {it->second.file, it->second.line,
           fmt::format("seq {} differs from the collector's copy ({}:{}): changed on the node", seq,
                       collector_copy, got.second)});
    } else {
      ++out.matched;
    }
  }
  for (const auto& [seq, l] : local) {
    if (!received.contains(seq))
      out.problems.push_back(
          {l.file, l.line,
           fmt::format("seq {} never reached the collector: inserted on the node, or written "
                       "while the collector was unreachable",
                       seq)});
  }
  std::stable_sort(out.problems.begin(), out.problems.end(),
                   [](const AuditProblem& a, const AuditProblem& b) {
                     return std::tie(a.file, a.line) < std::tie(b.file, b.line);
                   });
  return out;
}

}  // namespace hpcml::guard
