#!/bin/bash
# Install everything the rdt-virt test suites need on Debian 12 and run them.
#
# Run as root on a fresh machine: it installs the system packages listed in
# bindep.txt (libvirt, QEMU, FUSE, ...), builds one tox environment with Nova
# and Ceilometer, and runs style checks, unit tests, functional tests on the
# emulated RDT host (real libvirtd and KVM guests), the sample config check,
# the docs and the release notes. It ends with one line: "N passed, N failed".
#
# RDT_VIRT_TOX_ENVS picks other tox targets (comma separated).
set -euo pipefail
cd "$(dirname "$0")/.."

envs=${RDT_VIRT_TOX_ENVS:-pep8,py3,functional,genconfig,docs,releasenotes}

if [ "$(id -u)" -ne 0 ]; then
    echo "run-tests.sh: must run as root (it installs packages and starts" \
         "libvirtd in a private namespace)" >&2
    exit 2
fi

export DEBIAN_FRONTEND=noninteractive
if ! command -v python3 >/dev/null || ! python3 -c 'import venv, ensurepip' \
        2>/dev/null; then
    apt-get update -q
    apt-get install -y -q --no-install-recommends python3 python3-venv
fi

boot=.tox/bootstrap
if [ ! -x "$boot/bin/tox" ]; then
    python3 -m venv "$boot"
    "$boot/bin/pip" install -q 'bindep>=2.11' 'tox>=4.11'
fi
missing=$("$boot/bin/bindep" -b test || true)
if [ -n "$missing" ]; then
    echo "Installing system packages: $missing" | tr '\n' ' '; echo
    apt-get update -q
    # shellcheck disable=SC2086  # one package a word
    apt-get install -y -q --no-install-recommends $missing
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
"$boot/bin/tox" -e "$envs" 2>&1 | tee "$log" || status=$?

# Sum stestr's totals over every suite that ran, for one closing line.
awk '
    /^ - Passed: /  { p += $3 }
    /^ - Failed: /  { f += $3 }
    /^ - Skipped: / { s += $3 }
    END { printf "%d passed, %d failed, %d skipped\n", p, f, s }
' "$log"
exit "$status"
