#!/bin/bash
# Check the Prometheus rules of etc/prometheus and run their unit tests
# (tests/prometheus) with promtool: tox -e promtool.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v promtool >/dev/null; then
    echo "$0: promtool not found. On Debian 12 it comes with the" \
         "prometheus package of bindep.txt's test profile, which" \
         "tools/bootstrap.sh installs without starting a Prometheus" \
         "server; elsewhere put the promtool of a Prometheus release" \
         "(2.42 or later) on PATH." >&2
    exit 1
fi
promtool check rules etc/prometheus/*.yml
promtool test rules tests/prometheus/*.yml
