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

"""The reference scenario on an emulated RDT host.

One protected guest and seven noisy neighbours share the emulated reference
host (two-socket Xeon Gold 6252: 8 MBA CLOSIDs, CMT and MBM), with
rdt-virt-agent monitoring every guest. Every guest runs the ``work``
program of :mod:`guest`: it walks memory and reports what it wrote on its
serial port, so the protected guest's *work rate* (MiB written per second,
by its own account) stands in for the experiment's Redis GET/s. The phases:

1. the protected guest alone;
2. with the seven noisy neighbours, no policy;
3. the neighbours' flavor at ``hw:mem_bw=10`` with the per-instance
   strategy: libvirt gives each its own group (``<memorytune>``), which takes
   all 7 MBA CLOSIDs left on this host;
4. the same with the shared strategy: rdt-virt-agent puts all seven into one
   group, ``rdtvirt-mb10``: one CLOSID;
5. the neighbours at ``hw:rdt_priority=low`` without a static cap and the
   protected guest at ``high``: rdt-virt-agent's controller throttles the
   neighbours while the protected guest is active;
6. the protected guest suspended through libvirt: the controller releases
   the neighbours;
7. the protected guest resumed: the controller protects it again.

In each phase, once the guests have settled, it takes repeated samples of
the protected guest's work rate, of every guest's memory bandwidth (the
emulated MBM counters of the group rdt-virt-agent monitors it with), and of
every guest's real CPU time, and prints
them as mean and standard deviation over the samples, in the experiment's
form (work rate and its share of the alone phase), with a chart when
matplotlib is installed (``rdt-virt[plot]``). In phases 5-7 it also records
a timeline, about a point a second, of every guest's work count and of the
controller's level of every guest (from the agent's state file), and
measures from each phase's event how long the controller took
(:mod:`rdt_virt.sandbox.report` has the definitions).

The memory bandwidth is emulated: the emulator charges each CPU-second of a
guest as memory traffic, and its MBA throttles slow the throttled vCPUs down
through CPU quotas and weights (:mod:`rdt_virt.emulator.enforce`). On this
host the guests thus contend for CPU time where the reference host's guests
contended for memory bandwidth; the doc's emulated-host page says what that
does and does not show.
"""

import json
import os
import subprocess
import sys
import time
import uuid as uuid_mod

from rdt_virt.agent import sampler
from rdt_virt.agent import state as state_mod
from rdt_virt.cmd import cli
from rdt_virt.emulator import threads as threads_mod
from rdt_virt import exception
from rdt_virt.libvirt import capabilities
from rdt_virt.libvirt import elements
from rdt_virt.policy import extra_specs
from rdt_virt.policy import fit
from rdt_virt.resctrl import fs
from rdt_virt.resctrl import schemata
from rdt_virt.sandbox import chart
from rdt_virt.sandbox import guest
from rdt_virt.sandbox import hostload
from rdt_virt.sandbox import launcher
from rdt_virt.sandbox import report

NOVA_NS = 'http://openstack.org/xmlns/libvirt/nova/1.1'
# The guests, phases and figures: see rdt_virt.sandbox.report.
NOISY = report.NOISY
PROTECTED = report.PROTECTED
GUESTS = report.GUESTS
NOISY_SPECS = report.NOISY_SPECS
PHASES = report.PHASES
MIB = report.MIB
# The agent's group name prefix ([rdt] group_prefix, as AGENT_CONF leaves it).
PREFIX = 'rdtvirt-'

AGENT_CONF = """[DEFAULT]
debug = false
log_file = {dir}/agent.log

[rdt]
resctrl_root = {resctrl}
kernel_release_file = {osrelease}
mb_strategy = {strategy}
default_group_l3_ways = 2
monitoring = true
state_file = {dir}/state.json

[rdt_agent]
libvirt_uri = {uri}
qemu_pid_dir = {qemu_pid_dir}
tick_interval = 2
sample_interval = {sample}
prometheus_port = 0
"""


def nova_metadata(name, flavor, specs):
    """A ``<nova:instance>`` element: the agent manages Nova's domains."""
    extra = ''.join('<nova:extraSpec name="%s">%s</nova:extraSpec>' % kv
                    for kv in sorted(specs.items()))
    return ('<nova:instance xmlns:nova="%s"><nova:name>%s</nova:name>'
            '<nova:flavor name="%s"><nova:vcpus>1</nova:vcpus>'
            '<nova:extraSpecs>%s</nova:extraSpecs></nova:flavor>'
            '</nova:instance>' % (NOVA_NS, name, flavor, extra))


class Scenario(object):
    """Runs the phases; ``out`` gets the report.

    :param settle: seconds between a phase's last boot and its first sample.
    :param sample: seconds per sample (also the agent's sample interval).
    :param samples: samples per phase.
    :param step: seconds between timeline points in the controller's phases.
    :param hold: seconds over which the protected guest must hold a work
        rate to count as having reached it.
    :param converge: the most seconds to wait for the controller's effect
        (protection, release) before a controller phase's steady part.
    :param quiet: seconds a controller phase settles after its event's
        effect, before its steady part.
    :param steady: the least seconds of a controller phase's steady part
        (its samples, then more timeline): level changes are counted, and
        the protected guest's minimum share taken, over all of it.
    :param host_load: CPU hogs to run outside any guest through phases
        5-7 (:class:`~rdt_virt.sandbox.hostload.HostLoad`).
    """

    def __init__(self, directory, out=sys.stdout, settle=8.0, sample=3.0,
                 samples=5, step=1.0, hold=3.0, converge=180.0,
                 quiet=report.QUIET_SECONDS, steady=report.STEADY_SECONDS,
                 host_load=0):
        self.dir = directory
        self.out = out
        self.settle = settle
        self.sample_time = sample
        self.samples = samples
        self.step = step
        self.hold = hold
        self.converge = converge
        self.quiet = quiet
        self.steady = steady
        self.host_load = host_load
        self.neighbour_wait = 120.0
        # Timeline points (see rdt_virt.sandbox.report), recorded while
        # self.recording names a phase.
        self.points = []
        self.recording = None
        self.t_start = time.monotonic()
        self.sandbox = launcher.Sandbox(
            os.path.join(directory, 'sandbox'), 'reference',
            cache_dir='/var/cache/rdt-virt/sandbox-libvirt')
        self.agent = None
        self.uuids = {}
        self.meters = {}
        self.vcpus = {}
        # Control groups other than the default one, after phases 3 and 4.
        self.groups = {}
        self.results = {}
        self.chart = None

    # Plumbing ----------------------------------------------------------

    def say(self, text=''):
        self.out.write(text + '\n')
        self.out.flush()

    def start(self):
        import libvirt

        self.sandbox.start()
        self.conn = libvirt.open(self.sandbox.uri)
        self.caps = capabilities.parse(
            self.conn.getCapabilities()).capabilities
        self.image = guest.write_image(os.path.join(self.dir, 'work.img'),
                                       'work')

    def stop(self):
        self.stop_agent()
        self.sandbox.stop()

    def start_agent(self, strategy):
        self.stop_agent()
        conf = os.path.join(self.dir, 'agent.conf')
        with open(conf, 'w') as f:
            f.write(AGENT_CONF.format(
                dir=self.dir, resctrl=self.sandbox.resctrl_root,
                osrelease=self.sandbox.kernel_release_file,
                strategy=strategy, uri=self.sandbox.uri,
                qemu_pid_dir=self.sandbox.paths.private('/run/libvirt') +
                '/qemu', sample=self.sample_time))
        self.agent = subprocess.Popen(
            [sys.executable, '-m', 'rdt_virt.cmd.agent', '--config-file',
             conf], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(self.dir, 'agent.err'), 'ab'))
        self.strategy = strategy

    def stop_agent(self):
        if self.agent is not None:
            self.agent.terminate()
            self.agent.wait(30)
            self.agent = None

    def cli(self, *args):
        return subprocess.run(
            [sys.executable, '-W', 'ignore', '-m', 'rdt_virt.cmd.cli',
             '--resctrl-root', self.sandbox.resctrl_root,
             '--kernel-release-file', self.sandbox.kernel_release_file,
             '--state-file',
             os.path.join(self.dir, 'state.json')] + list(args),
            check=True, capture_output=True, text=True).stdout

    def boot(self, name, specs):
        uid = self.uuids.setdefault(name, str(uuid_mod.uuid4()))
        serial = os.path.join(self.dir, name + '.serial')
        if os.path.exists(serial):
            os.unlink(serial)
        base = guest.domain_xml(
            name, self.image, vcpus=1, uuid=uid, serial_file=serial,
            metadata=nova_metadata(name, 'm1.noisy' if specs else 'm1.small',
                                   specs))
        policy = extra_specs.from_extra_specs(specs)
        plan = fit.fit(policy, self.caps, self.strategy)
        xml = elements.insert(base, elements.elements(policy, plan, 1))
        dom = self.conn.createXML(xml)
        self.meters[name] = guest.WorkMeter(serial)
        self.vcpus[name] = guest.vcpu_thread_ids(dom)
        return dom

    def destroy(self, names):
        for name in names:
            self.conn.lookupByName(name).destroy()
            self.meters.pop(name, None)
            self.vcpus.pop(name, None)

    def wait_for_rates(self, names):
        """Wait until the agent published fresh rates for ``names``."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            doc = state_mod.read(os.path.join(self.dir, 'state.json'))
            if doc:
                rates = {i.get('name'): i.get('mbm_total_bps')
                         for i in doc.get('instances', {}).values()}
                if all(rates.get(n) is not None for n in names):
                    return doc
            time.sleep(0.5)
        raise RuntimeError('rdt-virt-agent published no rates for %s; see '
                           '%s/agent.log' % (', '.join(names), self.dir))

    def wait_for_work(self, name, timeout=120):
        """Wait until *name*'s program runs (SeaBIOS has finished)."""
        deadline = time.monotonic() + timeout
        while self.meters[name].sample()[1] is None:
            if time.monotonic() > deadline:
                raise RuntimeError('guest %s reported no work within %ss; '
                                   'see %s' % (name, timeout,
                                               self.meters[name].path))
            time.sleep(0.5)

    def _cpu_seconds(self):
        out = {}
        for name, tids in self.vcpus.items():
            total = 0
            for tid in tids:
                try:
                    with open('/proc/%d/stat' % tid) as f:
                        total += threads_mod.parse_stat(f.read())[1]
                except (OSError, ValueError, IndexError):
                    pass
            out[name] = total / 1e9
        return out

    def _counter_dirs(self):
        """Each guest's counters directory, as rdt-virt-agent names it."""
        doc = state_mod.read(os.path.join(self.dir, 'state.json')) or {}
        out = {}
        for inst in doc.get('instances', {}).values():
            if inst.get('name') not in self.vcpus or not inst.get('counters'):
                continue
            parts = [inst.get('group') or '']
            if inst.get('mon_group'):
                parts += ['mon_groups', inst['mon_group']]
            out[inst['name']] = os.path.join(
                self.sandbox.resctrl_root,
                *[p for p in parts if p.strip('/')])
        return out

    @staticmethod
    def _mbm_bytes(dirs):
        """``{name: {domain: bytes, or None where it reads Unavailable}}``.

        A guest whose counters cannot be read, or read another sentinel
        (``Error``, ``Unassigned``), is left out.
        """
        out = {}
        for name, path in dirs.items():
            values = {}
            try:
                for dom in os.listdir(os.path.join(path, 'mon_data')):
                    with open(os.path.join(path, 'mon_data', dom,
                                           'mbm_total_bytes')) as f:
                        value = fs.parse_mon_value(f.read())
                    if value.value is None and (
                            value.reason != sampler.UNAVAILABLE):
                        raise ValueError(value.reason)
                    values[dom] = value.value
            except (OSError, ValueError):
                continue        # gone, or another sentinel
            out[name] = values
        return out

    @staticmethod
    def _mbm_rate(start, end, seconds):
        """Bytes/s between two :meth:`_mbm_bytes` of one guest, or None.

        An RMID reads ``Unavailable`` on a domain until its tasks have run
        there (as the kernel's does for a monitor that saw no traffic),
        and counts from zero from then on: a domain that said so at the
        start moved its whole end value in the window, and one that still
        says so moved nothing. A vCPU that a throttle keeps on one CPU can
        leave the other domain ``Unavailable`` for minutes. A counter that
        went back, or became ``Unavailable`` again, was reset: no rate.
        """
        if set(start) != set(end):
            return None
        moved = 0
        for dom, value in end.items():
            old = start[dom]
            if value is None:
                if old is not None:
                    return None
                continue
            if old is not None and value < old:
                return None
            moved += value - (old or 0)
        return moved / seconds

    def sample(self):
        """One sample: work rate, CPU and memory bandwidth over a window.

        The bandwidth comes from the emulated ``mbm_total_bytes`` of the
        group rdt-virt-agent monitors each guest with, read at both ends of
        the window (the agent's own rates cover its own intervals, which a
        loaded machine stretches).

        :returns: ``{'work': bytes/s of the protected guest, 'works':
            {name: bytes/s}, 'cpu': {name: share of one CPU}, 'mbm': {name:
            bytes/s}}``
        """
        dirs = self._counter_dirs()
        w0, c0, b0, t0 = (self._work_counts(), self._cpu_seconds(),
                          self._mbm_bytes(dirs), time.monotonic())
        self.wait(self.sample_time)
        w1, c1, b1, t1 = (self._work_counts(), self._cpu_seconds(),
                          self._mbm_bytes(dirs), time.monotonic())
        dt = t1 - t0
        works = {n: guest.work_rate(w0[n], w1[n]) for n in w1 if n in w0}
        return {'work': works.get(PROTECTED),
                'works': works,
                'cpu': {n: (c1[n] - c0.get(n, 0.0)) / dt for n in c1},
                'mbm': {n: rate for n, rate in (
                    (n, self._mbm_rate(b0[n], b1[n], dt))
                    for n in b1 if n in b0) if rate is not None}}

    def _work_counts(self):
        return {n: m.sample() for n, m in self.meters.items()}

    # The timeline ------------------------------------------------------

    def _levels(self, doc=None):
        """Each guest's controller level from the agent's state file."""
        if doc is None:
            doc = state_mod.read(os.path.join(self.dir, 'state.json')) or {}
        return {i['name']: i.get('level')
                for i in doc.get('instances', {}).values()
                if i.get('name') in self.meters}

    def _view(self, doc):
        """What the agent's last sample saw, for reading a timeline after.

        The sample's time, the protected guest's measured bandwidth (or
        why there is none) and demand, and each pool's pressure, active
        high instances and decision with its reason: a protection that
        comes a sample late shows which of them held it back.
        """
        mine = [(u, i) for u, i in doc.get('instances', {}).items()
                if i.get('name') == PROTECTED]
        controller = doc.get('host', {}).get('controller') or {}
        view = {'time': doc.get('time'), 'pools': {
            pool: [d.get('pressure'), d.get('active_high'),
                   d.get('decision'), d.get('reason')]
            for pool, d in (controller.get('domains') or {}).items()}}
        if mine:
            uuid, inst = mine[0]
            view.update(bps=inst.get('mbm_total_bps'),
                        why=inst.get('reason'),
                        demand=(controller.get('demand') or {}).get(uuid))
        return view

    def _in_force(self):
        """Each guest's MB throttle in force in the emulated resctrl.

        ``{name: value}`` of the guests whose monitoring group is in one of
        the agent's control groups with an ``MB`` value below the default
        group's (the lowest over the domains; the default group holds the
        unthrottled value in the host's unit); the others are left out.
        This is what the executor wrote, when it wrote it: the state
        file's ``level`` is the level in force at the last *sample*, so it
        shows a throttle one sample interval after the tick that put it in
        force.
        """
        root = self.sandbox.resctrl_root
        wanted = {PREFIX + 'm-' + self.uuids[n]: n
                  for n in self.meters if n in self.uuids}
        out = {}
        try:
            unthrottled = _lowest_mb(os.path.join(root, 'schemata'))
            groups = [g for g in os.listdir(root) if g.startswith(PREFIX)]
        except (OSError, exception.InvalidSchemata):
            return out
        for group in groups:
            try:
                held = [wanted[m] for m in os.listdir(
                    os.path.join(root, group, 'mon_groups')) if m in wanted]
                if not held:
                    continue
                mb = _lowest_mb(os.path.join(root, group, 'schemata'))
            except (OSError, exception.InvalidSchemata):
                continue        # gone or being rewritten meanwhile
            if None not in (mb, unthrottled) and mb < unthrottled:
                out.update((n, mb) for n in held)
        return out

    def point(self):
        """Record one timeline point (see :mod:`report`)."""
        doc = state_mod.read(os.path.join(self.dir, 'state.json')) or {}
        point = {'t': time.monotonic() - self.t_start,
                 'phase': self.recording,
                 'units': {n: m.sample()[1] for n, m in self.meters.items()},
                 'cpu': self._cpu_seconds(),
                 'levels': self._levels(doc),
                 'in_force': self._in_force(),
                 'agent': self._view(doc)}
        self.points.append(point)
        return point

    def now(self):
        return time.monotonic() - self.t_start

    def wait(self, seconds):
        """Sleep; in a recorded phase, record a point every step."""
        if self.recording is None:
            time.sleep(seconds)
            return
        end = time.monotonic() + seconds
        while True:
            self.point()
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(self.step, left))

    def watch(self, done, timeout):
        """Record points until ``done(points)`` or *timeout* seconds.

        :returns: whether *done* came true.
        """
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.point()
            if done(self.points):
                return True
            time.sleep(self.step)
        return False

    def measure(self, key, title, settle=None):
        names = [n for n in GUESTS if n in self.vcpus]
        self.wait_for_work(PROTECTED)
        # The neighbours' programs too, for their own work rates; but a
        # neighbour throttled from its start can take minutes through
        # SeaBIOS on a busy machine: its work rate is then missing from
        # the samples rather than the phase failing.
        deadline = time.monotonic() + self.neighbour_wait
        for name in names:
            while (self.meters[name].sample()[1] is None and
                   time.monotonic() < deadline):
                self.wait(0.5)      # the timeline goes on meanwhile
        self.wait(self.settle if settle is None else settle)
        start = self.now()
        doc = self.wait_for_rates(names)
        samples = [self.sample() for _i in range(self.samples)]
        self.results[key] = report.summarize(samples)
        if key in report.CONTROLLER_PHASES or key == 'alone':
            # The whole steady part, not only its samples: a cycle of
            # throttles and releases is longer than they are. Alone, the
            # same span shows how far the guest's own work rate strays
            # with nobody beside it.
            self.wait(max(0.0, start + self.steady - self.now()))
            self.point()
            work, cpu = report.reference(self.results, key)
            self.results[key].update(report.steady(
                self.points, start, self.now(), self.hold,
                work[0] if work else None, cpu[0] if cpu else None))
        self.say('== Phase %d: %s ==' % (
            [k for k, _t in PHASES].index(key) + 1, title))
        self.say()
        self.say('resctrl groups (rdt-virt groups):')
        self.say(_indent(self.cli('groups')))
        self.say('per guest, emulated counters (rdt-virt top):')
        doc = state_mod.read(os.path.join(self.dir, 'state.json')) or doc
        self.say(_indent(cli.top_table(doc)))
        work = self.results[key]['work']
        self.say('protected guest work rate: %s MiB/s over %d samples of '
                 '%.0fs' % (report._pm(work, 1 / MIB), self.samples,
                            self.sample_time))
        self.say()

    # Phases --------------------------------------------------------------

    def run(self):
        self.say('rdt-virt reference scenario on the emulated reference '
                 'host')
        self.say('(2-socket Xeon Gold 6252 profile: L3 CAT 7ff, MBA 10% '
                 'steps with 8 CLOSIDs, CMT+MBM).')
        self.say('EMULATED: memory traffic is each guest\'s CPU time at '
                 'a fixed rate, and MBA')
        self.say('throttles slow the throttled vCPUs down with CPU quotas '
                 'and weights: the guests')
        self.say('contend for this machine\'s CPUs where the reference '
                 'host\'s contended for memory.')
        self.say()
        self.start()
        try:
            self.start_agent('per-instance')
            self.say('emulated MBA effect: %s' % _effect(
                self.sandbox.control.status().get('mba_effect')))
            self.say()
            self.boot(PROTECTED, {})
            self.recording = 'alone'
            self.measure(*PHASES[0])
            # Its points served its own figures; the timeline and chart
            # show the controller's phases.
            self.recording = None
            self.points = []

            for name in NOISY:
                self.boot(name, {})
            self.measure(*PHASES[1])

            self.destroy(NOISY)
            for name in NOISY:
                self.boot(name, NOISY_SPECS)
            self.measure(*PHASES[2])
            self.groups['per-instance'] = self.control_groups()

            self.destroy(NOISY)
            self.start_agent('shared')
            for name in NOISY:
                self.boot(name, NOISY_SPECS)
            self.measure(*PHASES[3])
            self.groups['shared'] = self.control_groups()
            self.run_controller()
        finally:
            self.recording = None
            self.stop()
        report.add_shares(self.results)
        self.summary()
        return self.results

    def run_controller(self):
        """Phases 5-7: the controller protects, releases, protects again.

        The same agent (shared strategy) goes on; the neighbours come back
        as ``low`` instances without a static cap, the protected guest as
        a ``high`` one. Each phase records a timeline and measures from its
        event: the neighbours started, the protected guest suspended, the
        protected guest resumed.
        """
        self.results['host_load'] = self.host_load
        if self.host_load:
            self.say('(phases 5-7 beside %d CPU hogs outside the guests)'
                     % self.host_load)
        with hostload.HostLoad(self.host_load):
            if self.host_load:
                self._floor_beside_load()
            self._controller_phases(list(NOISY))

    def _floor_beside_load(self):
        """Phase 4's guests beside the host load: the best a throttle gives.

        The neighbours are held at ``hw:mem_bw=10``, the MBA floor of the
        reference profile, which is the lowest any controller can hold
        them at. Where the host's own work leaves the guests less than the
        protected guest and seven floored neighbours want together, the
        protected guest gets less than alone even so (in the emulation
        the CPU time is the memory bus, and it is saturated at the floor),
        and no throttle can do better: phases 5-7 are judged against this
        where it is lower than the guest alone beside the load.
        """
        self.wait(self.settle)
        found = self._reference('floor')
        self.say('(the neighbours at the floor beside the host load: the '
                 'protected guest %s MiB/s, %.0f%% of alone on the idle '
                 'host; the neighbours %s MiB/s)' % (
                     report._pm(found['work'], 1 / MIB),
                     100 * found['share'],
                     report._pm(found['noisy_work'], 1 / MIB)))

    def _alone_beside_load(self):
        """The protected guest alone beside the host load: 5-7's reference.

        What the host's own work leaves the guest is not the neighbours'
        doing, and no throttle of theirs gives it back: protection is
        judged against what the guest gets alone on the host as it is.
        """
        found = self._reference('reference')
        self.say('(reference for phases 5-7: the protected guest alone '
                 'beside the host load, %s MiB/s, %.0f%% of alone on the '
                 'idle host)' % (report._pm(found['work'], 1 / MIB),
                                 100 * found['share']))

    def _reference(self, key):
        """Sample as a phase does and keep it as ``results[key]``.

        :returns: what was kept, with ``share``: its work rate as a share
            of phase 1's (not kept).
        """
        found = report.summarize([self.sample()
                                  for _i in range(self.samples)])
        kept = self.results[key] = {
            'work': found['work'],
            'cpu': found['guests'].get(PROTECTED, {}).get('cpu'),
            'noisy_work': found['noisy_work'],
            'host_load': self.host_load}
        return dict(kept, share=found['work'][0] /
                    self.results['alone']['work'][0])

    def _controller_phases(self, noisy):
        def protected(since):
            # By its work rate and by its vCPU time alike.
            return lambda points: report.time_to_rate(
                points, PROTECTED, since, target, self.hold) is not None \
                and report.time_to_rate(
                    points, PROTECTED, since, cpu_target, self.hold,
                    measure=report.window_cpu) is not None

        self.destroy(noisy + [PROTECTED])
        self.recording = 'controller'
        self.boot(PROTECTED, report.HIGH_SPECS)
        self.wait_for_work(PROTECTED)
        self.wait_for_rates([PROTECTED])
        self.wait(self.settle)
        if self.host_load:
            self._alone_beside_load()
        work, cpu = report.reference(self.results, 'controller')
        target = report.TARGET_SHARE * work[0]
        cpu_target = report.TARGET_SHARE * cpu[0]
        first = self.now()
        for name in noisy:
            self.boot(name, report.LOW_SPECS)
            self.point()        # starts take long on a busy machine
        since = self.now()
        self.say('(phase 5: seven low neighbours started in %.1f s; times '
                 'count from the last start)' % (since - first))
        self.watch(protected(since), self.converge)
        self.groups['controller'] = self.control_groups()
        self.measure(*PHASES[4], settle=self.quiet)
        phase = self.results['controller']
        phase['time_to_target'] = report.time_to_rate(
            self.points, PROTECTED, since, target, self.hold)
        phase['time_to_cpu'] = report.time_to_rate(
            self.points, PROTECTED, since, cpu_target, self.hold,
            measure=report.window_cpu)
        phase['throttled'] = sum(
            1 for n in noisy if self.points[-1]['levels'].get(n) is not None)

        self.recording = 'idle'
        dom = self.conn.lookupByName(PROTECTED)
        since = self.now()
        dom.suspend()
        self.watch(lambda points: report.time_until(
            points, since, noisy, throttled=False) is not None,
            self.converge)
        self.measure(*PHASES[5], settle=self.quiet)
        self.results['idle']['time_to_release'] = report.time_until(
            self.points, since, noisy, throttled=False)

        self.recording = 'resumed'
        since = self.now()
        dom.resume()
        self.watch(protected(since), self.converge)
        self.measure(*PHASES[6], settle=self.quiet)
        phase = self.results['resumed']
        phase['time_to_target'] = report.time_to_rate(
            self.points, PROTECTED, since, target, self.hold)
        phase['time_to_cpu'] = report.time_to_rate(
            self.points, PROTECTED, since, cpu_target, self.hold,
            measure=report.window_cpu)
        phase['time_to_throttle'] = report.time_to_first_throttle(
            self.points, since, noisy)
        self.recording = None

    def control_groups(self):
        rows = json.loads(self.cli('groups', '--json'))
        return sorted(r['group'] for r in rows
                      if r['kind'] == 'control' and r['owner'] != 'default')

    def summary(self):
        results = self.results
        self.say('== The experiment: protected guest\'s work rate '
                 '(mean ± sd over %d samples) ==' % self.samples)
        self.say()
        self.say(_indent(report.experiment_table(results)))
        self.say('== Memory bandwidth per guest (MB/s, emulated MBM of the '
                 'group rdt-virt-agent monitors it with) ==')
        self.say()
        self.say(_indent(report.guest_table(results, 'mbm', 1e-6, '%.1f')))
        self.say('  bandwidth samples per phase: %s' %
                 ', '.join('%d. %s' % (i, results[k].get('mbm_samples', '-'))
                           for i, (k, _t) in enumerate(PHASES, 1)
                           if k in results))
        self.say()
        self.say('== Real CPU time of each guest\'s vCPU (% of one CPU) ==')
        self.say()
        self.say(_indent(report.guest_table(results, 'cpu', 100.0, '%.1f')))
        self.say('== Each guest\'s own work rate (MiB/s) ==')
        self.say()
        self.say(_indent(report.guest_table(results, 'work', 1 / MIB,
                                            '%.1f')))
        if any(k in results for k in report.CONTROLLER_PHASES):
            self.say('== The controller (phases 5-7), against its targets '
                     '==')
            self.say()
            self.say(_indent(report.controller_table(results)))
        self.say('CLOSIDs taken by the noisy guests, per-instance strategy: '
                 '%d (%s)' % (len(self.groups['per-instance']),
                              ', '.join(self.groups['per-instance'])))
        self.say('CLOSIDs taken by the noisy guests, shared strategy:       '
                 '%d (%s)' % (len(self.groups['shared']),
                              ', '.join(self.groups['shared'])))
        if 'controller' in self.groups:
            self.say('Control groups while the controller protects:        '
                     '%d (%s)' % (len(self.groups['controller']),
                                  ', '.join(self.groups['controller'])))
        path = os.path.join(self.dir, 'results.json')
        with open(path, 'w') as f:
            json.dump(results, f, indent=1, sort_keys=True)
        self.say('Results: %s' % path)
        if self.points:
            path = os.path.join(self.dir, 'timeline.json')
            with open(path, 'w') as f:
                json.dump(self.points, f)
            self.say('Timeline: %s' % path)
        try:
            self.chart = chart.write(report.chart_data(results, self.points),
                                     os.path.join(self.dir, 'scenario.png'))
            self.say('Chart:   %s' % self.chart)
        except chart.Unavailable as e:
            self.say('Chart:   not written (%s)' % e)


def _effect(status):
    if not status:
        return 'none'
    if not status.get('backend'):
        return 'none (%s); throttles scale the counters only' % (
            status.get('reason'))
    return 'CPU quota and weight per throttled thread (%s at %s)' % (
        status['backend'], status['mount'])


def _lowest_mb(path):
    """The lowest ``MB`` value of a schemata file, or None without MB."""
    with open(path) as f:
        mb = schemata.parse(f.read()).get('MB')
    return min(mb.values()) if mb else None


def _indent(text):
    return ''.join('  ' + line + '\n' for line in text.splitlines())
