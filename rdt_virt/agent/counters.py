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

"""MBM counter assignment (``mbm_assign_mode`` = ``mbm_event``). Pure.

Since Linux 6.18, hosts whose hardware assigns bandwidth counters (AMD
ABMC, on by default on Zen 5) count MBM only for groups that were given a
counter: ``num_mbm_cntrs`` per domain, each counting one event of one
group; a group without one reads ``Unassigned`` for ever. Groups get
counters at mkdir while there are free ones (``mbm_assign_on_mkdir``) and
through their ``mbm_L3_assignments`` file.

The agent wants a counter per MBM event for every group that counts an
instance (its monitoring group, or its own control group) and none for
its shared control groups, whose own counts it never reads. When counters
are short it rotates them like RMIDs (a second
:class:`~rdt_virt.agent.rotation.Rotation`): the budget is what is free
plus what its groups hold, in groups of one counter per event, on the
scarcest domain. A counter read right after assignment starts from zero,
so the rates of a group that got one restart.
"""

from rdt_virt.agent import model
from rdt_virt.resctrl import fs

R_NO_COUNTER = 'waiting for an MBM counter (counter assignment)'


def held(actual, events):
    """``{domain: counters}`` the groups of ``actual`` hold."""
    found = {}
    for per_event in actual.values():
        for event in events:
            for dom, state in per_event.get(event, {}).items():
                if state != fs.UNASSIGNED:
                    found[dom] = found.get(dom, 0) + 1
    return found


def budget(monitor, available, actual):
    """Groups that can count every MBM event at once.

    :param monitor: the host's MonitorCapability.
    :param available: ``{domain: free counters}``.
    :param actual: ``{(group, mon): {event: {domain: state}}}`` of the
        agent's groups.
    """
    events = monitor.mbm_events
    if not events:
        return 0
    doms = [d for d, _n in monitor.num_mbm_cntrs] or list(available)
    if not doms:
        return 0
    mine = held(actual, events)
    return min((available.get(d, 0) + mine.get(d, 0)) // len(events)
               for d in doms)


def has_all(assignments, events):
    """True when every event has a counter on every domain."""
    for event in events:
        doms = assignments.get(event)
        if not doms or any(s == fs.UNASSIGNED for s in doms.values()):
            return False
    return True


def actions(wanted, actual, events):
    """AssignCounter actions that make ``actual`` what ``wanted`` says.

    :param wanted: ``{(group, mon): (uuid or None, wants counters)}``.
    :param actual: ``{(group, mon): {event: {domain: state}}}``.
    :returns: releases first (they free counters), then assignments.
    """
    release, assign = [], []
    for key in sorted(wanted, key=lambda k: (k[0] or '', k[1] or '')):
        uuid, want = wanted[key]
        have = actual.get(key, {})
        for event in events:
            doms = have.get(event, {})
            assigned = bool(doms) and all(
                s != fs.UNASSIGNED for s in doms.values())
            unassigned = all(s == fs.UNASSIGNED for s in doms.values())
            if want and not assigned:
                assign.append(model.AssignCounter(key[0], key[1], event,
                                                  fs.ASSIGNED, uuid))
            elif not want and not unassigned:
                release.append(model.AssignCounter(key[0], key[1], event,
                                                   fs.UNASSIGNED, uuid))
    return release + assign
