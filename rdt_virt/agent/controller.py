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
publishes, so a restarted agent resumes where it stopped.

Definitions
-----------

*active*
    An instance whose bandwidth, summed over the domains, is at least
    ``active_threshold`` bytes/s in the last interval; it is active on the
    domains that carry at least their even share of the threshold. The
    sum, not each domain: a guest whose threads run on both sockets
    splits its traffic, and a protected guest squeezed by its neighbours
    must not drop out of sight exactly when it needs protection.
*pressure*
    The domain's measured bandwidth (the sum over the instances measured
    in the interval) divided by its *capacity*.
*capacity*
    Bytes/s the domain's memory can move: configured, else the sustained
    maximum the domain has shown (learned: the highest value that the
    domain's total held for ``learn_samples`` intervals in a row). Linux
    exposes no firmware figure of a domain's memory bandwidth through
    resctrl or sysfs (ACPI HMAT's bandwidths are per NUMA node and reach
    sysfs only as initiator/target access classes, not per L3 domain), so
    no capacity is read from firmware; ``firmware`` is reserved for that.

Control law (per domain)
------------------------

* **Throttle** (multiplicative decrease) when a high-priority instance is
  active and the pressure is at or above ``high_watermark``: the low
  instances active on the domain, heaviest first, each get their level
  multiplied by ``decrease``, until what they are expected to give up
  covers the excess over the high watermark. Never below the floor.
* **Saturated or squeezed**: at a pressure above 1 the domain moves all
  it can, and its total no longer shows how much more the instances
  want; nor does it while a high-priority instance active there moves
  less than half of its own *peak* (the highest rate it sustained for
  ``learn_samples`` intervals in a row) and the pressure is at or above
  the high watermark: what it lost is demand the total does not show.
  The excess over the high watermark is then unknown, and a proportional
  cut would take as many periods as the demand is deep while the
  protected instance waits. Every active low instance goes to the floor
  at once; the releases (below) give back what was not needed. This is
  Heracles' answer to a violated target, and TCP's to a timeout.
* **Release** (additive increase) when no high-priority instance is
  active, or the pressure is at or below ``low_watermark``: every
  throttled instance on the domain gets ``increase`` more; at its ceiling
  (its static cap, or unthrottled) the controller lets it go. While a
  high-priority instance is active, a release is held back when the step
  would bring the pressure back to the high watermark, taking a throttled
  instance's traffic to grow at most in proportion to its level (in
  percent; by the step's MBps in absolute units). Without that guard a
  throttle that works lowers the pressure below the low watermark, the
  release brings it back above the high one, and the levels cycle.
* **Hold** in between: the watermarks are the hysteresis band, and a
  steady workload inside it causes no change.
* **Dwell**: a domain throttles again only ``throttle_dwell`` seconds
  after its last change (by default one period: the effect of a change is
  measured in the next interval), and releases only ``release_dwell``
  seconds after it (by default three periods). Backing off fast and
  giving back slowly is what keeps a protected instance protected when
  its neighbours' demand is steady.

An instance that was not measured in the interval (no RMID or counter in
the rotation, ``Unavailable``, a counter reset, its first sample) is
neither throttled nor released because of it: its level stays. A domain
where a monitored instance was last active holds its releases while that
instance is unmeasured, because its total may be missing the heaviest
consumer.

Levels are in the host's MBA unit: percent (Intel, MPAM) in steps of
``bandwidth_gran``, or MBps on hosts mounted with ``mba_MBps`` (and AMD's
units where the host has them). An instance has one level: MBA values of
the agent's shared groups are the same on every domain, so the lowest
level any domain asks for wins, and a release needs every domain the
instance has been active on since it was first throttled to agree. Not
only the domains of the last interval: vCPUs that are not pinned move
between sockets and take their one level with them, and a domain that
protects nobody must not release an instance that another domain, where
it ran a moment ago and will run again, has throttled for a high one.
"""

import dataclasses
import typing

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
    """

    unit: str
    maximum: int
    minimum: int
    step: int = 1
    bytes_per_unit: typing.Optional[float] = None
    max_levels: typing.Optional[int] = None

    @property
    def shared(self):
        return self.bytes_per_unit is None

    def round_down(self, value):
        value = int(value // self.step * self.step)
        return max(self.minimum, min(self.maximum, value))

    def round_up(self, value):
        value = int(-(-value // self.step) * self.step)
        return max(self.minimum, min(self.maximum, value))


@dataclasses.dataclass(frozen=True)
class Member:
    """One instance as the controller sees it in one interval.

    :param priority: 'high', 'normal' or 'low'.
    :param ceiling: its static cap in the host's unit (None: none).
    :param domains: ``{domain id: bytes/s}`` measured in the interval;
        None when it was not measured.
    :param monitored: whether the agent measures it at all.
    """

    uuid: str
    priority: str = NORMAL
    ceiling: typing.Optional[int] = None
    domains: typing.Optional[typing.Mapping[int, float]] = None
    monitored: bool = True


@dataclasses.dataclass(frozen=True)
class Domain:
    """What the controller keeps of one domain between periods."""

    last_change: float = float('-inf')
    learned: float = 0.0
    # The last totals, newest last, for the sustained maximum.
    recent: typing.Tuple[float, ...] = ()


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
    :param peaks: ``{uuid: Peak}`` of the high-priority instances.
    """

    levels: typing.Mapping[str, int] = dataclasses.field(
        default_factory=dict)
    domains: typing.Mapping[int, Domain] = dataclasses.field(
        default_factory=dict)
    seen: typing.Mapping[str, typing.FrozenSet[int]] = dataclasses.field(
        default_factory=dict)
    held_on: typing.Mapping[str, typing.FrozenSet[int]] = dataclasses.field(
        default_factory=dict)
    peaks: typing.Mapping[str, "Peak"] = dataclasses.field(
        default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Peak:
    """The highest rate a high instance sustained (learned like capacity)."""

    learned: float = 0.0
    recent: typing.Tuple[float, ...] = ()

    def add(self, total, samples):
        recent = (self.recent + (total,))[-samples:]
        learned = self.learned
        if len(recent) == samples:
            learned = max(learned, min(recent))
        return Peak(learned, recent)


@dataclasses.dataclass(frozen=True)
class Change:
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
    if scale.shared:
        floor = scale.maximum * params.floor / 100.0
    elif capacity and scale.bytes_per_unit:
        floor = capacity * params.floor / 100.0 / scale.bytes_per_unit
    else:
        floor = scale.maximum * params.floor / 100.0
    return min(scale.round_up(max(floor, scale.minimum)),
               _ceiling(member, scale))


def in_force(member, levels, scale):
    """The value in force: the controller's level, else the ceiling."""
    level = levels.get(member.uuid)
    return _ceiling(member, scale) if level is None else level


def _snap(value, in_use, scale, floor):
    """A level within the limit on distinct levels (shared groups).

    Each percentage is a control group, and CLOSIDs are few: when no new
    level may be opened, the nearest lower one in use is taken (else the
    nearest higher one: never above what was asked by more than needed).
    """
    if not scale.shared or scale.max_levels is None or value in in_use or (
            len(in_use) < scale.max_levels):
        return value
    lower = [v for v in in_use if floor <= v <= value]
    if lower:
        return max(lower)
    higher = [v for v in in_use if v > value]
    return min(higher) if higher else value


def _throttle(dom, lows, levels, scale, params, capacity, excess, in_use,
              votes, saturated=False):
    """Cut the heaviest low instances until ``excess`` bytes/s is covered.

    ``saturated``: the excess is unknown; every one goes to its floor.
    """
    covered = 0.0
    for member in sorted(lows, key=lambda m: (-m.domains.get(dom, 0.0),
                                              m.uuid)):
        if covered >= excess:
            break
        current = in_force(member, levels, scale)
        floor = _floor(member, scale, params, capacity)
        if current <= floor:
            continue
        if not scale.shared and member.uuid not in levels and (
                scale.bytes_per_unit):
            # An absolute cap starts from what the instance uses now.
            use = sum(member.domains.values()) / scale.bytes_per_unit
            current = min(current, max(use, floor))
        new = floor if saturated else max(
            floor, scale.round_down(current * params.decrease))
        new = _snap(new, in_use, scale, floor)
        if new >= current:
            continue
        bps = member.domains.get(dom, 0.0)
        covered += bps * (1.0 - float(new) / current)
        old = votes.get(member.uuid, (None, None))[0]
        if old is None or new < old:
            votes[member.uuid] = (new, dom)
        in_use.add(new)
    return covered


def _active(member, params):
    """Domains where ``member`` is active in this interval (see above)."""
    if not member.domains:
        return frozenset()
    if sum(member.domains.values()) < params.active_threshold:
        return frozenset()
    share = params.active_threshold / len(member.domains)
    return frozenset(d for d, bps in member.domains.items() if bps >= share)


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


def _release_growth(dom, held, levels, scale, params, capacity):
    """Bytes/s one release step may add to domain ``dom``, at most."""
    growth = 0.0
    for member in held:
        if member.domains is None:
            continue
        old = levels[member.uuid]
        new = _released(member, old, scale, params, capacity)
        new = _ceiling(member, scale) if new is None else new
        if not scale.shared and scale.bytes_per_unit:
            growth += (new - old) * scale.bytes_per_unit
        elif old > 0:
            growth += member.domains.get(dom, 0.0) * (float(new) / old - 1)
    return growth


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
    for m in members.values():
        if m.domains is not None:
            seen[m.uuid] = _active(m, params)
            domain_ids |= set(m.domains)
    held_on = {u: state.held_on.get(u, frozenset()) | seen.get(
        u, frozenset()) for u in levels}
    peaks = {}
    squeezed = set()
    for m in members.values():
        if m.priority != HIGH:
            continue
        peak = state.peaks.get(m.uuid, Peak())
        if m.domains is not None:
            total = sum(m.domains.values())
            if total < SQUEEZED * peak.learned and seen[m.uuid]:
                squeezed.add(m.uuid)
            peak = peak.add(total, params.learn_samples)
        peaks[m.uuid] = peak

    def held_there(uuid, dom):
        # After a restart nothing is known: every domain has a say.
        return uuid in levels and (dom in held_on.get(uuid, ()) or
                                   not held_on.get(uuid))
    # Domains whose total may miss an unmeasured instance.
    unsure = {}
    for m in members.values():
        if m.monitored and m.domains is None:
            for d in seen.get(m.uuid, domain_ids):
                unsure.setdefault(d, m.uuid)
    in_use = {v for v in levels.values()}
    throttle_votes = {}         # uuid -> (level, domain)
    cut_reasons = {}            # domain -> why its votes cut
    release_ok = {}             # uuid -> set of domains that release
    hold_for = {}               # uuid -> set of domains that hold
    reports = {}
    new_domains = {}
    changed_domains = set()
    for dom in sorted(domain_ids):
        old = state.domains.get(dom, Domain())
        measured = [m for m in members.values() if m.domains is not None]
        total = sum(m.domains.get(dom, 0.0) for m in measured)
        capacity, source, memory = _capacity(
            capacities.get(dom), old, total, params)
        pressure = total / capacity if capacity else None
        highs = [m for m in measured if m.priority == HIGH and
                 dom in seen[m.uuid]]
        lows = [m for m in measured if m.priority == LOW and
                dom in seen[m.uuid]]
        held_here = [m for m in members.values() if held_there(m.uuid, dom)]
        # 10% slack: a period that ends a little early (sampling jitter)
        # must not cost a whole period more.
        since = now - old.last_change
        throttle_dwelling = since < params.throttle_dwell * 0.9
        release_dwelling = since < params.release_dwell * 0.9
        decision, reason = HOLD, 'between the watermarks'
        if pressure is None:
            reason = 'capacity unknown yet'
        if highs and pressure is not None and (
                pressure >= params.high_watermark):
            if throttle_dwelling:
                reason = 'pressure above the high watermark, dwelling'
            elif not lows:
                reason = 'pressure above the high watermark, no active low'
            else:
                short = sorted(m.uuid for m in highs if m.uuid in squeezed)
                saturated = pressure > SATURATED or bool(short)
                excess = float('inf') if saturated else (
                    total - params.high_watermark * capacity)
                covered = _throttle(dom, lows, levels, scale, params,
                                    capacity, excess, in_use,
                                    throttle_votes, saturated)
                if covered > 0 and saturated:
                    decision = THROTTLE
                    reason = ('pressure %.2f: %s with %d active high, '
                              'every active low to the floor' % (
                                  pressure, 'saturated' if pressure >
                                  SATURATED else '%s below half its peak'
                                  % short[0], len(highs)))
                    cut_reasons[dom] = reason
                elif covered > 0:
                    decision = THROTTLE
                    reason = ('pressure %.2f >= high watermark %.2f with '
                              '%d active high' % (pressure,
                                                  params.high_watermark,
                                                  len(highs)))
                    cut_reasons[dom] = reason + ', heaviest first'
                else:
                    reason = ('pressure above the high watermark, no step '
                              'left (floor, or no free CLOSID for a level)')
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
            elif highs and capacity and (
                    total + _release_growth(dom, held_here, levels, scale,
                                            params, capacity) >=
                    params.high_watermark * capacity):
                reason = why + (', but a release step could bring it back '
                                'to the high watermark %.2f' %
                                params.high_watermark)
            else:
                decision, reason = RELEASE, why
        for m in held_here:
            if decision == RELEASE:
                release_ok.setdefault(m.uuid, set()).add(dom)
            else:
                hold_for.setdefault(m.uuid, set()).add(dom)
        if decision != HOLD:
            changed_domains.add(dom)
        new_domains[dom] = memory
        reports[dom] = Report(
            decision, reason, pressure, capacity, source, total,
            throttled=0, active_high=len(highs))
    changes = []
    for uuid, (new, dom) in sorted(throttle_votes.items()):
        old = levels.get(uuid)
        levels[uuid] = new
        held_on[uuid] = held_on.get(uuid, frozenset()) | seen.get(
            uuid, frozenset()) | {dom}
        changes.append(Change(uuid, dom, old, new,
                              cut_reasons.get(dom, reports[dom].reason)))
    for uuid, doms in sorted(release_ok.items()):
        m = members[uuid]
        if uuid in throttle_votes or hold_for.get(uuid) or (
                m.domains is None):
            continue
        dom = min(doms)
        old = levels[uuid]
        new = _released(m, old, scale, params, reports[dom].capacity)
        if new is None:
            del levels[uuid]
        else:
            levels[uuid] = new
        changes.append(Change(uuid, dom, old, new, reports[dom].reason))
    for dom in changed_domains:
        if any(c.domain == dom for c in changes):
            new_domains[dom] = dataclasses.replace(new_domains[dom],
                                                   last_change=now)
    for dom, report in list(reports.items()):
        throttled = sum(1 for u in levels if held_there(u, dom))
        reports[dom] = dataclasses.replace(report, throttled=throttled)
    held_on = {u: held_on[u] for u in levels}
    return Decision(State(levels, new_domains, seen, held_on, peaks),
                    tuple(changes), reports)
