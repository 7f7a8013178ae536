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
        self.held = 0                # monitoring groups left draining
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

    def account(self, snap, caps):
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
        gone = (self._rmid_groups or set()) - rmids - self.accounted
        if gone and caps.monitor and (
                'llc_occupancy' in caps.monitor.features):
            # Removed without a look at their occupancy, by anyone (libvirt
            # at a domain's stop, a rmdir of a control group): in limbo.
            self.rotation.released(self.clock(), len(gone))
        self._rmid_groups = rmids
        self.accounted = set()
        self.closids_used = 1 + len(ctrl)
        self.rmids_used = 1 + len(ctrl) + ours + foreign if (
            caps.monitor) else 0
        return foreign, ours

    def own_mon_groups(self, snap):
        """``{uuid: (control group, monitoring group)}`` of the agent's."""
        found = {}
        for name, group in snap.groups.items():
            for mon in group.mon_names:
                kind = groups_mod.parse(self.prefix, mon)
                if kind and kind[0] == 'monitor':
                    found[kind[1]] = (name, mon)
        return found

    def draining(self, caps, outside):
        """Monitoring groups to empty but keep: their RMID has not drained.

        A removed group's RMID stays in limbo until its cache occupancy is
        below ``max_threshold_occupancy`` on every domain; read here, on
        the group that still exists, it tells when removing it frees the
        RMID at once (see :mod:`rdt_virt.agent.rotation`).
        """
        mon = caps.monitor
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

    def budget_for(self, caps, foreign, now, parents=None):
        """The RMID budget of this tick (lower for a while after ENOSPC).

        :param parents: on Arm MPAM, the control groups that hold
            candidates (see :func:`rotation.rmid_budget`).
        """
        budget = rotation_mod.rmid_budget(caps, self.opts.rmid_budget,
                                          foreign, parents)
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
