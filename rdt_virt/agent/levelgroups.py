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

"""Levels on percent hosts, where each level is a shared group. Pure.

Each MBA percentage that the controller holds low instances at is one of
the agent's shared groups (``rdtvirt-mb<N>``), and so one CLOSID. CLOSIDs
are few and other instances take them, so protection must not depend on a
spare one: with none free, the controller moves instances into levels
whose groups exist, and changes a level's value in place when all of its
instances go down together (the planner then rewrites that group's
schemata, :mod:`rdt_virt.agent.reconcile`). Helpers of
:mod:`rdt_virt.agent.controller`.
"""


def snap(value, current, in_use, scale, floor):
    """A level within the limit on distinct levels (shared groups).

    Each percentage is a control group, and CLOSIDs are few. When no new
    level may be opened, the instance joins a level whose group exists:
    the nearest below what was asked, else the lowest one below where it
    is. When there is none, the answer is ``(value, True)``: the level may
    only be reached in place, by every instance of the level it leaves
    going down together (see :func:`in_place`).

    :returns: ``(level, in place)``.
    """
    if not scale.shared or scale.max_levels is None or value in in_use or (
            value in scale.existing or len(in_use) < scale.max_levels):
        return value, False
    there = set(in_use) | set(scale.existing)
    lower = [v for v in there if floor <= v <= value]
    if lower:
        return max(lower), False
    between = [v for v in there if value < v < current]
    if between:
        return min(between), False
    return value, True


def in_place(votes, pending, levels):
    """Keep the in-place votes whose whole level goes down together.

    A level's group can take a new value in place (no CLOSID needed) only
    when every instance held at it moves to that same value in this
    period, and no other instance joins it; other in-place votes are
    dropped.

    :param pending: ``{uuid: (level left, level asked)}``.
    :returns: the uuids whose votes were dropped.
    """
    dropped = set()
    joined = {v for u, (v, _d) in votes.items() if u not in pending}
    for uuid, (old, new) in sorted(pending.items()):
        holders = {u for u, v in levels.items() if v == old}
        together = all(votes.get(u, (None,))[0] == new and
                       pending.get(u) == (old, new) for u in holders)
        if not holders or not together or old in joined:
            dropped.add(uuid)
    for uuid in dropped:
        if pending[uuid][1] == votes.get(uuid, (None,))[0]:
            del votes[uuid]
    return dropped
