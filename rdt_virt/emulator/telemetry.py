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

"""Package telemetry of the emulated host (Intel AET, ``PERF_PKG``).

What the kernel does (``arch/x86/kernel/cpu/resctrl/intel_aet.c``,
``fs/resctrl/ctrlmondata.c``):

* The telemetry aggregators keep one cumulative counter per RMID and event
  in MMIO, summed over the aggregators of a package
  (``intel_aet_read_event()``). Bit 63 says whether the aggregator has data
  for the RMID; without data on any of them the read fails with EINVAL and
  the file says ``Unavailable``.
* Nothing resets a counter when an RMID changes hands: a new group starts
  from whatever the RMID's previous owner left. Readers must take the first
  value as a baseline.
* Events with ``bin_bits`` fraction bits (energy and activity, 18) are
  printed by ``print_event_value()``: the integer part, a point, and the
  fraction rounded to nearest with ``decplaces[bin_bits]`` digits
  (``ceil(bin_bits * log10(2))``: 6 for 18 bits), zero padded. Integer
  events print as decimal integers.
* A control group's file sums its own RMID and those of its monitoring
  groups (``mon_event_count()``), before the value is printed.

The counters are *emulation*: each thread's CPU time since the last update
is charged to the RMID that counts it on the package of the CPU it ran on;
a CPU-second switches ``farads_per_cpu_second`` of activity, which costs
that times ``volts_squared`` joules, and runs ``hz`` cycles. Values are
kept as the hardware's fixed-point integers (``floor(x * 2**bin_bits)``),
and the exact float totals are the ground truth (:meth:`Telemetry.truth`).
"""

import math

UNAVAILABLE = 'Unavailable'

#: ``decplaces[]`` of fs/resctrl/ctrlmondata.c: ceil(bits * log10(2)),
#: except 0 bits, printed as ``value.0``.
MAX_BINARY_BITS = 27


def decimal_places(bin_bits):
    """Digits after the point for *bin_bits* fraction bits."""
    if not 0 <= bin_bits <= MAX_BINARY_BITS:
        raise ValueError('bin_bits %r out of range' % bin_bits)
    if bin_bits == 0:
        return 1
    return int(math.ceil(bin_bits * math.log10(2) - 1e-12))


def format_fixed(raw, bin_bits):
    """The text ``print_event_value()`` prints for fixed-point *raw*."""
    places = decimal_places(bin_bits)
    frac = 0
    if bin_bits:
        frac = raw & ((1 << bin_bits) - 1)
        frac *= 10 ** places
        frac += 1 << (bin_bits - 1)
        frac >>= bin_bits
    return '%d.%0*d' % (raw >> bin_bits, places, frac)


class _Rmid(object):
    """One RMID's counters per package: fixed-point totals and truth."""

    __slots__ = ('raw', 'truth', 'valid')

    def __init__(self):
        self.raw = {}       # (package, event) -> int
        self.truth = {}     # (package, event) -> float
        self.valid = set()  # packages that have data for the RMID


class Telemetry(object):
    """The PERF_PKG counters of one mount, keyed by RMID.

    :param spec: the profile's :class:`~rdt_virt.emulator.profiles.
        Telemetry`.
    :param packages: package ids (one per L3 domain).
    """

    def __init__(self, spec, packages):
        self.spec = spec
        self.packages = tuple(packages)
        self._rmids = {}
        self._cpu_ns = None
        self._last = None
        # (rmid, package, event) -> units per second injected by tests.
        self._rates = {}

    def _rmid(self, rmid):
        state = self._rmids.get(rmid)
        if state is None:
            state = self._rmids[rmid] = _Rmid()
        return state

    def is_fixed(self, event):
        return event in ('core_energy', 'activity')

    def _per_cpu_second(self):
        spec = self.spec
        cycles = spec.hz
        return {
            'activity': spec.farads_per_cpu_second,
            'core_energy': spec.farads_per_cpu_second * spec.volts_squared,
            'unhalted_core_cycles': cycles,
            'unhalted_ref_cycles': cycles,
            'uops_retired': cycles * spec.uops_per_cycle,
        }

    def charge(self, rmid, package, cpu_seconds):
        """Count *cpu_seconds* of work by *rmid* on *package*."""
        if cpu_seconds <= 0:
            return
        for event, rate in self._per_cpu_second().items():
            if event in self.spec.events:
                self._add(rmid, package, event, rate * cpu_seconds)

    def _add(self, rmid, package, event, amount):
        state = self._rmid(rmid)
        state.valid.add(package)
        key = (package, event)
        state.truth[key] = state.truth.get(key, 0.0) + amount
        scale = (1 << self.spec.bin_bits) if self.is_fixed(event) else 1
        # The hardware's register: floor of the exact total.
        state.raw[key] = int(state.truth[key] * scale)

    def update(self, samples, owner, package_of, now=None):
        """Charge every thread's CPU time since the last update.

        Injected rates (:meth:`inject_rate`) advance with *now*.

        :param samples: ``{tid: sample}`` with ``cpu_ns`` and ``cpu``.
        :param owner: ``f(tid, cpu) -> rmid or None``.
        :param package_of: ``{cpu: package id}``.
        """
        if now is not None:
            if self._last is not None and now > self._last:
                for (rmid, package, event), rate in self._rates.items():
                    self._add(rmid, package, event,
                              rate * (now - self._last))
            self._last = now
        first = self._cpu_ns is None
        previous = self._cpu_ns or {}
        self._cpu_ns = {tid: s.cpu_ns for tid, s in samples.items()}
        if first:
            return
        for tid, sample in samples.items():
            self._charge_since(tid, sample, previous.get(tid, 0), owner,
                               package_of)

    def charge_thread(self, tid, sample, owner, package_of):
        """Charge one thread's CPU time since the last update now.

        For a thread about to move (see :meth:`update`'s arguments): its
        past belongs to the RMID that holds it now.
        """
        if self._cpu_ns is None:
            return
        before = self._cpu_ns.get(tid, 0)
        self._cpu_ns[tid] = sample.cpu_ns
        self._charge_since(tid, sample, before, owner, package_of)

    def _charge_since(self, tid, sample, before_ns, owner, package_of):
        delta = sample.cpu_ns - before_ns
        package = package_of.get(sample.cpu)
        if delta <= 0 or package is None:
            return
        rmid = owner(tid, sample.cpu)
        if rmid is not None:
            self.charge(rmid, package, delta / 1e9)

    def read_raw(self, rmids, package, event):
        """Sum of the raw counters of *rmids*, or None when none has data."""
        total, valid = 0, False
        for rmid in rmids:
            state = self._rmids.get(rmid)
            if state is None or package not in state.valid:
                continue
            total += state.raw.get((package, event), 0)
            valid = True
        return total if valid else None

    def read(self, rmids, package, event):
        """The text of ``mon_PERF_PKG_XX/<event>`` for these RMIDs."""
        raw = self.read_raw(rmids, package, event)
        if raw is None:
            return UNAVAILABLE
        if self.is_fixed(event):
            return format_fixed(raw, self.spec.bin_bits)
        return '%d' % raw

    def truth(self, rmid, package, event):
        """The exact total of one RMID (what the hardware approximates)."""
        state = self._rmids.get(rmid)
        if state is None:
            return 0.0
        return state.truth.get((package, event), 0.0)

    def inject(self, rmid, package, event, value):
        """Set a counter to *value* (units of the event), marking it valid."""
        state = self._rmid(rmid)
        state.valid.add(package)
        state.truth[(package, event)] = float(value)
        scale = (1 << self.spec.bin_bits) if self.is_fixed(event) else 1
        state.raw[(package, event)] = int(float(value) * scale)

    def inject_rate(self, rmid, package, event, rate):
        """Make a counter grow by *rate* units per second from now on.

        The rate stays with the RMID, as the hardware's counters do; 0
        stops it. The counter becomes valid at once.
        """
        self._rmid(rmid).valid.add(package)
        if rate:
            self._rates[(rmid, package, event)] = float(rate)
        else:
            self._rates.pop((rmid, package, event), None)
