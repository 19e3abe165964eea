#include "hpcml/guard/policy.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <initializer_list>
#include <limits>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "hpcml/common/toml.hpp"

#include "hpcml/common/sha256.hpp"
#include "hpcml/common/strings.hpp"
#include "hpcml/common/unique_fd.hpp"
#include "options.hpp"
#include "policy_cache.hpp"

namespace hpcml::guard {
namespace {

// Error helper bound to the file: "<source>:<line>: <message>".
class Reporter {
 public:
  explicit Reporter(std::string_view source) : source_(source) {}
  template <typename... Args>
  Status Error(int line, fmt::format_string<Args...> f, Args&&... args) const {
    return InvalidArgument("{}:{}: {}", source_, line, fmt::format(f, std::forward<Args>(args)...));
  }

 private:
  std::string source_;
};

int LineOf(const toml::node& node) {
  return static_cast<int>(node.source().begin.line);
}

// Every key of `table` must be in `allowed`.
Status CheckKeys(const Reporter& r, const toml::table& table, std::string_view where,
                 std::initializer_list<std::string_view> allowed) {
  for (auto&& [key, value] : table) {
    if (std::find(allowed.begin(), allowed.end(), key.str()) != allowed.end()) continue;
    std::string expected;
    for (std::string_view a : allowed) expected += (expected.empty() ? "" : ", ") + std::string(a);
    return r.Error(static_cast<int>(key.source().begin.line),
                   "{}: unknown key '{}' (expected one of: {})", where, key.str(), expected);
  }
  return Status::Ok();
}

Result<std::string> GetString(const Reporter& r, const toml::table& t, int table_line,
                              std::string_view where, std::string_view key, bool required) {
  const toml::node* n = t.get(key);
  if (!n) {
    if (required) return r.Error(table_line, "{}: missing key '{}'", where, key);
    return std::string();
  }
  const auto* s = n->as_string();
  if (!s) return r.Error(LineOf(*n), "{} key '{}': expected a string", where, key);
  if (s->get().empty()) return r.Error(LineOf(*n), "{} key '{}': empty string", where, key);
  return s->get();
}

// A string array; `name_like` validates each element as a name.
Result<std::vector<std::string>> GetStringArray(const Reporter& r, const toml::node& n,
                                                std::string_view where, std::string_view key,
                                                bool name_like) {
  const auto* arr = n.as_array();
  if (!arr) return r.Error(LineOf(n), "{} key '{}': expected an array of strings", where, key);
  std::vector<std::string> out;
  for (const toml::node& e : *arr) {
    const auto* s = e.as_string();
    if (!s) return r.Error(LineOf(e), "{} key '{}': expected an array of strings", where, key);
    if (name_like) {
      Status st = ValidateName(fmt::format("{} key '{}'", where, key), s->get());
      if (!st.ok()) return r.Error(LineOf(e), "{}", st.message());
    } else if (s->get().empty()) {
      return r.Error(LineOf(e), "{} key '{}': empty string", where, key);
    }
    out.push_back(s->get());
  }
  return out;
}

// "/data/ae/", "/data/ae" -> "/data/ae"; "/data/ae/fraud-*" -> prefix
// "/data/ae/fraud-". Rejects relative paths, '.', '..', '//' and '*'
// anywhere but at the end, so an entry means exactly what it says.
Status NormalisePolicyPath(std::string_view raw, std::string* path, bool* prefix) {
  std::string p(raw);
  *prefix = false;
  if (!p.empty() && p.back() == '*') {
    *prefix = true;
    p.pop_back();
  }
  if (p.empty() || p.front() != '/') return InvalidArgument("'{}' is not an absolute path", raw);
  if (p.find('*') != std::string::npos)
    return InvalidArgument("'{}': '*' is only allowed at the end", raw);
  if (p.size() > kMaxPathLength)
    return InvalidArgument("path longer than {} bytes", kMaxPathLength);
  std::size_t pos = 1;
  while (pos < p.size()) {
    std::size_t slash = p.find('/', pos);
    std::size_t end = slash == std::string::npos ? p.size() : slash;
    std::string_view comp(p.data() + pos, end - pos);
    bool last = end == p.size();
    if (comp.empty() && !(last || slash == p.size() - 1))
      return InvalidArgument("'{}': empty path component ('//')", raw);
    if (comp == "." || comp == "..")
      return InvalidArgument("'{}': '.' and '..' are not allowed (write the canonical path)", raw);
    pos = end + 1;
  }
  if (!*prefix)
    while (p.size() > 1 && p.back() == '/') p.pop_back();
  // The view covers each entry (mount_view.hpp): a cover over / hides
  // nothing, and one over every name in / hides the system.
  if (p == "/")
    return InvalidArgument(
        "'{}': the file system root cannot be a dataset; name its data "
        "directories",
        raw);
  *path = std::move(p);
  return Status::Ok();
}

// A number of a host range: 1 to 9 digits (so std::stoul cannot overflow).
bool HostNumber(std::string_view d) {
  return !d.empty() && d.size() < 10 &&
         std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A Slurm-style host pattern: a name, or one bracket of numbers and ranges
// ("node[1-4,7]", "gpu[01-16]x"); ranges keep the width of their first bound.
struct Hostlist {
  std::string prefix, suffix;
  std::vector<std::pair<std::string, std::string>> ranges;  // [from, to], digits
};

Result<Hostlist> ParseHostlist(std::string_view pattern) {
  Hostlist h;
  std::size_t open = pattern.find('['), close = pattern.find(']');
  if (open == std::string_view::npos && close == std::string_view::npos) {
    h.prefix = pattern;
  } else {
    if (open == std::string_view::npos || close == std::string_view::npos || close < open ||
        pattern.find('[', open + 1) != std::string_view::npos ||
        pattern.find(']', close + 1) != std::string_view::npos)
      return InvalidArgument("'{}': one [ranges] group at most", pattern);
    h.prefix = pattern.substr(0, open);
    h.suffix = pattern.substr(close + 1);
    std::string_view body = pattern.substr(open + 1, close - open - 1);
    // Every item, an empty one included (a bad range).
    for (std::string_view item : SplitFields(body, ',')) {
      std::size_t dash = item.find('-');
      std::string from(item.substr(0, dash)), to(dash == item.npos ? from : item.substr(dash + 1));
      if (!HostNumber(from) || !HostNumber(to) || std::stoul(from) > std::stoul(to))
        return InvalidArgument("'{}': bad range '{}'", pattern, item);
      h.ranges.emplace_back(std::move(from), std::move(to));
    }
  }
  std::string all = h.prefix + h.suffix;
  Status name = ValidateName("node name", all.empty() ? "x" : all);
  if (!name.ok()) return InvalidArgument("'{}': {}", pattern, name.message());
  return h;
}

Status CheckHostlist(std::string_view pattern) {
  return ParseHostlist(pattern).status();
}

bool HostlistMatches(std::string_view pattern, std::string_view node) {
  auto h = ParseHostlist(pattern);
  if (!h.ok()) return false;
  if (h->ranges.empty()) return node == h->prefix;
  if (node.size() <= h->prefix.size() + h->suffix.size() || !node.starts_with(h->prefix) ||
      !node.ends_with(h->suffix))
    return false;
  std::string_view num =
      node.substr(h->prefix.size(), node.size() - h->prefix.size() - h->suffix.size());
  if (!HostNumber(num)) return false;
  unsigned long v = std::stoul(std::string(num));
  for (const auto& [from, to] : h->ranges) {
    // Padded ranges ("01-16") match only names of that width.
    if (from.size() > 1 && from[0] == '0' && num.size() != from.size()) continue;
    if (v >= std::stoul(from) && v <= std::stoul(to)) return true;
  }
  return false;
}

std::string_view Parent(std::string_view p) {
  std::size_t slash = p.rfind('/');
  if (slash == 0 || slash == std::string_view::npos) return "/";
  return p.substr(0, slash);
}

}  // namespace

void Policy::BuildLookups() {
  for (const Binding& b : bindings_) {
    auto& index = b.kind == BindingKind::kUser    ? user_roles_
                  : b.kind == BindingKind::kGroup ? group_roles_
                                                  : account_roles_;
    index[b.name].insert(b.roles.begin(), b.roles.end());
    if (b.kind == BindingKind::kAccount)
      account_bound_roles_.insert(b.roles.begin(), b.roles.end());
  }
}

std::optional<DatasetEntry> Policy::MatchDataset(std::string_view canonical) const {
  if (canonical.empty() || canonical.front() != '/') return std::nullopt;
  // Walk from the path itself up to "/": the first candidate with a match is
  // the most specific one (a deeper candidate is always a longer entry).
  std::string_view c = canonical;
  for (;;) {
    if (auto e = datasets_.Exact(c)) return e;
    if (c == "/") return std::nullopt;
    std::string_view parent = Parent(c);
    if (auto e = datasets_.LongestPrefixIn(parent, c)) return e;
    c = parent;
  }
}

DatasetRange Policy::EntriesBelow(std::string_view canonical) const {
  std::string lo(canonical);
  if (lo.empty() || lo.back() != '/') lo += '/';
  // Paths below lo are exactly those in [lo, lo with its last '/' as '0'),
  // since '0' is the character after '/'.
  std::string hi = lo;
  hi.back() = '0';
  return {&datasets_, datasets_.LowerBound(lo), datasets_.LowerBound(hi)};
}

namespace {
bool IndexHas(const std::unordered_map<std::string, std::set<std::string>>& index,
              const std::string& name, const std::string& role) {
  auto it = index.find(name);
  return it != index.end() && it->second.count(role) > 0;
}
}  // namespace

bool Policy::IsBoundToPerson(const std::string& role, const std::string& user,
                             const std::vector<std::string>& groups) const {
  if (IndexHas(user_roles_, user, role)) return true;
  for (const std::string& g : groups)
    if (IndexHas(group_roles_, g, role)) return true;
  return false;
}

bool Policy::IsBound(const std::string& role, const std::string& user,
                     const std::vector<std::string>& groups,
                     const std::optional<std::string>& account) const {
  if (IsBoundToPerson(role, user, groups)) return true;
  if (account) return IndexHas(account_roles_, *account, role);
  return account_bound_roles_.count(role) > 0;
}

std::vector<std::string> Policy::ZonesOfNode(std::string_view node) const {
  std::vector<std::string> out;
  for (const auto& [zone, patterns] : zone_nodes_)
    for (const std::string& pattern : patterns)
      if (HostlistMatches(pattern, node)) {
        out.push_back(zone);
        break;
      }
  return out;
}

// ParsePolicy's steps, one per part of the file, in the order of their
// checks: each fills the policy and returns the first error.
class PolicyParser {
 public:
  PolicyParser(const Reporter& r, const toml::table& root, Policy& p) : r_(r), root_(root), p_(p) {}

  // [zones.<name>] description = "...", nodes = [...]
  Status Zones() {
    const Reporter& r = r_;
    Policy& p = p_;
    if (const toml::node* zn = root_.get("zones")) {
      const auto* zones = zn->as_table();
      if (!zones) return r.Error(LineOf(*zn), "'zones' must be a table ([zones.<name>])");
      for (auto&& [key, value] : *zones) {
        int line = static_cast<int>(key.source().begin.line);
        Status st = ValidateName("zone name", key.str());
        if (!st.ok()) return r.Error(line, "[zones.{}]: {}", key.str(), st.message());
        const auto* zt = value.as_table();
        if (!zt) return r.Error(line, "[zones.{}] must be a table", key.str());
        std::string where = fmt::format("[zones.{}]", key.str());
        HPCML_RETURN_IF_ERROR(CheckKeys(r, *zt, where, {"description", "nodes"}));
        HPCML_ASSIGN_OR_RETURN(std::string desc,
                               GetString(r, *zt, line, where, "description", false));
        p.zones_.emplace(std::string(key.str()), std::move(desc));
        if (const toml::node* nn = zt->get("nodes")) {
          HPCML_ASSIGN_OR_RETURN(std::vector<std::string> nodes,
                                 GetStringArray(r, *nn, where, "nodes", false));
          for (const std::string& n : nodes) {
            Status hl = CheckHostlist(n);
            if (!hl.ok()) return r.Error(LineOf(*nn), "{} key 'nodes': {}", where, hl.message());
          }
          p.zone_nodes_.emplace(std::string(key.str()), std::move(nodes));
        }
      }
    }
    if (p.zones_.empty()) return r.Error(1, "no zones: declare at least one [zones.<name>]");
    return Status::Ok();
  }

  // [defaults] role, unknown_datasets. Before [[roles]]: the role is checked
  // against them once they are read (DefaultRoleDeclared).
  Status Defaults() {
    const Reporter& r = r_;
    Policy& p = p_;
    if (const toml::node* dn = root_.get("defaults")) {
      const auto* d = dn->as_table();
      if (!d) return r.Error(LineOf(*dn), "'defaults' must be a table ([defaults])");
      HPCML_RETURN_IF_ERROR(CheckKeys(r, *d, "[defaults]", {"role", "unknown_datasets"}));
      HPCML_ASSIGN_OR_RETURN(std::string role,
                             GetString(r, *d, LineOf(*dn), "[defaults]", "role", false));
      if (!role.empty()) p.default_role_ = role;
      HPCML_ASSIGN_OR_RETURN(std::string unknown, GetString(r, *d, LineOf(*dn), "[defaults]",
                                                            "unknown_datasets", false));
      if (unknown == "allow") {
        p.unknown_datasets_ = UnknownDatasets::kAllow;
      } else if (!unknown.empty() && unknown != "deny") {
        return r.Error(LineOf(*d->get("unknown_datasets")),
                       "[defaults] key 'unknown_datasets': '{}' (expected \"deny\" or \"allow\")",
                       unknown);
      }
    }
    return Status::Ok();
  }

  // [view] roots: directories that hold only data (mount_view.hpp).
  Status View() {
    const Reporter& r = r_;
    const toml::node* vn = root_.get("view");
    if (!vn) return Status::Ok();
    const auto* v = vn->as_table();
    if (!v) return r.Error(LineOf(*vn), "'view' must be a table ([view])");
    HPCML_RETURN_IF_ERROR(CheckKeys(r, *v, "[view]", {"roots"}));
    if (const toml::node* rn = v->get("roots")) {
      HPCML_ASSIGN_OR_RETURN(std::vector<std::string> roots,
                             GetStringArray(r, *rn, "[view]", "roots", false));
      for (const std::string& raw : roots) {
        std::string path;
        bool prefix = false;
        Status st = NormalisePolicyPath(raw, &path, &prefix);
        if (st.ok() && prefix)
          st = InvalidArgument("'{}': a root is a directory, not a prefix", raw);
        if (!st.ok()) return r.Error(LineOf(*rn), "[view] key 'roots': {}", st.message());
        p_.view_roots_.push_back(std::move(path));
      }
    }
    return Status::Ok();
  }

  // [[datasets]] path, zone, classification
  Status Datasets() {
    HPCML_ASSIGN_OR_RETURN(const toml::array* datasets, ArrayOfTables("datasets"));
    if (!datasets) return Status::Ok();
    std::unordered_map<std::string, int> seen;
    for (const toml::node& n : *datasets) HPCML_RETURN_IF_ERROR(Dataset(n, seen));
    return Status::Ok();
  }

  // [[roles]] name, zones, classifications, max_gpus, partitions
  Status Roles() {
    HPCML_ASSIGN_OR_RETURN(const toml::array* roles, ArrayOfTables("roles"));
    if (!roles) return Status::Ok();
    for (const toml::node& n : *roles) HPCML_RETURN_IF_ERROR(OneRole(n));
    return Status::Ok();
  }

  Status DefaultRoleDeclared() {
    if (p_.default_role_ && !p_.roles_.count(*p_.default_role_))
      return r_.Error(LineOf(*root_["defaults"]["role"].node()),
                      "[defaults] key 'role': role '{}' is not declared", *p_.default_role_);
    return Status::Ok();
  }

  // [[bindings]] exactly one of user/group/account, and roles
  Status Bindings() {
    HPCML_ASSIGN_OR_RETURN(const toml::array* bindings, ArrayOfTables("bindings"));
    if (!bindings) return Status::Ok();
    for (const toml::node& n : *bindings) HPCML_RETURN_IF_ERROR(OneBinding(n));
    return Status::Ok();
  }

 private:
  // The array of tables at `key`; nullptr when absent.
  Result<const toml::array*> ArrayOfTables(std::string_view key) const {
    const toml::node* n = root_.get(key);
    if (!n) return static_cast<const toml::array*>(nullptr);
    const auto* arr = n->as_array();
    if (!arr || !arr->is_array_of_tables())
      return r_.Error(LineOf(*n), "'{}' must be an array of tables ([[{}]])", key, key);
    return arr;
  }

  // One [[datasets]] entry; `seen` maps each path (prefix entries starred)
  // to the line that declared it.
  Status Dataset(const toml::node& n, std::unordered_map<std::string, int>& seen) {
    const Reporter& r = r_;
    const toml::table& t = *n.as_table();
    int line = LineOf(n);
    HPCML_RETURN_IF_ERROR(CheckKeys(r, t, "[[datasets]]", {"path", "zone", "classification"}));
    DatasetSpec e;
    e.line = line;
    HPCML_ASSIGN_OR_RETURN(std::string raw, GetString(r, t, line, "[[datasets]]", "path", true));
    Status st = NormalisePolicyPath(raw, &e.path, &e.string_prefix);
    if (!st.ok())
      return r.Error(LineOf(*t.get("path")), "[[datasets]] key 'path': {}", st.message());
    HPCML_ASSIGN_OR_RETURN(e.zone, GetString(r, t, line, "[[datasets]]", "zone", true));
    if (!p_.zones_.count(e.zone))
      return r.Error(LineOf(*t.get("zone")), "[[datasets]] key 'zone': zone '{}' is not declared",
                     e.zone);
    HPCML_ASSIGN_OR_RETURN(e.classification,
                           GetString(r, t, line, "[[datasets]]", "classification", true));
    st = ValidateName("[[datasets]] key 'classification'", e.classification);
    if (!st.ok()) return r.Error(LineOf(*t.get("classification")), "{}", st.message());
    std::string key = (e.string_prefix ? "*" : "") + e.path;
    if (auto [it, inserted] = seen.emplace(key, line); !inserted)
      return r.Error(line, "[[datasets]] path '{}' already declared at line {}", raw, it->second);
    specs_.push_back(std::move(e));
    return Status::Ok();
  }

  // One [[roles]] entry.
  Status OneRole(const toml::node& n) {
    const Reporter& r = r_;
    const toml::table& t = *n.as_table();
    int line = LineOf(n);
    HPCML_RETURN_IF_ERROR(CheckKeys(
        r, t, "[[roles]]", {"name", "zones", "classifications", "max_gpus", "partitions"}));
    Role role;
    role.line = line;
    HPCML_ASSIGN_OR_RETURN(role.name, GetString(r, t, line, "[[roles]]", "name", true));
    Status st = ValidateName("[[roles]] key 'name'", role.name);
    if (!st.ok()) return r.Error(LineOf(*t.get("name")), "{}", st.message());
    std::string where = fmt::format("[[roles]] '{}'", role.name);
    const toml::node* zones = t.get("zones");
    if (!zones) return r.Error(line, "{}: missing key 'zones'", where);
    HPCML_ASSIGN_OR_RETURN(std::vector<std::string> zl,
                           GetStringArray(r, *zones, where, "zones", true));
    for (const std::string& z : zl)
      if (!p_.zones_.count(z))
        return r.Error(LineOf(*zones), "{} key 'zones': zone '{}' is not declared", where, z);
    role.zones.insert(zl.begin(), zl.end());
    if (const toml::node* c = t.get("classifications")) {
      HPCML_ASSIGN_OR_RETURN(std::vector<std::string> cl,
                             GetStringArray(r, *c, where, "classifications", true));
      role.classifications.insert(cl.begin(), cl.end());
    }
    const toml::node* g = t.get("max_gpus");
    if (!g) return r.Error(line, "{}: missing key 'max_gpus'", where);
    const auto* gi = g->as_integer();
    if (!gi || gi->get() < 0 || gi->get() > 1000000)
      return r.Error(LineOf(*g), "{} key 'max_gpus': expected an integer from 0 to 1000000", where);
    role.max_gpus = static_cast<std::uint32_t>(gi->get());
    if (const toml::node* pn = t.get("partitions")) {
      HPCML_ASSIGN_OR_RETURN(std::vector<std::string> pl,
                             GetStringArray(r, *pn, where, "partitions", false));
      role.partitions.emplace(pl.begin(), pl.end());
    }
    std::string name = role.name;
    if (auto it = p_.roles_.find(name); it != p_.roles_.end())
      return r.Error(line, "[[roles]] '{}' already declared at line {}", name, it->second.line);
    p_.roles_.emplace(name, std::move(role));
    return Status::Ok();
  }

  // One [[bindings]] entry.
  Status OneBinding(const toml::node& n) {
    const Reporter& r = r_;
    const toml::table& t = *n.as_table();
    int line = LineOf(n);
    HPCML_RETURN_IF_ERROR(CheckKeys(r, t, "[[bindings]]", {"user", "group", "account", "roles"}));
    Binding b;
    b.line = line;
    int kinds = 0;
    for (auto [key, kind] :
         {std::pair{"user", BindingKind::kUser}, std::pair{"group", BindingKind::kGroup},
          std::pair{"account", BindingKind::kAccount}}) {
      if (!t.contains(key)) continue;
      ++kinds;
      b.kind = kind;
      HPCML_ASSIGN_OR_RETURN(b.name, GetString(r, t, line, "[[bindings]]", key, true));
    }
    if (kinds != 1)
      return r.Error(line, "[[bindings]]: give exactly one of 'user', 'group', 'account'");
    const toml::node* rn = t.get("roles");
    if (!rn) return r.Error(line, "[[bindings]]: missing key 'roles'");
    HPCML_ASSIGN_OR_RETURN(b.roles, GetStringArray(r, *rn, "[[bindings]]", "roles", true));
    if (b.roles.empty()) return r.Error(LineOf(*rn), "[[bindings]] key 'roles': empty");
    for (const std::string& role : b.roles)
      if (!p_.roles_.count(role))
        return r.Error(LineOf(*rn), "[[bindings]] key 'roles': role '{}' is not declared", role);
    p_.bindings_.push_back(std::move(b));
    return Status::Ok();
  }

 public:
  // The entries read by Datasets(), for the table.
  std::vector<DatasetSpec>& specs() { return specs_; }

 private:
  const Reporter& r_;
  const toml::table& root_;
  Policy& p_;
  std::vector<DatasetSpec> specs_;
};

Result<Policy> ParsePolicy(std::string_view text, std::string_view source) {
  Reporter r(source);
  HPCML_ASSIGN_OR_RETURN(toml::table root, ParseToml(text, source));
  Policy p;
  p.source_ = std::string(source);
  p.sha256_ = Sha256::Hex(text);
  HPCML_RETURN_IF_ERROR(CheckKeys(r, root, "top level",
                                  {"zones", "datasets", "roles", "bindings", "defaults", "view"}));
  // The order of the checks: zones, defaults, view, datasets, roles, the
  // default role, bindings (each refers only to what is read before it).
  PolicyParser parser(r, root, p);
  HPCML_RETURN_IF_ERROR(parser.Zones());
  HPCML_RETURN_IF_ERROR(parser.Defaults());
  HPCML_RETURN_IF_ERROR(parser.View());
  HPCML_RETURN_IF_ERROR(parser.Datasets());
  HPCML_RETURN_IF_ERROR(parser.Roles());
  HPCML_RETURN_IF_ERROR(parser.DefaultRoleDeclared());
  HPCML_RETURN_IF_ERROR(parser.Bindings());
  p.datasets_ = DatasetTable::FromSpecs(std::move(parser.specs()));
  p.BuildLookups();
  return p;
}

namespace {

// Owner and write bits of one object; `what` names it in the error.
Status CheckSafe(const struct stat& st, const std::string& what, unsigned owner, bool is_dir) {
  if (st.st_uid != 0 && st.st_uid != owner)
    return PermissionDenied("{}: owned by uid {}, must be owned by root", what, st.st_uid);
  bool sticky_dir = is_dir && (st.st_mode & S_ISVTX);
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !sticky_dir)
    return PermissionDenied("{}: writable by group or others (mode {:o})", what,
                            st.st_mode & 07777);
  return Status::Ok();
}

}  // namespace

Result<UniqueFd> OpenPolicyFile(const std::string& path, unsigned required_owner) {
  HPCML_ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(path, O_RDONLY | O_NOCTTY));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ErrnoError("fstat " + path, errno);
  if (!S_ISREG(st.st_mode)) return PermissionDenied("policy {}: not a regular file", path);
  HPCML_RETURN_IF_ERROR(CheckSafe(st, "policy " + path, required_owner, false));
  // Every directory above the file as opened: whoever can write one of
  // them can swap the file.
  char buf[64];
  fmt::format_to_n(buf, sizeof buf - 1, "/proc/self/fd/{}", fd.get()).out[0] = '\0';
  char real[4096];
  ssize_t n = ::readlink(buf, real, sizeof real - 1);
  if (n <= 0) return ErrnoError("policy " + path + ": readlink", errno);
  std::string dir(real, static_cast<std::size_t>(n));
  while (dir != "/") {
    std::size_t slash = dir.rfind('/');
    dir = slash == 0 ? "/" : dir.substr(0, slash);
    struct stat ds {};
    if (::stat(dir.c_str(), &ds) != 0) return ErrnoError("stat " + dir, errno);
    HPCML_RETURN_IF_ERROR(
        CheckSafe(ds, fmt::format("policy {}: directory {}", path, dir), required_owner, true));
  }
  return fd;
}

namespace {

constexpr std::size_t kMaxPolicySize = 64u << 20;

// The opened policy file from its start, in chunks passed to `sink`.
template <typename Sink>
Status ReadPolicyChunks(int fd, const std::string& path, Sink sink) {
  char chunk[1 << 16];
  std::size_t total = 0;
  for (;;) {
    ssize_t got = ::pread(fd, chunk, sizeof chunk, static_cast<off_t>(total));
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("read " + path, errno);
    }
    if (got == 0) return Status::Ok();
    total += static_cast<std::size_t>(got);
    if (total > kMaxPolicySize) return InvalidArgument("policy {}: larger than 64 MiB", path);
    sink(std::string_view(chunk, static_cast<std::size_t>(got)));
  }
}

}  // namespace

Result<std::string> ReadPolicyText(int fd, const std::string& path) {
  std::string text;
  // One allocation (a growing string would touch about twice the memory).
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0 && st.st_size <= off_t{kMaxPolicySize})
    text.reserve(static_cast<std::size_t>(st.st_size));
  HPCML_RETURN_IF_ERROR(ReadPolicyChunks(fd, path, [&](std::string_view c) { text.append(c); }));
  return text;
}

Result<std::string> HashPolicyText(int fd, const std::string& path) {
  Sha256 sha;
  HPCML_RETURN_IF_ERROR(ReadPolicyChunks(fd, path, [&](std::string_view c) { sha.Update(c); }));
  return sha.FinishHex();
}

Result<Policy> LoadPolicyFile(const std::string& path, unsigned required_owner) {
  HPCML_ASSIGN_OR_RETURN(UniqueFd fd, OpenPolicyFile(path, required_owner));
  HPCML_ASSIGN_OR_RETURN(std::string text, ReadPolicyText(fd.get(), path));
  return ParsePolicy(text, path);
}

}  // namespace hpcml::guard
