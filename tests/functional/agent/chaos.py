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

"""Faults under load: a seeded chaos run against the agent.

One run is an emulated host (the FUSE resctrl on the reference profile),
hundreds of fake QEMU processes whose vCPUs are real threads, and the
agent in a process of its own (:mod:`chaosagent`). Each round churns the
instances (creates, destroys, percentage changes, with or without their
libvirt events) and injects faults at random points:

* ``remount``: resctrl unmounted and mounted again, every group gone;
* ``libvirtd``: libvirt unreachable for a tick, then back (a restart);
* ``kill``: the agent SIGKILLed after the N-th privileged call of the
  round, i.e. in the middle of a plan, then started afresh;
* ``refuse``: the emulated kernel refuses mkdir, rmdir, rename, writes to
  ``tasks``/``schemata`` or reads with ENOSPC, EBUSY or EIO (and the
  texts of ``last_cmd_status`` the kernel would give);
* ``foreign``: another tool's control and monitoring groups appear and
  disappear, holding threads of their own;
* ``drift``: another tool moves a vCPU thread back to the default group.

The state file must parse after every agent step, and every published
rate must lie between 0 and the host's ceiling (all CPUs at full memory
traffic). Then the faults stop, and after ``settle_ticks`` ticks the host
must hold no orphaned group, no misplaced thread, no foreign group or
thread touched by the agent (the emulator's mutation log says which
process window wrote what), and the last tick must write nothing.

Everything random comes from ``random.Random(seed)``: the same seed gives
the same instances, names, policies and faults in the same order. Thread
ids and timings differ between runs, which is the noise a real host has
too. A failed run names its seed; ``tools/chaos.py --seed N`` runs it
again.

Domains come from a file the agent reads rather than from a real libvirtd
(see doc/source/admin/reliability-chaos.inc for why).
"""

import collections
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid as uuid_mod

from rdt_virt.agent import model
from rdt_virt.agent import state
from rdt_virt.emulator import launcher
from rdt_virt.emulator import profiles
from rdt_virt.policy import groups as groups_mod
from tests.functional.agent import chaosagent
from tests.functional.agent import fakeqemu

PREFIX = 'rdtvirt-'
TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
MUTATIONS = ('write', 'mkdir', 'rmdir', 'rename')
FAULTS = ('remount', 'libvirtd', 'kill', 'refuse', 'foreign', 'drift')

# Names a tenant or a careless operator could give a domain: they must not
# reach a group name or break anything that prints or parses them.
HOSTILE_NAMES = (
    'instance-%08x',
    'ünïcødé-%d-\U0001f642',
    'x' * 300 + '-%d',
    'new\nline-%d',
    '../../etc/passwd-%d',
    'a/b/../c-%d',
    '\x1b[2J\x1b[H-%d',
    'rdtvirt-mb10 %d',
    'qemu-1-x-vcpus_0-%d',
    ' tab\tand space %d ',
)

# (operation, glob, errno, last_cmd_status text)
REFUSALS = (
    ('mkdir', '/rdtvirt-*', 'ENOSPC', 'Kernel out of memory\n'),
    ('mkdir', '/*mon_groups/rdtvirt-m-*', 'EBUSY', 'Out of RMIDs\n'),
    ('mkdir', '/*mon_groups/rdtvirt-m-*', 'ENOSPC', 'Out of RMIDs\n'),
    ('write', '/*tasks', 'EIO', ''),
    ('write', '/rdtvirt-*/schemata', 'EIO', ''),
    ('write', '/rdtvirt-*/schemata', 'EBUSY', ''),
    ('write', '/schemata', 'EIO', ''),
    ('rmdir', '/rdtvirt-*', 'EBUSY', ''),
    ('rename', '/*mon_groups/rdtvirt-m-*', 'EIO', ''),
    ('read', '/rdtvirt-*/tasks', 'EIO', ''),
    ('read', '/*mon_data/*', 'EIO', ''),
)
PERCENTS = (10, 10, 20, 20, 30, 50, 70, 100)
# Seconds a group the kernel refused stays blocked ([rdt_agent]).
RETRY_INTERVAL = 1.0


class Report(object):
    """What one run did and found."""

    def __init__(self, seed):
        self.seed = seed
        self.rounds = 0
        self.faults = collections.Counter()
        self.churn = collections.Counter()
        self.ticks = 0
        self.agent_errors = 0
        self.state_checks = 0
        self.violations = []
        self.max_rate = 0.0
        self.seconds = 0.0
        self.instances_max = 0
        self.agent_seconds = collections.Counter()
        # CPU seconds of every process of the run (driver, emulator,
        # agents, fake QEMUs): what it costs a machine of its own.
        self.cpu_seconds = 0.0

    @property
    def ok(self):
        return not self.violations

    def summary(self):
        return ('seed %d: %s; %d rounds, %d ticks, %d state checks, '
                'up to %d instances; churn %s; faults %s; agent errors '
                'logged %d; highest rate %.0f B/s; %.1f s (%.1f CPU s)'
                % (self.seed, 'OK' if self.ok else '%d VIOLATIONS' % len(
                    self.violations), self.rounds, self.ticks,
                   self.state_checks, self.instances_max,
                   dict(sorted(self.churn.items())),
                   dict(sorted(self.faults.items())), self.agent_errors,
                   self.max_rate, self.seconds, self.cpu_seconds))


class Violation(Exception):
    pass


class Chaos(object):
    """One seeded run; :meth:`run` returns a :class:`Report`.

    :param instances: instances booted before the first round.
    :param churn: at most this many creates, destroys and changes each.
    :param settle_ticks: ticks allowed to converge once faults stop.
    """

    def __init__(self, seed, rounds=10, instances=200, churn=10,
                 settle_ticks=3, sample_every=1, workdir=None, log=None):
        self.seed = seed
        self.rng = random.Random(seed)
        self.order = list(FAULTS)
        self.rng.shuffle(self.order)
        self.rounds = rounds
        self.initial = instances
        self.churn = churn
        self.settle_ticks = settle_ticks
        self.sample_every = sample_every
        self.workdir = workdir
        self.log = log or (lambda text: None)
        self.report = Report(seed)
        self.instances = {}         # uuid -> model.Instance
        self.foreign = {}           # group path -> set of tids
        self.foreign_schemata = {}  # control group -> text written
        self.foreign_names = set()
        self.foreign_tids = []
        self.where_foreign = {}     # tid -> (ctrl, mon) set by the driver
        self.injected = []          # groups with an injected rate
        self.agent = None
        self.window = []
        self.host = self.emulator = self.agent_log = None
        self.seq = 0
        self.count = 0
        self.up = True
        self.profile = profiles.get_profile('reference')
        cpus = len(launcher.host_cpus()[0])
        self.ceiling = cpus * profiles.CounterModel().mbm_bytes_per_cpu_second
        self.l3_bytes = sum(d.l3_size for d in self.profile.domains)

    # Set-up ------------------------------------------------------------------

    def _setup(self):
        self.dir = tempfile.mkdtemp(prefix='rdt-chaos-',
                                    dir=self.workdir)
        self.root = os.path.join(self.dir, 'resctrl')
        os.mkdir(self.root)
        self.emulator = launcher.mount(
            self.root, 'reference', limbo_delay=0.05,
            log_path=os.path.join(self.dir, 'emulator.log'),
            control_socket=os.path.join(self.dir, 'control'))
        self.client = self.emulator.client
        self.host = fakeqemu.FakeHost(os.path.join(self.dir, 'proc'))
        self.foreign_tids = self.host.pool.spawn(6)
        self.state_file = os.path.join(self.dir, 'state.json')
        self.domains_file = os.path.join(self.dir, 'domains.json')
        self.agent_log = open(os.path.join(self.dir, 'agent.log'), 'a')
        for _ in range(self.initial):
            self._create()
        self._publish()
        self._start_agent()

    def _teardown(self):
        self._stop_agent()
        try:
            if self.host is not None:
                self.host.close()
        finally:
            if self.emulator is not None:
                self.emulator.stop()
            if self.agent_log is not None:
                self.agent_log.close()

    def _settings(self):
        return {'domains': self.domains_file, 'conf': {
            'rdt': {'resctrl_root': self.root,
                    'state_file': self.state_file,
                    'group_prefix': PREFIX},
            'rdt_agent': {'proc_root': os.path.join(self.dir, 'proc'),
                          'qemu_pid_dir': None,
                          'retry_interval': RETRY_INTERVAL,
                          'reconnect_interval': 0.1,
                          'rotation_interval': 3600.0,
                          'sample_interval': 1.0, 'prometheus_port': 0}}}

    def _start_agent(self):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [TOP] + [p for p in os.environ.get('PYTHONPATH', '').split(
                os.pathsep) if p]))
        self.agent = subprocess.Popen(
            [sys.executable, '-m', 'tests.functional.agent.chaosagent',
             json.dumps(self._settings())], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.agent_log, text=True,
            bufsize=1, cwd=TOP, env=env)
        line = self.agent.stdout.readline()
        if not line:
            raise RuntimeError('the agent did not start; see %s'
                               % self.agent_log.name)

    def _stop_agent(self):
        if self.agent is not None and self.agent.poll() is None:
            self.agent.stdin.close()
            self.agent.kill()
        if self.agent is not None:
            self.agent.wait()
            self.agent.stdout.close()

    # The world -----------------------------------------------------------

    def _uuid(self):
        return str(uuid_mod.UUID(int=self.rng.getrandbits(128), version=4))

    def _policy(self):
        roll = self.rng.random()
        if roll < 0.55:
            pct = self.rng.choice(PERCENTS)
            return model.BandwidthPolicy('percent', pct, pct, model.SHARED)
        if roll < 0.6:
            pct = self.rng.choice(PERCENTS)
            return model.BandwidthPolicy('percent', pct, pct,
                                         model.INSTANCE)
        return None

    def _create(self):
        self.count += 1
        uuid = self._uuid()
        name = self.rng.choice(HOSTILE_NAMES)
        name = name % self.count if '%' in name else name
        inst = model.Instance(uuid, name, self.count,
                              bandwidth=self._policy(),
                              monitor=self.rng.random() < 0.9)
        self.host.start(uuid, vcpus=self.rng.choice((1, 2, 2, 4)),
                        others=1)
        self.instances[uuid] = inst
        return uuid

    def _destroy(self, uuid):
        del self.instances[uuid]
        self.host.stop(uuid)

    def _change(self, uuid):
        inst = self.instances[uuid]
        self.instances[uuid] = model.Instance(
            inst.uuid, inst.name, inst.domain_id, bandwidth=self._policy(),
            monitor=inst.monitor)

    def _publish(self):
        chaosagent.write_domains(self.domains_file, self.instances,
                                 self.up)
        self.report.instances_max = max(self.report.instances_max,
                                        len(self.instances))

    # The agent -----------------------------------------------------------

    def _skip_log(self):
        """Forget mutations made outside the agent's windows."""
        entries = self.client.log(self.seq)
        if entries:
            self.seq = entries[-1]['seq']

    def _command(self, **cmd):
        """One agent step; returns its answer, None if it was killed."""
        self._skip_log()
        start = time.monotonic()
        try:
            self.agent.stdin.write(json.dumps(cmd) + '\n')
            self.agent.stdin.flush()
            line = self.agent.stdout.readline()
        except BrokenPipeError:
            line = ''
        self.report.agent_seconds[cmd['op']] += time.monotonic() - start
        self.window = self._check_window()
        self._check_state()
        if not line:
            self.agent.wait()
            self.log('  agent killed (%s)' % self.agent.returncode)
            self._stop_agent()
            self._start_agent()
            return None
        answer = json.loads(line)
        self.report.agent_errors += answer.get('errors', 0)
        if cmd['op'] == 'tick':
            self.report.ticks += 1
        return answer

    def _check_window(self):
        """No mutation of the agent's touched another tool's groups."""
        entries = self.client.log(self.seq)
        if entries:
            self.seq = entries[-1]['seq']
        for e in entries:
            if e['op'] not in MUTATIONS:
                continue
            paths = [e['path']] + ([e['data']] if e['op'] == 'rename'
                                   else [])
            for path in paths:
                parts = set(str(path).strip('/').split('/'))
                if parts & self.foreign_names:
                    self._violation('agent touched a foreign group: %s %s'
                                    % (e['op'], path))
            if e['op'] == 'write' and e['path'].endswith('tasks'):
                tids = {int(t) for t in str(e['data']).replace(
                    ',', ' ').split() if t.isdigit()}
                touched = tids & set(self.where_foreign)
                if touched:
                    self._violation('agent moved foreign threads %s to %s'
                                    % (sorted(touched), e['path']))
        return [e for e in entries if e['op'] in MUTATIONS]

    def _check_state(self):
        if not os.path.exists(self.state_file):
            return
        self.report.state_checks += 1
        doc = state.read(self.state_file)
        if doc is None:
            self._violation('state file %s does not parse'
                            % self.state_file)
            return
        rows = list(doc.get('instances', {}).items()) + [
            ('host', doc.get('host', {}))]
        for uuid, row in rows:
            for key in ('mbm_total_bps', 'mbm_local_bps'):
                value = row.get(key)
                if value is None:
                    continue
                self.report.max_rate = max(self.report.max_rate, value)
                if not 0 <= value <= self.ceiling:
                    self._violation('%s %s = %r outside [0, %.0f]'
                                    % (uuid, key, value, self.ceiling))
            occ = row.get('llc_occupancy_bytes')
            if occ is not None and not 0 <= occ <= self.l3_bytes:
                self._violation('%s llc_occupancy_bytes = %r outside '
                                '[0, %d]' % (uuid, occ, self.l3_bytes))

    def _violation(self, text):
        if text not in self.report.violations:
            self.log('  VIOLATION ' + text)
            self.report.violations.append(text)

    # Faults --------------------------------------------------------------

    def _path(self, *parts):
        return os.path.join(self.root, *parts)

    def _write(self, rel, text):
        fd = os.open(self._path(rel), os.O_WRONLY)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)

    def _foreign_appear(self):
        n = len(self.foreign_names)
        free = [t for t in self.foreign_tids if t not in self.where_foreign]
        if not free:
            return False
        tid = self.rng.choice(free)
        ctrls = [g for g in self.foreign if '/' not in g]
        name = 'other-%d' % n
        if len(ctrls) < 2 and self.rng.random() < 0.5 and (
                self._foreign_ctrl(name, tid)):
            pass
        else:
            name = 'othermon-%d' % n
            try:
                os.mkdir(self._path('mon_groups', name))
                self._write('mon_groups/%s/tasks' % name, '%d\n' % tid)
            except OSError as e:
                self.log('  foreign group %s not made: %s' % (name, e))
                return False
            self.foreign['mon_groups/' + name] = {tid}
            self.where_foreign[tid] = (None, name)
        self.foreign_names.add(name)
        return True

    def _foreign_ctrl(self, name, tid):
        try:
            os.mkdir(self._path(name))
        except OSError as e:
            # No CLOSID left: the other tool makes a monitoring group.
            self.log('  foreign group %s not made: %s' % (name, e))
            return False
        self.foreign[name] = set()
        self.foreign_names.add(name)
        self._write(name + '/schemata', 'MB:0=50;1=50\n')
        self._write(name + '/tasks', '%d\n' % tid)
        self.foreign[name] = {tid}
        self.foreign_schemata[name] = 'MB:0=50;1=50'
        self.where_foreign[tid] = (name, None)
        return True

    def _foreign_vanish(self):
        if not self.foreign:
            return False
        group = self.rng.choice(sorted(self.foreign))
        try:
            os.rmdir(self._path(group))
        except OSError as e:
            self.log('  foreign group %s not removed: %s' % (group, e))
            return False
        self._forget_foreign(group)
        return True

    def _forget_foreign(self, group):
        for tid in self.foreign.pop(group):
            self.where_foreign.pop(tid, None)
        self.foreign_schemata.pop(group, None)

    def _refuse(self):
        for _ in range(self.rng.randint(1, 2)):
            op, glob, err, text = self.rng.choice(REFUSALS)
            self.client.fail(op, glob, err, count=self.rng.randint(1, 3),
                             skip=self.rng.randint(0, 4), status=text)

    def _drift(self):
        candidates = sorted(u for u in self.instances
                            if u in self.host.procs)
        if not candidates:
            return False
        uuid = self.rng.choice(candidates)
        tid = min(self.host.vcpu_tids(uuid))
        try:
            self._write('tasks', '%d\n' % tid)
        except OSError:
            return False
        return True

    def _traffic(self):
        """Counters of two monitoring groups grow at known rates.

        The fake vCPUs are idle; injected rates (on every domain, at most
        a quarter of the ceiling in all) give the counters something to
        lose in a remount or a re-created group.
        """
        for group in self.injected:
            try:
                self.client.clear(group)
            except Exception:
                pass    # gone with its instance or a remount
        mons = []
        for ctrl in [None] + [g for g in self._listdir()
                              if g.startswith(PREFIX)]:
            base = (ctrl,) if ctrl else ()
            mons += ['/'.join(base + ('mon_groups', m)) for m in
                     self._listdir(*(base + ('mon_groups',)))
                     if m.startswith(PREFIX)]
        self.injected = self.rng.sample(mons, min(2, len(mons)))
        domains = len(self.profile.domains)
        for group in self.injected:
            rate = self.rng.uniform(0, self.ceiling / 8 / domains)
            self.client.set_rate(group, rate, event='mbm_total_bytes')
            self.client.set_rate(group, rate * 0.8,
                                 event='mbm_local_bytes')

    # A round -------------------------------------------------------------

    def _round(self, number):
        rng = self.rng
        events = []
        live = sorted(self.instances)
        for _ in range(rng.randint(0, self.churn)):
            uuid = self._create()
            self.report.churn['create'] += 1
            if rng.random() < 0.5:
                events.append(('started', uuid))
        for uuid in rng.sample(live, min(len(live) - 1,
                                         rng.randint(0, self.churn))):
            self._destroy(uuid)
            self.report.churn['destroy'] += 1
            if rng.random() < 0.5:
                events.append(('stopped', uuid))
        for uuid in rng.sample(sorted(self.instances),
                               min(len(self.instances),
                                   rng.randint(0, self.churn // 2))):
            self._change(uuid)
            self.report.churn['change'] += 1
            if rng.random() < 0.5:
                events.append(('changed', uuid))
        rng.shuffle(events)

        faults = []
        # The first rounds force one fault kind each, so that even a short
        # run has every kind; random ones come on top.
        forced = self.order[number] if number < len(self.order) else None
        if forced == 'remount' or rng.random() < 0.12:
            self.client.remount()
            for group in list(self.foreign):
                self._forget_foreign(group)
            faults.append('remount')
        self.up = forced != 'libvirtd' and rng.random() >= 0.12
        if not self.up:
            faults.append('libvirtd')
        roll = 0.0 if forced == 'foreign' else rng.random()
        if roll < 0.3 and self._foreign_appear():
            faults.append('foreign')
        elif roll < 0.45 and self._foreign_vanish():
            faults.append('foreign')
        if (forced == 'drift' or rng.random() < 0.25) and self._drift():
            faults.append('drift')
        # Last: the other tools' own writes above are not refused.
        if forced == 'refuse' or rng.random() < 0.5:
            self._refuse()
            faults.append('refuse')
        kill = forced == 'kill' or rng.random() < 0.2
        calls = rng.randint(1, 5 if forced == 'kill' else 40)
        self._publish()

        self.log('round %d: %d instances, %d events, faults %s%s'
                 % (number, len(self.instances), len(events), faults,
                    ' kill after %d calls' % calls if kill else ''))
        killed = False
        if kill:
            self._command(op='kill_after', calls=calls)
        for kind, uuid in events:
            if self._command(op='event', kind=kind, uuid=uuid) is None:
                killed = True
        if self._command(op='tick') is None:
            killed = True
        if killed:
            faults.append('kill')
        elif kill:
            # The plan was shorter than the count: disarm.
            self._command(op='kill_after', calls=10 ** 9)
        if number % self.sample_every == 0:
            self._command(op='sample')
        self.client.clear_faults()
        self._traffic()
        if not self.up:
            self.up = True
            self._publish()
        self.report.faults.update(faults)
        self.report.rounds += 1

    # Convergence ---------------------------------------------------------

    def _settle(self):
        self.client.clear_faults()
        self.up = True
        self._publish()
        self._command(op='kill_after', calls=10 ** 9)
        # Groups refused during the faults are retried after this.
        time.sleep(RETRY_INTERVAL)
        for _ in range(self.settle_ticks):
            # Freed RMIDs leave limbo (0.05 s) before the next tick.
            time.sleep(0.1)
            self._command(op='tick')
        # A converged tick changes nothing; it may only try again for a
        # group the kernel has no room for.
        for e in self.window:
            if e['result'] == 'ok' or e['op'] != 'mkdir' or (
                    e['result'] not in ('ENOSPC', 'EBUSY')):
                self._violation('tick %d after the faults: %s %s %s'
                                % (self.settle_ticks, e['op'], e['path'],
                                   e['result']))
        self._command(op='sample')
        self._verify()

    def _listdir(self, *parts):
        try:
            return sorted(os.listdir(self._path(*parts)))
        except FileNotFoundError:
            return []

    def _tasks(self, *parts):
        try:
            with open(self._path(*(parts + ('tasks',)))) as f:
                return {int(t) for t in f.read().split()}
        except FileNotFoundError:
            return set()

    def _snapshot(self):
        ctrls = [g for g in self._listdir() if g not in (
            'info', 'mon_groups', 'mon_data') and os.path.isdir(
                self._path(g))]
        where = {}
        mons = {}
        for ctrl in ctrls:
            for tid in self._tasks(ctrl):
                where[tid] = (ctrl, None)
        for ctrl in [None] + ctrls:
            base = (ctrl,) if ctrl else ()
            for mon in self._listdir(*(base + ('mon_groups',))):
                mons[mon] = ctrl
                for tid in self._tasks(*(base + ('mon_groups', mon))):
                    where[tid] = (ctrl, mon)
        return ctrls, mons, where

    def _expected_group(self, inst):
        bw = inst.bandwidth
        if bw is None:
            return None
        if bw.group == model.SHARED:
            return groups_mod.shared_group(PREFIX, bw.value)
        return groups_mod.instance_group(PREFIX, inst.uuid)

    def _verify(self):
        ctrls, mons, where = self._snapshot()
        doc = state.read(self.state_file) or {'instances': {}}
        needed = {self._expected_group(i) for i in self.instances.values()}
        for ctrl in ctrls:
            if ctrl.startswith(PREFIX) and ctrl not in needed:
                self._violation('orphaned control group %s' % ctrl)
        full = len(ctrls) >= self.profile.num_closids - 1
        for mon, parent in mons.items():
            if not mon.startswith(PREFIX):
                continue
            kind = groups_mod.parse(PREFIX, mon)
            inst = self.instances.get(kind[1]) if kind else None
            if inst is None or not inst.monitor:
                self._violation('orphaned monitoring group %s in %s'
                                % (mon, parent or '/'))
        for uuid, inst in sorted(self.instances.items()):
            self._verify_instance(inst, ctrls, mons, where, full,
                                  doc['instances'].get(uuid, {}))
        for group, tids in sorted(self.foreign.items()):
            if '/' not in group and group not in ctrls:
                self._violation('foreign group %s removed' % group)
            elif '/' in group and group.split('/')[-1] not in mons:
                self._violation('foreign group %s removed' % group)
        for tid, loc in sorted(self.where_foreign.items()):
            if where.get(tid, (None, None)) != loc:
                self._violation('foreign thread %d moved from %s to %s'
                                % (tid, loc, where.get(tid)))
        for group, text in sorted(self.foreign_schemata.items()):
            with open(self._path(group, 'schemata')) as f:
                if text not in f.read().replace(' ', ''):
                    self._violation('schemata of foreign group %s changed'
                                    % group)

    def _verify_instance(self, inst, ctrls, mons, where, full, row):
        uuid = inst.uuid
        tids = self.host.vcpu_tids(uuid)
        locs = {where.get(t, (None, None)) for t in tids}
        expected = self._expected_group(inst)
        if len(locs) != 1:
            self._violation('threads of %s split over %s' % (uuid, locs))
            return
        ctrl, mon = locs.pop()
        if expected is not None and expected not in ctrls:
            if not full:
                self._violation('group %s of %s missing with CLOSIDs free'
                                % (expected, uuid))
            expected = None
        if ctrl != expected:
            self._violation('%s in %s, not %s' % (uuid, ctrl, expected))
        own = groups_mod.mon_group(PREFIX, uuid)
        dedicated = expected is not None and not expected.startswith(
            PREFIX + 'mb')
        if mon is not None and (mon != own or not inst.monitor or
                                dedicated):
            self._violation('%s in monitoring group %s' % (uuid, mon))
        if own in mons and mons[own] != ctrl:
            self._violation('monitoring group of %s in %s, threads in %s'
                            % (uuid, mons[own], ctrl))
        if inst.monitor and mon is None and not dedicated and not row.get(
                'reason'):
            self._violation('%s monitored, without a monitoring group, '
                            'and no reason published' % uuid)

    # Running -------------------------------------------------------------

    @staticmethod
    def _cpu():
        return sum(u.ru_utime + u.ru_stime for u in (
            resource.getrusage(resource.RUSAGE_SELF),
            resource.getrusage(resource.RUSAGE_CHILDREN)))

    def run(self):
        start = time.monotonic()
        cpu = self._cpu()
        try:
            self._setup()
            self._command(op='tick')
            self._command(op='sample')
            for number in range(self.rounds):
                self._round(number)
            self._settle()
        finally:
            self._teardown()
            self.report.seconds = time.monotonic() - start
            self.report.cpu_seconds = self._cpu() - cpu
        if self.report.ok:
            shutil.rmtree(self.dir, ignore_errors=True)
        else:
            self.log('kept %s (emulator.log, agent.log) for seed %d'
                     % (self.dir, self.seed))
        return self.report
