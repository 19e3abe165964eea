#include "hpcml/featurecache/access.hpp"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <filesystem>

#include "hpcml/common/job_env.hpp"
#include "hpcml/common/strings.hpp"

namespace hpcml::featurecache {
namespace {

std::string Normalize(const std::string& p) {
  std::string n = std::filesystem::path(p).lexically_normal().string();
  while (n.size() > 1 && n.back() == '/') n.pop_back();
  return n;
}

}  // namespace

AccessContext AccessContext::FromEnvironment() {
  AccessContext ctx;
  const char* zone = std::getenv(job_env::kZone);
  if (zone == nullptr) return ctx;
  ctx.guarded = true;
  ctx.zone = zone;
  if (const char* role = std::getenv(job_env::kRole)) ctx.role = role;
  if (const char* ds = std::getenv(job_env::kDatasets)) {
    for (auto& p : SplitList(ds)) {
      // The guard sends canonical paths; resolve again where they exist so a
      // symlinked mount point cannot make two spellings of one file differ.
      char buf[PATH_MAX];
      if (::realpath(p.c_str(), buf) != nullptr) {
        ctx.datasets.push_back(Normalize(buf));
      } else {
        ctx.datasets.push_back(Normalize(p));
      }
    }
  }
  if (const char* cls = std::getenv(job_env::kClassifications))
    ctx.classifications = SplitList(cls);
  return ctx;
}

Result<std::string> CanonicalPath(const std::string& path, bool must_exist) {
  if (path.empty()) return InvalidArgument("empty path");
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) != nullptr) return Normalize(buf);
  int err = errno;
  if (must_exist || err != ENOENT) return ErrnoError(path, err);
  std::filesystem::path p(path);
  std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  if (::realpath(dir.c_str(), buf) == nullptr) return ErrnoError(dir, errno);
  return Normalize((std::filesystem::path(buf) / p.filename()).string());
}

bool PathApproved(const std::vector<std::string>& approved, std::string_view canonical) {
  for (const auto& a : approved) {
    if (a.empty() || a.front() != '/') continue;  // only absolute entries count
    if (IsWithin(canonical, a)) return true;
  }
  return false;
}

Status CheckPath(const AccessContext& ctx, const std::string& canonical, std::string_view what) {
  if (!ctx.guarded) return Status::Ok();
  if (PathApproved(ctx.datasets, canonical)) return Status::Ok();
  std::string listed;
  for (const auto& d : ctx.datasets) listed += (listed.empty() ? "" : ",") + d;
  return PermissionDenied(
      "{}: access denied ({}): not among the datasets approved for this job ({}={})", canonical,
      what, job_env::kDatasets, listed.empty() ? "<empty>" : listed);
}

Status CheckLabels(const AccessContext& ctx, const std::string& canonical, std::string_view zone,
                   std::string_view classification) {
  if (!ctx.guarded) return Status::Ok();
  if (zone != ctx.zone) {
    return PermissionDenied(
        "{}: access denied: the data is in zone '{}' but this job runs in zone '{}' ({})",
        canonical, zone, ctx.zone, job_env::kZone);
  }
  if (ctx.classifications.has_value()) {
    bool allowed = false;
    for (const auto& c : *ctx.classifications) allowed = allowed || c == classification;
    if (!allowed) {
      std::string listed;
      for (const auto& c : *ctx.classifications) listed += (listed.empty() ? "" : ",") + c;
      return PermissionDenied(
          "{}: access denied: classification '{}' is not allowed in this job "
          "({}={})",
          canonical, classification, job_env::kClassifications,
          listed.empty() ? "<empty>" : listed);
    }
  }
  return Status::Ok();
}

}  // namespace hpcml::featurecache
