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
    apt-get update -q
    # The prometheus package is there for promtool: its postinst would
    # start a Prometheus server (systemd's unit, or its init script without
    # systemd). Unless the machine has a policy-rc.d of its own, one that
    # refuses that service alone keeps it from starting, and the service
    # is disabled at boot afterwards.
    new_prometheus=
    own_rcd=
    if grep -qx prometheus <<<"$missing"; then
        new_prometheus=1
        if [ ! -e /usr/sbin/policy-rc.d ]; then
            cat > /usr/sbin/policy-rc.d <<'POLICY'
#!/bin/sh
# Written by rdt-virt's tools/bootstrap.sh while it installs packages.
while [ "${1#--}" != "$1" ]; do shift; done
case "$1" in prometheus|prometheus.service) exit 101 ;; esac
exit 0
POLICY
            chmod 755 /usr/sbin/policy-rc.d
            own_rcd=1
        fi
    fi
    installed=0
    # shellcheck disable=SC2086  # one package a word
    apt-get install -y -q --no-install-recommends $missing || installed=$?
    if [ -n "$own_rcd" ]; then
        rm -f /usr/sbin/policy-rc.d
    fi
    if [ "$installed" -ne 0 ]; then
        exit "$installed"
    fi
    if [ -n "$new_prometheus" ]; then
        if command -v systemctl >/dev/null; then
            systemctl disable --quiet prometheus.service || true
        fi
        update-rc.d prometheus disable >/dev/null 2>&1 || true
    fi
fi
TOX="$boot/bin/tox"
export TOX
