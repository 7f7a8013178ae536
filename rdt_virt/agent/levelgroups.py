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
:mod:`rdt_virt.agent.controller` and :mod:`rdt_virt.agent.reconcile`.
"""

from rdt_virt.agent import model
from rdt_virt.policy import groups as groups_mod


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


def snap_up(value, current, held, scale):
    """A released level within the limit on distinct levels.

    A release step that needs a level nobody else is at takes a CLOSID
    for its group. Without one free, the planner could not put the
    instance there, and would send its threads to the default group: a
    whole release at once, which also leaves the level it came from
    without every holder, so that level can no longer go down in place.
    The step stops at the highest level there is on the way instead, or
    holds.

    :param held: ``{level: held instances}`` of every held instance, this
        one (at ``current``) included.
    :returns: the level, ``current`` to hold.
    """
    others = {v for v, n in held.items() if n > (v == current)}
    if not scale.shared or scale.max_levels is None or value in others or (
            value in scale.existing or
            len(others | {value}) <= scale.max_levels):
        return value
    there = others | set(scale.existing)
    between = [v for v in there if current < v < value]
    return max(between) if between else current


def whole_levels(steps, levels):
    """Levels whose every holder is released to one same level.

    Such a level's group can take the new value in place, as a whole
    level going down does (:func:`stand_ins`): it needs no CLOSID.

    :param steps: ``{uuid: (domain, level, released level or None)}``.
    :param levels: ``{uuid: level}`` before the release.
    """
    targets = {}
    for uuid, level in levels.items():
        step = steps.get(uuid)
        targets.setdefault(level, set()).add(
            step[2] if step is not None else level)
    return {level for level, to in targets.items()
            if len(to) == 1 and None not in to and level not in to}


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


def _shared(prefix, name):
    kind = groups_mod.parse(prefix, name) if name else None
    return bool(kind) and kind[0] == 'shared'


def stand_ins(snapshot, caps, prefix, blocked, wants, needed):
    """Stand-ins for shared groups that no free CLOSID can create.

    When the controller moves every instance of a level to a new one and
    no CLOSID is free for the new group, the old group takes the new value
    in place: it stands in while it holds nothing but threads bound for
    the new group (and nobody wants its own value), and a group of the
    right name replaces it once a CLOSID is free. Protection then never
    waits for a spare CLOSID, and no thread passes through the default
    group on the way.

    :param wants: ``[(agent group, thread ids)]`` of the instances whose
        threads are known.
    :param needed: names of the agent groups some instance wants.
    :returns: ``{missing group: existing stand-in}``.
    """
    if not snapshot.complete or not caps.num_closids:
        return {}
    free = caps.num_closids - len(snapshot.groups)
    wanted = {}
    for group, tids in wants:
        if _shared(prefix, group) and group not in snapshot.groups:
            wanted.setdefault(group, set()).update(tids)
    aliases = {}
    for missing in sorted(wanted):
        if free > 0 and missing not in blocked:
            free -= 1
            continue
        for name in sorted(n for n in snapshot.groups if n is not model.ROOT):
            tasks = set(snapshot.groups[name].tasks)
            if _shared(prefix, name) and name not in needed and (
                    name not in aliases.values()) and tasks and (
                    tasks <= wanted[missing]):
                aliases[missing] = name
                break
    return aliases
