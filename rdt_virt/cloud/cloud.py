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

"""``rdt-virt-sandbox cloud``: a real OpenStack cloud on one machine.

Everything lives under one directory (``--dir``, default
``/var/lib/rdt-virt/cloud``)::

    ports.json   the TCP ports chosen at the first ``up`` (127.0.0.1 only)
    etc/         every service's configuration
    log/         one log per process
    run/         one pid file per process
    state/       databases (MariaDB), RabbitMQ, images, instances, ...
    hosts/<h>/   the emulated RDT host (sandbox) of compute host <h>

``up`` starts, in order: a MariaDB server, RabbitMQ, Keystone,
Placement, Glance, Neutron (API only), Nova API, conductor and scheduler,
Gnocchi and Ceilometer's notification agent, then per compute host its
sandbox (private libvirtd over an emulated resctrl, listening on TCP on
the host's own loopback address for live migrations), nova-compute with the
RDT-aware driver, rdt-virt-agent and Ceilometer's compute polling agent,
Prometheus scraping both exporters of every host, with Aetos in front of
it (:mod:`.prometheus`), and last Watcher (API, decision engine, applier;
:mod:`.watcher`).
The rdt-virt parts of the configuration are written by the DevStack plugin
itself (``devstack/plugin.sh`` with ``devstack/standalone.sh``), so the
cloud and DevStack cannot drift apart. ``down`` stops every process and
removes the directory. ``status`` lists the processes.
"""

import json
import os
import shutil
import subprocess
import time

from rdt_virt.cloud import gnocchi as gnocchi_svc
from rdt_virt.cloud import ini
from rdt_virt.cloud import mariadb
from rdt_virt.cloud import process
from rdt_virt.cloud import prometheus
from rdt_virt.cloud import services
from rdt_virt.cloud import ssh
from rdt_virt.cloud import watcher

DEFAULT_DIR = '/var/lib/rdt-virt/cloud'
#: The agents' ``[rdt_agent] controller_release_dwell`` (seconds) and
#: ``controller_increase`` (percent per release step): the test cloud's,
#: where production keeps the defaults (three sampling periods; 10).
RELEASE_DWELL = 10
RELEASE_INCREASE = 45
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
DATABASES = ('keystone', 'placement', 'glance', 'neutron', 'nova_api',
             'nova_cell0', 'nova_cell1', 'gnocchi', 'watcher')
WSGI = {
    # name: (port key, WSGI module, config environment)
    'keystone': ('keystone', 'keystone.wsgi.api',
                 {'OS_KEYSTONE_CONFIG_FILES': 'keystone.conf',
                  'OS_KEYSTONE_CONFIG_DIR': 'keystone'}),
    'placement-api': ('placement', 'placement.wsgi.api',
                      {'OS_PLACEMENT_CONFIG_DIR': 'placement'}),
    'glance-api': ('glance', 'glance.wsgi.api',
                   {'OS_GLANCE_CONFIG_DIR': 'glance'}),
    'neutron-api': ('neutron', 'rdt_virt.cloud.neutron_wsgi',
                    {'OS_NEUTRON_CONFIG_DIR': 'neutron',
                     'OS_NEUTRON_CONFIG_FILES': 'neutron.conf'}),
    'nova-api': ('nova', 'nova.wsgi.osapi_compute',
                 {'OS_NOVA_CONFIG_DIR': 'nova',
                  'OS_NOVA_CONFIG_FILES':
                      'api-paste.ini;nova.conf;nova-api.conf'}),
    'watcher-api': ('watcher', 'watcher.wsgi.api', {}),
    # Its configuration from its home (rdt_virt.cloud.prometheus).
    'aetos-api': ('aetos', 'aetos.wsgi.api', {}),
}
CATALOG = (
    # (user, service name, type, port key, path)
    ('glance', 'glance', 'image', 'glance', ''),
    ('placement', 'placement', 'placement', 'placement', ''),
    ('neutron', 'neutron', 'network', 'neutron', ''),
    ('nova', 'nova', 'compute', 'nova', '/v2.1'),
    ('gnocchi', 'gnocchi', 'metric', 'gnocchi', ''),
    ('ceilometer', None, None, None, None),
    watcher.CATALOG_ENTRY,
) + ((prometheus.CATALOG_ENTRY,) if prometheus.aetos_installed() else ())


class CloudError(Exception):
    pass


class Cloud(object):

    def __init__(self, base=DEFAULT_DIR, gnocchi_bin=None, log=print,
                 metric_client_bin=None, venv_bin=None):
        """The cloud under ``base``.

        :param venv_bin: the bin directory of the environment whose
            services this object starts (default: this process's); an
            upgrade starts the new release's from another.
        """
        self.base = os.path.abspath(base)
        self.log = log
        self.daemons = process.Daemons(os.path.join(self.base, 'run'),
                                       os.path.join(self.base, 'log'))
        ports = self._ports()
        self.layout = services.Layout(self.base, ports, venv_bin=venv_bin,
                                      gnocchi_bin=gnocchi_bin,
                                      metric_client_bin=metric_client_bin)
        self.db = mariadb.Server(self.daemons,
                                 self.layout.path('state', 'mariadb'),
                                 ports.get('db', 0))

    # Layout --------------------------------------------------------------

    def _ports(self):
        path = os.path.join(self.base, 'ports.json')
        try:
            with open(path) as f:
                return json.load(f)
        except FileNotFoundError:
            return {}

    def _allocate_ports(self):
        ports = {name: process.free_port() for name in services.PORTS}
        os.makedirs(self.base, exist_ok=True)
        with open(os.path.join(self.base, 'ports.json'), 'w') as f:
            json.dump(ports, f, indent=1, sort_keys=True)
        self.layout.ports = ports
        self.db.port = ports['db']

    def env(self, **extra):
        env = dict(os.environ)
        env['PATH'] = '%s:%s:/usr/sbin:/sbin' % (
            self.layout.bin, env.get('PATH', ''))
        env.update(extra)
        return env

    def processes(self):
        """Names of the cloud's processes that have a pid file."""
        run = self.daemons.run_dir
        if not os.path.isdir(run):
            return []
        return sorted(f[:-4] for f in os.listdir(run) if f.endswith('.pid'))

    def running(self):
        return [name for name in self.processes() if self.daemons.pid(name)]

    # Commands ------------------------------------------------------------

    def up(self):
        if self.running():
            raise CloudError('the cloud in %s is running (%d processes); '
                             '"down" first' % (self.base,
                                               len(self.running())))
        started = time.monotonic()
        if os.path.exists(self.base):
            shutil.rmtree(self.base)
        os.makedirs(self.base)
        self._allocate_ports()
        steps = [('MariaDB', self.start_db),
                 ('RabbitMQ', self.start_rabbit),
                 ('Keystone', self.start_keystone),
                 ('Placement', self.start_placement),
                 ('Glance', self.start_glance),
                 ('Neutron', self.start_neutron),
                 ('Nova', self.start_nova),
                 ('Gnocchi and Ceilometer', self.start_telemetry)]
        steps += [('compute host %s (%s)' % (host, profile),
                   lambda h=host, p=profile: self.start_compute(h, p))
                  for host, profile in services.COMPUTES]
        steps += [('cells', self.discover_hosts),
                  ('Prometheus and Aetos', lambda: prometheus.start(self)),
                  ('Watcher', lambda: watcher.start(self))]
        for what, step in steps:
            t = time.monotonic()
            step()
            self.log('%-40s up in %5.1f s' % (what, time.monotonic() - t))
        self.write_openrc()
        self.log('cloud up in %.0f s; credentials: source %s' % (
            time.monotonic() - started, self.layout.path('openrc')))

    def down(self):
        self.daemons.stop_all([name for name in self.processes()
                               if name != mariadb.Server.NAME])
        self.stop_sandboxes()
        self.stop_rabbit()
        self.db.stop()
        shutil.rmtree(self.base, ignore_errors=True)

    def status(self):
        rows = []
        for name in self.processes():
            pid = self.daemons.pid(name)
            rows.append((name, pid or '-', 'up' if pid else 'DOWN'))
        return rows

    # Services ------------------------------------------------------------

    def run(self, argv, name, **env):
        process.run(argv, env=self.env(**env),
                    log=self.daemons.log_file(name))

    def start_db(self):
        self.db.start()
        for db in DATABASES:
            self.db.create_database(db)

    def start_rabbit(self):
        home = self.layout.path('state', 'rabbitmq')
        os.makedirs(home, exist_ok=True)
        with open(os.path.join(home, 'enabled_plugins'), 'w') as f:
            f.write('[].\n')
        with open(os.path.join(home, 'rabbitmq-env.conf'), 'w') as f:
            f.write('')
        p = self.layout.ports
        self.rabbit_env = self.env(
            HOME=home, RABBITMQ_NODENAME='rdtvirt@localhost',
            RABBITMQ_NODE_IP_ADDRESS='127.0.0.1',
            RABBITMQ_NODE_PORT=str(p['rabbit']),
            RABBITMQ_DIST_PORT=str(p['rabbit_dist']),
            ERL_EPMD_PORT=str(p['epmd']), ERL_EPMD_ADDRESS='127.0.0.1',
            RABBITMQ_MNESIA_BASE=os.path.join(home, 'mnesia'),
            RABBITMQ_LOG_BASE=self.daemons.log_dir,
            RABBITMQ_LOGS='-',
            RABBITMQ_CONFIG_FILE=os.path.join(home, 'rabbitmq'),
            RABBITMQ_ENABLED_PLUGINS_FILE=os.path.join(home,
                                                       'enabled_plugins'),
            RABBITMQ_CONF_ENV_FILE=os.path.join(home, 'rabbitmq-env.conf'),
            RABBITMQ_PID_FILE=os.path.join(home, 'rabbitmq.pid'))
        self.daemons.start('rabbitmq', ['/usr/lib/rabbitmq/bin/'
                                        'rabbitmq-server'],
                           env=self.rabbit_env, marker='rabbitmq')
        self.daemons.wait_port('rabbitmq', p['rabbit'], timeout=180)

    def stop_rabbit(self):
        self.daemons.stop('rabbitmq')
        # epmd daemonizes itself, apart from the server's process group.
        port = self.layout.ports.get('epmd')
        if port and shutil.which('epmd'):
            subprocess.call(['epmd', '-port', str(port), '-kill'],
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                            env=dict(os.environ, ERL_EPMD_PORT=str(port)))

    def uwsgi(self, name, extra=(), env=None):
        port_key, module, conf_env = WSGI[name]
        env = dict({k: (self.layout.etc(v) if k.endswith('_DIR') else v)
                    for k, v in conf_env.items()}, **(env or {}))
        if 'OS_KEYSTONE_CONFIG_DIR' in env:
            env['OS_KEYSTONE_CONFIG_DIR'] = self.layout.etc('keystone')
        self.daemons.start(name, [
            self.layout.tool('uwsgi'),
            '--http-socket', '127.0.0.1:%d' % self.layout.ports[port_key],
            '--master', '--die-on-term', '--enable-threads',
            '--processes', '1', '--threads', '4', '--lazy-apps',
            '--virtualenv', self.layout.venv, '--chdir', '/',
            '--module', '%s:application' % module,
            '--add-header', 'Connection: close',
            # Glance's image uploads arrive chunked.
            '--buffer-size', '65535', '--http-chunked-input',
            '--chunked-input-limit', '4096000',
            '--hook-master-start', 'unix_signal:15 gracefully_kill_them_all',
            '--thunder-lock'] + list(extra), env=self.env(**env),
            marker=module)
        self.daemons.wait_port(name, self.layout.ports[port_key],
                               timeout=300)

    def wait_http(self, name, url, timeout=300):
        import urllib.error
        import urllib.request

        def ready():
            try:
                with urllib.request.urlopen(url, timeout=10):
                    return True
            except urllib.error.HTTPError:
                return True
            except OSError:
                return False
        self.daemons.wait(name, ready, timeout, 'answer %s' % url)

    def start_keystone(self):
        conf = services.keystone(self.layout)
        km = [self.layout.tool('keystone-manage'), '--config-file', conf]
        self.run(km + ['db_sync'], 'keystone-manage')
        for what in ('fernet_setup', 'credential_setup'):
            self.run(km + [what, '--keystone-user', 'root',
                           '--keystone-group', 'root'], 'keystone-manage')
        url = self.layout.keystone_url
        self.run(km + ['bootstrap', '--bootstrap-password',
                       services.PASSWORD,
                       '--bootstrap-admin-url', url,
                       '--bootstrap-public-url', url,
                       '--bootstrap-internal-url', url,
                       '--bootstrap-region-id', services.REGION],
                 'keystone-manage')
        self.uwsgi('keystone')
        self.wait_http('keystone', url)
        self.register_services()

    def admin_session(self):
        from keystoneauth1.identity import v3
        from keystoneauth1 import session
        auth = v3.Password(auth_url=self.layout.keystone_url,
                           username='admin', password=services.PASSWORD,
                           project_name='admin', user_domain_name='Default',
                           project_domain_name='Default')
        return session.Session(auth=auth)

    def register_services(self, catalog=CATALOG):
        from keystoneclient.v3 import client
        ks = client.Client(session=self.admin_session())
        service_project = (ks.projects.list(name='service') or
                           [ks.projects.create('service', 'default')])[0]
        admin_role = ks.roles.find(name='admin')
        service_role = (ks.roles.list(name='service') or
                        [ks.roles.create('service')])[0]
        for user, name, kind, port, path in catalog:
            u = ks.users.create(user, domain='default',
                                password=services.PASSWORD,
                                default_project=service_project)
            ks.roles.grant(admin_role, user=u, project=service_project)
            ks.roles.grant(service_role, user=u, project=service_project)
            if not name:
                continue
            svc = ks.services.create(name, type=kind)
            for interface in ('public', 'internal', 'admin'):
                ks.endpoints.create(svc, self.layout.url(port, path),
                                    interface=interface,
                                    region=services.REGION)

    def start_placement(self):
        services.placement(self.layout)
        self.run([self.layout.tool('placement-manage'), '--config-file',
                  self.layout.etc('placement', 'placement.conf'), 'db',
                  'sync'], 'placement-manage')
        self.uwsgi('placement-api')

    def start_glance(self):
        conf = services.glance(self.layout)
        self.run([self.layout.tool('glance-manage'), '--config-file', conf,
                  'db_sync'], 'glance-manage')
        self.uwsgi('glance-api')

    def start_neutron(self):
        conf = services.neutron(self.layout)
        self.run([self.layout.tool('neutron-db-manage'), '--config-file',
                  conf, 'upgrade', 'heads'], 'neutron-db-manage')
        self.uwsgi('neutron-api')

    def nova_manage(self, *args):
        self.run([self.layout.tool('nova-manage'), '--config-file',
                  self.layout.etc('nova', 'nova.conf')] + list(args),
                 'nova-manage')

    def start_nova(self):
        conf = services.nova(self.layout)
        # The scheduler part of the DevStack plugin: RDTFilter, RDTWeigher.
        self.devstack_plugin('controller', ['n-sch'], NOVA_CONF=conf)
        self.nova_manage('api_db', 'sync')
        self.nova_manage('cell_v2', 'map_cell0', '--database_connection',
                         self.layout.db_url('nova_cell0'))
        self.nova_manage('cell_v2', 'create_cell', '--name', 'cell1',
                         '--database_connection',
                         self.layout.db_url('nova_cell1'),
                         '--transport-url', self.layout.transport_url)
        self.nova_manage('db', 'sync')
        self.uwsgi('nova-api')
        for name in ('nova-conductor', 'nova-scheduler'):
            tool = self.layout.tool(name)
            self.daemons.start(name, [tool, '--config-file', conf],
                               env=self.env(), marker=tool)

    def start_telemetry(self):
        if not self.layout.gnocchi_bin:
            raise CloudError('Gnocchi is not installed: tox -e gnocchi '
                             '--notest')
        db = self.layout.db_url('gnocchi')
        conf = gnocchi_svc.write_conf(
            self.layout.etc('gnocchi', 'gnocchi.conf'), db,
            self.layout.path('state', 'gnocchi'), auth_mode='keystone',
            extra={'keystone_authtoken': services._authtoken(
                self.layout, 'gnocchi')[0]})
        g = gnocchi_svc.Gnocchi(self.daemons, self.layout.gnocchi_bin, conf,
                                self.layout.ports['gnocchi'])
        g.upgrade()
        g.start()
        ceilo = services.ceilometer(self.layout)
        resources = self.layout.etc('ceilometer', 'gnocchi_resources.yaml')
        self.devstack_plugin(
            'controller', ['ceilometer-anotification'], CEILOMETER_CONF=ceilo,
            RDT_VIRT_GNOCCHI_RESOURCES=resources)
        services.add_archive_policy(resources)
        self.run([self.layout.tool('ceilometer-upgrade'), '--config-file',
                  ceilo], 'ceilometer-upgrade')
        tool = self.layout.tool('ceilometer-agent-notification')
        self.daemons.start('ceilometer-notification',
                           [tool, '--config-file', ceilo], env=self.env(),
                           marker=tool)

    def host_dir(self, host, *parts):
        return self.layout.path('hosts', host, *parts)

    def start_compute(self, host, profile):
        nova_cpu = services.nova_compute(self.layout, host,
                                         self.host_dir(host, 'sandbox'))
        ceilo = services.ceilometer(self.layout, host)
        state_file = self.host_dir(host, 'host-state.json')
        sandbox = self.host_dir(host, 'sandbox')
        # The compute part of the DevStack plugin: compute driver, [rdt],
        # rdt-virt.conf, the emulated host, the agent, the pollsters.
        plugin = dict(
            NOVA_CPU_CONF=nova_cpu, CEILOMETER_CONF=ceilo,
            RDT_VIRT_EMULATE='True', RDT_VIRT_EMULATED_PROFILE=profile,
            RDT_VIRT_SANDBOX_DIR=sandbox, RDT_VIRT_SANDBOX_HOSTNAME=host,
            RDT_VIRT_SANDBOX_LISTEN=services.ADDRESSES[host],
            RDT_VIRT_CONF_DIR=self.host_dir(host, 'etc'),
            RDT_VIRT_STATE_FILE=state_file,
            RDT_VIRT_CEILOMETER_POLLING=self.layout.etc(
                'ceilometer', 'polling-%s.yaml' % host),
            RDT_VIRT_POLLING_INTERVAL='30')
        enabled = ['n-cpu', 'rdt-virt-agent', 'ceilometer-acompute']
        self.devstack_plugin(host, enabled, phases=(
            ('stack', 'install'), ('stack', 'post-config')), **plugin)
        # Two agents on one machine: each its own Prometheus port.
        agent_conf = self.host_dir(host, 'etc', 'rdt-virt.conf')
        ini.iniset(agent_conf, 'rdt_agent', 'prometheus_port',
                   str(self.layout.ports['agent_prom_%s' % host]))
        # The flow waits for a release from the floor: two steps of one
        # sampling period (10 s) rather than nine of the default three.
        ini.iniset(agent_conf, 'rdt_agent', 'controller_release_dwell',
                   str(RELEASE_DWELL))
        ini.iniset(agent_conf, 'rdt_agent', 'controller_increase',
                   str(RELEASE_INCREASE))
        self.devstack_plugin(host, enabled, phases=(('stack', 'extra'),),
                             **plugin)
        uri = 'qemu:///system?socket=%s' % os.path.join(
            sandbox, 'private', 'run', 'libvirt', 'libvirt-sock')
        ini.iniset(ceilo, 'DEFAULT', 'libvirt_uri', uri)
        self.start_sshd(host)
        tool = self.layout.tool('nova-compute')
        self.daemons.start('%s-nova-compute' % host, self.in_sandbox(host, [
            tool, '--config-file', nova_cpu]), env=self.env(),
            marker=nova_cpu)
        tool = self.layout.tool('ceilometer-polling')
        self.daemons.start('%s-ceilometer-polling' % host, [
            tool, '--polling-namespaces', 'compute', '--config-file', ceilo],
            env=self.env(), marker=ceilo)

    def _agent(self, host):
        """(daemon name, argv) of ``host``'s agent, as the plugin runs it."""
        argv = [self.layout.tool('rdt-virt-agent'), '--config-file',
                self.host_dir(host, 'etc', 'rdt-virt.conf')]
        return '%s-rdt-virt-agent' % host, argv

    def stop_agent(self, host):
        """Stop ``host``'s rdt-virt-agent (DevStack's stop_process)."""
        self.daemons.stop(self._agent(host)[0])

    def start_agent(self, host):
        """Start ``host``'s rdt-virt-agent again (DevStack's run_process)."""
        name, argv = self._agent(host)
        self.daemons.start(name, argv, env=self.env(), marker=argv[0])

    def in_sandbox(self, host, argv):
        """``argv`` run in the mount namespace of ``host``'s sandbox.

        There, and only there, the host's own instance directory is bound
        on the ``instances_path`` that both hosts' nova-compute use: two
        hosts with local disks at the same path, as Nova expects of a
        block migration (its destination domain keeps the source's disk
        paths). QEMU runs in the same namespace, and so does the host's
        sshd (:meth:`start_sshd`), through which the other host's
        nova-compute writes there; nova-compute's ``~/.ssh`` there is the
        cloud's (:mod:`.ssh`).
        """
        from rdt_virt.sandbox import launcher
        pid = launcher.Sandbox(self.host_dir(host, 'sandbox')).pid
        if not pid:
            raise CloudError('the sandbox of %s is not running' % host)
        enter = ['nsenter', '--target', str(pid), '--mount']
        dot_ssh = os.path.join(ssh.home(), '.ssh')
        # The mount point only: an existing ~/.ssh keeps its files, hidden
        # in this namespace alone.
        os.makedirs(dot_ssh, mode=0o700, exist_ok=True)
        mounted = _mount_points(pid)
        for src, target in ((services.instances_dir(self.layout, host),
                             self.layout.path('state', 'instances')),
                            (self.ssh_keys.client_dir, dot_ssh)):
            if target not in mounted:
                process.run(enter + ['mount', '--bind', src, target],
                            env=self.env(),
                            log=self.daemons.log_file('mounts'))
        return enter + argv

    @property
    def ssh_keys(self):
        return ssh.Keys(self.layout.path('state', 'ssh'))

    def start_sshd(self, host):
        """``host``'s sshd, on its own address, for Nova's remote copies.

        In the host's sandbox mount namespace, so that what the other
        host's nova-compute writes over SSH lands in this host's instance
        directory (see :mod:`.ssh`).
        """
        keys = self.ssh_keys
        hosts = {h: (services.ADDRESSES[h], self.layout.ports['ssh_%s' % h])
                 for h, _ in services.COMPUTES}
        keys.create(hosts)
        keys.write(hosts)
        # sshd's privilege separation directory, which Debian's service
        # would make at its start.
        os.makedirs('/run/sshd', mode=0o755, exist_ok=True)
        address, port = hosts[host]
        name = '%s-sshd' % host
        self.daemons.start(name, self.in_sandbox(host, [
            ssh.SSHD, '-D', '-e', '-f', keys.sshd_config(host)]),
            env=self.env(), marker=keys.sshd_config(host))
        self.daemons.wait_port(name, port, timeout=30, host=address)

    def stop_sandboxes(self):
        from rdt_virt.sandbox import launcher
        for host, _ in services.COMPUTES:
            path = self.host_dir(host, 'sandbox')
            if os.path.isdir(path):
                launcher.Sandbox(path).stop()

    def discover_hosts(self, timeout=300):
        deadline = time.monotonic() + timeout
        hosts = {h for h, _ in services.COMPUTES}
        while True:
            out = subprocess.run(
                [self.layout.tool('openstack'), 'compute', 'service', 'list',
                 '--service', 'nova-compute', '-f', 'value', '-c', 'Host',
                 '-c', 'State'], env=self.env(**self.openrc()),
                capture_output=True, text=True).stdout.split('\n')
            up = {line.split()[0] for line in out
                  if line.endswith(' up')}
            if hosts <= up:
                break
            if time.monotonic() > deadline:
                raise CloudError('nova-compute not up on %s; see %s' % (
                    ', '.join(sorted(hosts - up)), self.daemons.log_dir))
            time.sleep(3)
        self.nova_manage('cell_v2', 'discover_hosts', '--verbose')

    # The DevStack plugin -------------------------------------------------

    def devstack_plugin(self, host, enabled, phases=(('stack',
                                                      'post-config'),),
                        **settings):
        script = ['set -e',
                  'source %s/devstack/standalone.sh' % REPO,
                  'source %s/devstack/settings' % REPO]
        script += ['source %s/devstack/plugin.sh %s %s' % (REPO, a, b)
                   for a, b in phases]
        values = dict(
            ENABLED_SERVICES=' '.join(enabled), RDT_VIRT_HOST=host,
            RDT_VIRT_PYTHON=os.path.join(self.layout.bin, 'python'),
            RDT_VIRT_RUN_DIR=self.daemons.run_dir,
            RDT_VIRT_LOG_DIR=self.daemons.log_dir,
            RDT_VIRT_DIR=REPO, DEST=self.base,
            DATA_DIR=self.layout.path('state'),
            NOVA_CONF=self.layout.etc('nova', 'nova.conf'),
            NOVA_BIN_DIR=self.layout.bin, STACK_USER='root',
            ENABLE_DEBUG_LOG_LEVEL='False')
        values.update(settings)
        env = self.env(**values)
        process.run(['bash', '-c', '\n'.join(script)], env=env,
                    log=self.daemons.log_file('devstack-plugin-' + host))

    # Credentials ---------------------------------------------------------

    def openrc(self):
        return {'OS_AUTH_URL': self.layout.keystone_url,
                'OS_USERNAME': 'admin', 'OS_PASSWORD': services.PASSWORD,
                'OS_PROJECT_NAME': 'admin', 'OS_USER_DOMAIN_NAME': 'Default',
                'OS_PROJECT_DOMAIN_NAME': 'Default',
                'OS_REGION_NAME': services.REGION,
                'OS_IDENTITY_API_VERSION': '3',
                'OS_COMPUTE_API_VERSION': '2.latest'}

    def write_openrc(self):
        with open(self.layout.path('openrc'), 'w') as f:
            for key, value in sorted(self.openrc().items()):
                f.write('export %s=%s\n' % (key, value))
            f.write('export PATH=%s:$PATH\n' % self.layout.bin)


def _mount_points(pid):
    """The mount points of process ``pid``'s mount namespace."""
    with open('/proc/%d/mountinfo' % pid) as f:
        return {line.split()[4] for line in f}
