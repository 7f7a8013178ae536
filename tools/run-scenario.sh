#!/bin/bash
# The main job: the reference scenario on an emulated RDT host.
#
# Run as root on Debian 12: it installs what it needs (bindep.txt: libvirt,
# QEMU, FUSE), then starts an emulated two-socket reference host with its
# own libvirtd and rdt-virt-agent, boots one protected and seven noisy KVM
# guests, and prints the resctrl groups and a per-guest table of LLC
# occupancy and memory bandwidth (emulated counters): without policy, with
# the noisy guests at hw:mem_bw=10 per instance, and shared.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=tools/bootstrap.sh
source tools/bootstrap.sh

"$TOX" -q -e scenario -- "$@"
