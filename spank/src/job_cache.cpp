#include "hpcml/spank/job_cache.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hpcml/common/fs.hpp"
#include "hpcml/common/unique_fd.hpp"

namespace hpcml::guard {
namespace {

std::string EntryName(JobKey key) {
  return fmt::format("job-{}.{}.json", key.job_id, key.restart_count);
}

// Calls fn(name) for each directory entry; errors end the walk silently (a
// sweep or a removal that misses a file costs nothing but a file).
template <typename Fn>
void ForEachEntry(const std::string& dir, Fn fn) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) return;
  while (const dirent* e = ::readdir(d.get())) fn(std::string_view(e->d_name));
}

// Root-owned, a real directory, no access for group or others.
Status CheckDirectory(const std::string& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return ErrnoError(dir, errno);
  if (!S_ISDIR(st.st_mode)) return PermissionDenied("{}: not a directory", dir);
  if (st.st_uid != 0) return PermissionDenied("{}: owned by uid {}, not root", dir, st.st_uid);
  if ((st.st_mode & 077) != 0)
    return PermissionDenied("{}: mode {:o}, expected 0700", dir, st.st_mode & 07777);
  return Status::Ok();
}

}  // namespace

std::optional<JobFacts> ReadCachedJobFacts(const std::string& dir, JobKey key, uid_t uid,
                                           std::string* why_missed) {
  auto miss = [&](std::string why) -> std::optional<JobFacts> {
    if (why_missed) *why_missed = std::move(why);
    return std::nullopt;
  };
  if (Status d = CheckDirectory(dir); !d.ok())
    return miss(d.code() == StatusCode::kNotFound ? "" : d.message());
  std::string path = dir + "/" + EntryName(key);
  auto fd = OpenFd(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (!fd.ok())
    return miss(fd.status().code() == StatusCode::kNotFound ? "" : fd.status().message());
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 ||
      (st.st_mode & 022) != 0 || st.st_size > 65536)
    return miss(path + ": not a root-owned regular file writable only by root");
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  if (::pread(fd->get(), text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
    return miss(path + ": short read");
  auto j = nlohmann::json::parse(text, nullptr, false);
  try {
    if (!j.is_object()) return miss(path + ": not a JSON object");
    JobFacts f;
    f.uid = j.at("uid").get<uid_t>();
    f.account = j.at("account").get<std::string>();
    f.partition = j.at("partition").get<std::string>();
    f.cluster = j.at("cluster").get<std::string>();
    f.gpus = j.at("gpus").get<std::uint32_t>();
    if (j.at("job_id").get<std::uint32_t>() != key.job_id ||
        j.at("restart_count").get<std::uint32_t>() != key.restart_count)
      return miss(path + ": for another job or attempt");
    if (f.uid != uid) return miss(fmt::format("{}: written for uid {}, not {}", path, f.uid, uid));
    if (f.account.empty()) return miss(path + ": no account");
    return f;
  } catch (const nlohmann::json::exception& e) {
    return miss(fmt::format("{}: {}", path, e.what()));
  }
}

Status WriteCachedJobFacts(const std::string& dir, JobKey key, const JobFacts& facts) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return ErrnoError("mkdir " + dir, errno);
  HPCML_RETURN_IF_ERROR(CheckDirectory(dir));
  const std::time_t oldest = std::time(nullptr) - std::time_t{kMaxEntryAgeDays} * 24 * 3600;
  ForEachEntry(dir, [&](std::string_view name) {
    if (!name.starts_with("job-")) return;
    std::string path = dir + "/" + std::string(name);
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && st.st_mtime < oldest) ::unlink(path.c_str());
  });
  nlohmann::json j = {
      {"job_id", key.job_id},     {"restart_count", key.restart_count}, {"uid", facts.uid},
      {"account", facts.account}, {"partition", facts.partition},       {"cluster", facts.cluster},
      {"gpus", facts.gpus}};
  return WriteFileAtomic(dir + "/" + EntryName(key),
                         j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), 0600);
}

Status RemoveCachedJobFacts(const std::string& dir, std::uint32_t job_id) {
  if (Status d = CheckDirectory(dir); !d.ok())
    return d.code() == StatusCode::kNotFound ? Status::Ok() : d;
  const std::string prefix = fmt::format("job-{}.", job_id);
  Status result;
  ForEachEntry(dir, [&](std::string_view name) {
    if (!name.starts_with(prefix) || !name.ends_with(".json")) return;
    std::string path = dir + "/" + std::string(name);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT && result.ok())
      result = ErrnoError("unlink " + path, errno);
  });
  return result;
}

}  // namespace hpcml::guard
