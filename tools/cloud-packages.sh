#!/bin/bash
# Install the system packages of bindep's "cloud" profile (MariaDB,
# RabbitMQ, PostgreSQL, qemu-utils, Prometheus, OpenSSH) without starting
# Debian's own MariaDB, RabbitMQ, Prometheus or sshd: the test cloud runs
# its own, on loopback. Sourced after
# tools/bootstrap.sh by run-cloud.sh and run-tests.sh.

cloud_missing=$(.tox/bootstrap/bin/bindep -b cloud || true)
if [ -n "$cloud_missing" ]; then
    echo "Installing system packages: ${cloud_missing//$'\n'/ }"
    cloud_rcd=
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        cloud_rcd=1
    fi
    apt-get update -q
    # shellcheck disable=SC2086  # one package a word
    apt-get install -y -q --no-install-recommends $cloud_missing
    if [ -n "$cloud_rcd" ]; then
        rm -f /usr/sbin/policy-rc.d
    fi
    # Under systemd the package enables its service for the next boot.
    if grep -qx prometheus <<<"$cloud_missing" &&
            command -v systemctl >/dev/null; then
        systemctl disable --quiet prometheus.service || true
    fi
    if grep -qx openssh-server <<<"$cloud_missing" &&
            command -v systemctl >/dev/null; then
        systemctl disable --quiet ssh.service || true
    fi
fi
