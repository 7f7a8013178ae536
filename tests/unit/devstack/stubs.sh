# shellcheck shell=bash
# DevStack's helper functions as recorders, for tests of devstack/plugin.sh.
# Every call is appended to $RECORD, one line each, arguments joined by "|".

function _record {
    local IFS='|'
    echo "$*" >> "$RECORD"
}

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
function echo_summary { :; }
function die { _record die "$@"; exit 1; }
function setup_develop { _record setup_develop "$@"; }
function pip_install { _record pip_install "$@"; }
function install_package { _record install_package "$@"; }
# Like DevStack's: nothing happens for a service that is not enabled.
function run_process { is_service_enabled "$1" && _record run_process "$@"; true; }
function stop_process { is_service_enabled "$1" && _record stop_process "$@"; true; }
function iniset { _record iniset "$@"; }
function iniadd { _record iniadd "$@"; }
# Values nova.conf already holds: INIGET_<section>_<option>.
function iniget {
    local var="INIGET_${2}_${3}"
    echo "${!var:-}"
}
function sudo { _record sudo "$@"; "$@"; }
