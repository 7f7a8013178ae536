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

"""rdt-virt-agent's work: ticks, the event fast path and sampling.

:class:`Agent` wires the pieces together. It never writes resctrl itself:

* a **tick** reads the desired state (libvirt, ``/proc``) and resctrl under
  resctrl's flock, plans with :func:`rdt_virt.agent.reconcile.plan` and
  applies the plan through the executor; on a converged host it reads and
  writes nothing else;
* the **fast path** does the same for the one domain a libvirt event names,
  reading only that instance's groups, so a started guest is throttled and
  monitored within milliseconds;
* a **sample** reads the counters of every monitored instance, turns them
  into rates and publishes the host state file and the Prometheus metrics.

:meth:`Agent.run` is the daemon's loop: a single thread that waits for
events and timers, so ticks, events and samples never run concurrently.
"""

import dataclasses
import os
import queue as stdlib_queue
import time
import zlib

from oslo_log import log as logging

from rdt_virt.agent import ceiling as ceiling_mod
from rdt_virt.agent import counters as counters_mod
from rdt_virt.agent import domains
from rdt_virt.agent import executor as executor_mod
from rdt_virt.agent import model
from rdt_virt.agent import publish
from rdt_virt.agent import reconcile
from rdt_virt.agent import rotation as rotation_mod
from rdt_virt.agent import sampler
from rdt_virt.agent import state
from rdt_virt import exception
from rdt_virt.policy import default_group
from rdt_virt.policy import groups as groups_mod
from rdt_virt.resctrl import fs

LOG = logging.getLogger(__name__)
# Every monitoring group's tasks are read at least once in this many ticks.
MON_VERIFY_TICKS = 10
# Seconds between a domain's stop and the tick that removes its groups.
CLEANUP_DELAY = 1.0


@dataclasses.dataclass
class TickStats:
    """What one tick (or fast path run) did."""

    actions: int = 0
    writes: int = 0
    cpu: float = 0.0         # CPU seconds of this process
    wall: float = 0.0
    skipped: str = None      # why nothing was done


class Agent(object):
    """The agent of one compute host.

    :param conf: the oslo.config object (``[rdt]`` and ``[rdt_agent]``).
    :param resctrl: a :class:`~rdt_virt.resctrl.fs.Resctrl` for reading.
    :param source: a :class:`~rdt_virt.agent.domains.LibvirtSource` or any
        object with ``connected``, ``connect()``, ``instances()``,
        ``instance(uuid)`` and an ``events`` queue.
    :param procfs: a :class:`~rdt_virt.agent.procfs.ProcFS`.
    :param executor: a :class:`~rdt_virt.agent.executor.Executor`.
    """

    def __init__(self, conf, resctrl, source, procfs, executor,
                 clock=time.monotonic, wall=time.time):
        self.conf = conf
        self.opts = conf.rdt_agent
        self.resctrl = resctrl
        self.source = source
        self.procfs = procfs
        self.executor = executor
        self.clock = clock
        self.wall = wall
        self.settings = reconcile.Settings(
            prefix=conf.rdt.group_prefix,
            default_l3_ways=conf.rdt.default_group_l3_ways,
            place_extra=self.opts.place_extra_threads)
        self.rotation = rotation_mod.Rotation(self.opts.rotation_interval)
        # MBM counters rotate like RMIDs on counter-assignment hosts.
        self.counter_rotation = rotation_mod.Rotation(
            self.opts.rotation_interval)
        self.counter_info = None     # what the state file says of them
        self.tracker = sampler.RateTracker()
        self.ceiling_source = None
        # Groups holding an RMID at the last tick, and the monitoring
        # groups whose removal since is accounted for already (drained:
        # free at once; a stopped instance's: counted by the rotation).
        self._rmid_groups = None
        self._accounted = set()
        self._held = 0               # monitoring groups left draining
        self.caps = None
        self._fingerprint = None
        self.instances = {}
        self.threads = {}
        self.placements = {}
        self.rates = {}
        self.blocked = {}            # name -> (reason, until)
        self._generation = {}        # group or mon group -> int
        # (group, mon group) -> (parent's tasks, tasks) at the last read.
        self._mon_cache = {}
        self._rmid_cap = None        # (budget, until) after ENOSPC
        self._next_connect = 0.0
        self._warned = set()
        self.budget = None           # RMID budget of the last tick
        self.rmids_used = 0
        self.closids_used = 0
        self._full_due = None        # when a full tick was asked for
        self.last_doc = None
        self.last_tick = TickStats()
        self.totals = {'ticks': 0, 'writes': 0, 'events': 0, 'errors': 0}
        self.event_latencies = []
        self._placed_at = {}         # uuid -> when the fast path read it

    # Capabilities ----------------------------------------------------------

    def refresh_caps(self):
        """Re-read capabilities when the mount changed; False if unmounted."""
        rc = self.resctrl
        if not rc.is_mounted():
            self.caps = None
            self._fingerprint = None
            return False
        try:
            fingerprint = (tuple(sorted(os.listdir(rc.path(None, None,
                                                           'info')))),
                           rc.mount_options(), rc.io_alloc_states())
        except OSError:
            return False
        if self.caps is None or fingerprint != self._fingerprint:
            self.caps = rc.capabilities()
            self._fingerprint = fingerprint
            self._set_ceiling()
            LOG.info('resctrl at %s: features %s, %d CLOSIDs, %d RMIDs',
                     rc.root, ', '.join(sorted(self.caps.features)) or
                     'none', self.caps.num_closids, self.caps.num_rmids)
            try:
                default_group.reserved_schemata(
                    self.caps, self.conf.rdt.default_group_l3_ways)
            except exception.InvalidConfig as e:
                LOG.error('%s; the default group keeps its L3 mask', e)
        return True

    def _set_ceiling(self):
        mon = self.caps.monitor
        value, source = ceiling_mod.host_ceiling(
            self.opts.memory_bandwidth_ceiling,
            len(mon.domain_ids) if mon else 1)
        self.tracker.ceiling = value
        self.ceiling_source = source
        LOG.info('Memory bandwidth ceiling %.0f GB/s (%s): faster counter '
                 'growth is taken for a counter reset',
                 value / ceiling_mod.GB, source)

    # Reading resctrl -------------------------------------------------------

    def _mon_tasks(self, group, mon, ctrl_tasks, wanted):
        """Tasks of a monitoring group, from the cache when that is safe.

        A converged tick should not read every monitoring group: their
        threads are known from the last read as long as nothing was
        written since, the parent's tasks did not change (a thread came
        or went) and the group belongs to a live instance (a dead thread
        in a cached set must not keep an unused group alive). Each group
        is still read every MON_VERIFY_TICKS ticks, which catches a
        thread moved straight from it to its parent.
        """
        key = (group, mon)
        cached = self._mon_cache.get(key)
        if cached is not None and mon in wanted and (
                cached[0] == ctrl_tasks) and (
                zlib.crc32(mon.encode()) % MON_VERIFY_TICKS !=
                self.totals['ticks'] % MON_VERIFY_TICKS):
            return cached[1]
        tasks = frozenset(self.resctrl.read_tasks(group, mon))
        self._mon_cache[key] = (ctrl_tasks, tasks)
        return tasks

    def _schemata(self, name):
        """A group's schemata; None for another tool's unreadable one.

        A pseudo-locked group answers ENODEV when its cache domain is
        offline; nothing of another tool's may stop a tick.
        """
        rc = self.resctrl
        if rc.owns(name) or reconcile.is_libvirt_group(name):
            return rc.read_schemata(name)
        try:
            return rc.read_schemata(name)
        except exception.GroupNotFound:
            raise
        except (exception.ResctrlError, exception.InvalidSchemata) as e:
            LOG.debug('Ignoring the schemata of group %s: %s', name, e)
            return None

    def _read_group(self, name, monitor, wanted, only):
        rc = self.resctrl
        group = model.GroupState(
            name, tasks=frozenset(rc.read_tasks(name)),
            schemata=self._schemata(name))
        if monitor and (rc.owns(name) or reconcile.is_libvirt_group(name)):
            mons = rc.list_mon_groups(name)
            group.mon_names = frozenset(mons)
            group.mon_groups = {m: self._mon_tasks(name, m, group.tasks,
                                                   wanted)
                                for m in mons if only is None or m in only}
        return group

    def read_snapshot(self, scope=None, instances=(), only=None):
        """Read resctrl; ``scope``: only these control groups.

        :param instances: uuids of the live instances, whose monitoring
            groups may come from the cache.
        :param only: names of the monitoring groups whose tasks to read
            (None: all); the others are only listed. For the fast path,
            which plans one instance.
        """
        rc = self.resctrl
        monitor = self.caps.monitor is not None
        wanted = {self.settings.prefix + 'm-' + u for u in instances}
        root = model.GroupState(None, schemata=rc.read_schemata(None))
        if monitor:
            mons = rc.list_mon_groups(None)
            root.mon_names = frozenset(mons)
            # The default group's own tasks are never read (every thread
            # of the host): its cache entries depend on nothing else.
            root.mon_groups = {m: self._mon_tasks(None, m, None, wanted)
                               for m in mons if rc.owns(m) and (
                                   only is None or m in only)}
        groups = {None: root}
        names = rc.list_groups() if scope is None else sorted(
            n for n in scope if n is not None)
        for name in names:
            try:
                groups[name] = self._read_group(name, monitor, wanted,
                                                only)
            except exception.GroupNotFound:
                continue
        return model.Snapshot(groups, complete=scope is None)

    def _read_or_warn(self, *args, **kwargs):
        """read_snapshot, or None (with a warning) when resctrl refuses.

        A kernel that answers EIO for one group's tasks must not make the
        agent log a traceback every tick; nothing can be planned safely
        without knowing where threads are, so the step is skipped and
        the next one tries again.
        """
        try:
            return self.read_snapshot(*args, **kwargs)
        except (exception.ResctrlError, OSError) as e:
            LOG.warning('Cannot read resctrl (%s); trying again later', e)
            return None

    def _account(self, snap):
        """RMIDs and CLOSIDs in use, and monitoring groups of others."""
        ctrl = [n for n in snap.groups if n is not None]
        foreign = 0
        ours = 0
        for group in snap.groups.values():
            for mon in group.mon_names:
                if self.resctrl.owns(mon):
                    ours += 1
                else:
                    foreign += 1
        rmids = {(n, None) for n in ctrl}
        rmids |= {(n, m) for n, g in snap.groups.items() for m in g.mon_names}
        gone = (self._rmid_groups or set()) - rmids - self._accounted
        if gone and self.caps.monitor and (
                'llc_occupancy' in self.caps.monitor.features):
            # Removed without a look at their occupancy, by anyone (libvirt
            # at a domain's stop, a rmdir of a control group): in limbo.
            self.rotation.released(self.clock(), len(gone))
        self._rmid_groups = rmids
        self._accounted = set()
        self.closids_used = 1 + len(ctrl)
        self.rmids_used = 1 + len(ctrl) + ours + foreign if (
            self.caps.monitor) else 0
        return foreign, ours

    def _own_mon_groups(self, snap):
        """``{uuid: (control group, monitoring group)}`` of the agent's."""
        found = {}
        for name, group in snap.groups.items():
            for mon in group.mon_names:
                kind = groups_mod.parse(self.settings.prefix, mon)
                if kind and kind[0] == 'monitor':
                    found[kind[1]] = (name, mon)
        return found

    def _draining(self, outside):
        """Monitoring groups to empty but keep: their RMID has not drained.

        A removed group's RMID stays in limbo until its cache occupancy is
        below ``max_threshold_occupancy`` on every domain; read here, on
        the group that still exists, it tells when removing it frees the
        RMID at once (see :mod:`rdt_virt.agent.rotation`).
        """
        mon = self.caps.monitor
        if (mon is None or mon.max_threshold_occupancy is None or
                'llc_occupancy' not in mon.features):
            return set()
        threshold = mon.max_threshold_occupancy
        draining = set()
        for group, name in outside.values():
            try:
                values = self.resctrl.read_mon_data(
                    group, name, events=['llc_occupancy'])
            except exception.ResctrlError:
                continue
            for dom in values.values():
                occ = dom.get('llc_occupancy')
                if occ is None or occ.value is None or (
                        occ.value >= threshold):
                    draining.add(name)
                    break
        return draining

    def _assign_counters(self, placements, snap, now):
        """Give MBM counters to the groups that count instances.

        Counter-assignment hosts only (see :mod:`rdt_virt.agent.counters`).
        Returns the number of writes.
        """
        rc = self.resctrl
        mon = self.caps.monitor
        events = mon.mbm_events
        owner = {}
        for uuid, place in placements.items():
            if place.counters is not None:
                owner[tuple(place.counters)] = uuid
        spare = set()
        for name in snap.groups:
            kind = groups_mod.parse(self.settings.prefix, name or '')
            if kind and kind[0] == 'shared' and (name, None) not in owner:
                spare.add((name, None))
        actual = {}
        for key in list(owner) + sorted(spare):
            try:
                actual[key] = rc.read_assignments(*key)
            except exception.ResctrlError:
                owner.pop(key, None)
                spare.discard(key)
        try:
            available = rc.read_available_counters()
        except exception.ResctrlError as e:
            LOG.warning('Cannot read the free MBM counters: %s', e)
            return 0
        budget = counters_mod.budget(mon, available, actual)
        # First time round, those that have counters keep them.
        self.counter_rotation.adopt(
            [u for key, u in owner.items()
             if counters_mod.has_all(actual.get(key, {}), events)],
            budget, now)
        window = self.counter_rotation.update(sorted(owner.values()),
                                              budget, now)
        wanted = {key: (uuid, uuid in window) for key, uuid in owner.items()}
        wanted.update({key: (None, False) for key in spare})
        actions = counters_mod.actions(wanted, actual, events)
        outcome = self.executor.apply(actions) if actions else None
        for action in actions:
            if action.state == fs.ASSIGNED:
                # A new counter starts from zero: restart the rates.
                key = action.mon_group or action.group
                self._generation[key] = self._generation.get(key, 0) + 1
        with_counters = sum(
            1 for key, (_u, want) in wanted.items() if want and key in owner)
        self.counter_info = {
            'counter_mode': mon.assign_mode,
            'mbm_counters_total': min(
                (n for _d, n in mon.num_mbm_cntrs), default=0),
            'mbm_counters_available': min(available.values(), default=0),
            'counter_budget': budget,
            'counter_coverage': round(self.counter_rotation.coverage, 4),
            'instances_with_counters': with_counters,
        }
        return outcome.writes if outcome else 0

    # Planning and applying --------------------------------------------------

    def _blocked(self, now):
        for name in [n for n, (_r, until) in self.blocked.items()
                     if until <= now]:
            del self.blocked[name]
        return {n: r for n, (r, _u) in self.blocked.items()}

    def _budget(self, foreign, now):
        budget = rotation_mod.rmid_budget(self.caps, self.opts.rmid_budget,
                                          foreign)
        if self._rmid_cap is not None:
            if now < self._rmid_cap[1]:
                budget = min(budget, self._rmid_cap[0])
            else:
                self._rmid_cap = None
        self.budget = budget
        return budget

    def _apply(self, result, now, ours=0):
        if result.actions:
            # What the cache says no longer holds.
            self._mon_cache.clear()
        outcome = self.executor.apply(result.actions)
        if outcome.blocked:
            self._unplace(result.placements, outcome.blocked)
        retry = now + self.opts.retry_interval
        for name, reason in outcome.blocked.items():
            self.blocked[name] = (reason, retry)
        if outcome.rmids_exhausted:
            created = sum(1 for _g, m in outcome.created if m)
            self._rmid_cap = (ours + created, retry)
        if outcome.rmids_busy:
            # Free RMIDs ran out while others sit in limbo: slow down.
            self.rotation.busy(now)
            LOG.warning('RMIDs are busy in limbo; monitoring groups now '
                        'rotate assuming %.0f s of limbo',
                        self.rotation.drain_time)
        for group, mon in outcome.created:
            key = mon or group
            self._generation[key] = self._generation.get(key, 0) + 1
        for text in result.warnings:
            if text not in self._warned:
                LOG.warning('%s', text)
        self._warned = set(result.warnings)
        executor_mod.log_repairs(result.repairs, outcome)
        if result.needs_full:
            self.request_full()
        return outcome

    @staticmethod
    def _unplace(placements, blocked):
        """Correct placements whose group the kernel refused to create."""
        for uuid, place in list(placements.items()):
            if place.group in blocked:
                # Its threads did not move: they are where they were,
                # normally the default group.
                placements[uuid] = dataclasses.replace(
                    place, group=None, mon_group=None, counters=None,
                    reason=blocked[place.group])
            elif place.mon_group in blocked:
                placements[uuid] = dataclasses.replace(
                    place, mon_group=None, counters=None,
                    reason=blocked[place.mon_group])

    def _threads(self, instances):
        found = {}
        for uuid, inst in instances.items():
            threads = self.procfs.instance_threads(uuid, inst.name)
            if threads is not None:
                found[uuid] = threads
        if self.settings.place_extra and found:
            vhost = self.procfs.vhost_threads()
            for uuid, threads in list(found.items()):
                extra = vhost.get(threads.pid)
                if extra:
                    found[uuid] = dataclasses.replace(
                        threads, others=tuple(sorted(
                            set(threads.others) | set(extra))))
        return found

    def _ensure_connected(self, now):
        if self.source.connected:
            return True
        if now < self._next_connect:
            return False
        self._next_connect = now + self.opts.reconnect_interval
        try:
            self.source.connect()
        except Exception as e:
            LOG.warning('Cannot connect to libvirt: %s', e)
            return False
        return True

    def tick(self):
        """One full reconciliation; returns :class:`TickStats`."""
        cpu0, start = time.process_time(), self.clock()
        stats = TickStats()
        self._full_due = None
        if not self._ensure_connected(start):
            stats.skipped = 'libvirt unreachable'
            return self._done(stats, cpu0, start)
        try:
            instances = self.source.instances()
        except Exception as e:
            LOG.warning('Cannot list domains: %s', e)
            stats.skipped = 'libvirt unreachable'
            return self._done(stats, cpu0, start)
        if not self.refresh_caps():
            stats.skipped = 'resctrl not mounted'
            LOG.warning('resctrl is not mounted at %s', self.resctrl.root)
            return self._done(stats, cpu0, start)
        for uuid in set(self.instances) - set(instances):
            self.procfs.forget(uuid)
        threads = self._threads(instances)
        now = self.clock()
        with self.resctrl.lock():
            snap = self._read_or_warn(instances=instances)
            if snap is None:
                stats.skipped = 'resctrl unreadable'
                return self._done(stats, cpu0, start)
            foreign, ours = self._account(snap)
            cands = reconcile.mon_candidates(instances, threads, self.caps,
                                             self.settings)
            budget = self._budget(foreign, now)
            mons = self._own_mon_groups(snap)
            self.rotation.adopt(set(mons) & set(cands), budget, now)
            held = [m for m in mons if m not in self.rotation.window]
            window = self.rotation.update(cands, budget, now,
                                          held=len(held))
            draining = self._draining(
                {u: g for u, g in mons.items() if u not in window})
            self._held = len(draining)
            result = reconcile.plan(instances, threads, snap, self.caps,
                                    self.settings, window,
                                    self._blocked(now), draining)
            outcome = self._apply(result, now, ours)
            self._accounted = {(a.group, a.mon_group)
                               for a in result.actions
                               if isinstance(a, model.RemoveMonGroup)}
            if self.caps.monitor and self.caps.monitor.assigns_counters:
                outcome.writes += self._assign_counters(result.placements,
                                                        snap, now)
        self.instances = instances
        self.threads = threads
        self.placements = result.placements
        stats.actions = len(result.actions)
        stats.writes = outcome.writes
        return self._done(stats, cpu0, start)

    def _done(self, stats, cpu0, start):
        stats.cpu = time.process_time() - cpu0
        stats.wall = self.clock() - start
        self.last_tick = stats
        self.totals['ticks'] += 1
        self.totals['writes'] += stats.writes
        return stats

    def fast_path(self, uuid, event_time=None):
        """Place one (re)started domain now; returns TickStats."""
        cpu0, start = time.process_time(), self.clock()
        stats = TickStats()
        inst = self.source.instance(uuid)
        # Capabilities only change with a remount, which ticks notice.
        if inst is None or not (self.caps or self.refresh_caps()):
            stats.skipped = 'not a running Nova domain'
            return stats
        self.procfs.forget(uuid)
        threads = self._threads({uuid: inst})
        if uuid not in threads:
            stats.skipped = 'QEMU process not found'
            self.request_full()
            return stats
        now = self.clock()
        scope = reconcile.groups_of(inst, self.caps, self.settings)
        before = self.placements.get(uuid)
        if before is not None and before.group is not None:
            # Its policy may have changed: where its threads are now must
            # be read too, or they would look as if in the default group.
            scope = set(scope) | {before.group}
        with self.resctrl.lock():
            snap = self._read_or_warn(
                scope, set(self.instances) | {uuid},
                only={self.settings.prefix + 'm-' + uuid})
            if snap is None:
                stats.skipped = 'resctrl unreadable'
                self.request_full(CLEANUP_DELAY)
                return stats
            cands = reconcile.mon_candidates({uuid: inst}, threads,
                                             self.caps, self.settings)
            window = self.rotation.window
            if cands:
                budget = self.budget
                if budget is None:
                    # No full tick yet: other tools' groups are unknown.
                    budget = self._budget(0, now)
                window = self.rotation.admit(uuid, budget, now, self._held)
            result = reconcile.plan({uuid: inst}, threads, snap, self.caps,
                                    self.settings, window,
                                    self._blocked(now))
            outcome = self._apply(result, now)
        self.instances[uuid] = inst
        self.threads[uuid] = threads[uuid]
        self.placements[uuid] = result.placements[uuid]
        self._placed_at[uuid] = start
        stats.actions = len(result.actions)
        stats.writes = outcome.writes
        stats.cpu = time.process_time() - cpu0
        stats.wall = self.clock() - start
        self.totals['writes'] += stats.writes
        if event_time is not None:
            self.event_latencies.append(self.clock() - event_time)
            del self.event_latencies[:-1000]
        return stats

    def stopped(self, uuid):
        """A domain stopped: remove its groups, without asking libvirt.

        A full tick would list every domain, which waits for libvirt while
        other domains start; the stopped instance's groups are known.
        Whatever cannot go yet (threads still exiting) is left to a full
        tick a little later.
        """
        self.procfs.forget(uuid)
        self.counter_rotation.forget(uuid)
        mon = self.caps.monitor if self.caps else None
        # Without CMT the kernel frees RMIDs at once: no limbo.
        self.rotation.forget(uuid, self.clock() if (
            mon and 'llc_occupancy' in mon.features) else None)
        self._placed_at.pop(uuid, None)
        inst = self.instances.pop(uuid, None)
        self.threads.pop(uuid, None)
        self.placements.pop(uuid, None)
        if inst is None or self.caps is None:
            self.request_full(CLEANUP_DELAY)
            return
        scope = reconcile.groups_of(inst, self.caps, self.settings)
        with self.resctrl.lock():
            snap = self._read_or_warn(scope, self.instances)
            if snap is None:
                self.request_full(CLEANUP_DELAY)
                return
            actions, warnings = reconcile.cleanup(
                uuid, inst, snap, self.caps, self.settings, self.instances)
            if actions:
                self._mon_cache.clear()
            outcome = self.executor.apply(actions)
            # The rotation counted this RMID in limbo already.
            self._accounted |= {(a.group, a.mon_group) for a in actions
                                if isinstance(a, model.RemoveMonGroup)}
        self.totals['writes'] += outcome.writes
        if warnings or outcome.failures:
            self.request_full(CLEANUP_DELAY)

    @property
    def full_requested(self):
        """True when a full tick was asked for (now or soon)."""
        return self._full_due is not None

    def request_full(self, delay=0.0):
        """Ask for a full tick within ``delay`` seconds."""
        due = self.clock() + delay
        if self._full_due is None or due < self._full_due:
            self._full_due = due

    def handle(self, event):
        """React to one :class:`~rdt_virt.agent.domains.Event`."""
        self.totals['events'] += 1
        if event.kind in (domains.STARTED, domains.CHANGED):
            if self._placed_at.get(event.uuid, -1.0) >= event.time:
                # Placed since this event was sent (libvirt announces a
                # start as started and resumed): nothing new to read.
                return
            self.fast_path(event.uuid, event.time)
        elif event.kind == domains.STOPPED:
            self.stopped(event.uuid)
        else:
            self.request_full()

    # Sampling --------------------------------------------------------------

    def _source_key(self, counters):
        group, mon = counters
        key = mon or group
        return (group if mon is None else 'mon', key,
                self._generation.get(key, 0))

    def _read_counters(self, counters):
        """One Reading of a group's counters, each file timed on its own.

        The kernel reads the hardware counter when the file is read, so
        the time of each read is what its value belongs to; a single
        time for all files would blur the rates by however long reading
        the others took.
        """
        group, mon = counters
        rc = self.resctrl
        values = {}
        times = {}
        events = sorted(self.caps.monitor.features)
        for dom in self.caps.monitor.domain_ids:
            values[dom] = {}
            for event in events:
                path = rc.path(group, mon, 'mon_data', 'mon_L3_%02d' % dom,
                               event)
                t0 = self.clock()
                try:
                    with open(path) as f:
                        text = f.read()
                except FileNotFoundError:
                    if not os.path.isdir(os.path.dirname(path)):
                        raise exception.GroupNotFound(path=path,
                                                      group=mon or group)
                    continue
                except OSError as e:
                    # Some kernels answer EIO for a counter in error.
                    values[dom][event] = fs.MonValue(None,
                                                     os.strerror(e.errno))
                    continue
                times[(dom, event)] = (t0 + self.clock()) / 2
                values[dom][event] = fs.parse_mon_value(text)
        return sampler.Reading(source=self._source_key(counters),
                               time=self.clock(), values=values,
                               times=times)

    def sample(self):
        """Read counters, compute rates, publish; returns the document."""
        rates = {}
        for uuid, place in sorted(self.placements.items()):
            if uuid not in self.instances:
                continue
            if place.counters is None:
                rates[uuid] = sampler.Rates(reason=place.reason)
                continue
            try:
                reading = self._read_counters(place.counters)
            except (exception.ResctrlError, OSError) as e:
                rates[uuid] = sampler.Rates(reason='counters unreadable')
                LOG.debug('Cannot read counters of %s: %s', uuid, e)
                continue
            rates[uuid] = self.tracker.update(uuid, reading)
            if self.counter_info is not None and (
                    uuid not in self.counter_rotation.window) and (
                    rates[uuid].mbm_total_bps is None):
                rates[uuid] = dataclasses.replace(
                    rates[uuid], reason=counters_mod.R_NO_COUNTER)
        self.tracker.forget(set(rates))
        self.rates = rates
        caps = self.caps
        doc = publish.build(
            self.wall(), self.opts.sample_interval, self.instances,
            self.placements, rates, self.rotation,
            rmids_total=caps.num_rmids if caps else 0,
            rmids_used=self.rmids_used,
            closids_total=caps.num_closids if caps else 0,
            closids_used=self.closids_used, mon_budget=self.budget or 0,
            extra=self._host_extra())
        try:
            state.write(self.conf.rdt.state_file, doc)
        except OSError as e:
            LOG.warning('Cannot write the state file %s: %s',
                        self.conf.rdt.state_file, e)
        self.last_doc = doc
        return doc

    def _host_extra(self):
        extra = {'bandwidth_ceiling_bps': self.tracker.ceiling,
                 'counter_resets': self.tracker.jumps}
        extra.update(self.counter_info or {})
        return extra

    # The loop --------------------------------------------------------------

    def _safe(self, func, *args):
        try:
            return func(*args)
        except Exception:
            self.totals['errors'] += 1
            LOG.exception('%s failed', getattr(func, '__name__', func))

    def run(self, stop):
        """Serve until ``stop`` (a threading.Event) is set."""
        # The event queue is the OS's even under eventlet (domains.native).
        empty = (domains.native('queue').Empty, stdlib_queue.Empty)
        next_tick = self.clock()
        next_sample = next_tick + self.opts.sample_interval
        while not stop.is_set():
            now = self.clock()
            due = min(next_tick, next_sample)
            if self._full_due is not None:
                due = min(due, self._full_due)
            wait = max(0.0, due - now)
            try:
                event = self.source.events.get(timeout=min(wait, 1.0))
            except empty:
                event = None
            while event is not None:
                self._safe(self.handle, event)
                try:
                    event = self.source.events.get_nowait()
                except empty:
                    event = None
            now = self.clock()
            if now >= next_tick or (self._full_due is not None and
                                    now >= self._full_due):
                self._safe(self.tick)
                next_tick = self.clock() + self.opts.tick_interval
            if now >= next_sample:
                self._safe(self.sample)
                next_sample = self.clock() + self.opts.sample_interval
