# shellcheck shell=bash
# DevStack's helper functions that devstack/plugin.sh uses, for running the
# plugin outside DevStack: the test cloud (rdt-virt-sandbox cloud) sources
# this, then devstack/settings and devstack/plugin.sh, so that rdt-virt's
# settings reach its services through the plugin itself.
#
# Needs: RDT_VIRT_PYTHON (the cloud's python), RDT_VIRT_RUN_DIR and
# RDT_VIRT_LOG_DIR (pid and log files), RDT_VIRT_HOST (prefix of the
# process names, one per emulated host), ENABLED_SERVICES.

function trueorfalse {
    local default=$1 var=$2
    local value=${!var:-$default}
    case ${value,,} in
        1|yes|true|on) echo True ;;
        *) echo False ;;
    esac
}

function is_service_enabled {
    local service
    for service in "$@"; do
        [[ " $ENABLED_SERVICES " == *" $service "* ]] && return 0
    done
    return 1
}

function enable_service { ENABLED_SERVICES="$ENABLED_SERVICES $*"; }
function disable_service {
    local service
    for service in "$@"; do
        ENABLED_SERVICES=" $ENABLED_SERVICES "
        ENABLED_SERVICES=${ENABLED_SERVICES// $service / }
    done
}
function echo_summary { echo "rdt-virt plugin: $*"; }
function die { shift; echo "rdt-virt plugin: $*" >&2; exit 1; }
# Installed already, from the cloud's requirements and bindep profile.
function setup_develop { :; }
function pip_install { :; }
function install_package { :; }
# The cloud runs as root.
function sudo { "$@"; }

function iniset { "$RDT_VIRT_PYTHON" -m rdt_virt.cloud.ini set "$@"; }
function iniadd { "$RDT_VIRT_PYTHON" -m rdt_virt.cloud.ini add "$@"; }
function iniget { "$RDT_VIRT_PYTHON" -m rdt_virt.cloud.ini get "$@"; }

# run_process NAME COMMAND [GROUP] [USER]: a daemon with a pid file.
function run_process {
    is_service_enabled "$1" || return 0
    # shellcheck disable=SC2086  # the command line, one word an argument
    "$RDT_VIRT_PYTHON" -m rdt_virt.cloud.process start "$RDT_VIRT_RUN_DIR" \
        "$RDT_VIRT_LOG_DIR" "$RDT_VIRT_HOST-$1" $2
}

function stop_process {
    is_service_enabled "$1" || return 0
    "$RDT_VIRT_PYTHON" -m rdt_virt.cloud.process stop "$RDT_VIRT_RUN_DIR" \
        "$RDT_VIRT_LOG_DIR" "$RDT_VIRT_HOST-$1"
}
