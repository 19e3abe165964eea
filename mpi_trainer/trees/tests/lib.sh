# Shared by the trees' shell tests (bash; source it): a temporary working
# directory, removed on exit, outside any guarded job's variables; `py` is
# Debian's Python (numpy, h5py, xgboost); `fail` names the test.
set -eu
TEST_NAME=$(basename "$0" .sh)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset HPCML_ZONE
cd "$tmp"
py=/usr/bin/python3
churn_table=$(dirname "$0")/churn_table.py
fail() {
  echo "FAIL: $TEST_NAME: $*"
  exit 1
}
