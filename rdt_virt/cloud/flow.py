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

"""The operator's flow on the cloud, typed as a user types it.

Every step is an ``openstack`` (python-openstackclient with osc-placement),
``gnocchi`` or ``rdt-virt`` command, printed with its output; each step
checks what a user would look at (server states, Placement usages and
traits, resctrl groups and their tasks, Gnocchi measures, Prometheus's
series through Aetos) and the flow stops at the first that is wrong.
``openstack metric`` is python-observabilityclient's, from an environment
of its own (:mod:`.flow_prometheus`).
"""

import json
import os
import re
import shlex
import subprocess
import time
import urllib.request

from rdt_virt.agent import state as state_mod
from rdt_virt.cloud import cloud as cloud_mod
from rdt_virt.cloud import flow_churn
from rdt_virt.cloud import flow_moves
from rdt_virt.cloud import flow_prometheus
from rdt_virt.cloud import flow_watcher
from rdt_virt.cloud import osc
from rdt_virt.cloud import services
from rdt_virt.policy import extra_specs as es
from rdt_virt.policy import placement
from rdt_virt.sandbox import guest
from watcher_plugin import promql

NOISY = 7
#: A wait this long (seconds) or longer is shown and summed up: where the
#: flow's time goes.
WAIT_SHOWN = 10
WAITS_LISTED = 10
#: Characters of a command shown in the summary's slowest commands.
COMMAND_SHOWN = 100
#: Low-priority noisy servers beside the high one (phase "controller").
LOW = 3
#: Priority flavors: no static cap, no CLOSID of their own (a low server's
#: bandwidth is the agent's shared groups', a high one has no group).
PRIORITY_FLAVORS = (('rdt.high', 'high'), ('rdt.low', 'low'))
#: The flavors of the servers the flow boots first: what an operator is
#: advised to make (admin/placement), with the Placement keys
#: ``rdt-virt flavor-audit`` asks for, from :func:`advised`.
FLAVORS = (('rdt.protected', {'hw:cache_l3': '2048'}),
           ('rdt.noisy', {'hw:mem_bw': '10'}),
           ('rdt.protected4m', {'hw:cache_l3': '4096'}))


def advised(specs):
    """``specs`` with the Placement keys its RDT policy needs.

    Its CLOSID, if it takes one, and the trait of every feature it needs:
    Placement then counts CLOSIDs atomically and offers only hosts that
    have the features.
    """
    return dict(specs, **placement.expected(es.from_extra_specs(specs)))


def properties(specs):
    """``openstack flavor create`` arguments for ``specs``."""
    args = []
    for key, value in sorted(specs.items()):
        args += ['--property', '%s=%s' % (key, value)]
    return args


def _ceilometer_major():
    """The major version of the Ceilometer the cloud runs."""
    from importlib import metadata
    return int(metadata.version('ceilometer').split('.')[0])


def _short(command):
    """A command as the summary lists it: its program's name, then the rest.

    Cut at COMMAND_SHOWN characters.
    """
    program, _sep, rest = command.partition(' ')
    text = ' '.join(p for p in (os.path.basename(program), rest) if p)
    if len(text) > COMMAND_SHOWN:
        text = text[:COMMAND_SHOWN - 3] + '...'
    return text


#: A request ID as OpenStack's services log it and its clients print it.
REQUEST_ID = re.compile(r'req-[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}')
#: Lines of the services' logs shown for each request of a failed command.
TRACED_LINES = 20


class FlowError(Exception):
    pass


def traced(text, log_dir, limit=TRACED_LINES):
    """What the services logged about the requests that *text* names.

    A client prints a failed request's ID and the reason it could parse,
    which for an error body in another service's format is only "HTTP
    400"; the service that answered logged why. Returns the lines of the
    logs in *log_dir* that hold each ID, each prefixed with its file's
    name (at most *limit* per ID), or '' when none names one.
    """
    ids = sorted(set(REQUEST_ID.findall(text)))
    if not ids:
        return ''
    try:
        names = sorted(n for n in os.listdir(log_dir) if n.endswith('.log'))
    except OSError:
        return ''
    found = {i: [] for i in ids}
    for name in names:
        try:
            with open(os.path.join(log_dir, name), errors='replace') as f:
                for line in f:
                    for i in ids:
                        if i in line and len(found[i]) < limit:
                            found[i].append('%s: %s' % (name, line.rstrip()))
        except OSError:
            continue
    out = []
    for i in ids:
        out.append('%s in the services\' logs:' % i)
        out += ['  ' + line for line in found[i]] or ['  (nowhere)']
    return '\n'.join(out) + '\n'


def undeleted(servers):
    """The names of ``server list``'s rows that are not being deleted.

    openstacksdk's wait of a ``server delete --wait`` ends once the server
    reads DELETED, which Nova shows, and lists, until the compute host has
    removed its row: deleted again by name, it can be gone by then, and
    the command fails.
    """
    return [s['Name'] for s in servers if s['Status'] != 'DELETED']


class Flow(object):

    def __init__(self, cloud, out=print):
        self.cloud = cloud
        self.out = out
        self.env = cloud.env(**cloud.openrc())
        self.work = cloud.layout.path('flow')
        os.makedirs(self.work, exist_ok=True)
        # (step title, seconds, commands, their seconds) of the steps run,
        # and (what, seconds) of the waits of WAIT_SHOWN seconds or more,
        # for the summary.
        self.times = []
        self.waits = []
        # (seconds, command line) of each command run (shown or not).
        self.commands = []
        # {bin directory: osc.Worker} of other environments' clients.
        self.workers = {}
        # The step running, and when the flow began, for commands.tsv.
        self.current = ''
        self.started = time.monotonic()

    # Commands ------------------------------------------------------------

    def sh(self, *argv, check=True, show=True, parse=False, env=None):
        """Run a command as typed; print it and its output.

        This environment's ``openstack`` and ``gnocchi`` run in this
        process, another environment's in one process of that environment
        (:mod:`rdt_virt.cloud.osc`); any other command as a process.

        :param env: the environment instead of the admin's (another user's
            credentials).
        """
        argv = [str(a) for a in argv]
        if parse:
            argv += ['-f', 'json']
        if show:
            self.out('$ ' + ' '.join(shlex.quote(a) for a in argv))
        start = time.monotonic()
        if osc.runs_here(argv[0]):
            code, stdout, stderr = osc.run(argv, env or self.env)
        elif osc.runs_in_worker(argv[0]):
            code, stdout, stderr = self._worker(argv[0]).run(
                argv, env or self.env)
        else:
            # No terminal on stdin: openstackclient's ``image create``
            # would upload it as the image's data (an empty image) when
            # given no file.
            proc = subprocess.run(argv, env=env or self.env,
                                  capture_output=True,
                                  stdin=subprocess.DEVNULL, text=True)
            code, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
        took = time.monotonic() - start
        self.commands.append((took, ' '.join(argv)))
        self._record(start, took, code, argv)
        text = stdout + stderr
        if show and not parse:
            self.out(text.rstrip())
        if check and code:
            raise FlowError('%s failed (exit %d):\n%s%s' % (
                ' '.join(argv), code, text,
                traced(text, self.cloud.daemons.log_dir)))
        if parse:
            return json.loads(stdout) if stdout.strip() else None
        return code, text

    def _record(self, start, took, code, argv):
        """One line of ``commands.tsv``: where each command's time went.

        Its start (seconds into the flow), seconds, exit code, step and
        command line, shown or not (the waits' polls are most of them).
        """
        with open(os.path.join(self.work, 'commands.tsv'), 'a') as f:
            f.write('%.1f\t%.2f\t%d\t%s\t%s\n' % (
                start - self.started, took, code,
                self.current, ' '.join(argv)))

    def _worker(self, tool):
        bin_dir = os.path.dirname(tool)
        if bin_dir not in self.workers:
            self.workers[bin_dir] = osc.Worker(bin_dir, log=os.path.join(
                self.work, 'clients-%s.log' % os.path.basename(
                    os.path.dirname(bin_dir))))
        return self.workers[bin_dir]

    def close(self):
        """End the client processes of other environments."""
        for worker in self.workers.values():
            worker.close()
        self.workers.clear()

    def os(self, *args, **kw):
        return self.sh(self.cloud.layout.tool('openstack'), *args, **kw)

    def table(self, *args):
        """An ``openstack`` listing, shown as the user sees it."""
        return self.os(*args)[1]

    def expect(self, ok, message):
        if not ok:
            raise FlowError(message)
        self.out('  ok: ' + message)

    def wait(self, what, check, timeout=300, interval=3):
        start = time.monotonic()
        deadline = start + timeout
        while True:
            value = check()
            if value:
                waited = time.monotonic() - start
                if waited >= WAIT_SHOWN:
                    self.waits.append((what, waited))
                    self.out('   (%.0f s waiting for %s)' % (waited, what))
                return value
            if time.monotonic() > deadline:
                raise FlowError('timed out waiting for ' + what)
            time.sleep(interval)

    # Steps ---------------------------------------------------------------

    def run(self):
        try:
            self.steps()
        finally:
            self.close()

    def steps(self):
        self.step('Flavors and images', self.flavors_and_images)
        self.step('Bad input', self.bad_input)
        self.step('Boot one protected and %d noisy servers' % NOISY,
                  self.boot)
        self.step('The protected server reports its work',
                  self.protected_work)
        self.step('Where the servers went, and why', self.placement)
        self.step('resctrl on each host', self.resctrl)
        self.step('Telemetry in Gnocchi', self.gnocchi)
        self.step('Telemetry in Prometheus', self.prometheus)
        self.step('Prometheus scrapes every exporter, behind Aetos',
                  self.prometheus_targets)
        self.step('Each tenant sees its own servers through Aetos',
                  self.tenants)
        self.step('Resize and rebuild', self.lifecycle)
        self.step('Live migration', self.live_migration)
        self.step('Watcher with rdt-virt\'s strategy', self.watcher_services)
        self.step('Watcher moves a noisy neighbour', self.watcher_loop)
        self.step('Measures of the live-migrated server',
                  self.live_migration_measures)
        self.step('Delete all: back to zero', self.delete_all)
        self.step('Boots and deletes in quick succession',
                  self.boots_and_deletes)
        self.step('Cold migration and resize to the other host',
                  self.cold_migration_and_resize)
        self.step('Priority classes: a high server and %d low ones' % LOW,
                  self.priority_boot)
        self.step('The controller throttles the low servers',
                  self.priority_throttled)
        self.step('Watcher moves a low server held at the floor',
                  self.priority_watcher)
        self.step("An agent stops: its alert is pending",
                  self.alert_pending)
        self.step('Pause the high server: the controller releases',
                  self.priority_released)
        self.step('The alert fires, and resolves with the agent back',
                  self.alert_resolved)
        self.summary()

    def step(self, title, fn):
        self.out('\n== %s ==' % title)
        self.current = title
        t, first = time.monotonic(), len(self.commands)
        fn()
        commands = self.commands[first:]
        self.times.append((title, time.monotonic() - t, len(commands),
                           sum(seconds for seconds, _line in commands)))
        self.out('   (%.0f s; %d commands took %.0f s)' % self.times[-1][1:])

    def summary(self):
        """Where the flow's time went: each step's seconds, and the total."""
        width = max(len(row[0]) for row in self.times)
        self.out('\n== Time per step (seconds; commands run, their '
                 'seconds) ==')
        for row in self.times + [('flow',) + tuple(
                sum(column) for column in list(zip(*self.times))[1:])]:
            self.out('  %-*s %5.0f s %4d %5.0f s' % ((width,) + row))
        if self.waits:
            self.out('\n== Longest waits ==')
            for what, seconds in sorted(self.waits, key=lambda w: -w[1])[
                    :WAITS_LISTED]:
                self.out('  %5.0f s  %s' % (seconds, what))
        if self.commands:
            self.out('\n== Slowest commands ==')
            for seconds, argv in sorted(self.commands,
                                        key=lambda c: -c[0])[:WAITS_LISTED]:
                self.out('  %5.0f s  %s' % (seconds, _short(argv)))

    def flavors_and_images(self):
        # Each flavor asks Placement for the CLOSID its instance's group
        # takes, so that Placement counts them atomically, and for the
        # traits of the features it needs (admin/placement): the flavors
        # rdt-virt flavor-audit finds nothing to change in.
        for name, specs in FLAVORS:
            self.os('flavor', 'create', '--vcpus', 1, '--ram', 64, '--disk',
                    1, *properties(advised(specs)), name)
        # burn: the noisy guests' memory traffic; work: a guest that prints
        # a dot per 256 KiB it writes to its console; idle: for rebuilds.
        # The guests are boot sectors that ignore ACPI's power button:
        # os_shutdown_timeout=0 makes Nova power them off at once where it
        # would wait for a clean shutdown (resize, migration, rebuild), 60
        # s each with [DEFAULT] shutdown_timeout, as for any such image.
        for program in ('burn', 'work', 'idle'):
            path = guest.write_image(os.path.join(self.work, program +
                                                  '.img'), program)
            name = 'rdt-' + program
            self.os('image', 'create', '--disk-format', 'raw',
                    '--container-format', 'bare', '--public', '--file', path,
                    '--property', 'os_shutdown_timeout=0',
                    name, '-c', 'name', '-c', 'status', '-c', 'size')
            image = self.os('image', 'show', name, parse=True, show=False)
            self.expect(image['status'] == 'active' and
                        image['size'] == guest.IMAGE_SIZE,
                        '%s is active with its %d bytes' % (
                            name, guest.IMAGE_SIZE))
            self.os('image', 'show', name, '-c', 'name', '-c', 'status',
                    '-c', 'size')

    def bad_input(self):
        # Nova validates extra specs only from microversion 2.86, and
        # openstackclient sends flavor changes at an older one unless told
        # (OS_COMPUTE_API_VERSION=2.latest is not enough): without the
        # option hw:mem_bw=0 is stored.
        rc, text = self.os('--os-compute-api-version', '2.86', 'flavor',
                           'set', '--property', 'hw:mem_bw=0', 'rdt.noisy',
                           check=False)
        self.expect(rc != 0 and '400' in text and
                    'not a valid value for hw:mem_bw' in text,
                    'hw:mem_bw=0 is refused with HTTP 400 and the reason')
        flavor = self.os('flavor', 'show', 'rdt.noisy', parse=True,
                         show=False)
        self.expect(flavor['properties'].get('hw:mem_bw') == '10',
                    'the flavor keeps hw:mem_bw=10')
        # More dedicated L3 than any host has: no host can serve it.
        self.os('flavor', 'create', '--vcpus', 1, '--ram', 64, '--disk', 1,
                '--property', 'hw:cache_l3=1048576', 'rdt.huge')
        self.os('server', 'create', '--flavor', 'rdt.huge', '--image',
                'rdt-idle', '--nic', 'none', 'too-big', check=False)
        server = self.wait('too-big to fail', lambda: self._state(
            'too-big', ('ERROR',)), timeout=180)
        # By id: openstackclient 7.5 (2025.1) shows a server named by its
        # name as Nova's server list has it, which carries no fault.
        self.os('server', 'show', server['id'], '-c', 'status', '-c',
                'fault')
        server = self.os('server', 'show', server['id'], parse=True,
                         show=False)
        fault = json.dumps(server.get('fault') or {})
        # Both hosts refused it for the same cause, counted as one.
        self.expect('RDTFilter: no host can take hw:cache_l3=1048576: '
                    '2 hosts: 1048576 KiB of L3 needs' in fault,
                    'the fault counts the hosts RDTFilter refused per '
                    'cause: %s' % fault[:300])
        log = self.cloud.daemons.log_file('nova-scheduler')
        with open(log, errors='replace') as f:
            logged = [line for line in f if 'INFO' in line and
                      'no host can take hw:cache_l3=1048576: 2 hosts:' in
                      line]
        self.expect(len(logged) >= 1, 'nova-scheduler logs the counts at '
                    'INFO: %s' % (logged[-1].strip()[-160:] if logged
                                  else 'nothing in %s' % log))
        self.os('server', 'delete', '--wait', 'too-big')

    def _state(self, name, states):
        server = self.os('server', 'show', name, parse=True, show=False)
        if server and server['status'] in states:
            return server
        if server and server['status'] == 'ERROR':
            # By id for the fault (see bad_input).
            server = self.os('server', 'show', server['id'], parse=True,
                             show=False)
            raise FlowError('%s went to ERROR: %s' % (name,
                                                      server.get('fault')))
        return None

    def boot(self):
        # The noisy ones first: percentage limits need the reference host,
        # whose 8 CLOSIDs (one the default group's) hold exactly seven
        # throttled instances. The protected one, whose cache allocation
        # takes a CLOSID as well, then goes where one is left: compute2.
        self.os('server', 'create', '--flavor', 'rdt.noisy', '--image',
                'rdt-burn', '--nic', 'none', '--min', NOISY, '--max', NOISY,
                'noisy')
        names = ['noisy-%d' % i for i in range(1, NOISY + 1)]
        hosts = {}
        for name in names:
            server = self.wait(name + ' ACTIVE', lambda n=name: self._state(
                n, ('ACTIVE',)))
            hosts[name] = server['OS-EXT-SRV-ATTR:host']
        self.expect(set(hosts.values()) == {'compute1'},
                    'the noisy servers are ACTIVE on the reference host')
        self.os('server', 'create', '--flavor', 'rdt.protected', '--image',
                'rdt-work', '--nic', 'none', '--wait', 'protected')
        protected = self._state('protected', ('ACTIVE',))
        self.expect(protected is not None and
                    protected['OS-EXT-SRV-ATTR:host'] == 'compute2',
                    'protected is ACTIVE on the host with a CLOSID left')
        self.table('server', 'list', '--long', '-c', 'Name', '-c', 'Status',
                   '-c', 'Flavor', '-c', 'Host')

    def _work(self, name):
        """(time, units of work) from the server's console log."""
        now = time.monotonic()
        _, text = self.os('console', 'log', 'show', name, show=False)
        return now, guest.work_units(text)

    #: Seconds between the two console reads of a guest's work rate:
    #: over a hundred units at the protected guest's pace here.
    WORK_WINDOW = 5

    def protected_work(self):
        # Nova returns the last 100 KiB of the console log, which holds the
        # banner for the first minutes at this guest's pace: read early.
        def started():
            sample = self._work('protected')
            return sample if sample[1] is not None else None
        first = self.wait("protected's work banner", started, timeout=120,
                          interval=3)
        time.sleep(self.WORK_WINDOW)
        second = self._work('protected')
        # The log is the banner, then one dot per unit on a single line.
        _, text = self.os('console', 'log', 'show', 'protected',
                          show=False)
        self.out('$ openstack console log show protected   (from its banner, '
                 'cut)')
        start = text.rfind(guest.WORK_BANNER)
        self.out(text[start:start + len(guest.WORK_BANNER) + 40])
        rate = guest.work_rate(first, second)
        self.expect(rate is not None and rate > 0,
                    'protected reports its work: %d units of %d KiB in '
                    '%.0f s, %.1f MiB/s' % (
                        (second[1] or 0) - first[1],
                        guest.WORK_UNIT_BYTES // 1024, second[0] - first[0],
                        (rate or 0) / 2.0 ** 20))

    def placement(self):
        rps = self.os('resource', 'provider', 'list', parse=True)
        self.table('resource', 'provider', 'list', '-c', 'uuid', '-c', 'name')
        usages = {}
        for rp in rps:
            self.out('-- %s --' % rp['name'])
            traits = [t['name'] for t in self.os(
                'resource', 'provider', 'trait', 'list', rp['uuid'],
                parse=True, show=False)]
            self.out('RDT traits: ' + ' '.join(sorted(
                t for t in traits if t.startswith('CUSTOM_RDT_'))))
            self.table('resource', 'provider', 'inventory', 'list',
                       rp['uuid'], '-c', 'resource_class', '-c', 'total',
                       '-c', 'reserved', '-c', 'used')
            usages[rp['name']] = {u['resource_class']: u['usage'] for u in
                                  self.os('resource', 'provider', 'usage',
                                          'show', rp['uuid'], parse=True,
                                          show=False)}
        # Seven noisy servers, one CLOSID each, on the reference host; the
        # protected one's on the other.
        self.expect(usages.get('compute1', {}).get('CUSTOM_RDT_CLOSID') ==
                    NOISY and usages.get('compute2', {}).get(
                        'CUSTOM_RDT_CLOSID') == 1,
                    'Placement counts %d CLOSIDs on compute1, 1 on compute2'
                    % NOISY)

    def resctrl(self):
        servers = self.os('server', 'list', '--long', parse=True,
                          show=False)
        for host, _ in services.COMPUTES:
            root = self.cloud.host_dir(host, 'sandbox', 'resctrl')
            self.out('-- %s --' % host)
            self.sh(self.cloud.layout.tool('rdt-virt'), '--resctrl-root',
                    root, 'groups')
            # top exits 3 on a stale state file, which fails this command:
            # the agent publishes.
            state_file = self.cloud.host_dir(host, 'host-state.json')
            _, top = self.sh(self.cloud.layout.tool('rdt-virt'),
                             '--state-file', state_file, 'top', '--once')
            self.expect('STALE' not in top, '%s: the state file is '
                        'current' % host)
            # Every server here has an RDT flavor: one libvirt group each,
            # holding its vCPU thread.
            here = [s for s in servers if s['Host'] == host]
            cached = [s for s in here
                      if s['Flavor'].startswith('rdt.protected')]
            self.expect(top.count('cache_l3=') == len(cached),
                        '%s: top shows the L3 cache held for %d servers'
                        % (host, len(cached)))
            # What the host applies: hw:mem_bw=10 is a step of the
            # reference host (no request beside it), hw:cache_l3=2048 is
            # held as whole ways.
            policies = {uuid: entry.get('policy') or {} for uuid, entry in
                        state_mod.load(state_file)['instances'].items()}
            throttled = [s for s in here if s['Flavor'] == 'rdt.noisy']
            self.expect(all(policies.get(s['ID']) == {'mem_bw': 10}
                            for s in throttled) and
                        top.count('mem_bw=10 ') == len(throttled),
                        '%s: the state file and top give %d servers the '
                        'applied mem_bw=10' % (host, len(throttled)))
            self.expect(all(policies.get(s['ID'], {}).get('cache_l3', 0) >=
                            2048 for s in cached),
                        '%s: the cache held is at least the request' % host)
            groups = flow_moves.groups(self, host)
            self.expect(len(groups) == len(here) and
                        all(n >= 1 for n in groups.values()),
                        '%s: %d servers, %d groups, each with its vCPU '
                        'thread' % (host, len(here), len(groups)))

    # One server on each host: both hosts monitor (compute2 is booted
    # without MBA, not without monitoring).
    WATCHED = (('noisy-1', 'compute1'), ('protected', 'compute2'))

    def gnocchi(self):
        gn = self.cloud.layout.tool('gnocchi')

        # The 5-minute means, which Watcher's Gnocchi audits read.
        coarse = services.COARSE

        def measures(uuid, meter):
            return self._gnocchi_measures(uuid, meter, coarse)
        for name, _ in self.WATCHED:
            uuid = self._show(name)['id']
            # The first 5-minute mean appears once the agents' first
            # samples are processed.
            self.wait('measures of %s in Gnocchi' % name,
                      lambda: measures(uuid, 'memory.bandwidth.total'),
                      timeout=420, interval=5)
            for meter in ('memory.bandwidth.total',
                          'memory.bandwidth.local', 'cpu_l3_cache'):
                self.sh(gn, 'measures', 'show', '--resource-id', uuid,
                        '--refresh', '--granularity', str(coarse), meter)
                values = [m['value'] for m in measures(uuid, meter)]
                self.expect(values and all(v > 0 for v in values),
                            'Gnocchi has %s of %s (%s)' % (
                                meter, name,
                                ', '.join('%.0f' % v for v in values)))

    # Ceilometer's polling agent exports every sample it polls as a gauge
    # named ceilometer_<meter> (dots become underscores), labelled with
    # the instance's UUID as ``resource``; the agent exports its own.
    EXPORTERS = (
        ('ceilometer_prom', 'resource', (
            'ceilometer_memory_bandwidth_total',
            'ceilometer_memory_bandwidth_local',
            'ceilometer_cpu_l3_cache')),
        ('agent_prom', 'instance_uuid', (
            'rdt_virt_instance_memory_bandwidth_total_bytes_per_second',
            'rdt_virt_instance_memory_bandwidth_local_bytes_per_second',
            'rdt_virt_instance_llc_occupancy_bytes')),
    )

    def scrape(self, kind, host, label, names, show=True):
        """{(metric, instance uuid): value} from one exporter."""
        from prometheus_client import parser
        url = 'http://127.0.0.1:%d/metrics' % self.cloud.layout.ports[
            '%s_%s' % (kind, host)]
        if show:
            self.out('-- %s --' % url)
        with urllib.request.urlopen(url, timeout=10) as resp:
            text = resp.read().decode()
        found = {}
        for family in parser.text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in names and label in sample.labels:
                    found[sample.name, sample.labels[label]] = sample.value
                    if show:
                        self.out('%s{%s="%s"} %g' % (
                            sample.name, label, sample.labels[label],
                            sample.value))
        return found

    def prometheus(self):
        for name, host in self.WATCHED:
            uuid = self._show(name)['id']
            for kind, label, names in self.EXPORTERS:
                def complete():
                    found = self.scrape(kind, host, label, names,
                                        show=False)
                    return all(found.get((n, uuid), 0) > 0 for n in names)
                # Ceilometer polls every 30 s, its first poll perhaps
                # before the agent's first rates.
                self.wait('%s of %s' % (kind, name), complete, timeout=120,
                          interval=5)
                found = self.scrape(kind, host, label, names)
                self.expect(all(found.get((n, uuid), 0) > 0 for n in names),
                            '%s on %s exports %s of %s' % (
                                kind, host, ', '.join(names), name))

    # Prometheus and Aetos (rdt_virt.cloud.flow_prometheus) ---------------

    def prometheus_targets(self):
        flow_prometheus.targets(self)

    def tenants(self):
        flow_prometheus.tenants(self)

    def exported(self, hosts=None, exporters=None):
        """The instances any exporter on any host still has series of.

        :param hosts: only these compute hosts' exporters.
        :param exporters: only these of :attr:`EXPORTERS`.
        """
        uuids = set()
        for host in hosts or [h for h, _ in services.COMPUTES]:
            for kind, label, names in exporters or self.EXPORTERS:
                uuids.update(u for _, u in self.scrape(
                    kind, host, label, names, show=False))
        return uuids

    def ceilometer_forgets(self, host):
        """Ceilometer 24's exporter on ``host`` drops the deleted servers.

        It keeps a meter's series until the pollster has samples again:
        once a server runs on ``host``, the series of the servers deleted
        in :meth:`delete_all` must go.
        """
        stale = getattr(self, 'stale_series', {}).get(host)
        if not stale:
            return
        self.wait("Ceilometer's exporter on %s to drop the deleted servers"
                  % host, lambda: not (self.exported(
                      [host], self.EXPORTERS[:1]) & stale), timeout=120,
                  interval=2)
        self.expect(True, "Ceilometer %d's exporter on %s dropped the %d "
                    "deleted servers' series once it polled a server there "
                    "again" % (_ceilometer_major(), host, len(stale)))
        del self.stale_series[host]

    def _show(self, name):
        return self.os('server', 'show', name, parse=True, show=False)

    def lifecycle(self):
        # Resize: the protected server's dedicated L3 from 2 to 4 MiB. Its
        # host is the only one with a CLOSID left, so it stays there.
        self.os('server', 'resize', '--flavor', 'rdt.protected4m', '--wait',
                'protected')
        self.wait('protected VERIFY_RESIZE', lambda: self._state(
            'protected', ('VERIFY_RESIZE',)))
        self.os('server', 'resize', 'confirm', 'protected')
        server = self.wait('protected ACTIVE', lambda: self._state(
            'protected', ('ACTIVE',)))
        self.expect(server['flavor']['name'] == 'rdt.protected4m',
                    'protected is ACTIVE with 4 MiB of L3 on %s' %
                    server['OS-EXT-SRV-ATTR:host'])
        # Rebuild: same host, same claim, another image.
        self.os('server', 'rebuild', '--image', 'rdt-idle', '--wait',
                'noisy-3')
        server = self._show('noisy-3')
        self.expect(server['status'] == 'ACTIVE' and
                    server['OS-EXT-SRV-ATTR:host'] == 'compute1',
                    'noisy-3 is rebuilt, ACTIVE on compute1')
        self.table('server', 'list', '--long', '-c', 'Name', '-c', 'Status',
                   '-c', 'Flavor', '-c', 'Host')

    # Live migration ------------------------------------------------------

    def _host_of(self, name):
        return self._show(name)['OS-EXT-SRV-ATTR:host']

    def _migrations(self, name, show=True):
        """``name``'s migrations, newest first (shown as a table)."""
        if show:
            self.table('server', 'migration', 'list', '--server', name,
                       '-c', 'Source Compute', '-c', 'Dest Compute', '-c',
                       'Status', '-c', 'Type')
        return self.os('server', 'migration', 'list', '--server', name,
                       parse=True, show=False) or []

    def _settled(self, name):
        """The server once no task runs on it (ACTIVE, or ERROR raises)."""
        server = self._state(name, ('ACTIVE',))
        return server if server and not server.get(
            'OS-EXT-STS:task_state') else None

    def _usages(self):
        """{provider name: {resource class: usage}}."""
        return {rp['name']: {u['resource_class']: u['usage'] for u in self.os(
            'resource', 'provider', 'usage', 'show', rp['uuid'], parse=True,
            show=False)} for rp in self.os('resource', 'provider', 'list',
                                           parse=True, show=False)}

    def _agent_instances(self, host):
        from rdt_virt.agent import state
        try:
            return set(state.load(self.cloud.host_dir(
                host, 'host-state.json'))['instances'])
        except (OSError, state.InvalidStateFile):
            return set()

    def _gnocchi_measures(self, uuid, meter, granularity=None):
        """The measures of one metric: all, or those of one granularity."""
        only = ['--granularity', str(granularity)] if granularity else []
        rc, text = self.sh(self.cloud.layout.tool('gnocchi'), 'measures',
                           'show', '--resource-id', uuid, '--refresh', *only,
                           meter, '-f', 'json', check=False, show=False)
        try:
            # JSON on stdout, Python's warnings after it.
            return json.JSONDecoder().raw_decode(
                text[text.index('['):])[0] if not rc else []
        except ValueError:
            return []

    def live_migration(self):
        """Live migration with RDT claims, and one the pre-checks refuse.

        The protected server moves from compute2 to compute1, beside the
        noisy ones, once one of them gives its CLOSID back; then a noisy
        server, whose bandwidth limit needs MBA, is refused compute2.
        """
        freed = self._show('noisy-%d' % NOISY)['id']
        self.os('server', 'delete', '--wait', 'noisy-%d' % NOISY)
        # The API forgets a deleted server before its compute host gives
        # its allocation back to Placement: a migration asked for in
        # between finds no CLOSID on compute1 ("No valid host").
        self.wait("noisy-%d's allocation to go" % NOISY,
                  lambda: not self.os('resource', 'provider', 'allocation',
                                      'show', freed, parse=True, show=False),
                  timeout=60, interval=1)
        uuid = self._show('protected')['id']
        source = self._host_of('protected')
        self.expect(source == 'compute2', 'protected runs on compute2')
        self.os('server', 'migrate', '--live-migration', '--host',
                'compute1', '--wait', 'protected', check=False)

        def ended():
            # Nova's source compute records the migration's end after the
            # destination has taken the server over: wait for both.
            server = self._settled('protected')
            latest = (server and self._migrations('protected', show=False)
                      or [None])[0]
            return server if latest and latest['Status'] in (
                'completed', 'error', 'failed', 'cancelled') else None
        server = self.wait('the live migration to end', ended, timeout=300)
        moved = time.time()
        migration = self._migrations('protected')[0]
        self.expect(server['OS-EXT-SRV-ATTR:host'] == 'compute1' and
                    migration['Status'] == 'completed',
                    'protected is live-migrated from compute2 to compute1, '
                    'ACTIVE, its migration completed')
        self.table('server', 'list', '--long', '-c', 'Name', '-c', 'Status',
                   '-c', 'Flavor', '-c', 'Host')

        # Placement: the allocation moved with it.
        allocations = self.os('resource', 'provider', 'allocation', 'show',
                              uuid, parse=True)
        providers = flow_moves.providers(self)
        self.expect([providers.get(a['resource_provider'])
                     for a in allocations] == ['compute1'] and
                    allocations[0]['resources'].get('CUSTOM_RDT_CLOSID') == 1,
                    "protected's allocation, its CLOSID included, is on "
                    "compute1 alone")
        usages = self._usages()
        self.expect(usages['compute1'].get('CUSTOM_RDT_CLOSID') == NOISY and
                    usages['compute2'].get('CUSTOM_RDT_CLOSID') == 0,
                    'Placement counts %d CLOSIDs on compute1, none on '
                    'compute2' % NOISY)

        # The agents: the destination's picks it up, the source's forgets
        # (at their next samples, up to 10 s after the move).
        def agents():
            return (uuid in self._agent_instances('compute1') and
                    uuid not in self._agent_instances('compute2'))
        self.wait("the agents' state files to follow", agents, timeout=120,
                  interval=2)
        self.expect(agents(), "compute1's agent has protected in its state "
                    "file, compute2's no longer")

        # The claims: one group per server on each host, with its vCPU,
        # as resctrl, the state files and rdt-virt top show them.
        self.resctrl()

        # Prometheus: its series are exported by compute1's agent and
        # Ceilometer's poller, and by nothing on compute2. Ceilometer 24
        # (2025.1) drops a meter's old series only when the pollster has
        # samples again, so its exporter on a host whose last server left
        # keeps the server's last values; 25 and later drop them.
        stale = _ceilometer_major() < 25
        found = {}

        def series():
            found.update({host: {u for _, u in self.scrape(
                kind, host, label, names, show=False)}
                for host, _ in services.COMPUTES
                for kind, label, names in self.EXPORTERS[:1]})
            agent = {host: {u for _, u in self.scrape(
                kind, host, label, names, show=False)}
                for host, _ in services.COMPUTES
                for kind, label, names in self.EXPORTERS[1:]}
            return (uuid in found['compute1'] and uuid in agent['compute1']
                    and (stale or uuid not in found['compute2']) and
                    uuid not in agent['compute2'])
        self.wait('the Prometheus series to move host', series,
                  timeout=150, interval=2)
        for kind, label, names in self.EXPORTERS:
            self.scrape(kind, 'compute1', label, names)
        if stale and uuid in found['compute2']:
            self.out("  note: Ceilometer %d's exporter on compute2 still "
                     "shows protected's last values: it drops them once it "
                     "polls a server there again" % _ceilometer_major())
            self.expect(series(), "protected's series are on compute1's "
                        "exporters, none on compute2's agent's")
        else:
            self.expect(series(), "protected's series are on compute1's "
                        "exporters, none on compute2's")

        self.refused_live_migration()
        self.migrated = (uuid, moved)

    def live_migration_measures(self):
        """Gnocchi still receives the moved server's measures.

        The same resource, and a 1-minute mean of a minute that began
        after the move, which only the destination's poller can have sent.
        A step of its own, after the Watcher steps, so that the minute has
        passed by then.
        """
        uuid, moved = self.migrated
        gn = self.cloud.layout.tool('gnocchi')
        fine = services.FINE
        window = int(moved // fine * fine)

        def after():
            import datetime
            return [m for m in self._gnocchi_measures(
                uuid, 'memory.bandwidth.total', fine)
                if datetime.datetime.fromisoformat(
                    m['timestamp']).timestamp() > window and m['value'] > 0]
        self.wait("a measure of protected after the move", after,
                  timeout=240, interval=5)
        self.sh(gn, 'measures', 'show', '--resource-id', uuid, '--refresh',
                '--granularity', str(fine), 'memory.bandwidth.total')
        self.expect(after(), "Gnocchi keeps receiving protected's "
                    "memory.bandwidth.total after the move")

    def refused_live_migration(self):
        # compute2 has no MBA: the noisy servers' bandwidth limit cannot be
        # held there. Their flavor requires CUSTOM_RDT_MBA, so Placement
        # offers no candidate there and Nova refuses with its own words
        # (RDTFilter's reason: flow_churn.refused_live_migration).
        before = self._usages()
        # The API answers the request itself: the conductor's pre-checks
        # (the scheduler, with RDTFilter) run before it returns.
        rc, text = self.os('server', 'migrate', '--live-migration', '--host',
                           'compute2', 'noisy-1', check=False)
        self.expect(rc != 0 and '400' in text and 'No valid host' in text,
                    'the request is refused with HTTP 400: no valid host')
        self.wait('the refused migration to end', lambda: [
            m for m in self.os('server', 'migration', 'list', '--server',
                               'noisy-1', parse=True, show=False)
            if m['Status'] in ('error', 'failed')], timeout=180)
        server = self.wait('noisy-1 ACTIVE', lambda: self._settled(
            'noisy-1'))
        self._migrations('noisy-1')
        self.os('server', 'event', 'list', 'noisy-1')
        self.expect(server['OS-EXT-SRV-ATTR:host'] == 'compute1',
                    'a live migration of noisy-1 to compute2 (no MBA) is '
                    'refused; noisy-1 stays ACTIVE on compute1')
        self.expect(self._usages() == before,
                    'Placement usages are unchanged')

    # Watcher (rdt_virt.cloud.flow_watcher) -------------------------------

    # bytes/s the two low-priority guests must use together: the burning
    # one uses well over 100 MB/s unthrottled on the emulated hosts.
    WATCHER_THRESHOLD = 50 * 10 ** 6

    def watcher_services(self):
        flow_watcher.services(self)

    def watcher_loop(self):
        flow_watcher.loop(self, self.WATCHER_THRESHOLD)

    # bytes/s the three low burn servers use together held at the floor:
    # the emulator counts 2 GiB per CPU second, and a guest at 10% still
    # gets several hundredths of a CPU on these two loaded cores.
    CLASS_THRESHOLD = 20 * 10 ** 6
    # The host whose agent the flow stops (the alert's step): the
    # controlled host's agent must keep releasing meanwhile.
    ALERTED = 'compute2'

    def priority_watcher(self):
        flow_watcher.classes(self, self.CLASS_THRESHOLD)

    def alert_pending(self):
        flow_prometheus.stop_agent(self, self.ALERTED)

    def alert_resolved(self):
        flow_prometheus.alert_fires_and_resolves(self, self.ALERTED)

    def delete_all(self):
        servers = self.os('server', 'list', parse=True, show=False)
        uuids = {s['ID'] for s in servers}
        names = undeleted(servers)
        if names:
            self.os('server', 'delete', '--wait', *names)
        # Ceilometer drops a meter's series at each poll and exports what
        # it polls; the agent exports what its state file holds.
        # Ceilometer 24 (2025.1) drops them only when the pollster has
        # samples again: with no server left on a host, its exporter keeps
        # the deleted servers' last values until a server runs there
        # (checked then: ceilometer_forgets).
        stale = _ceilometer_major() < 25
        agents, ceilometer = self.EXPORTERS[1:], self.EXPORTERS[:1]

        def forgotten():
            return not (self.exported(exporters=agents) & uuids) and (
                stale or not (self.exported(exporters=ceilometer) & uuids))
        self.wait('the exporters to forget the deleted servers', forgotten,
                  timeout=120, interval=2)
        self.stale_series = {
            host: self.exported([host], ceilometer) & uuids
            for host, _ in services.COMPUTES} if stale else {}
        if any(self.stale_series.values()):
            self.out("  note: Ceilometer %d's exporter still shows the last "
                     "values of deleted servers (%s): it drops them when it "
                     "polls a server on that host again, checked below" % (
                         _ceilometer_major(), ', '.join(
                             '%d on %s' % (len(v), h) for h, v in
                             sorted(self.stale_series.items()) if v)))
            self.expect(forgotten(), "no agent's exporter has series of a "
                        "deleted server")
        else:
            self.expect(not (self.exported() & uuids),
                        'no exporter has series of a deleted server')
        for rp in self.os('resource', 'provider', 'list', parse=True,
                          show=False):
            usage = self.os('resource', 'provider', 'usage', 'show',
                            rp['uuid'], parse=True)
            self.expect(all(u['usage'] == 0 for u in usage),
                        'no usage left on %s' % rp['name'])
        for host, _ in services.COMPUTES:
            root = self.cloud.host_dir(host, 'sandbox', 'resctrl')
            self.sh(self.cloud.layout.tool('rdt-virt'), '--resctrl-root',
                    root, 'groups')
            left = [d for d in os.listdir(root)
                    if d.startswith(('qemu-', 'rdtvirt-'))]
            self.expect(not left, 'no instance group left on %s' % host)

    def cold_migration_and_resize(self):
        flow_moves.cold_migration_and_resize(self)

    def boots_and_deletes(self):
        flow_churn.boots_and_deletes(self)

    # Priority classes and the controller ---------------------------------

    CONTROLLED = 'compute1'     # the host with MBA

    def _controller_state(self):
        """{instance UUID: state file entry} of the controlled host.

        The state file names an instance by its UUID (its ``name`` is the
        libvirt domain's, ``instance-0000000N``).
        """
        path = self.cloud.host_dir(self.CONTROLLED, 'host-state.json')
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError):
            return {}
        return doc.get('instances') or {}

    def _low_names(self):
        """The low servers on the controlled host (not those Watcher moved)."""
        moved = getattr(self, 'moved_lows', ())
        return [n for n in ('low-%d' % i for i in range(1, LOW + 1))
                if n not in moved]

    def _top(self):
        _, text = self.sh(self.cloud.layout.tool('rdt-virt'), '--state-file',
                          self.cloud.host_dir(self.CONTROLLED,
                                              'host-state.json'),
                          'top', '--once')
        return text

    def priority_boot(self):
        for name, priority in PRIORITY_FLAVORS:
            self.os('flavor', 'create', '--vcpus', 1, '--ram', 64, '--disk',
                    1, *properties(advised({'hw:rdt_priority': priority})),
                    name)
        rc, text = self.os('--os-compute-api-version', '2.86', 'flavor',
                           'set', '--property', 'hw:rdt_priority=urgent',
                           'rdt.low', check=False)
        self.expect(rc != 0 and '400' in text and
                    'hw:rdt_priority' in text,
                    'hw:rdt_priority=urgent is refused with HTTP 400 and '
                    'the reason')
        # The high server first, working; only the reference host has
        # MBA, which it needs. Then the noisy low ones beside it (--host,
        # an admin's request): the scheduler would send them to compute2,
        # which holds no high server and takes low ones.
        self.os('server', 'create', '--flavor', 'rdt.high', '--image',
                'rdt-work', '--nic', 'none', '--wait', 'high')
        self.os('--os-compute-api-version', '2.74', 'server', 'create',
                '--flavor', 'rdt.low', '--image', 'rdt-burn', '--nic',
                'none', '--host', self.CONTROLLED, '--min', LOW, '--max',
                LOW, 'low')
        hosts = {}
        for name in ['high'] + self._low_names():
            server = self.wait(name + ' ACTIVE', lambda n=name: self._state(
                n, ('ACTIVE',)))
            hosts[name] = server['OS-EXT-SRV-ATTR:host']
        self.expect(set(hosts.values()) == {self.CONTROLLED},
                    'high and the low servers are ACTIVE on %s, the host '
                    'with MBA' % self.CONTROLLED)
        self.table('server', 'list', '--long', '-c', 'Name', '-c', 'Status',
                   '-c', 'Flavor', '-c', 'Host')
        self.priority_started = time.monotonic()
        self.priority_uuids = None
        self.ceilometer_forgets(self.CONTROLLED)

    def _levels(self):
        """{server name: its controller level}.

        :raises KeyError: while the agent's state file lacks a server.
        """
        if not getattr(self, 'priority_uuids', None):
            self.priority_uuids = {n: self._show(n)['id']
                                   for n in ['high'] + self._low_names()}
        state = self._controller_state()
        return {n: state[u].get('level')
                for n, u in self.priority_uuids.items()}

    def priority_throttled(self):
        # As many as the excess needs, heaviest first (every active one
        # when the pool is saturated): at least one.
        def throttled():
            try:
                levels = self._levels()
            except KeyError:
                return None
            return levels if any(levels[n] is not None
                                 for n in self._low_names()) else None
        levels = self.wait('the controller to throttle the low servers',
                           throttled, timeout=240, interval=3)
        started = getattr(self, 'priority_started', None)
        held = [n for n in self._low_names() if levels[n] is not None]
        self.expect(levels['high'] is None,
                    'the controller throttles %s%s and leaves high alone' % (
                        ', '.join('%s at %g%%' % (n, levels[n])
                                  for n in held),
                        '' if started is None else ', %.0f s after they '
                        'were created' % (time.monotonic() - started)))
        # top names an instance by its domain and the UUID's first 8
        # characters; the level may have moved a step since.
        rows = {n: [line.split() for line in self._top().splitlines()
                    if ' %s ' % u[:8] in line]
                for n, u in self.priority_uuids.items()}
        self.expect(all(len(r) == 1 for r in rows.values()) and
                    'high' in rows['high'][0] and
                    all('low' in rows[n][0] for n in self._low_names()) and
                    any(c.endswith('%') for n in held for c in rows[n][0]),
                    'rdt-virt top shows the classes and the levels')
        self.priority_exported(held)
        self.priority_archived(held)

    def priority_released(self):
        self.out('  note: the agents here release %d points every %d s '
                 '([rdt_agent] controller_increase, controller_release_'
                 'dwell); by default 10 points every three sampling '
                 'periods' % (cloud_mod.RELEASE_INCREASE,
                              cloud_mod.RELEASE_DWELL))
        self.os('server', 'pause', 'high')
        self.wait('high PAUSED', lambda: self._state('high', ('PAUSED',)))
        paused = time.monotonic()

        def released():
            try:
                levels = self._levels()
            except KeyError:
                return None
            return levels if all(levels[n] is None
                                 for n in self._low_names()) else None
        # The agent samples every 10 s here, the controller releases 45
        # points per RELEASE_DWELL: two steps from the floor.
        self.wait('the controller to release the low servers', released,
                  timeout=300, interval=2)
        self.expect(True, 'the controller released %s %.0f s after the '
                    'pause' % (', '.join(self._low_names()),
                               time.monotonic() - paused))
        self._top()
        self.priority_exported([])
        self.os('server', 'delete', '--wait', 'high', *self._low_names(),
                *getattr(self, 'moved_lows', ()))

    LIMIT = 'memory.bandwidth.limit'

    def priority_archived(self, held):
        """Gnocchi keeps the throttling: the low servers' limit meter.

        A 1-minute mean below 100 % says the controller held the server
        for part of that minute.
        """
        uuids = {n: self._show(n)['id'] for n in held}
        fine = services.FINE

        def below():
            found = {n: [m['value'] for m in self._gnocchi_measures(
                u, self.LIMIT, fine)] for n, u in uuids.items()}
            return found if any(v and v[-1] < 100 for v in found.values()) \
                else None
        found = self.wait('Gnocchi to have the throttled %s' % self.LIMIT,
                          below, timeout=180, interval=5)
        name = sorted(n for n, v in found.items() if v and v[-1] < 100)[0]
        self.sh(self.cloud.layout.tool('gnocchi'), 'measures', 'show',
                '--resource-id', uuids[name], '--refresh', '--granularity',
                str(fine), self.LIMIT)
        self.expect(True, 'Gnocchi archives %s of %s: %s %%' % (
            self.LIMIT, name, ', '.join('%.0f' % v for v in found[name])))

    # The agent's protection series, labelled with the instance's UUID
    # (the names rdt_noisy_neighbor reads).
    LEVEL = promql.LEVEL
    THROTTLED = promql.THROTTLED
    CLASS = 'rdt_virt_instance_protection_class'

    def priority_exported(self, held):
        """The agent's Prometheus endpoint agrees with the state file.

        :param held: the low servers the state file had throttled (the
            controller may have moved on since: the levels are read again).
        """
        uuids = {self._show(n)['id']: n for n in self._low_names()}
        found = self.scrape('agent_prom', self.CONTROLLED, 'instance_uuid',
                            (self.LEVEL, self.THROTTLED), show=False)
        for uuid, name in sorted(uuids.items(), key=lambda kv: kv[1]):
            for metric in (self.THROTTLED, self.LEVEL):
                if (metric, uuid) in found:
                    self.out('%s{instance_uuid="%s"} %g   (%s)' % (
                        metric, uuid, found[metric, uuid], name))
        flag = {n: found.get((self.THROTTLED, u)) for u, n in uuids.items()}
        level = {n: found.get((self.LEVEL, u)) for u, n in uuids.items()}
        if held:
            self.expect(any(flag[n] == 1.0 and level[n] is not None and
                            level[n] < 100 for n in held),
                        'the agent exports the throttled servers with '
                        'their levels')
        else:
            self.expect(all(flag[n] == 0.0 and level[n] is None
                            for n in uuids.values()),
                        'the agent exports the low servers as released, '
                        'without a level')
