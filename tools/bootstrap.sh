#!/bin/bash
# Install what rdt-virt's tox targets need on Debian 12 (run as root):
# python3-venv, the system packages of bindep.txt (libvirt, QEMU, FUSE,
# build tools) and a small virtualenv with tox and bindep in .tox/bootstrap.
# Sourced by run-tests.sh and run-scenario.sh; sets $TOX.
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
    echo "$0: must run as root (it installs packages, mounts the emulated" \
         "resctrl and starts libvirtd in a private namespace)" >&2
    exit 2
fi

export DEBIAN_FRONTEND=noninteractive
if ! command -v python3 >/dev/null || ! python3 -c 'import venv, ensurepip' \
        2>/dev/null; then
    apt-get update -q
    apt-get install -y -q --no-install-recommends python3 python3-venv
fi

boot=.tox/bootstrap
if [ ! -x "$boot/bin/tox" ] || [ ! -x "$boot/bin/bindep" ]; then
    python3 -m venv "$boot"
    "$boot/bin/pip" install -q 'bindep>=2.11' 'tox>=4.11'
fi
missing=$("$boot/bin/bindep" -b test || true)
if [ -n "$missing" ]; then
    echo "Installing system packages: ${missing//$'\n'/ }"
    # Without systemd, prometheus's postinst starts Debian's service through
    # its init script (on *:9090); the tests start their own on loopback.
    test_rcd=
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        test_rcd=1
    fi
    apt-get update -q
    # shellcheck disable=SC2086  # one package a word
    apt-get install -y -q --no-install-recommends $missing
    if [ -n "$test_rcd" ]; then
        rm -f /usr/sbin/policy-rc.d
    fi
fi
TOX="$boot/bin/tox"
export TOX
