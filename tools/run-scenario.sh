#!/bin/bash
# The main job: the reference scenario on an emulated RDT host.
#
# Run as root on Debian 12: it installs what it needs (bindep.txt: libvirt,
# QEMU, FUSE), then starts an emulated two-socket reference host with its
# own libvirtd and rdt-virt-agent, and measures the work rate a protected
# KVM guest reports: alone, with seven noisy neighbours, and with the
# neighbours at hw:mem_bw=10 per instance and shared. It prints the
# experiment's table, every guest's emulated memory bandwidth and CPU time,
# and writes results.json and scenario.png to its output directory
# (--dir DIR, passed through; default a new one under /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=tools/bootstrap.sh
source tools/bootstrap.sh

"$TOX" -q -e scenario -- "$@"
