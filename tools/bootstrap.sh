#!/bin/bash
# Install what rdt-virt's tox targets need on Debian 12 (run as root):
# python3-venv, the system packages of bindep.txt (libvirt, QEMU, FUSE,
# build tools) and a small virtualenv with tox, tox-uv and bindep in
# .tox/bootstrap. Sourced by run-tests.sh and run-scenario.sh; sets $TOX.
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
if [ ! -x "$boot/bin/tox" ] || [ ! -x "$boot/bin/bindep" ] ||
        [ ! -x "$boot/bin/uv" ]; then
    python3 -m venv "$boot"
    "$boot/bin/pip" install -q 'bindep>=2.11' 'tox>=4.11' 'tox-uv>=1.11'
fi
# tox-uv builds the environments with uv: the same pins, installed in about
# two thirds of pip's time (the test command builds nine environments).
# uv leaves modules uncompiled unless told; the targets set
# PYTHONDONTWRITEBYTECODE, so every test process and every service of the
# test cloud would compile what it imports at each start.
export UV_COMPILE_BYTECODE=1
missing=$("$boot/bin/bindep" -b test || true)
if [ -n "$missing" ]; then
    echo "Installing system packages: ${missing//$'\n'/ }"
    # The prometheus package is there for promtool and for the tests'
    # own servers on loopback; its postinst would start Debian's service
    # (systemd's unit, or its init script without systemd, on *:9090).
    # Unless the machine has a policy-rc.d of its own, one that refuses
    # every start keeps it (and any other package's service) from starting,
    # as tools/cloud-packages.sh does; prometheus is disabled at boot after.
    own_rcd=
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        own_rcd=1
    fi
    installed=0
    apt-get update -q || installed=$?
    if [ "$installed" -eq 0 ]; then
        # shellcheck disable=SC2086  # one package a word
        apt-get install -y -q --no-install-recommends $missing ||
            installed=$?
    fi
    if [ -n "$own_rcd" ]; then
        rm -f /usr/sbin/policy-rc.d
    fi
    if [ "$installed" -ne 0 ]; then
        exit "$installed"
    fi
    if grep -qx prometheus <<<"$missing"; then
        if command -v systemctl >/dev/null; then
            systemctl disable --quiet prometheus.service || true
        fi
        update-rc.d prometheus disable >/dev/null 2>&1 || true
    fi
fi
TOX="$boot/bin/tox"
export TOX
