#!/usr/bin/env bash
# The Debian packages end to end, on this machine, as root: cpack builds
# hpcml-guard and hpcml-tools from this build tree, lintian finds no error
# in them, `apt-get install ./...deb` installs them; every command answers
# --version from /usr/bin and its man page is there; the admin enables the
# installed plugstack.conf.d snippet and a guarded job runs on the local
# cluster with the INSTALLED plugin (slurmd's log names its version and the
# policy's SHA-256, and so does every audit line); then `apt-get remove`
# takes the programs away and leaves the admin's configuration (the edited
# snippet, the policy) as it was. The packages are purged and the cluster's
# plugstack.conf restored on any exit.
# Run by ctest (label cluster, the hpcml_cluster fixture): HPCML_BUILD_DIR,
# HPCML_SOURCE_DIR and the cluster's SLURM_CONF come from there.
source "$HPCML_SOURCE_DIR/spank/tests/cluster/guard_lib.sh"
TEST_NAME=package_install

[ "$(id -u)" -eq 0 ] || fail "must run as root (apt-get installs the packages)"
for tool in cpack dpkg-deb apt-get lintian man; do
  command -v $tool >/dev/null || fail "$tool is missing: run scripts/install-deps.sh"
done
BUILD=$HPCML_BUILD_DIR
SNIPPET=/etc/slurm/plugstack.conf.d/hpcml_guard.conf
PLUGIN_DIR=$(sed -n 's/^HPCML_SLURM_PLUGIN_DIR:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
[ -n "$PLUGIN_DIR" ] || fail "HPCML_SLURM_PLUGIN_DIR not in $BUILD/CMakeCache.txt"
VERSION=$(sed -n 's/^CMAKE_PROJECT_VERSION:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
TOOLS="hpcml-fcache hpcml-train hpcml-infer hpcml-plan hpcml-cost hpcml-mpi-probe"
[ -x "$BUILD/mpi_trainer/probes/hpcml-gpu-probe" ] && TOOLS="$TOOLS hpcml-gpu-probe"
WORK=$(mktemp -d "$HPCML_CLUSTER_DIR/package.XXXXXX")
# This test's own audit log: the other guard tests' lines (and their repeat
# counts) stay out of it.
AUDIT=$WORK/audit.jsonl

# Purges each package that is installed or has its configuration left.
purge_packages() {
  local p state
  for p in hpcml-guard hpcml-tools; do
    state=$(dpkg-query -W -f '${db:Status-Abbrev}' "$p" 2>/dev/null || true)
    case "$state" in "" | un*) continue ;; esac
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -q "$p" >"$WORK/purge.log" 2>&1 ||
      { echo "package_install: apt-get purge $p failed:" >&2; cat "$WORK/purge.log" >&2; }
  done
}
cleanup() {
  local rc=$?
  restore_plugstack
  purge_packages
  # slurmd loaded the installed plugin when restarted below: start it again
  # without, so later tests do not run its prolog and epilog.
  [ -z "${RESTARTED:-}" ] || "$HPCML_SOURCE_DIR/tests/cluster/hpcml-cluster" restart-slurmd >/dev/null 2>&1 || true
  rm -rf "$WORK"
  exit $rc
}
save_plugstack
trap cleanup EXIT
trap 'exit 143' TERM INT

# Left over from an interrupted run: start clean (the snippet too).
purge_packages
[ ! -e "$SNIPPET" ] || fail "$SNIPPET exists without the package: an admin's file? not touching it"

# ---- build
(cd "$WORK" && cpack -G DEB --config "$BUILD/CPackConfig.cmake" -B "$WORK/debs") >"$WORK/cpack.log" 2>&1 ||
  { cat "$WORK/cpack.log" >&2; fail "cpack failed"; }
GUARD_DEB=$(ls "$WORK"/debs/hpcml-guard_*.deb)
TOOLS_DEB=$(ls "$WORK"/debs/hpcml-tools_*.deb)
echo "built: $(basename "$GUARD_DEB") $(du -h "$GUARD_DEB" | cut -f1), $(basename "$TOOLS_DEB") $(du -h "$TOOLS_DEB" | cut -f1)"
dpkg-deb --info "$GUARD_DEB" | grep -E '^ (Depends|Version):'
dpkg-deb --info "$TOOLS_DEB" | grep -E '^ (Depends|Recommends):'
assert_contains "$(dpkg-deb --info "$GUARD_DEB" conffiles)" "$SNIPPET" "hpcml-guard conffiles"
assert_contains "$(dpkg-deb --contents "$GUARD_DEB")" "$PLUGIN_DIR/hpcml_guard.so" "the plugin's place"

# ---- lintian: no errors (warnings are listed)
set +e
lint=$(lintian --fail-on error "$GUARD_DEB" "$TOOLS_DEB" 2>&1)
lint_rc=$?
set -e
echo "lintian:"; sed 's/^/  /' <<<"$lint"
[ $lint_rc -eq 0 ] || fail "lintian reports errors"

# ---- install: apt-get resolves the declared dependencies
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$GUARD_DEB" "$TOOLS_DEB" \
  >"$WORK/install.log" 2>&1 || { cat "$WORK/install.log" >&2; fail "apt-get install failed"; }
assert_eq "install ok installed" "$(dpkg-query -W -f '${Status}' hpcml-guard)" "hpcml-guard status"
assert_eq "install ok installed" "$(dpkg-query -W -f '${Status}' hpcml-tools)" "hpcml-tools status"

# Every command from /usr/bin (not the build tree), with its version and page.
for t in hpcml-audit $TOOLS; do
  [ -x "/usr/bin/$t" ] || fail "/usr/bin/$t not installed"
  out=$(env -i PATH=/usr/bin:/bin "/usr/bin/$t" --version 2>&1) || fail "/usr/bin/$t --version failed: $out"
  assert_eq "$t $VERSION" "$out" "/usr/bin/$t --version"
  page=$(man -w "$t") || fail "man $t: no page"
  assert_eq "/usr/share/man/man1/$t.1.gz" "$page" "man -w $t"
done
for p in "8 hpcml_guard" "5 hpcml-policy.toml" "5 hpcml-prices.toml"; do
  # shellcheck disable=SC2086
  text=$(MANWIDTH=80 man $p 2>/dev/null | head -5) || fail "man $p fails"
  assert_contains "$text" "NAME" "man $p"
done
assert_contains "$(MANWIDTH=80 man hpcml-cost 2>/dev/null | sed 's/.\x08//g')" "--prices" "man hpcml-cost"
[ -f "$PLUGIN_DIR/hpcml_guard.so" ] || fail "$PLUGIN_DIR/hpcml_guard.so not installed"
assert_contains "$(cat "$SNIPPET")" "#required $PLUGIN_DIR/hpcml_guard.so" "the snippet as installed (inactive)"
grep -q '^[^#]' "$SNIPPET" && fail "the installed snippet has an active line: $(grep '^[^#]' "$SNIPPET")"

# ---- the admin enables it: the installed plugin, zones from the nodes'
# features, one line for every host, through plugstack.conf.d.
write_policy
policy_sha=$(sha256sum "$POLICY" | cut -d' ' -f1)
sed -i "s|^#required $PLUGIN_DIR/hpcml_guard.so .*|required $PLUGIN_DIR/hpcml_guard.so policy=$POLICY audit=$AUDIT cluster=hpcml job_cache=$GUARD_CACHE|" "$SNIPPET"
grep -q "^required $PLUGIN_DIR/hpcml_guard.so policy=$POLICY" "$SNIPPET" || fail "enabling the line in $SNIPPET"
admin_snippet=$(sha256sum "$SNIPPET" | cut -d' ' -f1)
set_plugstack "include $SNIPPET"
# slurmd loads the plugin when it starts: its log names the guard and the
# policy (only lines written after the restart count).
log=$HPCML_CLUSTER_DIR/log/slurmd-node1.log
log_lines=$( [ -f "$log" ] && wc -l <"$log" || echo 0)
RESTARTED=1
"$HPCML_SOURCE_DIR/tests/cluster/hpcml-cluster" restart-slurmd >/dev/null
deadline=$((SECONDS + 30))
until tail -n +"$((log_lines + 1))" "$log" | grep -q "hpcml-guard $VERSION loaded: policy $POLICY sha256 $policy_sha"; do
  [ $SECONDS -lt $deadline ] || fail "slurmd's log $log does not name the guard and the policy digest: $(grep hpcml-guard "$log" | tail -3)"
  sleep 0.5
done
echo "slurmd log: $(grep -o "hpcml-guard $VERSION loaded: .*" "$log" | tail -1)"

# An allowed and a denied job, decided by the installed plugin.
run_as $ALICE timeout 60 srun -n1 --ml-role=ml-engineer --dataset="$DATA/ae/public/a.h5" \
  /usr/bin/hpcml-fcache --version
expect_allowed "a guarded step running an installed tool"
assert_contains "$OUT" "hpcml-fcache $VERSION" "the step's output"
# Denied on the node (only the job record knows its GPUs): an audit line too.
run_as $ALICE timeout 60 srun -n1 --gres=gpu:h100:2 true
expect_denied "2 GPUs with the default role" "role 'reader' allows at most 0"
new=$(cat "$AUDIT")
node_lines=$(grep '"context":"node"' <<<"$new") || fail "no node-side audit lines: $new"
grep -q '"decision":"allow"' <<<"$node_lines" || fail "no allow line: $node_lines"
grep -q '"decision":"deny"' <<<"$node_lines" || fail "no deny line: $node_lines"
while read -r l; do
  assert_contains "$l" "\"guard_version\":\"$VERSION\",\"policy_sha256\":\"$policy_sha\"" "audit line"
done <<<"$node_lines"
out=$(/usr/bin/hpcml-audit verify "$AUDIT") || fail "hpcml-audit verify: $out"
assert_contains "$out" "intact" "hpcml-audit verify"

# ---- remove: the programs go, the admin's configuration stays.
restore_plugstack
DEBIAN_FRONTEND=noninteractive apt-get remove -y -q hpcml-guard hpcml-tools >"$WORK/remove.log" 2>&1 ||
  { cat "$WORK/remove.log" >&2; fail "apt-get remove failed"; }
for t in hpcml-audit $TOOLS; do
  [ ! -e "/usr/bin/$t" ] || fail "/usr/bin/$t is still there after apt-get remove"
done
[ ! -e "$PLUGIN_DIR/hpcml_guard.so" ] || fail "the plugin is still there after apt-get remove"
[ -f "$SNIPPET" ] || fail "apt-get remove deleted the admin's $SNIPPET"
assert_eq "$admin_snippet" "$(sha256sum "$SNIPPET" | cut -d' ' -f1)" "the admin's snippet after remove"
assert_eq "$policy_sha" "$(sha256sum "$POLICY" | cut -d' ' -f1)" "the admin's policy after remove"
assert_eq "rc" "$(dpkg-query -W -f '${db:Status-Abbrev}' hpcml-guard | tr -d ' ')" "hpcml-guard removed, config kept"
pass "built, lintian clean of errors, installed, guarded job with the installed plugin, removed with the configuration kept"
