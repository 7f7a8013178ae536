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


"""RMIDs and MBM counters: who holds one, what is free, what drains.

:class:`Monitoring` keeps the agent's account of monitoring resources
between ticks: the RMID rotation (instances outnumbering RMIDs take
turns), the MBM counter rotation on counter-assignment hosts, the RMIDs
in limbo after a group's removal, and a generation per group so that a
counter that starts again from zero restarts its rates.
"""

from oslo_log import log as logging

from rdt_virt.agent import counters as counters_mod
from rdt_virt.agent import rotation as rotation_mod
from rdt_virt import exception
from rdt_virt.policy import groups as groups_mod
from rdt_virt.resctrl import fs

LOG = logging.getLogger(__name__)

#: A monitoring group is held to drain at most this many rotation
#: intervals (at least FAST_DRAIN seconds each).
HOLD_ROTATIONS = 4


class Monitoring(object):
    """The agent's monitoring resources across ticks.

    :param resctrl: a :class:`~rdt_virt.resctrl.fs.Resctrl` for reading.
    :param executor: the :class:`~rdt_virt.agent.executor.Executor`.
    :param prefix: the agent's group prefix.
    :param opts: the ``[rdt_agent]`` options.
    :param clock: monotonic seconds.
    """

    def __init__(self, resctrl, executor, prefix, opts, clock):
        self.resctrl = resctrl
        self.executor = executor
        self.prefix = prefix
        self.opts = opts
        self.clock = clock
        self.rotation = rotation_mod.Rotation(opts.rotation_interval)
        # MBM counters rotate like RMIDs on counter-assignment hosts.
        self.counter_rotation = rotation_mod.Rotation(
            opts.rotation_interval)
        self.counter_info = None     # what the state file says of them
        # Groups holding an RMID at the last tick, and the monitoring
        # groups whose removal since is accounted for already (drained:
        # free at once; a stopped instance's: counted by the rotation).
        self._rmid_groups = None
        self.accounted = set()
        # What account() and own_mon_groups() found, and in which names
        # ({control group: monitoring group names}): a converged host
        # shows the same ones tick after tick.
        self._names = None
        self._counts = None
        self._own = {}
        self.held = 0                # monitoring groups left draining
        self._held_since = {}        # mon group -> first seen draining
        self._forced = []            # when a group went above threshold
        self._last_check = None
        self.auto_budget = None      # RMID budget without [rdt_agent]
        self.generation = {}         # group or mon group -> int
        self._rmid_cap = None        # (budget, until) after ENOSPC
        self.budget = None           # RMID budget of the last tick
        self.rmids_used = 0
        self.closids_used = 0

    def renew(self, key):
        """A group's counters start again from zero: restart its rates."""
        self.generation[key] = self.generation.get(key, 0) + 1

    def source_key(self, counters):
        """What identifies one run of a group's counters for the rates."""
        group, mon = counters
        key = mon or group
        return (group if mon is None else 'mon', key,
                self.generation.get(key, 0))

    def _same_names(self, snap):
        """Whether *snap* has the groups of the last call (see __init__)."""
        names = {n: g.mon_names for n, g in snap.groups.items()}
        if names == self._names:
            return True
        self._names = names
        self._counts = None
        self._own = None
        return False

    def account(self, snap, caps):
        """RMIDs and CLOSIDs in use, and monitoring groups of others."""
        ctrl = [n for n in snap.groups if n is not None]
        if not self._same_names(snap) or self._counts is None:
            # With the same groups nothing was removed: no RMID to count.
            self._counts = self._count(snap, caps, ctrl)
        foreign, ours = self._counts
        self.accounted = set()
        self.closids_used = 1 + len(ctrl)
        self.rmids_used = 1 + len(ctrl) + ours + foreign if (
            caps.monitor) else 0
        return foreign, ours

    def _count(self, snap, caps, ctrl):
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
        gone = (self._rmid_groups or set()) - rmids - self.accounted
        if gone and caps.monitor and (
                'llc_occupancy' in caps.monitor.features):
            # Removed without a look at their occupancy, by anyone (libvirt
            # at a domain's stop, a rmdir of a control group): in limbo.
            self.rotation.released(self.clock(), len(gone))
        self._rmid_groups = rmids
        return foreign, ours

    def own_mon_groups(self, snap):
        """``{uuid: (control group, monitoring group)}`` of the agent's."""
        if not self._same_names(snap) or self._own is None:
            found = {}
            for name, group in snap.groups.items():
                for mon in group.mon_names:
                    kind = groups_mod.parse(self.prefix, mon)
                    if kind and kind[0] == 'monitor':
                        found[kind[1]] = (name, mon)
            self._own = found
        return dict(self._own)

    def drain_check(self, caps, mons, now):
        """A :class:`DrainCheck` of this tick for the groups in *mons*.

        Groups may be let go above the threshold only into the RMIDs the
        configured budget leaves unused (``spare``), less those let go so
        within the longest limbo the rotation assumes.
        """
        limit = HOLD_ROTATIONS * max(self.opts.rotation_interval,
                                     rotation_mod.FAST_DRAIN)
        check = DrainCheck(self.resctrl, caps, mons, now, self._held_since,
                           limit, self.spare(now))
        self._last_check = check
        return check

    def spare(self, now):
        """RMIDs the configured budget leaves unused and nothing took."""
        self._forced = [t for t in self._forced
                        if now - t < rotation_mod.MAX_DRAIN]
        return max(0, (self.auto_budget or 0) - (self.budget or 0) -
                   len(self._forced))

    def note_forced(self, now):
        """Count the groups the last check let go above the threshold."""
        if self._last_check is not None:
            self._forced.extend([now] * len(self._last_check.forced))

    def forget_held(self, keep):
        """Stop timing the holds of groups not in *keep* (names)."""
        for name in list(self._held_since):
            if name not in keep:
                del self._held_since[name]

    def budget_for(self, caps, foreign, now, parents=None):
        """The RMID budget of this tick (lower for a while after ENOSPC).

        :param parents: on Arm MPAM, the control groups that hold
            candidates (see :func:`rotation.rmid_budget`).
        """
        budget = rotation_mod.rmid_budget(caps, self.opts.rmid_budget,
                                          foreign, parents)
        self.auto_budget = rotation_mod.rmid_budget(caps, -1, foreign,
                                                    parents)
        if self._rmid_cap is not None:
            if now < self._rmid_cap[1]:
                budget = min(budget, self._rmid_cap[0])
            else:
                self._rmid_cap = None
        self.budget = budget
        return budget

    def rmids_exhausted(self, budget, until):
        """The kernel answered ENOSPC: hold the budget down until then."""
        self._rmid_cap = (budget, until)

    def assign_counters(self, caps, placements, snap, now):
        """Give MBM counters to the groups that count instances.

        Counter-assignment hosts only (see :mod:`rdt_virt.agent.counters`).
        Returns the number of writes.
        """
        rc = self.resctrl
        mon = caps.monitor
        events = mon.mbm_events
        owner = {}
        for uuid, place in placements.items():
            if place.counters is not None:
                owner[tuple(place.counters)] = uuid
        spare = set()
        for name in snap.groups:
            kind = groups_mod.parse(self.prefix, name or '')
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
                self.renew(action.mon_group or action.group)
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


class DrainCheck(object):
    """Whether a monitoring group outside the window may go now.

    A removed group's RMID stays in limbo while the kernel's reads of its
    occupancy say it is dirty (``__check_limbo()``: a value at or above
    ``max_threshold_occupancy``, or a failed read from 6.9 on). Read here,
    on the group that still exists, the occupancy tells when removing it
    frees the RMID at the next check (see :mod:`rdt_virt.agent.rotation`);
    until then the group is emptied but kept, holding its RMID.

    What bounds that wait, so that no group can stall the rotation:

    * a group whose occupancy cannot be read (``Unavailable``, as an empty
      group that never ran reads on real kernels, ``Error``, or a failed
      read) goes at once: waiting cannot change what it reads. Before 6.9
      ``add_rmid_to_limbo()`` frees such an RMID at once; from 6.9 the
      kernel may keep it in limbo, a later mkdir answers EBUSY and the
      rotation slows down (:meth:`Rotation.busy`);
    * a group at or above the threshold holds exactly the RMID the kernel
      would keep busy in limbo if it were removed, so holding it costs
      nothing more, and its instance gets it back on its next turn. Cache
      data may never drain, though: after ``limit`` seconds such a group
      goes anyway when the configured budget leaves RMIDs unused
      (``spare``), one per spare RMID, so that a budget set below what
      the host has never shrinks for good (:attr:`forced`). With the
      automatic budget there is no spare: the RMIDs control groups need
      are never given to a limbo that may not drain;
    * a group that no longer exists holds nothing.

    :param mons: ``{uuid: (control group, monitoring group)}``.
    :param held_since: ``{monitoring group: time}``, kept across ticks.
    """

    def __init__(self, resctrl, caps, mons, now, held_since, limit,
                 spare=0):
        self.resctrl = resctrl
        self.spare = spare
        self.mons = mons
        self.now = now
        self.held_since = held_since
        self.limit = limit
        mon = caps.monitor
        self.threshold = None
        if (mon is not None and mon.max_threshold_occupancy is not None and
                'llc_occupancy' in mon.features):
            self.threshold = mon.max_threshold_occupancy
        self._answers = {}
        #: Monitoring groups let go above the threshold.
        self.forced = set()
        #: Monitoring groups let go because their occupancy is unreadable.
        self.unreadable = set()

    def __call__(self, uuid):
        if uuid not in self.mons:
            return True
        if uuid not in self._answers:
            self._answers[uuid] = self._may_go(*self.mons[uuid])
        return self._answers[uuid]

    def _may_go(self, group, name):
        if self.threshold is None:
            return True
        try:
            values = self.resctrl.read_mon_data(
                group, name, events=['llc_occupancy'])
        except exception.ResctrlError:
            self.unreadable.add(name)
            return True
        dirty = False
        readable = False
        for dom in values.values():
            occ = dom.get('llc_occupancy')
            if occ is None or occ.value is None:
                continue
            readable = True
            if occ.value >= self.threshold:
                dirty = True
        if not readable:
            self.unreadable.add(name)
            return True
        if not dirty:
            return True
        since = self.held_since.setdefault(name, self.now)
        if self.now - since >= self.limit and len(self.forced) < self.spare:
            LOG.warning('Monitoring group %s still holds %s bytes of cache '
                        'after %.0f s; removing it anyway', name,
                        ', '.join(str(d.get('llc_occupancy').value)
                                  for d in values.values()
                                  if d.get('llc_occupancy')),
                        self.now - since)
            self.forced.add(name)
            return True
        return False

    def draining(self, outside):
        """Names of the groups of *outside* (uuids) that stay to drain."""
        return {self.mons[u][1] for u in outside
                if u in self.mons and not self(u)}
