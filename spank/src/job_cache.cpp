#include "job_cache.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hpcml/common/fs.hpp"
#include "hpcml/common/json.hpp"
#include "hpcml/common/unique_fd.hpp"

namespace hpcml::guard {
namespace {

// cluster= is a validated name (options.cpp): no '/' and no '.'-only names;
// the node is a hostname, with any '/' replaced all the same.
std::string BaseName(const JobKey& key) {
  std::string name = key.cluster.empty() ? fmt::format("job-{}", key.job_id)
                                         : fmt::format("job-{}-{}", key.cluster, key.job_id);
  if (!key.node.empty()) {
    std::string node = key.node;
    std::replace(node.begin(), node.end(), '/', '_');
    name += "@" + node;
  }
  return name;
}
std::string EntryPath(const std::string& dir, const JobKey& key) {
  return dir + "/" + BaseName(key) + ".json";
}
std::string MarkerPath(const std::string& dir, const JobKey& key) {
  return dir + "/" + BaseName(key) + ".attempt";
}
// The job's declared datasets: the same for every attempt (its SPANK
// environment is fixed at submission), so kept by the epilog, for an
// attempt whose prolog slurmd skips (a requeue within cred_expire).
std::string DatasetsPath(const std::string& dir, const JobKey& key) {
  return dir + "/" + BaseName(key) + ".datasets";
}

// Calls fn(name) for each directory entry; errors end the walk silently (a
// sweep or a removal that misses a file costs nothing but a file).
template <typename Fn>
void ForEachEntry(const std::string& dir, Fn fn) {
  UniqueDir d(::opendir(dir.c_str()));
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

// An attempt marker holds the declared datasets (at most 64 KiB of paths,
// options.hpp), JSON-escaped.
constexpr off_t kMaxTrustedFile = 512 * 1024;

// The content of a root-owned regular file writable by nobody else, opened
// without following a symlink.
Result<std::string> ReadTrustedFile(const std::string& path) {
  HPCML_ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 ||
      (st.st_mode & 022) != 0 || st.st_size > kMaxTrustedFile)
    return PermissionDenied("{}: not a root-owned regular file writable only by root", path);
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  if (::pread(fd.get(), text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
    return IoError("{}: short read", path);
  return text;
}

// The current attempt of `key` (written by BeginJobAttempt): its marker and
// the job's declared datasets.
struct Attempt {
  std::string marker;
  std::string datasets;
};
Result<Attempt> CurrentAttempt(const std::string& dir, const JobKey& key) {
  const std::string path = MarkerPath(dir, key);
  auto text = ReadTrustedFile(path);
  if (!text.ok() && text.status().code() == StatusCode::kNotFound)
    return FailedPrecondition(
        "no attempt marker for job {}: slurmd runs the guard's prolog only if plugstack.conf had "
        "the plugin when slurmd started (restart slurmd after installing it)",
        key.job_id);
  if (!text.ok()) return text.status();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object() || !j.contains("attempt") || !j["attempt"].is_string() ||
      !j.contains("datasets") || !j["datasets"].is_string())
    return PermissionDenied("{}: not an attempt marker", path);
  return Attempt{j["attempt"].get<std::string>(), j["datasets"].get<std::string>()};
}

}  // namespace

std::optional<JobFacts> ReadCachedJobFacts(const std::string& dir, const JobKey& key, uid_t uid,
                                           std::string* why_missed) {
  auto miss = [&](std::string why) -> std::optional<JobFacts> {
    if (why_missed) *why_missed = std::move(why);
    return std::nullopt;
  };
  if (Status d = CheckDirectory(dir); !d.ok())
    return miss(d.code() == StatusCode::kNotFound ? "" : d.message());
  auto attempt = CurrentAttempt(dir, key);
  if (!attempt.ok()) return miss(attempt.status().message());
  const std::string path = EntryPath(dir, key);
  auto text = ReadTrustedFile(path);
  if (!text.ok())
    return miss(text.status().code() == StatusCode::kNotFound ? "" : text.status().message());
  auto j = nlohmann::json::parse(*text, nullptr, false);
  try {
    if (!j.is_object()) return miss(path + ": not a JSON object");
    JobFacts f;
    f.uid = j.at("uid").get<uid_t>();
    f.account = j.at("account").get<std::string>();
    f.partition = j.at("partition").get<std::string>();
    f.cluster = j.at("cluster").get<std::string>();
    f.gpus = j.at("gpus").get<std::uint32_t>();
    f.node_features = j.at("node_features").get<std::string>();
    if (const auto& a = j.at("associations_enforced"); !a.is_null())
      f.associations_enforced = a.get<bool>();
    if (j.contains("prolog_alloc") && !j["prolog_alloc"].is_null())
      f.prolog_at_allocation = j["prolog_alloc"].get<bool>();
    if (j.at("job_id").get<std::uint32_t>() != key.job_id ||
        j.at("key_cluster").get<std::string>() != key.cluster)
      return miss(path + ": for another job");
    if (j.value("key_node", std::string()) != key.node)
      return miss(path + ": written on another node");
    if (j.at("attempt").get<std::string>() != attempt->marker)
      return miss(path + ": from an earlier attempt of the job");
    if (f.uid != uid) return miss(fmt::format("{}: written for uid {}, not {}", path, f.uid, uid));
    if (f.account.empty()) return miss(path + ": no account");
    return f;
  } catch (const nlohmann::json::exception& e) {
    return miss(fmt::format("{}: {}", path, e.what()));
  }
}

Status WriteCachedJobFacts(const std::string& dir, const JobKey& key, const JobFacts& facts) {
  HPCML_RETURN_IF_ERROR(CheckDirectory(dir));
  HPCML_ASSIGN_OR_RETURN(Attempt attempt, CurrentAttempt(dir, key));
  const std::time_t oldest = std::time(nullptr) - std::time_t{kMaxEntryAgeDays} * 24 * 3600;
  ForEachEntry(dir, [&](std::string_view name) {
    if (!name.starts_with("job-")) return;
    std::string path = dir + "/" + std::string(name);
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && st.st_mtime < oldest) ::unlink(path.c_str());
  });
  nlohmann::json j = {{"job_id", key.job_id},
                      {"key_cluster", key.cluster},
                      {"key_node", key.node},
                      {"attempt", attempt.marker},
                      {"uid", facts.uid},
                      {"account", facts.account},
                      {"partition", facts.partition},
                      {"cluster", facts.cluster},
                      {"gpus", facts.gpus},
                      {"associations_enforced", nullptr},
                      {"node_features", facts.node_features}};
  if (facts.associations_enforced) j["associations_enforced"] = *facts.associations_enforced;
  j["prolog_alloc"] = nullptr;
  if (facts.prolog_at_allocation) j["prolog_alloc"] = *facts.prolog_at_allocation;
  return WriteFileAtomic(EntryPath(dir, key), JsonText(j), 0600);
}

Status BeginJobAttempt(const std::string& dir, const JobKey& key, std::string_view datasets) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return ErrnoError("mkdir " + dir, errno);
  HPCML_RETURN_IF_ERROR(CheckDirectory(dir));
  const std::string entry = EntryPath(dir, key);
  if (::unlink(entry.c_str()) != 0 && errno != ENOENT) return ErrnoError("unlink " + entry, errno);
  std::uint8_t nonce[16];
  if (::getrandom(nonce, sizeof nonce, 0) != static_cast<ssize_t>(sizeof nonce))
    return ErrnoError("getrandom", errno);
  std::string hex;
  for (std::uint8_t b : nonce) hex += fmt::format("{:02x}", b);
  nlohmann::json j = {{"attempt", hex}, {"datasets", std::string(datasets)}};
  HPCML_RETURN_IF_ERROR(WriteFileAtomic(DatasetsPath(dir, key),
                                        JsonText(nlohmann::json{{"datasets", datasets}}), 0600));
  return WriteFileAtomic(MarkerPath(dir, key), JsonText(j), 0600);
}

Result<std::string> JobDeclaredDatasets(const std::string& dir, const JobKey& key) {
  HPCML_RETURN_IF_ERROR(CheckDirectory(dir));
  const std::string path = DatasetsPath(dir, key);
  auto text = ReadTrustedFile(path);
  if (!text.ok() && text.status().code() == StatusCode::kNotFound)
    return FailedPrecondition(
        "no record of job {}'s datasets: slurmd runs the guard's prolog only if plugstack.conf "
        "had the plugin when slurmd started (restart slurmd after installing it)",
        key.job_id);
  if (!text.ok()) return text.status();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object() || !j.contains("datasets") || !j["datasets"].is_string())
    return PermissionDenied("{}: not a record of the job's datasets", path);
  return j["datasets"].get<std::string>();
}

Status RemoveCachedJobFacts(const std::string& dir, const JobKey& key) {
  if (Status d = CheckDirectory(dir); !d.ok())
    return d.code() == StatusCode::kNotFound ? Status::Ok() : d;
  Status result;
  for (const std::string& path : {EntryPath(dir, key), MarkerPath(dir, key)})
    if (::unlink(path.c_str()) != 0 && errno != ENOENT && result.ok())
      result = ErrnoError("unlink " + path, errno);
  return result;
}

}  // namespace hpcml::guard
