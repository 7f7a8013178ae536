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
# RDT_VIRT_CLOUD_RELEASE=2025.1 the services are those of OpenStack 2025.1.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=tools/bootstrap.sh
source tools/bootstrap.sh

# shellcheck source=tools/cloud-packages.sh
source tools/cloud-packages.sh

# RDT_VIRT_CLOUD_RELEASE picks the OpenStack release of the services:
# 2026.2 (the default, tox -e cloud) or 2025.1 (tox -e cloud-2025.1).
case "${RDT_VIRT_CLOUD_RELEASE:-2026.2}" in
2026.2) env=cloud ;;
2025.1) env='cloud-2025.1' ;;
*) echo "$0: RDT_VIRT_CLOUD_RELEASE must be 2026.2 or 2025.1" >&2; exit 2 ;;
esac
"$TOX" -q -e "gnocchi,metric-client,$env" --notest
dir=${RDT_VIRT_CLOUD_DIR:-/var/lib/rdt-virt/cloud}
cloud=(".tox/$env/bin/rdt-virt-sandbox" cloud --dir "$dir"
       --gnocchi-bin "$PWD/.tox/gnocchi/bin"
       --metric-client-bin "$PWD/.tox/metric-client/bin")
if [ -z "${RDT_VIRT_CLOUD_KEEP:-}" ]; then
    trap '"${cloud[@]}" down' EXIT
fi
start=$SECONDS
"${cloud[@]}" up
"${cloud[@]}" flow
echo "cloud up and flow in $((SECONDS - start)) s"
