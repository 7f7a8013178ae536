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

"""Rates from resctrl's cumulative monitoring counters. Pure.

``mbm_total_bytes`` and ``mbm_local_bytes`` only grow while their RMID
lives. The rate of an instance is the sum over L3 domains of each
counter's growth divided by the time between the two readings of that
counter. What can go wrong, and what this module does about it:

* The counter shrinks: the group was re-created, the hardware reset it, or
  the BMEC configuration changed. The reading becomes the new baseline and
  that sample has no rate (never a negative or an absurd one).
* The counter reads ``Unavailable``/``Error``/``Unassigned``: no rate for
  that sample, with the kernel's word as the reason; the old baseline is
  kept, so the next good reading gives the average over the gap.
* A new group whose threads have not run reads ``Unavailable`` in every
  event file on real kernels (``mon_event_count()``: a new monitoring
  group "may report -EINVAL/Unavailable if the monitor hasn't seen any
  traffic"), and a domain the instance never ran on stays so. A counter
  that has never had a value since its RMID changed is such a case, not
  an error: a domain like that adds nothing to the sum, and when no
  counter has a value yet the instance has no rate with the reason
  ``no traffic yet``. Once a counter had a value, ``Unavailable`` is an
  error again (the AMD reset below).
* The counter jumps up by more than memory can move: on AMD without
  counter assignment the hardware resets the counter of an RMID it stops
  tracking (reads give ``Unavailable``), and the kernel takes the next
  value for a wrap of the 44-bit counter, adding about 2^44 x its scale
  (petabytes). Any growth faster than the host's bandwidth *ceiling* is
  such a reset: the reading becomes the new baseline and the interval has
  no rate. No published rate is ever above the ceiling.
* The instance's counters moved to another RMID (a new monitoring group, a
  rotation, a remount): the *source* of the reading changed and every
  baseline restarts.

``llc_occupancy`` is a gauge: the sum over domains, when every domain has
a value.
"""

import dataclasses
import typing

from rdt_virt.resctrl import info

RATE_EVENTS = (info.MBM_TOTAL_BYTES, info.MBM_LOCAL_BYTES)

R_FIRST = 'first sample'
R_RESET = 'counter reset'
R_JUMP = 'counter reset (jump above the bandwidth ceiling)'
R_NO_DATA = 'no monitoring data'
R_NO_TRAFFIC = 'no traffic yet'
UNAVAILABLE = 'Unavailable'


@dataclasses.dataclass(frozen=True)
class Reading:
    """Counters of one instance read at one time.

    :param source: identifies the RMID the values come from; any change
        restarts the baselines.
    :param time: when they were read (monotonic seconds).
    :param values: ``{domain_id: {event: MonValue}}``.
    :param times: ``{(domain_id, event): time}`` when each counter was
        read, if known; more exact than ``time`` when reading several
        files takes a while.
    """

    source: typing.Hashable
    time: float
    values: typing.Mapping[int, typing.Mapping[str, typing.Any]]
    times: typing.Optional[typing.Mapping[tuple, float]] = None

    def time_of(self, dom, event):
        if self.times:
            return self.times.get((dom, event), self.time)
        return self.time


@dataclasses.dataclass(frozen=True)
class Rates:
    """An instance's rates; None with ``reason`` when there is no value."""

    mbm_total_bps: typing.Optional[float] = None
    mbm_local_bps: typing.Optional[float] = None
    llc_occupancy_bytes: typing.Optional[float] = None
    reason: typing.Optional[str] = None
    # mbm_total_bps per L3 domain (the bandwidth controller's input).
    total_by_domain: typing.Optional[typing.Mapping[int, float]] = None

    @property
    def has_values(self):
        return (self.mbm_total_bps is not None or
                self.mbm_local_bps is not None or
                self.llc_occupancy_bytes is not None)


class RateTracker(object):
    """Keeps the baselines of every instance between readings.

    :param ceiling: the most bytes per second the host's memory can move
        (see :mod:`rdt_virt.agent.ceiling`); None: no check.
    """

    def __init__(self, ceiling=None):
        # uuid -> (source, {(domain, event): (value, time)}); a counter
        # that has had a value since the source changed has a baseline.
        self._base = {}
        self.ceiling = ceiling
        # Readings taken as resets because they jumped above the ceiling.
        self.jumps = 0

    def update(self, key, reading):
        """Feed one reading of instance ``key``; return its :class:`Rates`."""
        prev = self._base.get(key)
        if prev is None or prev[0] != reading.source:
            base = {}
            self._base[key] = (reading.source, base)
            restarted = True
        else:
            base = prev[1]
            restarted = False
        rates = {}
        reasons = []
        by_domain = {}
        # Sorted once for both events: the sum's order, so its rounding,
        # is the domains'.
        domains = sorted(reading.values.items())
        for event in RATE_EVENTS:
            rate, reason = self._rate(base, reading, domains, event,
                                      by_domain.setdefault(event, {}))
            rates[event] = rate
            if reason:
                reasons.append(reason)
        occupancy, reason = _gauge(reading, info.LLC_OCCUPANCY, base)
        if reason:
            reasons.append(reason)
        if occupancy is not None:
            for dom, values in reading.values.items():
                value = values.get(info.LLC_OCCUPANCY)
                if value is not None and value.value is not None:
                    base[(dom, info.LLC_OCCUPANCY)] = (value.value,
                                                       reading.time)
        if restarted and not reasons:
            reasons.append(R_FIRST)
        return Rates(
            mbm_total_bps=rates[info.MBM_TOTAL_BYTES],
            mbm_local_bps=rates[info.MBM_LOCAL_BYTES],
            llc_occupancy_bytes=occupancy,
            reason=_first_reason(reasons),
            total_by_domain=by_domain[info.MBM_TOTAL_BYTES] if (
                rates[info.MBM_TOTAL_BYTES] is not None) else None)

    def _rate(self, base, reading, domains, event, by_domain):
        ceiling = self.ceiling
        # Reading.time_of, inline: a sample calls this a thousand times.
        times = reading.times or {}
        when = reading.time
        total = 0.0
        reason = None
        seen = False
        idle = 0
        for dom, values in domains:
            current = values.get(event)
            if current is None:
                continue
            seen = True
            old = base.get((dom, event))
            value = current.value
            if value is None:
                if old is None and current.reason == UNAVAILABLE:
                    # Never ran (see _never_ran).
                    idle += 1
                else:
                    # Keep the old baseline: the next good value spans
                    # the gap.
                    reason = reason or current.reason or R_NO_DATA
                continue
            now = times.get((dom, event), when)
            base[(dom, event)] = (value, now)
            if old is None:
                reason = reason or R_FIRST
            elif value < old[0]:
                reason = reason or R_RESET
            elif now <= old[1]:
                reason = reason or R_FIRST
            else:
                rate = (value - old[0]) / (now - old[1])
                if ceiling is not None and rate > ceiling:
                    self.jumps += 1
                    reason = reason or R_JUMP
                else:
                    total += rate
                    by_domain[dom] = rate
        if not seen:
            return None, None
        if reason:
            return None, reason
        if idle and not any(k[1] == event for k in base):
            return None, R_NO_TRAFFIC
        if ceiling is not None and total > ceiling:
            # Every domain was plausible, their sum is not.
            self.jumps += 1
            return None, R_JUMP
        return total, None

    def export(self):
        """Every key's source and baselines, as JSON can hold them.

        ``{key: {'source': [...], 'counters': [[domain, event, value,
        time], ...]}}``: what :meth:`seed` takes back.
        """
        return {key: {'source': list(source),
                      'counters': sorted([dom, event, value, when] for (
                          dom, event), (value, when) in base.items())}
                for key, (source, base) in self._base.items()}

    def seed(self, key, source, counters):
        """Take the baselines of :meth:`export` for ``key``'s ``source``.

        The next reading from ``source`` then has a rate over the time
        since those baselines were read, with the checks of any other
        (a counter that shrank or jumped gives none).
        """
        self._base[key] = (source, {(dom, event): (value, when) for (
            dom, event, value, when) in counters})

    def forget(self, keep):
        """Drop the baselines of every key not in ``keep``."""
        for key in list(self._base):
            if key not in keep:
                del self._base[key]


def _never_ran(current, old):
    """``Unavailable`` from a counter with no value since its RMID changed."""
    return (current.value is None and old is None and
            current.reason == UNAVAILABLE)


def _gauge(reading, event, base):
    total = 0
    seen = valued = False
    for dom, values in reading.values.items():
        current = values.get(event)
        if current is None:
            continue
        seen = True
        if _never_ran(current, base.get((dom, event))):
            continue
        if current.value is None:
            return None, current.reason or R_NO_DATA
        total += current.value
        valued = True
    if seen and not valued and not any(k[1] == event for k in base):
        return None, R_NO_TRAFFIC
    return (total if seen else None), None


def _first_reason(reasons):
    # A sentinel from the kernel says more than "first sample", and
    # "first sample" more than "no traffic yet" of another counter.
    for reason in reasons:
        if reason not in (R_FIRST, R_RESET, R_JUMP, R_NO_TRAFFIC):
            return reason
    for reason in reasons:
        if reason != R_NO_TRAFFIC:
            return reason
    return reasons[0] if reasons else None


def host_totals(rates):
    """Sums over the instances that have values: ``{field: value}``."""
    totals = {'mbm_total_bps': 0.0, 'mbm_local_bps': 0.0,
              'llc_occupancy_bytes': 0.0}
    for r in rates:
        for field in totals:
            value = getattr(r, field)
            if value is not None:
                totals[field] += value
    return totals
