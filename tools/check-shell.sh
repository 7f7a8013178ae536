#!/bin/bash
# Lint every shell script of the project with shellcheck.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t scripts < <(git ls-files '*.sh' '.ci/run' 'devstack/plugin.sh' \
    'devstack/settings' | sort -u)
[ "${#scripts[@]}" -eq 0 ] && exit 0
exec shellcheck -x "${scripts[@]}"
