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

"""The RMID budget and the rotation of monitoring groups. Pure.

Every control group holds an RMID and the kernel refuses to create one
without a free RMID, so monitoring groups may only use what control groups
can never need: ``num_rmids - num_closids`` (the default group's RMID is
one of the ``num_closids``), less the RMIDs of other tools' monitoring
groups. When more instances need a monitoring group than that, the agent
multiplexes: the *window* of instances that have one changes every
rotation interval, a quarter of the budget at a time, from those monitored
longest to those waiting longest. Handing over only part of the window
keeps most instances reporting through a rotation (a new group needs two
readings before it has a rate).

Two kinds of host change that arithmetic. With Intel's package telemetry
(``PERF_PKG_MON``, 7.0) the kernel hands out only as many RMIDs as its
smallest monitoring resource has (``resctrl_arch_system_num_rmid_idx()``),
which :attr:`~rdt_virt.resctrl.info.HostCapabilities.num_rmids` already
is. On Arm MPAM an RMID is a PMG of one CLOSID: each control group owns a
pool of PMG-count RMIDs, takes one for itself, and ``alloc_rmid(closid)``
answers ENOSPC when its pool is used up however many other RMIDs are free.
Control groups then never compete with monitoring groups for RMIDs, but a
control group holds at most PMG count - 1 monitoring groups; the planner
(:mod:`rdt_virt.agent.reconcile`) enforces that per group, and the budget
here is the sum over the groups that hold candidates.

RMID limbo: a removed group's RMID stays busy until its cache occupancy
falls below ``max_threshold_occupancy`` on every domain. The kernel checks
that about once a second, and cache-resident data can keep an RMID busy for
as long as it stays in the cache. mkdir takes free RMIDs first and answers
EBUSY only when none is left, so an RMID taken while others sit in limbo
is one a control group (a libvirt ``<cachetune>`` at boot) may then miss,
and the kernel says so only when it is too late. The agent therefore does
the draining itself, where it can watch it: a monitoring group that leaves
the window gives its threads back to its control group but stays, holding
its RMID, until its own ``llc_occupancy`` reads below the threshold; only
then is it removed, and the kernel frees its RMID at the next check. The
wait is bounded (:class:`rdt_virt.agent.monitoring.DrainCheck`): a group
whose occupancy cannot be read (an empty group that never ran reads
``Unavailable``) goes at once, and one still above the threshold after a
few rotation intervals goes anyway, its RMID then counted as in limbo. A
member whose group can go at once is replaced in the same tick, so
steady rotation uses the whole budget.
Groups held that way (``held``) and RMIDs released recently (limbo)
count against the budget, so the window plus them never exceed it, and
new members join only as fast as the old ones drain. RMIDs released
without a reading (a stopped instance, a control group libvirt removed)
are counted for ``drain_time``, which starts at the rotation interval and
doubles whenever the kernel answers EBUSY anyway.
"""

# The kernel's limbo check runs about once a second on each domain.
FAST_DRAIN = 2.0
MAX_DRAIN = 3600.0


def rmid_budget(caps, configured=-1, foreign_mon_groups=0, parents=None):
    """How many monitoring groups the agent may keep.

    :param caps: the host's HostCapabilities.
    :param configured: ``[rdt_agent] rmid_budget`` (-1: automatic).
    :param foreign_mon_groups: monitoring groups of libvirt and other tools.
    :param parents: on MPAM, how many control groups hold instances that
        need a monitoring group (None: every CLOSID may).
    """
    if caps.monitor is None:
        return 0
    per_group = caps.mon_groups_per_closid
    if per_group is not None:
        groups = caps.num_closids if parents is None else parents
        auto = per_group * max(groups, 0) - foreign_mon_groups
    else:
        auto = (caps.num_rmids - max(caps.num_closids, 1) -
                foreign_mon_groups)
    auto = max(auto, 0)
    return auto if configured < 0 else min(configured, auto)


class Rotation(object):
    """Which instances get a monitoring group, over time.

    :param interval: seconds between two rotations.
    """

    def __init__(self, interval):
        self.interval = interval
        self.window = frozenset()
        self._since = {}        # uuid -> when it entered the window
        self._left = {}         # uuid -> when it last left it
        self._last_rotation = None
        self.candidates = 0
        # RMIDs released: [(when, drains fast)].
        self._limbo = []
        self.drain_time = float(interval)
        self._quiet_since = None
        self.busy_events = 0

    # Limbo -------------------------------------------------------------

    def in_limbo(self, now):
        """RMIDs released that may still be busy in limbo."""
        slow = self.drain_time
        self._limbo = [(t, fast) for t, fast in self._limbo
                       if now - t < (FAST_DRAIN if fast else slow)]
        return len(self._limbo)

    def released(self, now, count=1, fast=False):
        """``count`` RMIDs were freed (groups removed) at ``now``."""
        self._limbo.extend([(now, fast)] * int(count))

    def busy(self, now):
        """The kernel answered EBUSY: limbo drains slower than assumed."""
        self.busy_events += 1
        self.drain_time = min(self.drain_time * 2, MAX_DRAIN)
        self._quiet_since = now
        # What was thought drained may not be: count it again.
        self._limbo = [(max(t, now - self.drain_time / 2), False)
                       for t, _fast in self._limbo]

    def _relax(self, now):
        if self._quiet_since is None:
            self._quiet_since = now
        elif (now - self._quiet_since >= 4 * self.drain_time and
              self.drain_time > self.interval):
            self.drain_time = max(self.drain_time / 2, float(self.interval))
            self._quiet_since = now

    @property
    def rotating(self):
        """True when instances outnumber the budget."""
        return self.candidates > len(self.window)

    @property
    def coverage(self):
        """Share of the candidates that have a monitoring group now."""
        if not self.candidates:
            return 1.0
        return len(self.window) / self.candidates

    def update(self, candidates, budget, now, held=0, may_go=None,
               spare=0):
        """Return the new window for ``candidates`` under ``budget``.

        :param candidates: uuids that need a monitoring group.
        :param budget: monitoring groups allowed (see :func:`rmid_budget`).
        :param now: the current time (any monotonic clock, in seconds).
        :param held: monitoring groups outside the window that still hold
            an RMID (draining).
        :param may_go: ``f(uuid) -> bool``: the monitoring group of a
            member leaving now can be removed at once (drained, or
            nothing to wait for).
        :param spare: RMIDs beyond the budget that nothing else needs
            (a configured budget below the automatic one). A member whose
            group may go is replaced in the same tick while they last, so
            that steady rotation keeps the whole budget in use; otherwise
            its removed group's RMID, which the kernel frees only at its
            next limbo check, still counts this tick.
        """
        cands = set(candidates)
        self.candidates = len(cands)
        budget = max(int(budget), 0)
        self._relax(now)
        if self._last_rotation is None:
            self._last_rotation = now
        window = {u for u in self.window if u in cands}
        leaving = len(self.window - window)
        for uuid in list(self._since):
            if uuid not in window:
                del self._since[uuid]
        for uuid in list(self._left):
            if uuid not in cands:
                del self._left[uuid]
        # Oldest first; sorted only when someone is to leave.
        by_age = None
        handover = [max(int(spare), 0)]

        def stays(uuid):
            if may_go is not None and may_go(uuid) and handover[0]:
                handover[0] -= 1
                return 0
            return 1

        while len(window) > budget:
            if by_age is None:
                by_age = self._by_age(window)
            uuid = by_age.pop(0)
            self._leave(uuid, window, now)
            leaving += stays(uuid)
        if len(cands) <= budget:
            self._last_rotation = now
        elif budget and now - self._last_rotation >= self.interval:
            if by_age is None:
                by_age = self._by_age(window)
            step = min(len(cands) - budget, max(1, budget // 4))
            for uuid in by_age[:step]:
                self._leave(uuid, window, now)
                leaving += stays(uuid)
            self._last_rotation = now
        # Only RMIDs that are surely free may be taken: those leaving now
        # hold theirs until they drain, unless they may go at once.
        room = (budget - self.in_limbo(now) - int(held) - leaving -
                len(window))
        if room > 0:
            waiting = sorted(cands - window, key=lambda u: (
                self._left.get(u, float('-inf')), u))
            for uuid in waiting[:room]:
                window.add(uuid)
        for uuid in window:
            self._since.setdefault(uuid, now)
        self.window = frozenset(window)
        return self.window

    def _by_age(self, window):
        return sorted(window, key=lambda u: (self._since[u], u))

    def adopt(self, uuids, budget, now):
        """Start from the monitoring groups that exist (agent restart)."""
        if self._last_rotation is None and not self.window:
            self.window = frozenset(sorted(uuids)[:max(int(budget), 0)])
            for uuid in self.window:
                self._since[uuid] = now

    def admit(self, uuid, budget, now, held=0):
        """Let a newly started instance in if the budget has room.

        The event fast path uses this instead of :meth:`update`, which
        needs every candidate of the host.
        """
        if uuid not in self.window and (
                len(self.window) + self.in_limbo(now) + held <
                max(budget, 0)):
            self.window = self.window | {uuid}
            self._since[uuid] = now
            self.candidates += 1
        return self.window

    def forget(self, uuid, now=None):
        """An instance stopped: its RMID goes to limbo."""
        if uuid in self.window:
            self.window = self.window - {uuid}
            self.candidates = max(self.candidates - 1, 0)
            if now is not None:
                self.released(now)
        self._since.pop(uuid, None)
        self._left.pop(uuid, None)

    def _leave(self, uuid, window, now):
        window.discard(uuid)
        self._since.pop(uuid, None)
        self._left[uuid] = now
