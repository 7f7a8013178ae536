#!/bin/bash
# Write tools/constraints/RELEASE.txt: the exact versions rdt-virt's test
# environments install for one OpenStack release.
#
# Usage: [PYTHON=python3.9] tools/make-constraints.sh RELEASE UPPER_CONSTRAINTS
#
# With PYTHON set to another interpreter than python3 the file is
# tools/constraints/RELEASE-pyXY.txt: some libraries (hacking, for one)
# have no release for an old Python in the release's own pins.
#
# UPPER_CONSTRAINTS is that release's upper-constraints.txt from
# openstack/requirements (branch stable/RELEASE, or master for the release
# in development; https://releases.openstack.org/constraints/upper/RELEASE).
# It pins the libraries but not the services, so the services of the
# release are pinned here. The result is what pip installed in a fresh
# virtualenv from those pins plus rdt-virt's requirements, its test
# requirements and the test cloud's requirements (from 2025.2 on with
# tools/cloud-requirements-2025.2.txt): a closed set, so a test
# environment of that release never floats.
set -euo pipefail
cd "$(dirname "$0")/.."

release=${1:?release, e.g. 2025.1}
upper=${2:?the release upper-constraints.txt of openstack/requirements}

# The newest release of each service's series for that OpenStack release.
case "$release" in
2025.1) services="nova==31.3.1 ceilometer==24.0.2 python-watcher==14.1.2
    keystone==27.1.0 glance==30.2.0 neutron==26.0.6
    openstack-placement==13.0.1" ;;
2025.2) services="nova==32.2.1 ceilometer==25.0.0 python-watcher==15.1.2
    keystone==28.1.0 glance==31.1.0 neutron==27.0.4
    openstack-placement==14.0.0" ;;
2026.1) services="nova==33.0.2 ceilometer==26.0.0 python-watcher==16.0.2
    keystone==29.1.0 glance==32.0.0 neutron==28.0.2
    openstack-placement==15.0.0" ;;
2026.2) services="nova==34.0.0 ceilometer==27.0.0 python-watcher==17.0.0
    keystone==30.0.0 glance==33.0.0 neutron==29.0.0
    openstack-placement==16.0.0" ;;
*) echo "$0: unknown release $release" >&2; exit 2 ;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The services first: a service pinned by the release's own constraints
# (none today) must not be overridden silently.
# shellcheck disable=SC2086  # one pin a word
printf '%s\n' $services > "$work/services.txt"
grep -v -i -E '^(nova|ceilometer|python-watcher|keystone|glance|neutron|openstack-placement)===' \
    "$upper" > "$work/upper.txt"
python=${PYTHON:-python3}
suffix=
if [ "$python" != python3 ]; then
    suffix=-py$("$python" -c 'import sys; print("%d%d" % sys.version_info[:2])')
fi
out=tools/constraints/$release$suffix.txt
"$python" -m venv "$work/venv"
"$work/venv/bin/pip" install -q --upgrade pip
# The test cloud's services that 2025.1 does not have (Aetos).
later=(-r tools/cloud-requirements-2025.2.txt)
if [ "$release" = 2025.1 ]; then
    later=()
fi
# --prefer-binary: a library the release does not pin (atheris) takes its
# newest version with a wheel for this Python, not an sdist that needs a
# toolchain (atheris 3.0.0 has no wheel for 3.10, and builds only against
# libFuzzer).
"$work/venv/bin/pip" install -q --prefer-binary -c "$work/upper.txt" \
    -c "$work/services.txt" -r requirements.txt -r test-requirements.txt \
    -r tools/cloud-requirements.txt "${later[@]}"
{
    echo "# OpenStack $release on $("$work/venv/bin/python" -V): the versions rdt-virt's tests install"
    echo "# (written by tools/make-constraints.sh from that release's"
    echo "# upper-constraints and its services; regenerate, do not edit)."
    "$work/venv/bin/pip" freeze --exclude-editable | LC_ALL=C sort -f
} > "$out"
echo "$out: $(grep -c '==' "$out") pins"
