#!/bin/bash
# Install everything the rdt-virt test suites need on Debian 12 and run them.
#
# Run as root on a fresh machine: it installs the system packages listed in
# bindep.txt (libvirt, QEMU, FUSE, promtool, ...), builds the tox
# environments (with Nova and Ceilometer) and runs the style checks, the
# promtool tests of the Prometheus rules, the unit tests, the
# functional tests on the emulated RDT host (real libvirtd and KVM guests;
# Gnocchi, from its own environment, for the telemetry tests), the unit
# tests and the tests of Watcher's code on OpenStack 2025.1 and 2026.1
# (tools/constraints), the sample config check, the docs, the release notes and, last, the test cloud's
# operator flow (real OpenStack services on two emulated RDT hosts; the
# system packages of bindep's cloud profile). It ends with one line:
# "N passed, N failed, N skipped".
#
# RDT_VIRT_TOX_ENVS picks other tox targets (comma separated).
set -euo pipefail
cd "$(dirname "$0")/.."

# checks: pep8, genconfig, docs and releasenotes in one environment.
# unit-2025.1 and unit-2026.1: the older SLURP releases' unit tests and
# Watcher's model; their Nova harness is in the release-* targets.
envs=${RDT_VIRT_TOX_ENVS:-checks,promtool,py3,gnocchi,functional,unit-2025.1,unit-2026.1,metric-client,cloud}

# shellcheck source=tools/bootstrap.sh
source tools/bootstrap.sh

# shellcheck source=tools/cloud-packages.sh
source tools/cloud-packages.sh

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
"$TOX" -e "$envs" 2>&1 | tee "$log" || status=$?

# A failure's traceback sits far up a long log: repeat, where a truncated
# CI log still shows them, each failed test's name, the last 120 lines of
# its traceback and the last 30 of each other detail (a long report ends
# with its summary): a failure's cause is at the end.
if [ "$status" -ne 0 ]; then
    echo "=== stestr's failure reports, repeated from above ==="
    awk -v keep=30 '
        function flush(  lines, first, i, err, shown) {
            lines = section == "traceback" ? 4 * keep : keep
            first = n <= lines ? 1 : n - lines + 1
            # A server-side cause (an API 500, a failed RPC) is logged as
            # an ERROR record with its traceback, often far above the
            # tail: show those records, first, in full (up to 5 * keep).
            if (section == "pythonlogging" && first > 1) {
                for (i = 1; i < first && shown < 5 * keep; i++) {
                    if (buf[i] ~ /^[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] /)
                        err = buf[i] ~ / (ERROR|CRITICAL) /
                    if (err) {
                        print buf[i]; shown++
                    }
                }
                if (shown)
                    print "    [ERROR records above, from the lines left out]"
            }
            if (first > 1)
                print "    [" first - 1 " lines of " section " left out]"
            for (i = first; i <= n; i++)
                print buf[i]
            section = ""; n = 0
        }
        /^Failed [0-9]+ tests - output below:$/ { on = 1; print; next }
        on && /^Totals$/ { flush(); on = 0; next }
        !on { next }
        /^Captured [^ ]+:$/ {
            flush(); section = substr($2, 1, length($2) - 1); print; next
        }
        section != "" { buf[++n] = $0; next }
        { print }
    ' "$log"
    echo "=== failed tests ==="
    grep -E '^\{[0-9]+\} .* \.\.\. FAILED$' "$log" || true
fi

# Sum stestr's totals over every suite that ran, for one closing line.
awk '
    /^ - Passed: /  { p += $3 }
    /^ - Failed: /  { f += $3 }
    /^ - Skipped: / { s += $3 }
    END { printf "%d passed, %d failed, %d skipped\n", p, f, s }
' "$log"
exit "$status"
