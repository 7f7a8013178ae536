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

"""``rdt-virt-sandbox cloud upgrade``: a skip-level upgrade, servers running.

Run from the old release's environment (``tox -e cloud-2025.1``), with the
new release's bin directory (``--to-bin``, ``tox -e cloud-2026.1``):

#. the cloud comes up on the old release, with a ``hw:rdt_priority=high``
   server that works, three ``low`` noisy ones beside it, a
   ``hw:cache_l3`` server and a ``hw:mem_bw=10`` one;
#. the steps of :func:`rdt_virt.cloud.upgrade_plan.steps`: each service
   of the control plane stopped, migrated with its own tools from the new
   environment and started from there; a boot, a resize and a live
   migration with computes of both releases; compute2, then compute1
   (whose servers that another host can take are live-migrated there
   first; the others stay, running, while it is upgraded); the online
   data migrations; Aetos if the new release has it;
#. after each step the checks of :mod:`rdt_virt.cloud.upgrade_checks`,
   with the vCPU threads' groups and the protected server's work sampled
   during the step from the hosts' own files;
#. the upgrade's servers, flavors and images are deleted, so that the new
   release's flow (``rdt-virt-sandbox cloud flow`` from its environment)
   runs on the upgraded cloud as on a new one.

Every check runs to the end; the command fails if any failed.
"""

import collections
import glob
import os
import time

from rdt_virt.cloud import cloud as cloud_mod
from rdt_virt.cloud import flow as flow_mod
from rdt_virt.cloud import flow_moves
from rdt_virt.cloud import prometheus
from rdt_virt.cloud import services
from rdt_virt.cloud import upgrade_checks as checks
from rdt_virt.cloud import upgrade_plan as plan
from rdt_virt.cloud import upgrade_records as records
from rdt_virt.cloud import upgrade_services
from rdt_virt.sandbox import guest

HIGH, CACHE, MEMBW, MIXED = 'high', 'cache', 'membw', 'mixed'
LOWS = tuple('low-%d' % i for i in range(1, flow_mod.LOW + 1))
#: rdt-virt's group prefix (``[rdt] group_prefix``, the cloud's default);
#: ``<prefix>mb<N>`` are the controller's levels, whose members and
#: schemata change with the load whoever runs.
PREFIX = 'rdtvirt-'
#: Seconds between two readings of the groups' threads, of the
#: protected server's work, and of a restarted agent's counters.
THREADS_EVERY, WORK_EVERY, AGENT_EVERY = 2.0, 5.0, 0.5
#: Seconds between two looks for the other host's new guests.
GUESTS_EVERY = 1.0
#: The protected server's rate is compared per window of this many
#: seconds; before the upgrade, over this many windows: as many as the
#: longest step has (compute1's, with its live migrations, about 180 s),
#: so that the baseline's lowest window is the lowest of as long a time.
WINDOW, BASELINE_WINDOWS = 20.0, 9
#: Seconds each step goes on after its services answer, so that its
#: window holds the series' first points after the restarts.
SETTLE = 30.0
#: How often each series gets a point: the agent samples every 10 s
#: (``[rdt_agent] sample_interval``), Ceilometer polls every 30 s
#: (``RDT_VIRT_POLLING_INTERVAL``); a gap may be two of them.
INTERVALS = {'agent': 10.0, 'ceilometer': 30.0}
CLEARED_FLAVORS = tuple(n for n, _ in flow_mod.FLAVORS) + tuple(
    n for n, _ in flow_mod.PRIORITY_FLAVORS)
CLEARED_IMAGES = ('rdt-burn', 'rdt-work', 'rdt-idle')

Record = collections.namedtuple(
    'Record', 'states ids allocations schemata threads usages')


UpgradeError = upgrade_services.UpgradeError


def static_group(group):
    """Whether a group's members and schemata stay as they are."""
    return not group.startswith(PREFIX + 'mb')


def installed(venv_bin, package):
    """Whether ``package`` is importable in the environment of ``venv_bin``."""
    return bool(glob.glob(os.path.join(os.path.dirname(venv_bin), 'lib',
                                       'python3*', 'site-packages',
                                       package)))


def nova_version(venv_bin=None):
    """The Nova installed in the environment of ``venv_bin`` (or this one)."""
    if venv_bin is None:
        from importlib import metadata
        return metadata.version('nova')
    found = glob.glob(os.path.join(os.path.dirname(venv_bin), 'lib',
                                   'python3*', 'site-packages',
                                   'nova-*.dist-info'))
    return os.path.basename(found[0])[len('nova-'):-len('.dist-info')] \
        if found else None


def check_releases(spec, new_bin):
    """(old, new) of ``spec``, once the two environments are theirs.

    :raises UpgradeError: if this process or ``new_bin`` runs another
        release's Nova.
    """
    try:
        old, new = plan.parse(spec)
    except ValueError as e:
        raise UpgradeError(str(e))
    for release, venv_bin, what in ((old, None, 'this environment'),
                                    (new, new_bin, new_bin)):
        version = nova_version(venv_bin)
        if plan.release_of(version) != release:
            raise UpgradeError('%s has Nova %s, not %s\'s (Nova %d)' % (
                what, version, release, plan.NOVA[release]))
    return old, new


class Upgrade(object):

    def __init__(self, cloud, new_bin, out=print, steps=None):
        """The upgrade of ``cloud`` to the environment of ``new_bin``.

        :param steps: the steps to run (default: every step of the plan).
        """
        self.cloud = cloud
        self.steps = plan.steps() if steps is None else steps
        self.new_bin = os.path.abspath(new_bin)
        self.new = None
        self.out = out
        self.flow = None
        self.failures = []
        # (step, seconds, failures, work rate, lowest window rate,
        #  {source: largest gap}, first tick's writes)
        self.rows = []
        self.floor = None
        self.marks = []
        self.started = None
        self.initial = {}
        self.instance = {}

    # Setup ---------------------------------------------------------------

    def run(self):
        self.cloud.up()
        # The same cloud (its ports are chosen by up), started from the
        # new release's environment.
        self.new = cloud_mod.Cloud(
            self.cloud.base, gnocchi_bin=self.cloud.layout.gnocchi_bin,
            log=self.cloud.log,
            metric_client_bin=self.cloud.layout.metric_client_bin,
            venv_bin=self.new_bin)
        self.services = upgrade_services.Services(
            self.new, self.cloud.layout.gnocchi_bin, self.out)
        # Before the baseline: the control plane and this process (the
        # operator's machine) stand for other machines from the start; the
        # threads this process starts later inherit its priority.
        self.services.yield_cpu()
        upgrade_services.lower(os.getpid(), upgrade_services.CONTROL_NICE,
                               group=False)
        self.services.pin_compute_rpc()
        self.flow = flow_mod.Flow(self.cloud, self.out)
        self.boot()
        self.services.home = self._high()[0]
        self.services.yield_cpu()
        self.baseline()
        self.started = time.time()
        self.initial = self.record().ids
        try:
            for step in self.steps:
                self.step(step)
            self.gnocchi_gaps()
            self.add_aetos()
        finally:
            self.report()
            # What follows (the flow, or an operator on a kept cloud)
            # runs the cloud as it runs when new.
            self.new.daemons.on_start = None
            self.services.yield_cpu(upgrade_services.HOST_NICE)
            upgrade_services.lower(os.getpid(), upgrade_services.HOST_NICE,
                                   group=False)
        self.clear()
        return not self.failures

    def boot(self):
        f = self.flow
        self.out('\n== Boot on the old release ==')
        f.flavors_and_images()
        for name, priority in flow_mod.PRIORITY_FLAVORS:
            f.os('flavor', 'create', '--vcpus', 1, '--ram', 64, '--disk', 1,
                 *flow_mod.properties(flow_mod.advised(
                     {'hw:rdt_priority': priority})), name)
        f.os('server', 'create', '--flavor', 'rdt.high', '--image',
             'rdt-work', '--nic', 'none', '--wait', HIGH)
        # Beside the high one (an admin's --host), as the flow does.
        f.os('--os-compute-api-version', '2.74', 'server', 'create',
             '--flavor', 'rdt.low', '--image', 'rdt-burn', '--nic', 'none',
             '--host', f.CONTROLLED, '--min', len(LOWS), '--max', len(LOWS),
             'low')
        f.os('server', 'create', '--flavor', 'rdt.protected', '--image',
             'rdt-idle', '--nic', 'none', '--wait', CACHE)
        f.os('server', 'create', '--flavor', 'rdt.noisy', '--image',
             'rdt-burn', '--nic', 'none', '--wait', MEMBW)
        for name in (HIGH,) + LOWS + (CACHE, MEMBW):
            f.wait(name + ' ACTIVE', lambda n=name: f._state(n, ('ACTIVE',)))
        f.table('server', 'list', '--long', '-c', 'Name', '-c', 'Status',
                '-c', 'Flavor', '-c', 'Host')

    def _high(self):
        server = self.flow._show(HIGH)
        return server['OS-EXT-SRV-ATTR:host'], server['id']

    def work(self):
        """Units the protected server has logged (its host's console log)."""
        host, uuid = self.high_at
        return records.work_units(self.cloud.layout, host, uuid)

    def baseline(self):
        f = self.flow
        self.out('\n== Before the upgrade ==')
        self.high_at = self._high()
        f.wait("high's work banner", lambda: self.work() is not None,
               timeout=180)

        def throttled():
            try:
                levels = f._levels()
            except KeyError:
                return None
            return levels if any(levels[n] is not None for n in LOWS) \
                else None
        levels = f.wait('the controller to throttle the low servers',
                        throttled, timeout=300, interval=5)
        f.expect(True, 'the controller holds %s' % ', '.join(
            '%s at %g%%' % (n, levels[n]) for n in LOWS
            if levels[n] is not None))
        # With the groups' threads read as during each step: the readings
        # cost the hosts' emulated resctrl some CPU time.
        sampler = records.Sampler(self.work, WORK_EVERY)
        threads = records.Sampler(self.threads_now, THREADS_EVERY)
        start = time.time()
        sampler.start()
        threads.start()
        time.sleep(WINDOW * BASELINE_WINDOWS)
        threads.stop()
        samples = sampler.stop()
        rates = checks.window_rates(samples, start, time.time(), WINDOW)
        f.expect(len(rates) >= BASELINE_WINDOWS - 1 and min(rates) > 0,
                 'high works: %s MiB/s in %.0f-s windows' % (
                     ', '.join('%.2f' % _mib(r) for r in rates), WINDOW))
        self.floor = checks.rate_floor(rates)
        f.expect(self.floor > 0, 'no window of a step may fall below '
                 '%.2f MiB/s (the lowest less the spread)' % _mib(
                     self.floor))

    # Records -------------------------------------------------------------

    def root(self, host):
        return self.cloud.host_dir(host, 'sandbox', 'resctrl')

    def hosts(self):
        return [h for h, _ in services.COMPUTES]

    def record(self):
        f = self.flow
        servers = f.os('server', 'list', '--long', parse=True, show=False)
        providers = flow_moves.providers(f)
        allocations = {}
        for s in servers:
            found = f.os('resource', 'provider', 'allocation', 'show',
                         s['ID'], parse=True, show=False) or []
            allocations[s['Name']] = {
                providers.get(a['resource_provider']): a['resources']
                for a in found}
        return Record(
            {s['Name']: (s['Status'], s['Host']) for s in servers},
            {s['Name']: s['ID'] for s in servers}, allocations,
            {h: records.schemata(self.root(h)) for h in self.hosts()},
            {h: records.threads(self.root(h), static_group)
             for h in self.hosts()}, f._usages())

    def instance_name(self, name):
        if name not in self.instance:
            self.instance[name] = self.flow._show(name)[
                'OS-EXT-SRV-ATTR:instance_name']
        return self.instance[name]

    def threads_now(self):
        return {h: records.threads(self.root(h)) for h in self.hosts()}

    # Steps ---------------------------------------------------------------

    def step(self, step):
        self.out('\n== %s ==' % step.name)
        touched = []
        before = self.record()
        start = time.time()
        self.marks = []
        threads = records.Sampler(self.threads_now, THREADS_EVERY)
        work = records.Sampler(self.work, WORK_EVERY)
        others = records.Sampler(self.services.lower_guests, GUESTS_EVERY)
        agent = None
        if step.kind == plan.COMPUTE:
            agent = records.Sampler(
                lambda: records.agent_counters(self.cloud.layout, step.host),
                AGENT_EVERY)
        for sampler in (threads, work, others):
            sampler.start()
        try:
            if step.kind == plan.MIXED:
                touched += self.mixed()
            else:
                if step.kind == plan.COMPUTE and step.host == 'compute1':
                    touched += self.evacuate(step.host, 'compute2')
                self.restart(step, agent)
            time.sleep(SETTLE)
        finally:
            others.stop()
            taken = {'threads': threads.stop(), 'work': work.stop(),
                     'agent': agent.stop() if agent else []}
        end = time.time()
        after = self.record()
        self.check(step, before, after, taken, start, end, touched)

    def restart(self, step, agent=None):
        if step.kind == plan.COMPUTE and step.host == self.services.home:
            # A compute host's package upgrade runs at its own priority.
            with upgrade_services.priority(upgrade_services.HOST_NICE):
                self._restart(step, agent)
        else:
            self._restart(step, agent)

    def _restart(self, step, agent=None):
        services = self.services
        version = None
        if step.kind == plan.COMPUTE:
            version = services.service_version(step.host)
        # The new environment is installed and configured while the old
        # services run, as a package upgrade installs before it restarts:
        # the services are down only from their stop to their start.
        for host, enabled in step.plugin:
            self.new.devstack_plugin(host, list(enabled), phases=(
                ('stack', 'install'),), RDT_VIRT_EMULATE='True')
        if step.kind == plan.COMPUTE:
            services.retool(step.host)
        self.mark('stop')
        for group in plan.stop_order(step):
            self.new.daemons.stop_all(group)
        for cmd in step.before:
            services.command(cmd)
        self.mark('start')
        for name in step.start:
            services.start(name)
            if agent is not None and name.endswith('-rdt-virt-agent'):
                agent.start()
        for cmd in step.after:
            services.command(cmd)
        if step.kind == plan.COMPUTE:
            self.wait_compute(step.host, version)
        self.mark('up')

    def wait_compute(self, host, old_version):
        """Until the new nova-compute has recorded itself, and is up."""
        f = self.flow
        version = self.services.service_version
        f.wait('%s nova-compute of the new release' % host,
               lambda: (version(host) or 0) > old_version,
               timeout=240, interval=5)

        def up():
            rows = f.os('compute', 'service', 'list', '--service',
                        'nova-compute', '--host', host, parse=True,
                        show=False) or []
            return any(r.get('State') == 'up' for r in rows)
        f.wait('%s nova-compute up' % host, up, timeout=120, interval=5)
        self.expect(True, '%s: nova-compute service version %d, was %d' % (
            host, version(host), old_version))

    # With computes of both releases, and compute1's servers -------------

    def mixed(self):
        f = self.flow
        log = self.cloud.daemons.log_file('nova-scheduler')
        refused = _count(log, 'reports no RDT')
        self.mark('mixed boots')
        f.os('server', 'create', '--flavor', 'rdt.protected', '--image',
             'rdt-idle', '--nic', 'none', '--wait', MIXED)
        server = f._state(MIXED, ('ACTIVE',))
        self.expect(server is not None, 'the 2026.1 scheduler places a new '
                    'hw:cache_l3 server on %s' % (
                        server or {}).get('OS-EXT-SRV-ATTR:host'))
        for host in self.hosts():
            stat = flow_moves.rdt_stat(f, host)
            self.expect(stat is not None, "the scheduler's reader takes "
                        "%s's RDT stat, written by the old release" % host)
        self.expect(_count(log, 'reports no RDT') == refused,
                    'nova-scheduler filtered no host as reporting no RDT')
        self.mark('cache resizes')
        f.os('server', 'resize', '--flavor', 'rdt.protected4m', '--wait',
             CACHE)
        f.wait('cache VERIFY_RESIZE', lambda: f._state(
            CACHE, ('VERIFY_RESIZE',)))
        f.os('server', 'resize', 'confirm', CACHE)
        server = f.wait('cache ACTIVE', lambda: f._settled(CACHE))
        self.expect(server['flavor']['name'] == 'rdt.protected4m',
                    'cache is resized to 4 MiB of L3 on %s' %
                    server['OS-EXT-SRV-ATTR:host'])
        source = f._host_of(MIXED)
        dest = [h for h in self.hosts() if h != source][0]
        # Not --wait, which waits without end for a migration that never
        # starts; f.wait has a bound.
        self.mark('mixed migrates')
        f.os('server', 'migrate', '--live-migration', '--host', dest,
             MIXED, check=False)
        server = f.wait('the live migration to end',
                        lambda: f._settled(MIXED), timeout=300)
        self.completed(MIXED)
        self.expect(server['OS-EXT-SRV-ATTR:host'] == dest,
                    'mixed is live-migrated from %s to %s' % (source, dest))
        try:
            levels = f._levels()
        except KeyError:
            levels = {}
        self.expect(any(levels.get(n) is not None for n in LOWS),
                    'the controller on the old compute1 still holds a low '
                    'server: %s' % levels)
        return [CACHE, MIXED]

    def evacuate(self, host, other):
        """Live-migrate to ``other`` the servers of ``host`` it can take."""
        f = self.flow
        providers = {v: k for k, v in flow_moves.providers(f).items()}
        traits = [t['name'] for t in f.os(
            'resource', 'provider', 'trait', 'list', providers[other],
            parse=True, show=False)]
        moved = []
        for s in f.os('server', 'list', '--long', parse=True, show=False):
            if s['Host'] != host:
                continue
            specs = f._show(s['Name'])['flavor'].get('extra_specs') or {}
            required = [k.split(':', 1)[1] for k, v in specs.items()
                        if k.startswith('trait:') and v == 'required']
            if not plan.movable(required, traits):
                self.out('  %s stays on %s: %s has no %s' % (
                    s['Name'], host, other, ', '.join(
                        sorted(set(required) - set(traits)))))
                continue
            self.mark('%s migrates' % s['Name'])
            f.os('server', 'migrate', '--live-migration', '--host', other,
                 s['Name'], check=False)
            server = f.wait('%s to move' % s['Name'],
                            lambda n=s['Name']: f._settled(n), timeout=300)
            self.completed(s['Name'])
            self.mark('moved')
            self.expect(server['OS-EXT-SRV-ATTR:host'] == other,
                        '%s is live-migrated to %s' % (s['Name'], other))
            moved.append(s['Name'])
        return moved

    def completed(self, name):
        """Until ``name``'s last migration is done on its source host too.

        The server shows its new host before the source's nova-compute has
        finished the migration: marked it ``completed`` and given back the
        allocation the migration held there. Stopped in between, as an
        upgrade stops it, it leaves that allocation behind, and nothing in
        Nova removes it.
        """
        f = self.flow

        def done():
            rows = f._migrations(name, show=False)
            last = max(rows, key=lambda r: r.get('Id') or 0) if rows \
                else {}
            if last.get('Status') != 'completed':
                return None
            return not f.os('resource', 'provider', 'allocation', 'show',
                            last['UUID'], parse=True, show=False)
        f.wait("%s's migration to complete on its source" % name, done,
               timeout=120, interval=1)

    def mark(self, what):
        """Note what the step does now, for :func:`checks.timeline`."""
        self.marks.append((time.time(), what))

    # Checks --------------------------------------------------------------

    def expect(self, ok, message):
        if ok:
            self.out('  ok: ' + message)
        else:
            self.out('  FAILED: ' + message)
            self.failures.append(message)

    def check(self, step, before, after, taken, start, end, touched):
        names = [self.instance_name(n) for n in touched
                 if n in after.states]

        def untouched(group):
            return static_group(group) and not any(n in group
                                                   for n in names)
        failed = []
        failed += checks.changed_states(
            {k: v for k, v in before.states.items() if k not in touched},
            after.states)
        baseline = {h: {t: g for t, g in threads.items() if untouched(g)}
                    for h, threads in before.threads.items()}
        baseline = checks.live_threads(baseline, {
            h: records.alive(t) for h, t in baseline.items()})
        failed += checks.thread_moves(baseline, [
            (t - start, v) for t, v in taken['threads'] if v])
        failed += checks.changed_schemata(before.schemata, after.schemata,
                                          untouched)
        failed += checks.changed_allocations(before.allocations,
                                             after.allocations, touched)
        failed += checks.unowned_usage(after.usages, after.allocations)
        writes = None
        if step.kind == plan.COMPUTE:
            writes, exact = checks.first_tick_writes(
                [v for _, v in taken['agent']])
            if writes is None or writes:
                failed.append("the agent's first tick wrote %s" % writes)
            self.out("  the agent's first tick after its upgrade: %s "
                     "writes%s" % (writes, '' if exact else
                                   ' (read after more than one tick)'))
        measured = self.prometheus_gaps(start, end, failed, {
            after.ids.get(n) for n in touched})
        rate = checks.window_rate(taken['work'], start, end)
        found = checks.windows(taken['work'], start, end, WINDOW)
        lowest = min(r for _, r in found) if found else rate
        # Where a window fell, beside what the step was doing then.
        self.out("  high's %d-s windows and the step's actions, in s from "
                 "its start: %s" % (WINDOW, checks.timeline(
                     found, self.marks, start, _mib)))
        failed += checks.rate_drop(lowest, self.floor)
        for message in failed:
            self.expect(False, message)
        self.expect(not failed, '%s: states, threads (%d readings), '
                    'schemata, allocations, gaps%s, work rate' % (
                        step.name, len(taken['threads']),
                        ", agent's first tick" if writes is not None
                        else ''))
        self.rows.append((step.name, end - start, len(failed), rate,
                          lowest, measured, writes))

    def prometheus_gaps(self, start, end, failed, skip=()):
        """{source: largest gap} of each server's series in Prometheus.

        :param skip: servers booted or moved in the step, whose series
            start or pause with the move.

        Ceilometer's series of a server whose agent had no values for it
        at the step's start are not measured: they have no point to miss
        (:func:`~rdt_virt.cloud.upgrade_checks.without_values`).
        """
        found = {}
        layout = self.cloud.layout
        unmeasured = checks.without_values(records.prometheus_samples(
            layout, 'rdt_virt_instance_monitored',
            start - 2 * INTERVALS['agent'], start), start)
        if unmeasured:
            self.out("  Ceilometer's series not measured (no values from "
                     "the agent at the step's start): %s" % ', '.join(
                         sorted(unmeasured)))
        for source, metric, label in (
                ('agent', 'rdt_virt_instance_.*', 'instance_uuid'),
                ('ceilometer', 'ceilometer_.*', 'resource')):
            limit = 2 * INTERVALS[source]
            passed = set(skip) | (unmeasured if source == 'ceilometer'
                                  else set())
            # From before the step: a server whose series stopped for the
            # whole step is measured too.
            series = records.prometheus_series(
                layout, '{__name__=~"%s"}' % metric, start - limit, end)
            times = {k: v for k, v in checks.by_label(series, label).items()
                     if k not in passed and v and v[0] < start}
            measured, over = checks.gaps(times, start, end, limit)
            failed += ['Prometheus, %s: %s' % (source, o) for o in over]
            found[source] = max(measured.values()) if measured else None
        return found

    def gnocchi_gaps(self):
        """Each server's measures in Gnocchi over the whole upgrade."""
        self.out('\n== Gnocchi through the upgrade ==')
        f = self.flow
        end = time.time()
        for name, uuid in sorted(self.initial.items()):
            measures = f._gnocchi_measures(uuid, 'memory.bandwidth.total')
            # The finest means the archive policy keeps.
            granularity = min([float(m['granularity']) for m in measures] or
                              [0.0])
            times = [_epoch(m['timestamp']) for m in measures
                     if float(m['granularity']) == granularity]
            limit = 2 * max(INTERVALS['ceilometer'], granularity)
            # The last period is aggregated once it is over.
            gap = checks.largest_gap(times, self.started,
                                     end - granularity)
            self.expect(gap <= limit, '%s: memory.bandwidth.total in '
                        'Gnocchi, largest gap %.0f s (at most %.0f s at '
                        '%.0f-s granularity)' % (name, gap, limit,
                                                 granularity))

    def add_aetos(self):
        """Aetos, first released with 2025.2, if the new release has it."""
        if not installed(self.new.layout.bin, 'aetos'):
            return
        self.out('\n== Aetos, new in the upgraded cloud ==')
        self.new.register_services([prometheus.CATALOG_ENTRY])
        _, home = prometheus.aetos_conf(self.new.layout)
        self.new.uwsgi('aetos-api', env={'HOME': home})
        self.services.yield_cpu()
        self.new.wait_http('aetos-api', self.new.layout.url('aetos'))
        self.expect(True, 'aetos-api answers')

    def report(self):
        self.out('\n== The upgrade, step by step ==')
        self.out('  %-38s %6s %5s %9s %9s %8s %8s %6s' % (
            'step', 'secs', 'fail', 'MiB/s', 'lowest', 'agent', 'ceilo',
            'writes'))
        self.out('  %-38s %6s %5s %9s' % ('the least a window may have',
                                          '', '', _fmt(self.floor, _mib)))
        for name, secs, failed, rate, lowest, gaps, writes in self.rows:
            self.out('  %-38s %6.0f %5d %9s %9s %8s %8s %6s' % (
                name[:38], secs, failed, _fmt(rate, _mib),
                _fmt(lowest, _mib), _fmt(gaps.get('agent')),
                _fmt(gaps.get('ceilometer')),
                '-' if writes is None else writes))
        self.out('  (MiB/s: high\'s work over the step and its lowest '
                 '%.0f-s window; agent, ceilo: the largest gap in seconds '
                 'of any server\'s series in Prometheus)' % WINDOW)
        self.out('%d checks failed' % len(self.failures))

    def clear(self):
        """Delete the upgrade's servers, flavors and images."""
        f = self.flow
        self.out('\n== Delete the upgrade\'s servers ==')
        servers = f.os('server', 'list', parse=True, show=False) or []
        names = [s['Name'] for s in servers]
        if names:
            f.os('server', 'delete', '--wait', *names)
        f.os('flavor', 'delete', *CLEARED_FLAVORS, check=False)
        f.os('image', 'delete', *CLEARED_IMAGES, check=False)


def _count(path, text):
    try:
        with open(path, errors='replace') as f:
            return sum(text in line for line in f)
    except OSError:
        return 0


def _epoch(timestamp):
    import datetime
    return datetime.datetime.fromisoformat(timestamp).timestamp()


def _mib(rate):
    return rate * guest.WORK_UNIT_BYTES / 2.0 ** 20


def _fmt(value, convert=lambda v: v):
    return '-' if value is None else '%.2f' % convert(value) \
        if convert is _mib else '%.0f' % convert(value)
