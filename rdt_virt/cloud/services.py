# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Configuration and commands of the cloud's OpenStack services.

Each function writes one service's files with :mod:`rdt_virt.cloud.ini`
(DevStack's iniset) from a :class:`Layout` and returns nothing else; the
rdt-virt parts (compute driver, scheduler filter and weigher, agent,
pollsters, Gnocchi definitions) are not here: the DevStack plugin writes
them (see :mod:`rdt_virt.cloud.cloud`).
"""

import os
import shutil
import sys

import yaml

from rdt_virt.cloud import ini
from rdt_virt.cloud import mariadb

PASSWORD = 'rdt-virt'
REGION = 'RegionOne'
# Compute hosts: (name, emulated hardware profile). The reference host has
# L3 CAT, MBA and MBM; the other is the same host booted with rdt=!mba (L3
# CAT and MBM), so bandwidth limits need the reference host and servers on
# both are measured. Not an AMD host: libvirt can create no resctrl group
# on one (see rdt_virt.policy.fit).
COMPUTES = (('compute1', 'reference'), ('compute2', 'reference-no-mba'))
# Each host's own loopback address: its sandbox's libvirtd listens there
# on TCP (live migrations arrive there) and nova-compute reports it as
# its IP. The sandboxes share the machine's network namespace.
ADDRESSES = {'compute1': '127.0.0.2', 'compute2': '127.0.0.3'}
PORTS = ('db', 'rabbit', 'rabbit_dist', 'epmd', 'keystone', 'glance',
         'placement', 'neutron', 'nova', 'gnocchi', 'watcher', 'prometheus',
         'aetos') + tuple(
    '%s_%s' % (kind, host) for host, _ in COMPUTES
    for kind in ('agent_prom', 'ceilometer_prom', 'ssh'))


class Layout(object):
    """Where the cloud under ``base`` keeps everything."""

    def __init__(self, base, ports, venv_bin=None, gnocchi_bin=None,
                 metric_client_bin=None):
        self.base = os.path.abspath(base)
        self.ports = ports
        self.bin = venv_bin or os.path.dirname(sys.executable)
        self.gnocchi_bin = gnocchi_bin
        # openstackclient with python-observabilityclient, without
        # gnocchiclient: "openstack metric" of Prometheus and Aetos.
        self.metric_client_bin = metric_client_bin

    def path(self, *parts):
        return os.path.join(self.base, *parts)

    def etc(self, *parts):
        return self.path('etc', *parts)

    def tool(self, name):
        return os.path.join(self.bin, name)

    @property
    def venv(self):
        return os.path.dirname(self.bin)

    def url(self, service, suffix=''):
        return 'http://127.0.0.1:%d%s' % (self.ports[service], suffix)

    @property
    def keystone_url(self):
        return self.url('keystone', '/v3')

    @property
    def transport_url(self):
        return 'rabbit://guest:guest@127.0.0.1:%d/' % self.ports['rabbit']

    def db_url(self, name):
        return mariadb.Server(None, None, self.ports['db']).url(name)


def _common(layout, name):
    return {'DEFAULT': {'debug': 'False', 'use_stderr': 'True',
                        'transport_url': layout.transport_url,
                        'state_path': layout.path('state', name)},
            'oslo_concurrency': {'lock_path': layout.path('state', name,
                                                          'lock')}}


def _authtoken(layout, user):
    """keystonemiddleware, and the service user's own credentials."""
    auth = {'auth_type': 'password', 'auth_url': layout.keystone_url,
            'username': user, 'password': PASSWORD,
            'project_name': 'service', 'user_domain_name': 'Default',
            'project_domain_name': 'Default', 'region_name': REGION}
    token = dict(auth, www_authenticate_uri=layout.keystone_url,
                 service_token_roles_required='True')
    return token, auth


def keystone(layout):
    path = layout.etc('keystone', 'keystone.conf')
    keys = layout.path('state', 'keystone') + '/'
    conf = {
        'DEFAULT': {'debug': 'False', 'use_stderr': 'True'},
        'database': {'connection': layout.db_url('keystone')},
        'token': {'provider': 'fernet'},
        'fernet_tokens': {'key_repository': keys + 'fernet-keys'},
        'fernet_receipts': {'key_repository': keys + 'fernet-keys'},
        'credential': {'key_repository': keys + 'credential-keys'},
        # bcrypt's fewest rounds: every command of the flow logs in with
        # a password, which the default 12 rounds make cost about 0.4 s
        # of this machine's CPU each. Passwords here are not secrets.
        'identity': {'password_hash_rounds': '4'},
        # Keystone's own cache, as DevStack turns it on (with memcached):
        # a token is cached as it is issued, so the services' first
        # validation of each command's new token, and the roles and
        # catalog of each issue, come from memory. In memory, since
        # Keystone runs as one process here.
        'cache': {'enabled': 'True', 'backend': 'dogpile.cache.memory'},
    }
    ini.set_many(path, conf)
    return path


def placement(layout):
    path = layout.etc('placement', 'placement.conf')
    token, _ = _authtoken(layout, 'placement')
    ini.set_many(path, {
        'DEFAULT': {'debug': 'False', 'use_stderr': 'True'},
        'placement_database': {'connection': layout.db_url('placement')},
        'api': {'auth_strategy': 'keystone'},
        'keystone_authtoken': token,
    })
    return path


def glance(layout):
    conf_dir = layout.etc('glance')
    path = os.path.join(conf_dir, 'glance-api.conf')
    token, _ = _authtoken(layout, 'glance')
    store = layout.path('state', 'glance')
    ini.set_many(path, {
        'DEFAULT': {'debug': 'False', 'use_stderr': 'True',
                    'enabled_backends': 'fs:file',
                    'transport_url': layout.transport_url},
        'database': {'connection': layout.db_url('glance')},
        'keystone_authtoken': token,
        'paste_deploy': {'flavor': 'keystone'},
        'glance_store': {'default_backend': 'fs'},
        'fs': {'filesystem_store_datadir': os.path.join(store, 'images')},
        'os_glance_staging_store': {
            'filesystem_store_datadir': os.path.join(store, 'staging')},
        'os_glance_tasks_store': {
            'filesystem_store_datadir': os.path.join(store, 'tasks')},
        'oslo_concurrency': {'lock_path': os.path.join(store, 'lock')},
    })
    shutil.copy(os.path.join(layout.venv, 'etc', 'glance',
                             'glance-api-paste.ini'), conf_dir)
    return path


def neutron(layout):
    """Neutron's API with ML2 and no mechanism driver: ports, no wiring.

    Nova asks Neutron for the ports of every server it shows, lists or
    deletes, also for servers created with ``networks: none``; no agent is
    needed to answer that no port exists.
    """
    path = layout.etc('neutron', 'neutron.conf')
    token, auth = _authtoken(layout, 'neutron')
    conf = _common(layout, 'neutron')
    conf['DEFAULT'].update({'core_plugin': 'ml2', 'service_plugins': '',
                            'auth_strategy': 'keystone',
                            'notify_nova_on_port_status_changes': 'False',
                            'notify_nova_on_port_data_changes': 'False',
                            'api_workers': '1', 'rpc_workers': '0'})
    conf.update({
        'database': {'connection': layout.db_url('neutron')},
        'keystone_authtoken': token,
        'nova': auth,
        'ml2': {'type_drivers': 'flat', 'tenant_network_types': '',
                'mechanism_drivers': '', 'extension_drivers': ''},
        'ml2_type_flat': {'flat_networks': 'physnet1'},
    })
    paste = layout.etc('neutron', 'api-paste.ini')
    conf['DEFAULT']['api_paste_config'] = paste
    ini.set_many(path, conf)
    shutil.copy(os.path.join(layout.venv, 'etc', 'neutron',
                             'api-paste.ini'), paste)
    return path


def nova(layout):
    """nova.conf of API, conductor and scheduler; base of the computes'."""
    path = layout.etc('nova', 'nova.conf')
    token, auth = _authtoken(layout, 'nova')
    conf = _common(layout, 'nova')
    conf['DEFAULT'].update({
        'my_ip': '127.0.0.1', 'host': 'controller',
        'osapi_compute_workers': '1', 'metadata_workers': '1',
        # A build the RDTFilter or a claim refuses is retried elsewhere.
        'scheduler_max_attempts': '3',
        # No Neutron network info to heal for servers without networks.
        'heal_instance_info_cache_interval': '-1',
        # As DevStack sets it: a resize may stay on its host.
        'allow_resize_to_same_host': 'True',
        'instance_usage_audit': 'False',
    })
    conf.update({
        'api': {'auth_strategy': 'keystone'},
        'wsgi': {'api_paste_config': layout.etc('nova', 'api-paste.ini')},
        'api_database': {'connection': layout.db_url('nova_api')},
        'database': {'connection': layout.db_url('nova_cell1')},
        'keystone_authtoken': token,
        'placement': auth,
        'neutron': auth,
        'glance': {'region_name': REGION},
        'service_user': dict(auth, send_service_user_token='True'),
        'conductor': {'workers': '1'},
        'scheduler': {'workers': '1', 'discover_hosts_in_cells_interval':
                      '10'},
        # Watcher's decision engine keeps its compute model current from
        # Nova's versioned notifications, Ceilometer reads the unversioned
        # ones: both, as Watcher's DevStack plugin sets it
        # (NOVA_NOTIFICATION_FORMAT=both).
        'notifications': {'notify_on_state_change': 'vm_and_task_state',
                          'notification_format': 'both'},
        'oslo_messaging_notifications': {'driver': 'messagingv2'},
        'vnc': {'enabled': 'False'},
        'spice': {'enabled': 'False'},
        'cinder': {'os_region_name': REGION},
        'filter_scheduler': {'enabled_filters':
                             'ComputeFilter,ComputeCapabilitiesFilter,'
                             'ImagePropertiesFilter'},
    })
    ini.set_many(path, conf)
    # nova-api runs in uWSGI, whose worker waits for requests in C. Nova 31
    # (2025.1) patches eventlet into every process that imports it, so
    # oslo.messaging's heartbeat would be a green thread that never runs
    # while the API is idle: RabbitMQ drops its connection after a minute
    # and the next cast to the conductor (a resize) may be lost. The API
    # gets a native heartbeat thread, as oslo.messaging advises for WSGI
    # applications; on Nova 32 and later its threads are native anyway.
    ini.set_many(layout.etc('nova', 'nova-api.conf'), {
        'oslo_messaging_rabbit': {'heartbeat_in_pthread': 'True'}})
    shutil.copy(os.path.join(layout.venv, 'etc', 'nova', 'api-paste.ini'),
                layout.etc('nova', 'api-paste.ini'))
    return path


# nova-compute's shutdown, in seconds; see nova_compute().
COMPUTE_MANAGER_SHUTDOWN_TIMEOUT = 5
COMPUTE_GRACEFUL_SHUTDOWN_TIMEOUT = 15


def instances_dir(layout, host):
    """The directory that is ``instances_path`` on compute host ``host``."""
    return layout.path('state', host, 'instances')


def nova_compute(layout, host, sandbox_dir):
    """nova-cpu-<host>.conf: nova.conf without database access, and more.

    As DevStack's nova-cpu.conf: nova-compute reaches the databases through
    the conductor only (with database URLs it would query every cell).

    Short shutdown timeouts, so that SIGTERM stops nova-compute within
    :meth:`~rdt_virt.cloud.process.Daemons.stop`'s 20 s. Nova 34's
    nova-compute never finishes its graceful shutdown on its own in native
    threading mode: on SIGTERM oslo.service runs ``Service.stop()``, whose
    manager step ends with ``thread_pool_factory.shutdown_all_executors()``,
    which shuts the default executor down with ``wait=True``; but the
    libvirt driver's ``Host._conn_event_thread`` runs on that executor in
    an endless ``while True: queue.get()`` loop that nothing ends (see the
    TODO in ``nova.virt.libvirt.host.Host.cleanup``). So the manager step
    only ends when ``Service._run_manager_graceful_shutdown`` gives up
    waiting (``manager_shutdown_timeout``, capped at
    ``graceful_shutdown_timeout`` - 10, 50 s with the defaults), or the
    process when oslo.service's SIGALRM fires at
    ``graceful_shutdown_timeout`` (60 s). With these values the manager
    step is given up after 5 s and the process exits by 15 s at the latest;
    the cloud has no in-progress work worth waiting for when it is taken
    down.
    """
    path = layout.etc('nova', 'nova-cpu-%s.conf' % host)
    shutil.copy(layout.etc('nova', 'nova.conf'), path)
    for section in ('database', 'api_database'):
        ini.remove_section(path, section)
    os.makedirs(layout.path('state', host), exist_ok=True)
    os.makedirs(layout.path('state', 'instances'), exist_ok=True)
    os.makedirs(instances_dir(layout, host), exist_ok=True)
    helper = '%s --config-file %s' % (layout.tool('privsep-helper'), path)
    ini.set_many(path, {
        'DEFAULT': {'host': host, 'my_ip': ADDRESSES[host],
                    'state_path': layout.path('state', host),
                    # One path, each host its own directory: nova-compute
                    # runs in its sandbox's mount namespace, where
                    # instances_dir(host) is bound on this path (see
                    # rdt_virt.cloud.cloud). libvirt 9 takes a disk as
                    # shared only on a cluster or network file system,
                    # none of which can be mounted here, and refused every
                    # live migration from a directory both hosts saw
                    # ("Unsafe migration"); Nova puts the source's disk
                    # paths in the destination's domain, so the path must
                    # be the same on both. Apart, Nova live-migrates with a
                    # block migration (the disk copied over NBD) and
                    # resizes on the same host in place.
                    'instances_path': layout.path('state', 'instances'),
                    'resume_guests_state_on_host_boot': 'False',
                    'manager_shutdown_timeout': str(
                        COMPUTE_MANAGER_SHUTDOWN_TIMEOUT),
                    'graceful_shutdown_timeout': str(
                        COMPUTE_GRACEFUL_SHUTDOWN_TIMEOUT),
                    # Tiny guests on a 2-core machine: the flow runs up to
                    # nine on one host (Nova's default ratio holds eight).
                    'cpu_allocation_ratio': '16.0'},
        'oslo_concurrency': {'lock_path': layout.path('state', host,
                                                      'lock')},
        # live_migration_scheme and _inbound_addr: the DevStack plugin's
        # (RDT_VIRT_SANDBOX_LISTEN).
        'libvirt': {'virt_type': 'kvm', 'cpu_mode': 'none',
                    'images_type': 'qcow2'},
        # Both hosts are this machine, and libvirt's CPU comparison finds
        # its (nested, virtualised) CPU incompatible with itself, which
        # failed every live migration's destination check.
        'workarounds': {'disable_fallback_pcpu_query': 'True',
                        'skip_cpu_compare_on_dest': 'True'},
        # As root without sudo rules: the privsep daemons from the venv.
        'privsep': {'helper_command': helper},
        'nova_sys_admin': {'helper_command': helper},
        'privsep_osbrick': {'helper_command': helper},
    })
    return path


# The test cloud's archive policy: ceilometer-low's 5-minute means, which
# Watcher's Gnocchi audits read, and 1-minute means beside them, so that a
# check of "a measure after X" waits a minute rather than up to five.
# Ceilometer's Gnocchi publisher creates it from the resources definition
# file (archive_policies) before its first metric.
ARCHIVE_POLICY = {
    'name': 'rdt-virt-cloud',
    'aggregation_methods': ['mean'],
    'back_window': 0,
    'definition': [{'granularity': '1 minute', 'timespan': '1 day'},
                   {'granularity': '5 minutes', 'timespan': '30 days'}],
}
# The policy's granularities in seconds, as Gnocchi reports them.
FINE, COARSE = 60, 300


def add_archive_policy(path):
    """Define ARCHIVE_POLICY in a gnocchi_resources.yaml."""
    with open(path) as f:
        data = yaml.safe_load(f)
    policies = [p for p in data.get('archive_policies') or []
                if p.get('name') != ARCHIVE_POLICY['name']]
    data['archive_policies'] = policies + [ARCHIVE_POLICY]
    with open(path, 'w') as f:
        yaml.safe_dump(data, f, default_flow_style=False, sort_keys=False)


def ceilometer(layout, host=None):
    """ceilometer.conf: the notification agent's, or a compute host's."""
    name = 'ceilometer-%s' % (host or 'notification')
    path = layout.etc('ceilometer', name + '.conf')
    os.makedirs(layout.etc('ceilometer'), exist_ok=True)
    _, auth = _authtoken(layout, 'ceilometer')
    conf = _common(layout, name)
    conf['DEFAULT'].update({'host': host or 'controller'})
    conf.update({
        'service_credentials': dict(auth, interface='public'),
        'notification': {'workers': '1', 'pipelines': 'meter'},
    })
    if host:
        conf['polling'] = {
            'cfg_file': layout.etc('ceilometer', 'polling-%s.yaml' % host),
            'enable_prometheus_exporter': 'True',
            'prometheus_listen_addresses': '127.0.0.1:%d' % layout.ports[
                'ceilometer_prom_%s' % host]}
        conf['compute'] = {'instance_discovery_method': 'libvirt_metadata',
                           'resource_update_interval': '60'}
    else:
        conf['DEFAULT']['pipeline_cfg_file'] = layout.etc(
            'ceilometer', 'pipeline.yaml')
        with open(layout.etc('ceilometer', 'pipeline.yaml'), 'w') as f:
            f.write('sources:\n'
                    '  - name: meter_source\n'
                    '    meters: ["*"]\n'
                    '    sinks: [meter_sink]\n'
                    'sinks:\n'
                    '  - name: meter_sink\n'
                    '    publishers:\n'
                    '      - gnocchi://?archive_policy=%s'
                    '&filter_project=service&resources_definition_file=%s\n'
                    % (ARCHIVE_POLICY['name'],
                       layout.etc('ceilometer', 'gnocchi_resources.yaml')))
    ini.set_many(path, conf)
    return path
