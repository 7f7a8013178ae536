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


"""The bandwidth controller: protect high-priority instances. Pure.

Each memory-bandwidth domain is controlled on its own. The agent hands it
pools (:mod:`rdt_virt.agent.pools`: the L3/MBA domains that share a NUMA
node's memory, with their MBM rates summed) as its domains; to this
module a domain is any set of memory with one capacity.
Once per period :func:`decide` takes what the agent measured in the last
interval and the levels in force, and returns new levels, each change with
its reason. It reads no file and keeps no hidden state: everything it
remembers between periods is in :class:`State`, which the agent also
publishes, so a restarted agent resumes where it stopped. The admin guide
("Protection classes and the controller") states the law for operators;
in short:

* *Active*: a low instance by its bandwidth (``active_threshold``,
  summed over the domains, on each domain with its even share of it); a
  high one also by its demand, the time its vCPU threads were runnable,
  which the neighbours cannot take from it (:mod:`rdt_virt.agent.keeping`).
* *Pressure*: the domain's total over its *capacity* (configured, else
  the highest total it sustained for ``learn_samples`` intervals).
* **Throttle** while a high instance is active and the pressure is at or
  above ``high_watermark``: the heaviest low instances are multiplied by
  ``decrease`` until the excess is covered; when the pool is saturated
  (pressure above 1) or a high instance moves less than half of its
  sustained *peak*, the excess is unknown and every active low instance
  goes to the floor at once. So do they, at any pressure, while a high
  instance is *starved*: below half of its peak in proportion to its
  demand (all of the peak from :data:`~rdt_virt.agent.keeping.KEPT` of
  the demand it had then; :func:`~rdt_virt.agent.keeping.wants`).
* **Late-measured**: a low instance active for the first time in a pool
  whose other active low instances are all held, with a high instance
  active, starts at their level at once.
* **Not measured yet**: a monitored low instance without a first rate,
  new since the last period, goes to the floor while a high instance of
  the pool is starved, and where the other active low instances are all
  held, with a high instance active, starts at their level.
* **Release** (``increase`` points) when no high instance is active, or
  when the pressure is at or below ``low_watermark`` and every active
  high instance keeps what protection gave it (the rate it moved before
  the last step). The first interval in which one moves less than
  :data:`~rdt_virt.agent.keeping.KEPT` of it while wanting as much undoes
  the last step, and the pool releases no more until no high instance is
  active. A release is also held when the step could bring the pressure
  back to the high watermark.
* **Hold** otherwise; ``throttle_dwell`` and ``release_dwell`` seconds
  after a domain's last change before it may throttle or release again.
* **CLOSIDs**: on percent hosts each level is a shared group. With no
  CLOSID for a new level, an instance joins the nearest level whose group
  exists, else the lowest one below it; a level's group changes its value
  in place when every instance at it goes down together.

An instance that was not measured in the interval is neither throttled
nor released because of it, and a domain where a monitored instance was
last active holds its releases while it is unmeasured. An instance has one
level: the lowest level any domain asks for wins, and a release needs
every domain the instance has been active on since it was first throttled
to agree (unpinned vCPUs move between sockets and take their level along).
"""

import collections
import dataclasses
import typing

from rdt_virt.agent import keeping
from rdt_virt.agent import levelgroups
from rdt_virt.policy import extra_specs

HIGH = extra_specs.PRIORITY_HIGH
NORMAL = extra_specs.PRIORITY_NORMAL
LOW = extra_specs.PRIORITY_LOW

# Capacity sources.
CONFIGURED = 'configured'
FIRMWARE = 'firmware'
LEARNED = 'learned'

# Decisions of a domain.
THROTTLE = 'throttle'
RELEASE = 'release'
HOLD = 'hold'

MB = 2 ** 20
#: Pressure above which a domain moves all it can (see "Saturated").
SATURATED = 1.0
#: Share of its peak below which a high instance is squeezed.
SQUEEZED = 0.5


@dataclasses.dataclass(frozen=True)
class Params:
    """The control law's parameters (``[rdt_controller]`` options)."""

    high_watermark: float = 0.85
    low_watermark: float = 0.60
    decrease: float = 0.5
    increase: float = 10.0      # percent points of the unthrottled value
    # Seconds since a domain's last change before it may throttle again,
    # and before it may release.
    throttle_dwell: float = 10.0
    release_dwell: float = 30.0
    floor: float = 10.0         # percent of the unthrottled value
    active_threshold: float = 50.0 * MB     # bytes/s
    learn_samples: int = 3


@dataclasses.dataclass(frozen=True)
class Scale:
    """The host's MBA unit: which levels exist.

    :param unit: 'percent', 'MBps' or 'amd'.
    :param maximum: the unthrottled value.
    :param minimum: the lowest value the hardware takes.
    :param step: the granularity of the values.
    :param bytes_per_unit: bytes/s of one unit (absolute units), None for
        percent.
    :param max_levels: how many distinct levels may be in use at once
        (percent: the CLOSIDs the agent may use for them), None: no limit.
    :param existing: levels whose group exists already (the agent's
        shared groups of static percentages): joining one takes no CLOSID.
    """

    unit: str
    maximum: int
    minimum: int
    step: int = 1
    bytes_per_unit: typing.Optional[float] = None
    max_levels: typing.Optional[int] = None
    existing: typing.FrozenSet[int] = frozenset()

    @property
    def shared(self):
        return self.bytes_per_unit is None

    def round_down(self, value):
        value = int(value // self.step * self.step)
        return max(self.minimum, min(self.maximum, value))

    def round_up(self, value):
        value = int(-(-value // self.step) * self.step)
        return max(self.minimum, min(self.maximum, value))


class Member(typing.NamedTuple):
    """One instance as the controller sees it in one interval.

    A named tuple, immutable like the other values here: the agent makes
    one per instance every period, and a frozen dataclass costs several
    times as much to build.

    :param priority: 'high', 'normal' or 'low'.
    :param ceiling: its static cap in the host's unit (None: none).
    :param domains: ``{domain id: bytes/s}`` measured in the interval;
        None when it was not measured.
    :param monitored: whether the agent measures it at all.
    :param demand: CPUs its vCPU threads were runnable (running or
        waiting for a CPU) in the interval; None: unknown.
    """

    uuid: str
    priority: str = NORMAL
    ceiling: typing.Optional[int] = None
    domains: typing.Optional[typing.Mapping[int, float]] = None
    monitored: bool = True
    demand: typing.Optional[float] = None


@dataclasses.dataclass(frozen=True)
class Domain:
    """What the controller keeps of one domain between periods."""

    last_change: float = float('-inf')
    learned: float = 0.0
    # The last totals, newest last, for the sustained maximum.
    recent: typing.Tuple[float, ...] = ()
    # While a high instance is active: {uuid: (bytes/s, demand)} that
    # protection gave each (rdt_virt.agent.keeping), the levels before the
    # last release step (to undo it), and whether a release cost one its
    # share (no release until no high instance is active).
    given: typing.Mapping[str, tuple] = dataclasses.field(
        default_factory=dict)
    undo: typing.Mapping[str, int] = dataclasses.field(default_factory=dict)
    stopped: bool = False


@dataclasses.dataclass(frozen=True)
class State:
    """Everything the controller remembers (published in the state file).

    :param levels: ``{uuid: level}`` of the instances it holds below their
        ceiling.
    :param domains: ``{domain id: Domain}``.
    :param seen: ``{uuid: domain ids}`` where each instance was last
        active.
    :param held_on: ``{uuid: domain ids}`` where each held instance has
        been active since it was first throttled.
    :param peaks: ``{uuid: keeping.Peak}`` of the high-priority instances.
    """

    levels: typing.Mapping[str, int] = dataclasses.field(
        default_factory=dict)
    domains: typing.Mapping[int, Domain] = dataclasses.field(
        default_factory=dict)
    seen: typing.Mapping[str, typing.FrozenSet[int]] = dataclasses.field(
        default_factory=dict)
    held_on: typing.Mapping[str, typing.FrozenSet[int]] = dataclasses.field(
        default_factory=dict)
    peaks: typing.Mapping[str, keeping.Peak] = dataclasses.field(
        default_factory=dict)


class Change(typing.NamedTuple):
    """One level change and why."""

    uuid: str
    domain: int
    old: typing.Optional[int]       # None: not held
    new: typing.Optional[int]
    reason: str


@dataclasses.dataclass(frozen=True)
class Report:
    """One domain's figures in one period."""

    decision: str
    reason: str
    pressure: typing.Optional[float]
    capacity: typing.Optional[float]
    capacity_source: typing.Optional[str]
    total: float
    throttled: int
    active_high: int
    # Active low instances on the domain, and how many of them sit at
    # their floor once the period's levels are in force: all of them,
    # with a high instance under pressure, and nothing is left to throttle.
    active_low: int = 0
    low_at_floor: int = 0
    starved_high: int = 0


@dataclasses.dataclass(frozen=True)
class Decision:
    state: State
    changes: typing.Tuple[Change, ...]
    reports: typing.Mapping[int, Report]


def _capacity(configured, old, total, params):
    """(capacity, source, Domain memory updated with this total)."""
    recent = (old.recent + (total,))[-params.learn_samples:]
    learned = old.learned
    if len(recent) == params.learn_samples:
        learned = max(learned, min(recent))
    memory = dataclasses.replace(old, recent=recent, learned=learned)
    if configured:
        return configured, CONFIGURED, memory
    if learned > 0:
        return learned, LEARNED, memory
    return None, None, memory


def _ceiling(member, scale):
    if member.ceiling is None:
        return scale.maximum
    return min(member.ceiling, scale.maximum)


def _floor(member, scale, params, capacity):
    return min(_domain_floor(scale, params, capacity),
               _ceiling(member, scale))


def _domain_floor(scale, params, capacity):
    """The floor of a member without a static cap (one per domain)."""
    if scale.shared:
        floor = scale.maximum * params.floor / 100.0
    elif capacity and scale.bytes_per_unit:
        floor = capacity * params.floor / 100.0 / scale.bytes_per_unit
    else:
        floor = scale.maximum * params.floor / 100.0
    return scale.round_up(max(floor, scale.minimum))


def in_force(member, levels, scale):
    """The value in force: the controller's level, else the ceiling."""
    level = levels.get(member.uuid)
    return _ceiling(member, scale) if level is None else level


def _vote(votes, uuid, new, dom):
    old = votes.get(uuid, (None, None))[0]
    if old is None or new < old:
        votes[uuid] = (new, dom)


def _throttle(dom, lows, levels, scale, params, capacity, excess, in_use,
              votes, pending, saturated=False):
    """Cut the heaviest low instances until ``excess`` bytes/s is covered.

    ``saturated``: the excess is unknown; every one goes to its floor.
    ``pending`` gets the cuts that need a level changed in place.
    """
    covered = 0.0
    base = _domain_floor(scale, params, capacity)
    for member in sorted(lows, key=lambda m: (-m.domains.get(dom, 0.0),
                                              m.uuid)):
        if covered >= excess:
            break
        current = in_force(member, levels, scale)
        floor = min(base, _ceiling(member, scale))
        if current <= floor:
            continue
        if not scale.shared and member.uuid not in levels and (
                scale.bytes_per_unit):
            # An absolute cap starts from what the instance uses now.
            use = sum(member.domains.values()) / scale.bytes_per_unit
            current = min(current, max(use, floor))
        new = floor if saturated else max(
            floor, scale.round_down(current * params.decrease))
        new, in_place = levelgroups.snap(new, current, in_use, scale, floor)
        if new >= current:
            continue
        if in_place:
            if member.uuid not in levels:
                continue        # nothing to change in place
            pending[member.uuid] = (current, new)
        bps = member.domains.get(dom, 0.0)
        covered += bps * (1.0 - float(new) / current)
        _vote(votes, member.uuid, new, dom)
        if not in_place:
            in_use.add(new)
    return covered


def _new_to_floor(dom, new_lows, levels, scale, params, capacity, in_use,
                  votes):
    """Vote the floor for each unmeasured new low instance; how many."""
    count = 0
    for m in new_lows:
        floor = _floor(m, scale, params, capacity)
        current = in_force(m, levels, scale)
        level, in_place = levelgroups.snap(floor, current, in_use, scale,
                                           floor)
        if level < current and not in_place:
            _vote(votes, m.uuid, level, dom)
            in_use.add(level)
            count += 1
    return count


def _released(member, old, scale, params, capacity):
    """The level one release step gives ``member`` (None: let go)."""
    ceiling = _ceiling(member, scale)
    step = scale.maximum * params.increase / 100.0
    if not scale.shared and scale.bytes_per_unit and capacity:
        # Absolute units: steps of the domain's capacity, and a level at
        # the capacity no longer holds anything back.
        step = capacity * params.increase / 100.0 / scale.bytes_per_unit
        ceiling = min(ceiling, scale.round_up(
            capacity / scale.bytes_per_unit))
    new = scale.round_up(old + max(step, scale.step))
    return None if new >= ceiling else new


class _Steps(object):
    """:func:`_released` within one decision.

    It depends on a member only through its ceiling, and the held
    instances share a few levels: each step is worked out once.
    """

    def __init__(self, scale, params):
        self.scale = scale
        self.params = params
        self._known = {}

    def __call__(self, member, old, capacity):
        key = (member.ceiling, old, capacity)
        try:
            return self._known[key]
        except KeyError:
            new = self._known[key] = _released(member, old, self.scale,
                                               self.params, capacity)
            return new


def _release_growth(dom, held, levels, scale, released, capacity):
    """Bytes/s one release step may add to domain ``dom``, at most.

    :param released: a :class:`_Steps`.
    """
    growth = 0.0
    for member in held:
        if member.domains is None:
            continue
        old = levels[member.uuid]
        new = released(member, old, capacity)
        new = _ceiling(member, scale) if new is None else new
        if not scale.shared and scale.bytes_per_unit:
            growth += (new - old) * scale.bytes_per_unit
        elif old > 0:
            growth += member.domains.get(dom, 0.0) * (float(new) / old - 1)
    return growth


_NO_PEAK = keeping.Peak()
_NOWHERE = frozenset()


def decide(members, state, scale, params, now, capacities=None):
    """New levels from the measurements of one interval.

    :param members: :class:`Member` of every instance on the host.
    :param state: the :class:`State` of the last period.
    :param scale: the host's :class:`Scale`.
    :param params: :class:`Params`.
    :param now: monotonic seconds.
    :param capacities: ``{domain id: bytes/s}`` configured.
    :returns: a :class:`Decision`.
    """
    capacities = capacities or {}
    levels = dict(state.levels)
    members = {m.uuid: m for m in members}
    # Levels of instances that left, or are no longer low, are dropped.
    # So are levels at or above a (lowered) static cap: the cap rules.
    for uuid in list(levels):
        m = members.get(uuid)
        if m is None or m.priority != LOW or (
                levels[uuid] >= _ceiling(m, scale)):
            del levels[uuid]
    seen = {u: d for u, d in state.seen.items() if u in members}
    domain_ids = set(state.domains) | set(capacities)
    measured = [m for m in members.values() if m.domains is not None]
    active, threshold, before = (keeping.active_domains,
                                 params.active_threshold, state.seen)
    for m in measured:
        # by_demand: for high-priority instances.
        seen[m.uuid] = active(m, threshold, before.get(m.uuid, ()),
                              m.priority == HIGH)
    domain_ids.update(*[m.domains for m in measured])
    held_on = {u: state.held_on.get(u, _NOWHERE) | seen.get(u, _NOWHERE)
               for u in levels}
    peaks = {}
    squeezed = set()
    starved = set()     # below half of what its demand wants of its peak
    for m in [m for m in members.values() if m.priority == HIGH]:
        peak = state.peaks.get(m.uuid, _NO_PEAK)
        if m.domains is not None:
            total = sum(m.domains.values())
            if total < SQUEEZED * peak.learned and seen[m.uuid]:
                squeezed.add(m.uuid)
                if keeping.starved(m, total, peak, SQUEEZED):
                    starved.add(m.uuid)
            peak = peak.add(total, params.learn_samples, m.demand)
        peaks[m.uuid] = peak

    # Domains whose total may miss an unmeasured instance.
    unsure = {}
    for m in members.values():
        if m.monitored and m.domains is None:
            for d in seen.get(m.uuid, domain_ids):
                unsure.setdefault(d, m.uuid)
    in_use = {v for v in levels.values()}
    released = _Steps(scale, params)
    throttle_votes = {}         # uuid -> (level, domain)
    pending = {}                # uuid -> (level, level) in place
    cut_reasons = {}            # domain -> why its votes cut
    vote_why = {}               # uuid -> why, where not the domain's
    release_ok = {}             # uuid -> set of domains that release
    hold_for = {}               # uuid -> set of domains that hold
    reports = {}
    active_lows = {}            # domain -> (active lows, capacity)
    new_domains = {}
    changed_domains = set()
    # The held instances, each with where it has a say: the domains it
    # was active on since it was first throttled, or after a restart,
    # when nothing is known, every domain. (Levels change only after the
    # loop: the same for every domain.)
    held = [(m, held_on.get(m.uuid)) for m in members.values()
            if m.uuid in levels]
    measured_highs = [m for m in measured if m.priority == HIGH]
    measured_lows = [m for m in measured if m.priority == LOW]
    # Monitored low instances that have never been measured: started (or
    # first monitored) since the last period. Nothing after a restart.
    new_lows = [m for m in members.values() if m.priority == LOW and
                m.domains is None and m.monitored and
                m.uuid not in state.seen] if state.seen else []
    for dom in sorted(domain_ids):
        old = state.domains.get(dom, Domain())
        total = sum([m.domains.get(dom, 0.0) for m in measured])
        capacity, source, memory = _capacity(
            capacities.get(dom), old, total, params)
        pressure = total / capacity if capacity else None
        highs = [m for m in measured_highs if dom in seen[m.uuid]]
        lows = [m for m in measured_lows if dom in seen[m.uuid]]
        held_here = [m for m, on in held if not on or dom in on]
        # 10% slack: a period that ends a little early (sampling jitter)
        # must not cost a whole period more.
        since = now - old.last_change
        throttle_dwelling = since < params.throttle_dwell * 0.9
        release_dwelling = since < params.release_dwell * 0.9
        decision, reason = HOLD, 'between the watermarks'
        # What protection gave each active high instance; all of it is
        # forgotten once none is active.
        given = {m.uuid: old.given[m.uuid] for m in highs
                 if m.uuid in old.given}
        undo = dict(old.undo) if highs else {}
        stopped = old.stopped and bool(highs)
        losing = sorted(m.uuid for m in highs
                        if keeping.lost(m, given.get(m.uuid)))
        # Nothing is late in the first period after a (re)start: nobody
        # was seen before it.
        if highs and state.seen:
            for what, joining in (
                    ('late-measured', keeping.join_level(
                        dom, lows, levels, state.seen)),
                    ('not measured yet', keeping.join_new(
                        lows, new_lows, levels, state.seen))):
                for uuid, level in joining.items():
                    if level < in_force(members[uuid], levels, scale):
                        _vote(throttle_votes, uuid, level, dom)
                        vote_why[uuid] = (
                            '%s: starts where the other low instances '
                            'are, with %d active high' % (what, len(highs)))
        if pressure is None:
            reason = 'capacity unknown yet'
        # A starved high instance is no matter of the pressure: the
        # pressure is the total over a capacity that other work on the
        # host (or a capacity learned when the host was idle) makes read
        # low, while the instance gets less than half of what its demand
        # wants.
        hungry = sorted(m.uuid for m in highs if m.uuid in starved)
        above = 'pressure above the high watermark' if (
            pressure is not None and pressure >= params.high_watermark) \
            else '%s starved' % (hungry[0] if hungry else '')
        if highs and pressure is not None and (
                pressure >= params.high_watermark or hungry):
            if throttle_dwelling:
                reason = above + ', dwelling'
            elif not lows:
                reason = above + ', no active low'
            else:
                short = sorted(m.uuid for m in highs if m.uuid in squeezed)
                saturated = pressure > SATURATED or bool(short)
                excess = float('inf') if saturated else (
                    total - params.high_watermark * capacity)
                covered = _throttle(dom, lows, levels, scale, params,
                                    capacity, excess, in_use,
                                    throttle_votes, pending, saturated)
                if covered > 0 and saturated:
                    decision = THROTTLE
                    reason = ('pressure %.2f: %s with %d active high, '
                              'every active low to the floor' % (
                                  pressure, 'saturated' if pressure >
                                  SATURATED else '%s below half its peak%s'
                                  % (short[0], ' at its demand' if
                                     short[0] in starved else ''),
                                  len(highs)))
                    cut_reasons[dom] = reason
                elif covered > 0:
                    decision = THROTTLE
                    reason = ('pressure %.2f >= high watermark %.2f with '
                              '%d active high' % (pressure,
                                                  params.high_watermark,
                                                  len(highs)))
                    cut_reasons[dom] = reason + ', heaviest first'
                else:
                    reason = (above + ', no step left (every active low '
                              'at its floor or at the lowest level there '
                              'is)')
            if hungry and new_lows and not throttle_dwelling and (
                    _new_to_floor(dom, new_lows, levels, scale, params,
                                  capacity, in_use, throttle_votes)):
                # Their first rate is one or two intervals away, and the
                # high instance is starved now: the likeliest cause goes
                # to the floor at once; the usual steps release it once
                # it is measured idle.
                decision = THROTTLE
                reason = ('%s starved, with %d low instance(s) not measured '
                          'yet: those to the floor' % (
                              hungry[0], sum(1 for m in new_lows
                                             if m.uuid in throttle_votes)))
                for m in new_lows:
                    vote_why.setdefault(m.uuid, reason)
            if decision == THROTTLE and undo:
                # Cut again after a release with a high instance active:
                # the release cost it its share, as when it is undone
                # below; no release while it is active, or the pool
                # cycles between the floor and one step above it.
                stopped = True
                undo = {}
        elif losing:
            # The first sign that a release cost it its share: undo the
            # last step, and release no more while it is active.
            kept = sum(members[losing[0]].domains.values()) / (
                given[losing[0]][0] or 1.0)
            reason = ('%s moves %.0f%% of what protection gave it, '
                      'wanting as much' % (losing[0], 100 * kept))
            if throttle_dwelling:
                reason += ', dwelling'
            else:
                stopped = True
                for uuid, level in sorted(undo.items()):
                    m = members.get(uuid)
                    if m is None or m.priority != LOW:
                        continue
                    floor = _floor(m, scale, params, capacity)
                    current = in_force(m, levels, scale)
                    level, in_place = levelgroups.snap(
                        max(level, floor), current, in_use, scale, floor)
                    if level < current and not in_place:
                        _vote(throttle_votes, uuid, level, dom)
                        in_use.add(level)
                        decision = THROTTLE
                reason += (': the last release undone, no release while '
                           'it is active' if decision == THROTTLE else
                           ': no release while it is active')
                cut_reasons[dom] = reason
                undo = {}
        elif not highs or (pressure is not None and
                           pressure <= params.low_watermark):
            why = ('no active high-priority instance' if not highs else
                   'pressure %.2f <= low watermark %.2f' % (
                       pressure, params.low_watermark))
            if not held_here:
                reason = why + ', nothing throttled'
            elif dom in unsure:
                reason = why + ', but %s was not measured' % unsure[dom]
            elif release_dwelling:
                reason = why + ', dwelling'
            elif stopped:
                reason = why + (', but a release cost a high instance its '
                                'share: none while it is active')
            elif highs and capacity and (
                    total + _release_growth(dom, held_here, levels, scale,
                                            released, capacity) >=
                    params.high_watermark * capacity):
                reason = why + (', but a release step could bring it back '
                                'to the high watermark %.2f' %
                                params.high_watermark)
            else:
                decision, reason = RELEASE, why
                # What the active high instances have at the levels in
                # force now is what the next step must leave them.
                for m in highs:
                    given[m.uuid] = keeping.remember(given.get(m.uuid), m)
                undo = {m.uuid: levels[m.uuid] for m in held_here} if (
                    highs) else {}
        for m in held_here:
            if decision == RELEASE:
                release_ok.setdefault(m.uuid, set()).add(dom)
            else:
                hold_for.setdefault(m.uuid, set()).add(dom)
        if decision != HOLD:
            changed_domains.add(dom)
        new_domains[dom] = dataclasses.replace(
            memory, given=given, undo=undo, stopped=stopped)
        active_lows[dom] = (lows, capacity)
        reports[dom] = Report(
            decision, reason, pressure, capacity, source, total,
            throttled=0, active_high=len(highs), active_low=len(lows),
            starved_high=len(hungry))
    levelgroups.in_place(throttle_votes, pending, levels)
    changes = []
    no_closid = set()           # domains whose release needs a CLOSID
    for uuid, (new, dom) in sorted(throttle_votes.items()):
        old = levels.get(uuid)
        levels[uuid] = new
        held_on[uuid] = held_on.get(uuid, frozenset()) | seen.get(
            uuid, frozenset()) | {dom}
        reason = vote_why.get(uuid) or cut_reasons.get(
            dom, reports[dom].reason)
        if uuid in pending and pending[uuid][1] == new:
            reason += (' (no free CLOSID for a new level: level %d changed '
                       'in place)' % pending[uuid][0])
        changes.append(Change(uuid, dom, old, new, reason))
    steps = {}                  # uuid -> (domain, level, released)
    for uuid, doms in sorted(release_ok.items()):
        m = members[uuid]
        if uuid in throttle_votes or hold_for.get(uuid) or (
                m.domains is None):
            continue
        dom = min(doms)
        old = levels[uuid]
        steps[uuid] = (dom, old, released(m, old, reports[dom].capacity))
    limited = scale.shared and scale.max_levels is not None
    moving = levelgroups.whole_levels(steps, levels) if limited else ()
    held = collections.Counter(levels.values()) if limited else None
    for uuid, (dom, old, new) in sorted(steps.items()):
        if limited and new is not None and old not in moving:
            new = levelgroups.snap_up(new, old, held, scale)
            if new == old:
                no_closid.add(dom)
                continue
        if held is not None:
            held[old] -= 1
            if new is not None:
                held[new] += 1
        if new is None:
            del levels[uuid]
        else:
            levels[uuid] = new
        changes.append(Change(uuid, dom, old, new, reports[dom].reason))
    for dom in changed_domains:
        if any(c.domain == dom for c in changes):
            new_domains[dom] = dataclasses.replace(new_domains[dom],
                                                   last_change=now)
        elif reports[dom].decision == THROTTLE:
            # Its cuts needed a level changed in place, and not every
            # instance of that level went down with them.
            reports[dom] = dataclasses.replace(
                reports[dom], decision=HOLD, reason=(
                    'pressure above the high watermark, no step left (no '
                    'free CLOSID for a level, and a level in use cannot '
                    'change in place)'))
        elif dom in no_closid:
            reports[dom] = dataclasses.replace(
                reports[dom], decision=HOLD, reason=(
                    reports[dom].reason + ', but no free CLOSID for a '
                    'higher level'))
    # The held instances where they have a say, as above, counted in one
    # pass over the levels.
    everywhere = 0
    throttled = {}
    for uuid in levels:
        on = held_on.get(uuid)
        if not on:
            everywhere += 1
        else:
            for dom in on:
                throttled[dom] = throttled.get(dom, 0) + 1
    for dom, report in list(reports.items()):
        lows, capacity = active_lows[dom]
        floor = _domain_floor(scale, params, capacity)
        at_floor = 0
        for m in lows:
            ceiling = _ceiling(m, scale)
            level = levels.get(m.uuid)      # in_force(), as in the loop
            if (ceiling if level is None else level) <= min(floor, ceiling):
                at_floor += 1
        reports[dom] = dataclasses.replace(
            report, throttled=everywhere + throttled.get(dom, 0),
            low_at_floor=at_floor)
    held_on = {u: held_on[u] for u in levels}
    return Decision(State(levels, new_domains, seen, held_on, peaks),
                    tuple(changes), reports)
