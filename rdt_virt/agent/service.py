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

The parts it wires: :mod:`rdt_virt.agent.snapshot` reads resctrl,
:mod:`rdt_virt.agent.monitoring` keeps the account of RMIDs and MBM
counters between ticks, :mod:`rdt_virt.agent.sampling` turns counters into
rates and publishes them.
"""

import dataclasses
import math
import os
import queue as stdlib_queue
import time

from oslo_log import log as logging

from rdt_virt.agent import carry
from rdt_virt.agent import domains
from rdt_virt.agent import executor as executor_mod
from rdt_virt.agent import model
from rdt_virt.agent import monitoring as monitoring_mod
from rdt_virt.agent import planmemo
from rdt_virt.agent import pools as pools_mod
from rdt_virt.agent import protection as protection_mod
from rdt_virt.agent import reconcile
from rdt_virt.agent import sampling as sampling_mod
from rdt_virt.agent import snapshot as snapshot_mod
from rdt_virt import concurrency
from rdt_virt import exception
from rdt_virt.policy import default_group

LOG = logging.getLogger(__name__)
# Seconds between a domain's stop and the tick that removes its groups.
CLEANUP_DELAY = 1.0


def next_slot(slot, interval, now):
    """The first time of the sampling clock after ``now``.

    Samples start at ``slot + k * interval``: what a sample costs, or the
    tick that was running when it fell due, delays that sample only and
    never pushes the later ones back. Scheduling each sample an interval
    after the last one *ended* made every interval ``interval`` plus the
    agent's own work: on a loaded two-CPU host 3.3 to 4.3 s instead of 3,
    and the controller's bounds, counted in intervals, grew with them. A
    sample that overran whole intervals skips their slots rather than
    running them in a burst.
    """
    after = slot + interval
    if now >= after:
        after += interval * (math.floor((now - after) / interval) + 1)
    return after


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
        ``instance(uuid)``, ``capabilities()`` and an ``events`` queue.
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
        self.reader = snapshot_mod.SnapshotReader(resctrl,
                                                  self.settings.prefix)
        # A tick plans again only when something it plans from changed.
        self.planner = planmemo.PlanMemo()
        self.monitoring = monitoring_mod.Monitoring(
            resctrl, executor, self.settings.prefix, self.opts, clock)
        self.sampling = sampling_mod.Sampling(conf, resctrl,
                                              self.monitoring, clock, wall)
        self.protection = protection_mod.Protection(self.opts, clock)
        self._resumed = False
        # Read the memory bandwidth pools after each (re)connection and
        # resctrl mount: CPU hot-plug changes both.
        self._pools_due = True
        self._pools_warning = None
        self.caps = None
        self._fingerprint = None
        self.instances = {}
        self.threads = {}
        self.placements = {}
        # {uuid: level} the placements were planned with: the level in
        # force in the group each placement names. The controller's newer
        # decisions wait for the next tick.
        self.levels_in_force = {}
        self.blocked = {}            # name -> (reason, until)
        self._next_connect = 0.0
        self._warned = set()
        self._full_due = None        # when a full tick was asked for
        self.last_tick = TickStats()
        self.totals = {'ticks': 0, 'writes': 0, 'events': 0, 'errors': 0}
        self.event_latencies = []
        self._placed_at = {}         # uuid -> when the fast path read it
        # The time of the sampling clock the sample in progress stands for
        # (see next_slot); None outside run().
        self._slot = None

    # What the parts hold, under the names the agent always had.

    rotation = property(lambda self: self.monitoring.rotation)
    counter_rotation = property(
        lambda self: self.monitoring.counter_rotation)
    counter_info = property(lambda self: self.monitoring.counter_info)
    budget = property(lambda self: self.monitoring.budget)
    rmids_used = property(lambda self: self.monitoring.rmids_used)
    closids_used = property(lambda self: self.monitoring.closids_used)
    tracker = property(lambda self: self.sampling.tracker)
    ceiling_source = property(lambda self: self.sampling.ceiling_source)
    rates = property(lambda self: self.sampling.rates)
    last_doc = property(lambda self: self.sampling.last_doc)

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
            self._pools_due = True
            self.sampling.set_ceiling(self.caps)
            LOG.info('resctrl at %s: features %s, %d CLOSIDs, %d RMIDs',
                     rc.root, ', '.join(sorted(self.caps.features)) or
                     'none', self.caps.num_closids, self.caps.num_rmids)
            try:
                default_group.reserved_schemata(
                    self.caps, self.conf.rdt.default_group_l3_ways)
            except exception.InvalidConfig as e:
                LOG.error('%s; the default group keeps its L3 mask', e)
        return True

    # Reading resctrl -------------------------------------------------------

    def read_snapshot(self, scope=None, instances=(), only=None):
        """Read resctrl; see :meth:`.SnapshotReader.read`."""
        return self.reader.read(self.caps, self.totals['ticks'], scope,
                                instances, only)

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

    # Planning and applying --------------------------------------------------

    def _blocked(self, now):
        for name in [n for n, (_r, until) in self.blocked.items()
                     if until <= now]:
            del self.blocked[name]
        return {n: r for n, (r, _u) in self.blocked.items()}

    def _apply(self, result, now, ours=0):
        if result.actions:
            # What the cache says no longer holds.
            self.reader.invalidate()
        outcome = self.executor.apply(result.actions)
        if outcome.blocked:
            self._unplace(result.placements, outcome.blocked)
        retry = now + self.opts.retry_interval
        for name, reason in outcome.blocked.items():
            self.blocked[name] = (reason, retry)
        if outcome.rmids_exhausted:
            created = sum(1 for _g, m in outcome.created if m)
            self.monitoring.rmids_exhausted(ours + created, retry)
        if outcome.rmids_busy:
            # Free RMIDs ran out while others sit in limbo: slow down.
            self.rotation.busy(now)
            LOG.warning('RMIDs are busy in limbo; monitoring groups now '
                        'rotate assuming %.0f s of limbo',
                        self.rotation.drain_time)
        for group, mon in outcome.created:
            self.monitoring.renew(mon or group)
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
        self._pools_due = True
        return True

    def _read_pools(self):
        """The controller's pools from libvirt's view of the host."""
        self._pools_due = False
        if self.opts.controller_pools != pools_mod.NUMA:
            return
        pool_of, reason = pools_mod.read(self.source)
        if pool_of is None:
            # Read again after the next (re)connection or remount, not at
            # every tick: a libvirtd that failed here fails instances() too
            # and is reconnected; bad XML stays bad. Said once per reason.
            if reason != self._pools_warning:
                LOG.warning('Bandwidth controller: no NUMA topology (%s); '
                            'each L3 domain is a pool of its own', reason)
        self._pools_warning = reason
        self.protection.set_pools(pool_of)

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
        if self._pools_due:
            self._read_pools()
        for uuid in set(self.instances) - set(instances):
            self.procfs.forget(uuid)
        threads = self._threads(instances)
        planned = self._controlled(instances)
        levels = dict(self.protection.levels)
        now = self.clock()
        with self.resctrl.lock():
            snap = self._read_or_warn(instances=instances)
            if snap is None:
                stats.skipped = 'resctrl unreadable'
                return self._done(stats, cpu0, start)
            monitoring = self.monitoring
            foreign, ours = monitoring.account(snap, self.caps)
            cands = self.planner.mon_candidates(planned, threads, self.caps,
                                                self.settings)
            parents = None
            if self.caps.mon_groups_per_closid is not None:
                parents = reconcile.candidate_parents(
                    instances, cands, self.caps, self.settings)
            budget = monitoring.budget_for(self.caps, foreign, now, parents)
            mons = monitoring.own_mon_groups(snap)
            self.rotation.adopt(set(mons) & set(cands), budget, now)
            # Read before the window moves: a group that can go at once
            # neither holds an RMID nor keeps its successor out.
            may_go = monitoring.drain_check(self.caps, mons, now)
            in_window = self.rotation.window
            outside = [u for u in mons if u not in in_window]
            dirty = len(may_go.draining(outside))
            # A group removed now frees its RMID at the kernel's next limbo
            # check: until then only a spare RMID can stand in for it.
            spare = monitoring.spare(now)
            handed = min(spare, len(outside) - dirty)
            window = self.rotation.update(
                cands, budget, now, held=len(outside) - handed,
                may_go=may_go, spare=spare - handed)
            draining = may_go.draining([u for u in mons if u not in window])
            monitoring.held = len(draining)
            monitoring.forget_held(draining)
            result = self.planner.plan(planned, threads, snap, self.caps,
                                       self.settings, window,
                                       self._blocked(now), draining)
            outcome = self._apply(result, now, ours)
            # Drained groups free their RMID at the kernel's next check;
            # those let go above the threshold use a spare RMID.
            monitoring.accounted = {(a.group, a.mon_group)
                                    for a in result.actions
                                    if isinstance(a, model.RemoveMonGroup)}
            monitoring.note_forced(now)
            if self.caps.monitor and self.caps.monitor.assigns_counters:
                outcome.writes += monitoring.assign_counters(
                    self.caps, result.placements, snap, now)
        self.instances = instances
        self.threads = threads
        self.placements = result.placements
        self.levels_in_force = {u: lv for u, lv in levels.items()
                                if u in instances}
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
        planned = self._controlled({uuid: inst})
        level = self.protection.levels.get(uuid)
        scope = reconcile.groups_of(planned[uuid], self.caps, self.settings)
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
            cands = reconcile.mon_candidates(planned, threads,
                                             self.caps, self.settings)
            window = self.rotation.window
            if cands:
                budget = self.budget
                if budget is None:
                    # No full tick yet: other tools' groups are unknown.
                    budget = self.monitoring.budget_for(self.caps, 0, now)
                window = self.rotation.admit(uuid, budget, now,
                                             self.monitoring.held)
            result = reconcile.plan(planned, threads, snap, self.caps,
                                    self.settings, window,
                                    self._blocked(now))
            outcome = self._apply(result, now)
        self.instances[uuid] = inst
        self.threads[uuid] = threads[uuid]
        self.placements[uuid] = result.placements[uuid]
        self.levels_in_force.pop(uuid, None)
        if level is not None:
            self.levels_in_force[uuid] = level
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
        self.levels_in_force.pop(uuid, None)
        if inst is None or self.caps is None:
            self.request_full(CLEANUP_DELAY)
            return
        inst = self._controlled({uuid: inst})[uuid]
        scope = reconcile.groups_of(inst, self.caps, self.settings)
        with self.resctrl.lock():
            snap = self._read_or_warn(scope, self.instances)
            if snap is None:
                self.request_full(CLEANUP_DELAY)
                return
            actions, warnings = reconcile.cleanup(
                uuid, inst, snap, self.caps, self.settings,
                self._controlled(self.instances))
            if actions:
                self.reader.invalidate()
            outcome = self.executor.apply(actions)
            # The rotation counted this RMID in limbo already.
            self.monitoring.accounted |= {
                (a.group, a.mon_group) for a in actions
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

    def sample(self, slot=None):
        """Read counters, compute rates, control, publish; returns the doc.

        :param slot: the time of the sampling clock this sample stands for
            (:meth:`run`); the controller counts its periods and dwells on
            that clock, so a sample that starts late (behind a tick) costs
            no decision. None: the agent's clock.
        """
        self._slot = slot
        try:
            return self.sampling.sample(self.caps, self.instances,
                                        self.placements, self._control)
        finally:
            self._slot = None

    # The bandwidth controller -------------------------------------------

    def _controlled(self, instances):
        """What to plan: instances with the controller's levels in force.

        The first call takes the levels back from the state file that the
        agent published before it (re)started, so that a restart neither
        releases nor re-throttles anything by itself.
        """
        if not self._resumed:
            self._resumed = True
            self.protection.resume_file(self.conf.rdt.state_file)
        return reconcile.controlled(instances, self.protection.levels,
                                    self.caps)

    def _control(self, rates):
        if not self._resumed:
            self._controlled({})
        changes = self.protection.step(self.caps, self.instances, rates,
                                       self.monitoring.closids_used,
                                       self._runnable(), slot=self._slot)
        if changes:
            # Put the new levels in force now, not at the next tick.
            self.request_full()
        # Published beside the placements of the last tick: the level in
        # force in the group shown, and the decision still to be applied.
        return (self.levels_in_force, self.protection.host_doc(),
                self.protection.limits, self.protection.levels)

    def _runnable(self):
        """The high instances' vCPU run and wait times, for their demand."""
        out = {}
        for uuid, threads in self.threads.items():
            inst = self.instances.get(uuid)
            if inst is None or inst.priority != protection_mod.ctl.HIGH or (
                    threads is None):
                continue
            out[uuid] = {tid: self.procfs.runnable_ns(threads.pid, tid)
                         for tid in threads.vcpus.values()}
        return out

    # The loop --------------------------------------------------------------

    def _safe(self, func, *args):
        try:
            return func(*args)
        except Exception:
            self.totals['errors'] += 1
            LOG.exception('%s failed', getattr(func, '__name__', func))

    def run(self, stop):
        """Serve until ``stop`` (a threading.Event) is set."""
        # The event queue is the OS's even under eventlet (concurrency.native).
        empty = (concurrency.native('queue').Empty, stdlib_queue.Empty)
        carried = self._take_baselines()
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
            if now >= next_sample:
                # Before a tick that is due too: the sample keeps its slot,
                # and a decision it makes (request_full) is put in force by
                # the tick just below, in the same turn.
                self._safe(self.sample, next_sample)
                next_sample = next_slot(next_sample,
                                        self.opts.sample_interval,
                                        self.clock())
                now = self.clock()
            if now >= next_tick or (self._full_due is not None and
                                    now >= self._full_due):
                self._safe(self.tick)
                next_tick = self.clock() + self.opts.tick_interval
                if carried:
                    # With the last agent's baselines the first sample
                    # has rates: take it as soon as the groups are known.
                    carried = False
                    next_sample = self.clock()
        self._save_baselines()

    def _take_baselines(self):
        """Take the last agent's counter baselines; whether any hold."""
        path = carry.path_for(self.conf.rdt.state_file)
        try:
            doc = carry.take(path)
        except OSError as e:
            LOG.warning('Cannot read the counter baselines in %s: %s',
                        path, e)
            return False
        if doc is None:
            return False
        entries, reason = carry.usable(doc, self.procfs.boot_id(),
                                       self.clock())
        if reason:
            LOG.info('Not taking the counter baselines in %s: %s', path,
                     reason)
            return False
        if not entries:
            return False
        LOG.info("Rates go on from the last agent's baselines of %d "
                 "instances", len(entries))
        self.sampling.carried = entries
        return True

    def _save_baselines(self):
        """Leave the counters' baselines for the agent that starts next."""
        exported = self.sampling.tracker.export()
        boot_id = self.procfs.boot_id()
        if not exported or not boot_id:
            return
        path = carry.path_for(self.conf.rdt.state_file)
        try:
            carry.save(path, carry.document(exported, boot_id,
                                            self.clock()))
        except OSError as e:
            LOG.warning('Cannot write the counter baselines to %s: %s',
                        path, e)
