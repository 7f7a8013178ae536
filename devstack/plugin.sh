#!/bin/bash
# shellcheck disable=SC2154  # DevStack defines the variables used below
# DevStack plugin of rdt-virt: Intel RDT / AMD PQoS for Nova on libvirt.
#
# Each part acts only where its service runs: the compute driver and the
# emulated host with n-cpu, the scheduler plugins with n-sch, the agent with
# rdt-virt-agent, the meters with ceilometer-acompute.
#
# stack install     install rdt-virt into Nova's environment and the
#                   compute driver loader; with RDT_VIRT_EMULATE, FUSE too
# stack post-config configure nova.conf (driver, [rdt], scheduler), write
#                   rdt-virt.conf, start the emulated host if asked for, add
#                   the meters to Ceilometer's polling
#                   and rdt-virt's Gnocchi resource definitions to the
#                   notification agent's gnocchi_resources.yaml
# stack extra       start rdt-virt-agent
# unstack           stop the agent and the emulated host
# clean             remove the loader and the configuration

function install_rdt_virt {
    if ! is_service_enabled n-cpu n-sch rdt-virt-agent ceilometer-acompute \
            ceilometer-anotification; then
        return
    fi
    setup_develop "$RDT_VIRT_DIR"
    if is_service_enabled n-cpu; then
        # An editable install cannot put the loader package into Nova's
        # nova.virt; the loader command writes it (and removes it on clean).
        "$NOVA_BIN_DIR/rdt-virt-nova-loader" install
        if [[ "$RDT_VIRT_EMULATE" == "True" ]]; then
            install_package fuse3 libfuse3-3
            pip_install mfusepy
        fi
    fi
}

# $1: "-ro" for libvirt's read-only socket (the agent's).
function rdt_virt_libvirt_uri {
    if [[ "$RDT_VIRT_EMULATE" == "True" ]]; then
        echo "qemu:///system?socket=$RDT_VIRT_SANDBOX_DIR/private/run/libvirt/libvirt-sock${1:-}"
    else
        echo "qemu:///system"
    fi
}

function rdt_virt_resctrl_root {
    if [[ "$RDT_VIRT_EMULATE" == "True" ]]; then
        echo "$RDT_VIRT_SANDBOX_DIR/resctrl"
    else
        echo "/sys/fs/resctrl"
    fi
}

# Options of the [rdt] group, in nova.conf and rdt-virt.conf alike.
function configure_rdt_group {
    local conf=$1
    iniset "$conf" rdt resctrl_root "$(rdt_virt_resctrl_root)"
    if [[ "$RDT_VIRT_EMULATE" == "True" ]]; then
        # The release the emulator emulates, not the host's.
        iniset "$conf" rdt kernel_release_file "$RDT_VIRT_SANDBOX_DIR/osrelease"
    fi
    iniset "$conf" rdt mb_strategy "$RDT_VIRT_MB_STRATEGY"
    iniset "$conf" rdt default_group_l3_ways "$RDT_VIRT_DEFAULT_GROUP_L3_WAYS"
    iniset "$conf" rdt monitoring "$RDT_VIRT_MONITORING"
    iniset "$conf" rdt state_file "$RDT_VIRT_STATE_FILE"
}

function configure_rdt_virt_nova {
    if is_service_enabled n-cpu; then
        iniset "$NOVA_CPU_CONF" DEFAULT compute_driver "$RDT_VIRT_COMPUTE_DRIVER"
        configure_rdt_group "$NOVA_CPU_CONF"
        if [[ "$RDT_VIRT_EMULATE" == "True" ]]; then
            iniset "$NOVA_CPU_CONF" libvirt connection_uri "$(rdt_virt_libvirt_uri)"
            if [[ -n "$RDT_VIRT_SANDBOX_LISTEN" ]]; then
                # Live migrations arrive at the sandbox's libvirtd on its
                # TCP socket, not at the machine's host name.
                iniset "$NOVA_CPU_CONF" libvirt live_migration_scheme tcp
                iniset "$NOVA_CPU_CONF" libvirt live_migration_inbound_addr "$RDT_VIRT_SANDBOX_LISTEN"
            fi
        fi
    fi
    if is_service_enabled n-sch && [[ "$RDT_VIRT_ENABLE_SCHEDULER" == "True" ]]; then
        local filters
        filters=$(iniget "$NOVA_CONF" filter_scheduler enabled_filters)
        if [[ -z "$filters" ]]; then
            filters=$RDT_VIRT_NOVA_DEFAULT_FILTERS
        fi
        if [[ ",$filters," != *",RDTFilter,"* ]]; then
            filters="$filters,RDTFilter"
        fi
        iniset "$NOVA_CONF" filter_scheduler enabled_filters "$filters"
        iniset "$NOVA_CONF" filter_scheduler available_filters \
            nova.scheduler.filters.all_filters
        iniadd "$NOVA_CONF" filter_scheduler available_filters \
            nova_plugin.scheduler.filters.RDTFilter
        local weighers
        weighers=$(iniget "$NOVA_CONF" filter_scheduler weight_classes)
        weighers=${weighers:-nova.scheduler.weights.all_weighers}
        if [[ ",$weighers," != *",nova_plugin.scheduler.weights.RDTWeigher,"* ]]; then
            weighers="$weighers,nova_plugin.scheduler.weights.RDTWeigher"
        fi
        iniset "$NOVA_CONF" filter_scheduler weight_classes "$weighers"
        iniset "$NOVA_CONF" filter_scheduler rdt_weight_multiplier \
            "$RDT_VIRT_WEIGHT_MULTIPLIER"
    fi
}

function configure_rdt_virt_agent {
    if ! is_service_enabled rdt-virt-agent; then
        return
    fi
    sudo install -d -o "$STACK_USER" "$RDT_VIRT_CONF_DIR"
    cp "$RDT_VIRT_DIR/etc/rdt-virt/rdt-virt.conf.sample" "$RDT_VIRT_CONF"
    iniset "$RDT_VIRT_CONF" DEFAULT debug "$ENABLE_DEBUG_LOG_LEVEL"
    configure_rdt_group "$RDT_VIRT_CONF"
    # The agent runs as $STACK_USER with a read-only libvirt connection;
    # its only privilege is the privsep daemon that sudo starts.
    iniset "$RDT_VIRT_CONF" rdt_agent libvirt_uri "$(rdt_virt_libvirt_uri -ro)"
    iniset "$RDT_VIRT_CONF" rdt_virt_privsep helper_command \
        "sudo $NOVA_BIN_DIR/privsep-helper --config-file $RDT_VIRT_CONF"
    sudo install -d -o "$STACK_USER" -m 0755 "$(dirname "$RDT_VIRT_STATE_FILE")"
    if [[ "$RDT_VIRT_EMULATE" == "True" ]]; then
        iniset "$RDT_VIRT_CONF" rdt_agent qemu_pid_dir \
            "$RDT_VIRT_SANDBOX_DIR/private/run/libvirt/qemu"
    fi
}

function configure_rdt_virt_ceilometer {
    if ! is_service_enabled ceilometer-acompute; then
        return
    fi
    # The compute pollsters read the agent's state file.
    iniset "${CEILOMETER_CONF:-/etc/ceilometer/ceilometer.conf}" rdt state_file \
        "$RDT_VIRT_STATE_FILE"
    if [[ -f "$RDT_VIRT_CEILOMETER_POLLING" ]] && \
            grep -q 'rdt_pollsters' "$RDT_VIRT_CEILOMETER_POLLING"; then
        return
    fi
    if [[ ! -f "$RDT_VIRT_CEILOMETER_POLLING" ]]; then
        echo "sources:" > "$RDT_VIRT_CEILOMETER_POLLING"
    fi
    cat >> "$RDT_VIRT_CEILOMETER_POLLING" <<POLLING
    - name: rdt_pollsters
      interval: $RDT_VIRT_POLLING_INTERVAL
      meters:
        - memory.bandwidth.total
        - memory.bandwidth.local
        - cpu_l3_cache
        - memory.bandwidth.limit
POLLING
}

# Ceilometer's Gnocchi publisher (in the notification agent) drops samples
# of meters its resource definitions lack; since Ceilometer 24 its own
# gnocchi_resources.yaml lacks rdt-virt's. Merge them into the deployment's
# file (Ceilometer's plugin copies its own there in post-config: enable
# rdt-virt after ceilometer), or into a copy of the packaged one.
function configure_rdt_virt_gnocchi_resources {
    if ! is_service_enabled ceilometer-anotification; then
        return
    fi
    "$NOVA_BIN_DIR/rdt-virt-gnocchi-resources" \
        --output "$RDT_VIRT_GNOCCHI_RESOURCES"
}

function start_rdt_virt_sandbox {
    if [[ "$RDT_VIRT_EMULATE" != "True" ]] || ! is_service_enabled n-cpu; then
        return
    fi
    # nova-compute talks to the sandbox's libvirtd; the host's own stays
    # untouched.
    local cmd="$NOVA_BIN_DIR/rdt-virt-sandbox run --dir $RDT_VIRT_SANDBOX_DIR --profile $RDT_VIRT_EMULATED_PROFILE"
    if [[ -n "$RDT_VIRT_SANDBOX_HOSTNAME" ]]; then
        cmd="$cmd --hostname $RDT_VIRT_SANDBOX_HOSTNAME"
    fi
    if [[ -n "$RDT_VIRT_SANDBOX_LISTEN" ]]; then
        cmd="$cmd --listen $RDT_VIRT_SANDBOX_LISTEN"
    fi
    run_process rdt-virt-sandbox "$cmd" "" root
    local _
    for _ in $(seq 1 120); do
        if sudo "$NOVA_BIN_DIR/rdt-virt-sandbox" status --dir "$RDT_VIRT_SANDBOX_DIR" >/dev/null; then
            return
        fi
        sleep 1
    done
    die $LINENO "the emulated RDT host did not start; see the rdt-virt-sandbox log"
}

function start_rdt_virt_agent {
    # run_process does nothing unless the service is enabled.
    run_process rdt-virt-agent "$NOVA_BIN_DIR/rdt-virt-agent --config-file $RDT_VIRT_CONF"
}

function stop_rdt_virt {
    stop_process rdt-virt-agent
    stop_process rdt-virt-sandbox
}

function cleanup_rdt_virt {
    if is_service_enabled n-cpu; then
        "$NOVA_BIN_DIR/rdt-virt-nova-loader" remove || true
    fi
    if [[ -d "$RDT_VIRT_CONF_DIR" ]]; then
        sudo rm -rf "$RDT_VIRT_CONF_DIR"
    fi
}

if [[ "$1" == "stack" && "$2" == "install" ]]; then
    echo_summary "Installing rdt-virt"
    install_rdt_virt
elif [[ "$1" == "stack" && "$2" == "post-config" ]]; then
    echo_summary "Configuring rdt-virt"
    configure_rdt_virt_nova
    configure_rdt_virt_agent
    configure_rdt_virt_ceilometer
    configure_rdt_virt_gnocchi_resources
    start_rdt_virt_sandbox
elif [[ "$1" == "stack" && "$2" == "extra" ]]; then
    echo_summary "Starting rdt-virt-agent"
    start_rdt_virt_agent
fi
if [[ "$1" == "unstack" ]]; then
    stop_rdt_virt
fi
if [[ "$1" == "clean" ]]; then
    cleanup_rdt_virt
fi
