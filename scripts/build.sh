#!/usr/bin/env bash
# Installs the Debian packages hpcml needs (as root), then configures and
# builds one CMake preset (default: 'default').   scripts/build.sh [preset]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
preset=${1:-default}
"$top/scripts/install-deps.sh"
cd "$top"
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
