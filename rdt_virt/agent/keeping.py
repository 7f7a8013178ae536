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

"""What a protected instance wants and what protection gave it. Pure.

Helpers of :mod:`rdt_virt.agent.controller`, kept apart so that the law's
two judgements about a high-priority instance can be read and tested on
their own:

*Is it active?*  Judged by its demand: the time its vCPU threads were
runnable (running, or waiting for a CPU) in the interval, which the
neighbours cannot take away. Its bandwidth is what the neighbours leave
it: a squeezed instance moves less exactly when it needs protection most,
so bandwidth can show that an instance is active but never that it is
not.

*Does it keep what protection gave it?*  While its neighbours are held,
the controller remembers the highest rate the instance moved at the
levels in force before each release step (its *given* rate, with the
demand it had then). A release is allowed while the instance moves at
least :data:`KEPT` of that; the first interval in which it moves less,
while its demand is no lower than :data:`KEPT` of what it was, is the
first sign that the release cost it its share. A lower rate with a lower
demand is the instance's own doing, not a loss.

*Is it starved?*  Its :class:`Peak` is the highest rate it sustained,
with the demand it had then. What it wants now is that peak in
proportion to its demand against the peak's (all of it from :data:`KEPT`
of that demand on): an instance that resumes in the middle of an
interval, or works part of the time, wants part of its peak. Below half
of what it wants, it is starved (:func:`starved`).
"""

import typing

#: Runnable CPUs (summed over the vCPU threads) from which an instance is
#: active: a vCPU runnable a twentieth of the time does some work, while
#: an idle guest's timer ticks keep it runnable for far less than that.
ACTIVE_DEMAND = 0.05
#: Share of its given rate an instance must keep for releases to go on.
#: A steady workload varies by a few percent between intervals; a release
#: step that matters takes more.
KEPT = 0.9


def demand_active(member):
    """True when the member's demand shows it working (None: unknown)."""
    return member.demand is not None and member.demand >= ACTIVE_DEMAND


def active_domains(member, threshold, before=frozenset(), by_demand=False):
    """The domains where ``member`` is active in this interval.

    By bandwidth: at least ``threshold`` bytes/s summed over the domains,
    on each domain that carries at least its even share of it. With
    ``by_demand`` (high-priority instances), also when its demand shows it
    working however little it moved: then on every domain it moved
    anything on, else where it was active before.
    """
    domains = member.domains
    if domains is None:
        return frozenset()
    total = sum(domains.values())
    if domains and total >= threshold:
        share = threshold / len(domains)
        if len(domains) == 1:
            # The common case, without the loop (total is its one value).
            return frozenset(domains) if total >= share else frozenset()
        return frozenset([d for d, bps in domains.items() if bps >= share])
    if by_demand and demand_active(member):
        moved = frozenset([d for d, bps in domains.items() if bps > 0])
        return moved or frozenset(before) or frozenset(domains)
    return frozenset()


def wants(member, peak):
    """The rate ``member`` wants, from its :class:`Peak`; None: unknown.

    Its peak, in proportion to its demand against the demand it had at
    its peak; all of it from :data:`KEPT` of that demand on, as a steady
    workload's demand varies by a few percent.
    """
    if member.demand is None or peak.demand is None:
        return None
    if peak.demand <= 0:
        return peak.learned
    return peak.learned * min(1.0, member.demand / (KEPT * peak.demand))


def starved(member, total, peak, share):
    """Whether ``member`` moves ``total`` below ``share`` of its wants.

    Only an instance active by its demand: one whose threads were
    runnable for a tiny part of the interval wants too little to judge.
    """
    wanted = wants(member, peak)
    return (wanted is not None and demand_active(member) and
            total < share * wanted)


def lost(member, given):
    """Whether ``member`` lost what protection gave it.

    :param given: ``(bytes/s, demand or None)`` it was given, or None.
    """
    if given is None or member.domains is None:
        return False
    rate, demand = given
    if sum(member.domains.values()) >= KEPT * rate:
        return False
    if demand is None or member.demand is None:
        return True
    return member.demand >= KEPT * demand


def remember(given, member):
    """The given rate of ``member`` after one more release point."""
    rate = sum(member.domains.values())
    if given is not None and given[0] >= rate:
        return given
    return (rate, member.demand)


def join_level(dom, lows, levels, seen_before):
    """The level a late-measured low instance starts at, per uuid.

    A low instance active in ``dom`` that was not active in the last
    interval (its first rate, or it woke up) while every other low
    instance active there is held starts at the highest level they are
    held at: they were throttled for the high instance active there, and
    it would otherwise take the whole way down through the dwells while
    the high instance waits.

    :returns: ``{uuid: level}``.
    """
    held = [m for m in lows if m.uuid in levels]
    late = [m for m in lows if m.uuid not in levels and
            not seen_before.get(m.uuid)]
    if not held or not late or len(held) + len(late) != len(lows):
        return {}
    level = max(levels[m.uuid] for m in held)
    return {m.uuid: level for m in late}


def join_new(lows, new, levels, seen_before):
    """The level each new, not yet measured low instance starts at.

    As :func:`join_level`, for the instances in ``new`` (no rate yet, so
    not in ``lows``) while the pool's active low instances are all held
    or late: they take the highest level those are held at at once,
    rather than one or two intervals later with their first rate.

    :returns: ``{uuid: level}``.
    """
    held = [m for m in lows if m.uuid in levels]
    late = [m for m in lows if m.uuid not in levels and
            not seen_before.get(m.uuid)]
    if not held or len(held) + len(late) != len(lows):
        return {}
    level = max(levels[m.uuid] for m in held)
    return {m.uuid: level for m in new if m.uuid not in levels}


class Peak(typing.NamedTuple):
    """The highest rate a high instance sustained (learned like capacity).

    With the demand it had while it sustained it (None: unknown). A named
    tuple: each high instance gets a new one every period.
    """

    learned: float = 0.0
    recent: typing.Tuple[float, ...] = ()
    demand: typing.Optional[float] = None
    demands: typing.Tuple[typing.Optional[float], ...] = ()

    def add(self, total, samples, demand=None):
        recent = (self.recent + (total,))[-samples:]
        demands = (self.demands + (demand,))[-samples:]
        learned, peak_demand = self.learned, self.demand
        if len(recent) == samples:
            sustained = min(recent)
            if sustained > learned:
                learned = sustained
                peak_demand = None if None in demands else min(demands)
        return Peak._make((learned, recent, peak_demand, demands))
