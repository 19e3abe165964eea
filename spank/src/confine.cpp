#include "confine.hpp"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "hpcml/common/unique_fd.hpp"

namespace hpcml::guard {
namespace {

// Access rights and scopes newer than Debian 12's kernel headers
// (linux/landlock.h), and the ruleset attribute as ABI 6 has it.
constexpr std::uint64_t kAccessFsTruncate = 1ULL << 14;        // ABI 3
constexpr std::uint64_t kAccessFsIoctlDev = 1ULL << 15;        // ABI 5
constexpr std::uint64_t kScopeAbstractUnixSocket = 1ULL << 0;  // ABI 6
constexpr std::uint64_t kScopeSignal = 1ULL << 1;              // ABI 6
struct RulesetAttr {
  std::uint64_t handled_access_fs = 0;
  std::uint64_t handled_access_net = 0;  // ABI 4
  std::uint64_t scoped = 0;              // ABI 6
};

// A ruleset handling `handled` (and, on ABI 6+, scoped against signals and
// abstract unix sockets outside it).
Result<UniqueFd> NewRuleset(int abi, std::uint64_t handled) {
  RulesetAttr attr;
  attr.handled_access_fs = handled;
  std::size_t size = sizeof attr.handled_access_fs;  // ABI 1-3 take only this field
  if (abi >= 6) {
    attr.scoped = kScopeAbstractUnixSocket | kScopeSignal;
    size = sizeof attr;
  }
  UniqueFd ruleset(static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, size, 0)));
  if (!ruleset) return ErrnoError("confine=landlock: landlock_create_ruleset", errno);
  return ruleset;
}

Status RestrictSelf(const UniqueFd& ruleset) {
  if (::syscall(SYS_landlock_restrict_self, ruleset.get(), 0) != 0)
    return ErrnoError("confine=landlock: landlock_restrict_self", errno);
  return Status::Ok();
}

// Every file system access right this kernel knows. All of them are handled
// (and then allowed beneath "/"): REFER must be, or every rename and link
// across directories is denied.
std::uint64_t HandledAccess(int abi) {
  std::uint64_t handled = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;  // ABI 1: bits 0-12
  handled |= LANDLOCK_ACCESS_FS_REFER;                             // ABI 2
  if (abi >= 3) handled |= kAccessFsTruncate;
  if (abi >= 5) handled |= kAccessFsIoctlDev;
  return handled;
}

}  // namespace

Result<int> LandlockAbi() {
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 0)
    return ErrnoError("Landlock (is it in the kernel's lsm= list?)", errno)
        .WithContext("confine=landlock");
  return static_cast<int>(abi);
}

Status ConfineToView() {
  HPCML_ASSIGN_OR_RETURN(int abi, LandlockAbi());
  if (abi < 2)
    return FailedPrecondition(
        "confine=landlock: the kernel has Landlock ABI {}, 2 or later is needed (Linux 5.19+); "
        "use confine=none to run unconfined",
        abi);
  HPCML_ASSIGN_OR_RETURN(UniqueFd ruleset, NewRuleset(abi, HandledAccess(abi)));
  UniqueFd root(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) return ErrnoError("confine=landlock: open /", errno);
  landlock_path_beneath_attr beneath{};
  beneath.allowed_access = HandledAccess(abi);
  beneath.parent_fd = root.get();
  if (::syscall(SYS_landlock_add_rule, ruleset.get(), LANDLOCK_RULE_PATH_BENEATH, &beneath, 0) != 0)
    return ErrnoError("confine=landlock: landlock_add_rule", errno);
  return RestrictSelf(ruleset);
}

Status ForbidExecution() {
  HPCML_ASSIGN_OR_RETURN(int abi, LandlockAbi());
  // Handled and allowed nowhere. (Under ABI 1 this also forbids renames
  // across directories: nothing a denied step needs.)
  HPCML_ASSIGN_OR_RETURN(UniqueFd ruleset, NewRuleset(abi, LANDLOCK_ACCESS_FS_EXECUTE));
  return RestrictSelf(ruleset);
}

}  // namespace hpcml::guard
