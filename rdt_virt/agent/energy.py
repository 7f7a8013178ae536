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

"""Per-instance energy from package telemetry (Intel AET). Pure.

``core_energy`` (joules) and ``activity`` (farads) of an instance's
monitoring group are cumulative counters per RMID and package
(:mod:`rdt_virt.resctrl.telemetry`). They are handled like MBM's bytes
(:mod:`rdt_virt.agent.sampler`), with one difference that matters more
here: nothing resets the counters when an RMID changes hands, so a new
monitoring group starts from whatever the RMID's previous owner left. The
first reading of every source (RMID) is therefore only a baseline, never a
value.

* **Power** (watts) is the growth of ``core_energy`` summed over packages
  divided by the time between the two readings of each file.
* **Energy** (joules) is published as a counter of the instance: the sum
  of the growths the agent has seen, kept across rotations, new RMIDs and
  resets, which a reader turns into power over any period. It starts at
  zero when the agent starts (a Prometheus counter reset).
* **Activity** is turned into its rate, farads per second: the work done
  per second independent of the frequency the cores ran at. The ratio of
  power to it is the mean square voltage the cores ran at.

A counter that shrinks (the group was re-created, a firmware reset) becomes
the new baseline; one that reads ``Unavailable`` or ``Error`` keeps the old
baseline, so the next good reading spans the gap. An interval where any
package failed has no value, with the kernel's word as the reason.
"""

import dataclasses
import typing

from rdt_virt.agent import sampler
from rdt_virt.resctrl import telemetry

R_FIRST = sampler.R_FIRST
R_RESET = sampler.R_RESET
R_NO_DATA = sampler.R_NO_DATA


@dataclasses.dataclass(frozen=True)
class Energy:
    """An instance's energy figures; None with ``reason`` when unknown."""

    power_watts: typing.Optional[float] = None
    # Counter: joules seen by this agent since it started.
    energy_joules: typing.Optional[float] = None
    activity_fps: typing.Optional[float] = None
    reason: typing.Optional[str] = None


class EnergyTracker(object):
    """Baselines and energy counters of every instance."""

    def __init__(self):
        # key -> (source, {(package, event): (value, time)})
        self._base = {}
        # key -> joules (exact Fraction sum) seen since the agent started
        self._joules = {}

    def update(self, key, reading):
        """Feed one :class:`~rdt_virt.agent.sampler.Reading`."""
        prev = self._base.get(key)
        restarted = prev is None or prev[0] != reading.source
        if restarted:
            base = {}
            self._base[key] = (reading.source, base)
        else:
            base = prev[1]
        energy, e_growth, e_reason = _rate(base, reading,
                                           telemetry.CORE_ENERGY)
        activity, _g, a_reason = _rate(base, reading, telemetry.ACTIVITY)
        if e_growth:
            self._joules[key] = self._joules.get(key, 0) + e_growth
        total = self._joules.get(key)
        if total is None and not restarted and e_reason is None:
            total = 0
        reason = e_reason or a_reason
        return Energy(
            power_watts=energy,
            energy_joules=None if total is None else float(total),
            activity_fps=activity,
            reason=reason)

    def forget(self, keep):
        """Drop the baselines of every key not in ``keep``."""
        for key in list(self._base):
            if key not in keep:
                del self._base[key]
                self._joules.pop(key, None)


def _rate(base, reading, event):
    """(rate, exact growth counted, reason) of one event over packages."""
    rate = 0.0
    growth = 0
    reason = None
    seen = False
    for package, values in sorted(reading.values.items()):
        current = values.get(event)
        if current is None:
            continue
        seen = True
        if current.value is None:
            reason = reason or current.reason or R_NO_DATA
            continue
        now = reading.time_of(package, event)
        old = base.get((package, event))
        base[(package, event)] = (current.value, now)
        if old is None:
            reason = reason or R_FIRST
        elif current.value < old[0]:
            reason = reason or R_RESET
        elif now <= old[1]:
            reason = reason or R_FIRST
        else:
            delta = current.value - old[0]
            growth += delta
            rate += float(delta) / (now - old[1])
    if not seen:
        return None, 0, R_NO_DATA
    return (None if reason else rate), growth, reason
