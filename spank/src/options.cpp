#include "options.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "hpcml/common/gpu_tres.hpp"
#include "hpcml/common/strings.hpp"

namespace hpcml::guard {
namespace {

bool HasControlChar(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

Status CheckAbsolutePath(std::string_view key, std::string_view value) {
  if (value.empty() || value.front() != '/')
    return InvalidArgument("plugin argument '{}': '{}' is not an absolute path", key, value);
  if (value.size() > kMaxPathLength || HasControlChar(value))
    return InvalidArgument("plugin argument '{}': malformed path", key);
  return Status::Ok();
}

// HOST:PORT, [IPV6]:PORT; a host of letters, digits, '.', '-' (a name or
// an IPv4 address), a port 1..65535.
Result<Collector> ParseCollector(std::string_view value) {
  auto bad = [&] {
    return InvalidArgument(
        "plugin argument 'audit_collector': '{}' is not HOST:PORT (a host name or address and a "
        "TCP port)",
        HasControlChar(value) ? std::string("<control>") : std::string(value));
  };
  std::size_t colon = value.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == value.size()) return bad();
  std::string_view host = value.substr(0, colon), port = value.substr(colon + 1);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return bad();
    host = host.substr(1, host.size() - 2);
    if (host.find_first_not_of("0123456789abcdefABCDEF:.") != std::string_view::npos) return bad();
  } else if (host.size() > 253 ||
             host.find_first_not_of("abcdefghijklmnopqrstuvwxyz"
                                    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") !=
                 std::string_view::npos) {
    return bad();
  }
  unsigned number = 0;
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos)
    return bad();
  for (char c : port) number = number * 10 + static_cast<unsigned>(c - '0');
  if (number == 0 || number > 65535) return bad();
  return Collector{std::string(host), static_cast<std::uint16_t>(number)};
}

}  // namespace

Status ValidateName(std::string_view what, std::string_view value) {
  if (value.empty()) return InvalidArgument("{}: empty name", what);
  if (value.size() > kMaxNameLength)
    return InvalidArgument("{}: name longer than {} characters", what, kMaxNameLength);
  for (char c : value) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok)
      return InvalidArgument("{}: '{}' has a character other than letters, digits, '.', '_', '-'",
                             what, HasControlChar(value) ? std::string("<control>") : value);
  }
  return Status::Ok();
}

Result<PluginConfig> ParsePluginArgs(const std::vector<std::string_view>& args) {
  PluginConfig config;
  bool have_policy = false, have_zone = false, have_audit = false, have_cluster = false,
       have_sync = false, have_cache = false, have_enforce = false, have_confine = false,
       have_collector = false, have_policy_cache = false;
  for (std::string_view arg : args) {
    std::size_t eq = arg.find('=');
    if (eq == std::string_view::npos || eq == 0)
      return InvalidArgument("plugin argument '{}': expected key=value", arg);
    std::string_view key = arg.substr(0, eq);
    std::string_view value = arg.substr(eq + 1);
    auto once = [&](bool* seen) -> Status {
      if (*seen) return InvalidArgument("plugin argument '{}' given twice", key);
      *seen = true;
      if (value.empty()) return InvalidArgument("plugin argument '{}': empty value", key);
      return Status::Ok();
    };
    if (key == "policy") {
      HPCML_RETURN_IF_ERROR(once(&have_policy));
      HPCML_RETURN_IF_ERROR(CheckAbsolutePath(key, value));
      config.policy_path = value;
    } else if (key == "zone") {
      HPCML_RETURN_IF_ERROR(once(&have_zone));
      HPCML_RETURN_IF_ERROR(ValidateName("plugin argument 'zone'", value));
      config.zone = value;
    } else if (key == "audit") {
      HPCML_RETURN_IF_ERROR(once(&have_audit));
      HPCML_RETURN_IF_ERROR(CheckAbsolutePath(key, value));
      config.audit_path = value;
    } else if (key == "cluster") {
      HPCML_RETURN_IF_ERROR(once(&have_cluster));
      HPCML_RETURN_IF_ERROR(ValidateName("plugin argument 'cluster'", value));
      config.cluster = value;
    } else if (key == "audit_sync") {
      HPCML_RETURN_IF_ERROR(once(&have_sync));
      if (value != "yes" && value != "no")
        return InvalidArgument("plugin argument 'audit_sync': expected yes or no");
      config.audit_sync = value == "yes";
    } else if (key == "policy_cache") {
      HPCML_RETURN_IF_ERROR(once(&have_policy_cache));
      if (value == "off") {
        config.policy_cache.clear();
      } else {
        HPCML_RETURN_IF_ERROR(CheckAbsolutePath(key, value));
        config.policy_cache = value;
      }
    } else if (key == "audit_collector") {
      HPCML_RETURN_IF_ERROR(once(&have_collector));
      HPCML_ASSIGN_OR_RETURN(config.collector, ParseCollector(value));
    } else if (key == "enforce") {
      HPCML_RETURN_IF_ERROR(once(&have_enforce));
      if (value != "mount" && value != "advisory")
        return InvalidArgument("plugin argument 'enforce': expected mount or advisory");
      config.enforce_mount = value == "mount";
    } else if (key == "confine") {
      HPCML_RETURN_IF_ERROR(once(&have_confine));
      if (value != "landlock" && value != "none")
        return InvalidArgument("plugin argument 'confine': expected landlock or none");
      config.confine_landlock = value == "landlock";
    } else if (key == "job_cache") {
      HPCML_RETURN_IF_ERROR(once(&have_cache));
      if (value == "off") {
        config.job_cache.clear();
      } else {
        HPCML_RETURN_IF_ERROR(CheckAbsolutePath(key, value));
        config.job_cache = value;
      }
    } else {
      return InvalidArgument(
          "unknown plugin argument '{}' (expected policy=, zone=, audit=, audit_sync=, "
          "audit_collector=, cluster=, job_cache=, policy_cache=, enforce=, confine=)",
          HasControlChar(key) ? std::string("<control>") : std::string(key));
    }
  }
  if (!have_policy) return InvalidArgument("missing plugin argument policy=/path/to/policy.toml");
  return config;
}

Status AppendDatasets(std::string_view value, const std::optional<std::string>& cwd,
                      std::vector<std::string>* out) {
  if (value.empty()) return InvalidArgument("--dataset: empty value");
  // Every item, an empty one included (an error); blanks are part of a path.
  for (std::string_view item : SplitFields(value, ',')) {
    if (item.empty()) return InvalidArgument("--dataset: empty path in '{}'", value);
    if (HasControlChar(item)) return InvalidArgument("--dataset: control character in a path");
    std::string path;
    if (item.front() == '/') {
      path = item;
    } else if (cwd && !cwd->empty() && cwd->front() == '/') {
      path = *cwd;
      if (path.back() != '/') path += '/';
      path += item;
    } else {
      return InvalidArgument("--dataset: '{}' is not an absolute path", item);
    }
    if (path.size() > kMaxPathLength)
      return InvalidArgument("--dataset: path longer than {} bytes", kMaxPathLength);
    if (std::find(out->begin(), out->end(), path) == out->end()) {
      if (out->size() >= kMaxDatasets)
        return InvalidArgument("--dataset: more than {} datasets", kMaxDatasets);
      std::size_t bytes = path.size();
      for (const std::string& p : *out) bytes += p.size() + 1;
      if (bytes > kMaxDatasetsBytes)
        return InvalidArgument("--dataset: the paths add up to more than {} bytes",
                               kMaxDatasetsBytes);
      out->push_back(std::move(path));
    }
  }
  return Status::Ok();
}

std::string JoinDatasets(const std::vector<std::string>& paths) {
  return fmt::format("{}", fmt::join(paths, ","));
}

}  // namespace hpcml::guard

namespace hpcml::guard {

Result<std::uint32_t> GpusFromTres(std::string_view tres) {
  HPCML_ASSIGN_OR_RETURN(GpuTres gpus, ParseGpuTres(tres));
  return static_cast<std::uint32_t>(gpus.total());
}

}  // namespace hpcml::guard
