#!/bin/bash
# The main job: a real OpenStack cloud on two emulated RDT hosts, and the
# operator's flow on it.
#
# Run as root on Debian 12 (no systemd needed): it installs what it needs
# (bindep.txt's test and cloud profiles: libvirt, QEMU, FUSE, PostgreSQL,
# RabbitMQ, Prometheus; Debian's own services are not started), builds the
# cloud's, Gnocchi's and the metric client's environments, brings the cloud
# up under one directory (loopback only), runs the flow (flavors, images,
# one protected and seven noisy servers, Placement, resctrl groups,
# rdt-virt top, Gnocchi measures, Prometheus behind Aetos with two tenants
# each seeing their own servers, resize, rebuild, live migration, Watcher
# moving a noisy neighbour, delete, bad input) and takes the cloud down
# again. RDT_VIRT_CLOUD_KEEP=1 leaves it running
# (.tox/cloud/bin/rdt-virt-sandbox cloud down removes it). With
# RDT_VIRT_CLOUD_RELEASE=2025.1 (or 2026.1) the services are those of that
# OpenStack release.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=tools/bootstrap.sh
source tools/bootstrap.sh

# shellcheck source=tools/cloud-packages.sh
source tools/cloud-packages.sh

# RDT_VIRT_CLOUD_RELEASE picks the OpenStack release of the services:
# 2026.2 (the default, tox -e cloud), 2026.1 or 2025.1 (tox -e
# cloud-2026.1, cloud-2025.1).
case "${RDT_VIRT_CLOUD_RELEASE:-2026.2}" in
2026.2) env=cloud ;;
2026.1) env='cloud-2026.1' ;;
2025.1) env='cloud-2025.1' ;;
*) echo "$0: RDT_VIRT_CLOUD_RELEASE must be 2026.2, 2026.1 or 2025.1" >&2
   exit 2 ;;
esac
# RDT_VIRT_CLOUD_UPGRADE=2025.1:2026.1 instead: the cloud comes up on
# 2025.1 with servers running, is upgraded service by service and host by
# host to 2026.1 with the checks of each step (rdt-virt-sandbox cloud
# upgrade, doc/source/admin/upgrade.rst), and 2026.1's flow runs on it.
upgrade=${RDT_VIRT_CLOUD_UPGRADE:-}
case "$upgrade" in
'') envs=$env ;;
2025.1:2026.1) env='cloud-2025.1'; new='cloud-2026.1'; envs="$env,$new" ;;
*) echo "$0: RDT_VIRT_CLOUD_UPGRADE must be 2025.1:2026.1" >&2; exit 2 ;;
esac
"$TOX" -q -e "gnocchi,metric-client,$envs" --notest
dir=${RDT_VIRT_CLOUD_DIR:-/var/lib/rdt-virt/cloud}
tools=(--gnocchi-bin "$PWD/.tox/gnocchi/bin"
       --metric-client-bin "$PWD/.tox/metric-client/bin")
cloud=(".tox/$env/bin/rdt-virt-sandbox" cloud --dir "$dir" "${tools[@]}")
if [ -z "${RDT_VIRT_CLOUD_KEEP:-}" ]; then
    trap '"${cloud[@]}" down' EXIT
fi
start=$SECONDS
if [ -n "$upgrade" ]; then
    "${cloud[@]}" upgrade --releases "$upgrade" --to-bin "$PWD/.tox/$new/bin"
    echo "cloud up and upgraded in $((SECONDS - start)) s"
    ".tox/$new/bin/rdt-virt-sandbox" cloud --dir "$dir" "${tools[@]}" flow
    echo "cloud up, upgrade and flow in $((SECONDS - start)) s"
    exit 0
fi
"${cloud[@]}" up
"${cloud[@]}" flow
echo "cloud up and flow in $((SECONDS - start)) s"
