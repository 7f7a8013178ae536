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

"""CMT and MBM counters of the emulated host.

Each RMID (each control and monitoring group) has, per L3 domain, three
counters the kernel shows in ``mon_data/mon_L3_XX``:

``mbm_total_bytes`` / ``mbm_local_bytes``
    Cumulative bytes to memory (all nodes / the local node). They only grow,
    start from zero when a group is created, and read as multiples of the
    hardware unit (``mon_scale``).
``llc_occupancy``
    Bytes of L3 currently tagged with the RMID: a gauge.

A control group's files show its own RMID plus those of its monitoring
groups, counting the ones that read successfully; only when every one fails
does the file show the error (``Unavailable``, ``Error`` or ``Unassigned``).

The model, evaluated lazily whenever a counter is read: each thread's
CPU time since the last evaluation is charged to the group that holds it,
on the domain of the CPU it last ran on. A thread about to move has its
time set aside for the group it leaves (:meth:`Counters.charge_thread`),
so a move looks at that thread only, not at every thread of the host; the
next evaluation charges it with the others. A thread of the
default group running on a CPU given to another group counts there, as the
CPU's default CLOSID and RMID apply to it. A CPU-second moves
``mbm_bytes_per_cpu_second`` bytes, scaled by the group's ``MB`` throttle
(percent of 100, or AMD units of 2048); with ``mba_MBps`` the group's
traffic on a domain is capped at its MBps value instead. ``local_fraction``
of it is local. The cache footprint grows by
``occupancy_bytes_per_cpu_second``, halves every ``occupancy_half_life``
seconds and is bounded by the bytes of the group's L3 mask on the domain.

A new RMID whose tasks have not run yet reads ``Unavailable`` in every
event file, on both kernels seen (6.1 and 6.12): the hardware has no
value for it. ``mon_event_count()`` in ``fs/resctrl/monitor.c`` says so
("may report -EINVAL/Unavailable if the monitor hasn't seen any
traffic") and keeps a control group's sum when any member reads. Here an
RMID reads ``Unavailable`` on a domain until the model has charged it CPU
time there (or a test injects a value); the default group's RMID has run
since boot.

Tests take over any counter: an absolute value, a constant rate in bytes per
second of the model clock (exact ground truth, no CPU model), a reset to
zero, a sentinel, or an AMD hardware reset (:meth:`Counters.hardware_reset`:
``Unavailable``, then a jump the kernel takes for a counter wrap);
:meth:`Counters.clear` hands it back to the model.
"""

import math

UNAVAILABLE = 'Unavailable'
ERROR = 'Error'
UNASSIGNED = 'Unassigned'
SENTINELS = (UNAVAILABLE, ERROR, UNASSIGNED)

OCCUPANCY = 'llc_occupancy'
TOTAL = 'mbm_total_bytes'
LOCAL = 'mbm_local_bytes'

MIB = 1024 * 1024


class _Cell(object):
    """One counter: (RMID, domain, event)."""

    __slots__ = ('value', 'model', 'injected', 'rate', 'sentinel', 'wrap',
                 'unavailable_until')

    def __init__(self):
        self.value = 0.0      # exact part: injected value plus rate
        self.model = 0.0      # bytes from the CPU model (MBM only)
        self.injected = False
        self.rate = 0.0
        self.sentinel = None
        self.wrap = 0         # bytes the kernel added for hardware resets
        self.unavailable_until = None

    def unavailable(self, now):
        return (self.unavailable_until is not None and
                now < self.unavailable_until)


class _State(object):
    """Counters of one RMID."""

    def __init__(self, events, domains):
        self.cells = {(d, e): _Cell() for d in domains for e in events}
        self.footprint = {d: 0.0 for d in domains}
        # Domains where the RMID has seen traffic: elsewhere Unavailable.
        self.seen = set()


class Counters(object):
    """All counters of a mount, keyed by group object.

    :param profile: the :class:`~rdt_virt.emulator.profiles.Profile`.
    :param domains: online domain ids.
    :param cpu_domains: ``{cpu: domain_id}`` of the online CPUs.
    :param allowed_bytes: ``f(group, dom) -> bytes`` of L3 the group may
        occupy on the domain.
    :param throttle: ``f(ctrl_group, dom) -> (factor, mbps_cap or None)``.
    """

    def __init__(self, profile, domains, cpu_domains, allowed_bytes,
                 throttle, now):
        self.profile = profile
        self.events = profile.mon.events if profile.mon else ()
        self.scale = profile.mon.mon_scale if profile.mon else 1
        self.domains = tuple(domains)
        self.cpu_domains = dict(cpu_domains)
        self._allowed = allowed_bytes
        self._throttle = throttle
        self._states = {}
        self._cpu_ns = None   # baseline per tid; None until the first update
        self._last = now
        # Runs set aside by charge_thread() for the next update.
        self._pending = []
        #: ``f(group, event, dom) -> bool``: does a hardware counter count
        #: this event (False: ``Unassigned``, see :mod:`assign`).
        self.is_assigned = lambda group, event, dom: True
        #: ``{cpu: (hyperthread siblings)}`` when MBA throttles a core at
        #: the lowest value of its threads (``thread_throttle_mode=max``).
        self.siblings = {}

    # Lifecycle ---------------------------------------------------------------

    def attach(self, group, seen=False):
        """Give *group* fresh counters (a new or re-created RMID).

        :param seen: the RMID has run on every domain already (the
            default group's).
        """
        self._states[group] = _State(self.events, self.domains)
        if seen:
            self._states[group].seen.update(self.domains)

    def detach(self, group):
        self._states.pop(group, None)

    def export(self, group):
        """The counter state of *group*, to carry over a remount."""
        return self._states[group]

    def restore(self, group, state):
        self._states[group] = state

    def occupancy(self, group):
        """``{domain: bytes}`` of L3 the group's RMID holds now.

        None for a domain where a read fails (``Unavailable``).
        """
        state = self._states.get(group)
        if state is None:
            return {}
        out = {}
        for dom in self.domains:
            cell = state.cells.get((dom, OCCUPANCY))
            if cell is not None and cell.injected:
                out[dom] = cell.value
            elif dom not in state.seen or (
                    cell is not None and cell.sentinel):
                out[dom] = None
            else:
                out[dom] = min(state.footprint[dom],
                               self._allowed(group, dom))
        return out

    def reset(self, group):
        """Zero the counters, as a hardware reset would; keep injections."""
        state = self._states[group]
        for cell in state.cells.values():
            cell.value = cell.model = 0.0
            cell.wrap = 0
            cell.unavailable_until = None
        for dom in state.footprint:
            state.footprint[dom] = 0.0

    # Model -------------------------------------------------------------------

    def update(self, now, samples, owner):
        """Advance to *now*, charging thread CPU time to its group.

        :param samples: ``{tid: sample}`` with ``cpu_ns`` and ``cpu``.
        :param owner: ``f(tid, cpu) -> (rmid group, closid group)``: whose
            RMID counts the thread and whose CLOSID throttles it there.
        """
        dt = max(0.0, now - self._last)
        self._last = now
        self._advance_injected(dt)
        model = self.profile.counters
        if dt and model.occupancy_half_life:
            decay = math.pow(0.5, dt / model.occupancy_half_life)
            for state in self._states.values():
                for dom in state.footprint:
                    state.footprint[dom] *= decay
        first = self._cpu_ns is None
        previous = self._cpu_ns or {}
        self._cpu_ns = {tid: s.cpu_ns for tid, s in samples.items()}
        if first:
            return
        runs, active = [], {}
        pending, self._pending = self._pending, []
        for run in pending:
            if run[0] in self._states:
                runs.append(run)
                active.setdefault(run[3], set()).add(run[1])
        for tid, sample in samples.items():
            # A thread born since the last update is charged from zero.
            delta = sample.cpu_ns - previous.get(tid, 0)
            dom = self.cpu_domains.get(sample.cpu)
            if delta <= 0 or dom is None:
                continue
            group, ctrl = owner(tid, sample.cpu)
            if group not in self._states:
                continue
            runs.append((group, ctrl, dom, sample.cpu, delta))
            active.setdefault(sample.cpu, set()).add(ctrl)
        charged = {}
        for group, ctrl, dom, cpu, delta in runs:
            # CLOSIDs that ran on the core's other hyperthreads meanwhile.
            others = frozenset(c for sib in self.siblings.get(cpu, ())
                               for c in active.get(sib, ())) - {ctrl}
            key = (group, ctrl, dom, others)
            charged[key] = charged.get(key, 0.0) + delta / 1e9
        self._charge(charged, dt)

    def charge_thread(self, tid, sample, owner):
        """Set *tid*'s CPU time since the last update aside for its group.

        For a thread about to move: its past belongs to the group that
        holds it now, which :meth:`update` charges at its next call, over
        the time that call covers, as if it had read every thread now.

        :param sample: the thread's sample (``cpu_ns``, ``cpu``), now.
        :param owner: as for :meth:`update`, before the move.
        """
        if self._cpu_ns is None:
            return
        delta = sample.cpu_ns - self._cpu_ns.get(tid, 0)
        self._cpu_ns[tid] = sample.cpu_ns
        dom = self.cpu_domains.get(sample.cpu)
        if delta <= 0 or dom is None:
            return
        group, ctrl = owner(tid, sample.cpu)
        self._pending.append((group, ctrl, dom, sample.cpu, delta))

    def _advance_injected(self, dt):
        if not dt:
            return
        for state in self._states.values():
            for cell in state.cells.values():
                if (cell.injected and cell.rate and
                        not cell.unavailable(self._last)):
                    cell.value += cell.rate * dt

    def _charge(self, charged, dt):
        model = self.profile.counters
        traffic = {}
        caps = {}
        for (group, ctrl, dom, others), cpu_s in charged.items():
            factor, mbps = self._throttle(ctrl, dom)
            for other in others:
                # thread_throttle_mode=max: the core runs at the lowest.
                factor = min(factor, self._throttle(other, dom)[0])
            traffic[(group, ctrl, dom, others)] = (
                cpu_s * model.mbm_bytes_per_cpu_second * factor)
            if mbps is not None:
                caps[(ctrl, dom)] = mbps * MIB * dt
            self._states[group].footprint[dom] += (
                cpu_s * model.occupancy_bytes_per_cpu_second)
            self._states[group].seen.add(dom)
        # The MBps software controller caps the CLOSID as a whole.
        for (ctrl, dom), cap in caps.items():
            keys = [k for k in traffic if k[1] is ctrl and k[2] == dom]
            total = sum(traffic[k] for k in keys)
            if total > cap:
                for k in keys:
                    traffic[k] *= cap / total
        for (group, _ctrl, dom, _others), nbytes in traffic.items():
            cells = self._states[group].cells
            for event, share in ((TOTAL, 1.0),
                                 (LOCAL, model.local_fraction)):
                cell = cells.get((dom, event))
                # Traffic while the hardware tracks no counter is lost.
                if (cell is not None and not cell.injected and
                        not cell.unavailable(self._last) and
                        self.is_assigned(group, event, dom)):
                    cell.model += nbytes * share

    # Reading -----------------------------------------------------------------

    def _display(self, group, state, dom, event):
        cell = state.cells[(dom, event)]
        if cell.injected:
            return int(cell.value) + cell.wrap
        if event == OCCUPANCY:
            occ = min(state.footprint[dom], self._allowed(group, dom))
            return int(occ // self.scale * self.scale)
        return (int(cell.value) + int(cell.model // self.scale * self.scale)
                + cell.wrap)

    def read_own(self, group, dom, event):
        """One RMID's counter: an int, or a sentinel string."""
        state = self._states[group]
        cell = state.cells[(dom, event)]
        if cell.sentinel:
            return cell.sentinel
        if event != OCCUPANCY and not self.is_assigned(group, event, dom):
            return UNASSIGNED
        if cell.unavailable(self._last) or (
                dom not in state.seen and not cell.injected):
            return UNAVAILABLE
        return self._display(group, state, dom, event)

    def read(self, group, dom, event):
        """What ``mon_data/mon_L3_XX/<event>`` of *group* shows."""
        members = [group]
        if group.kind == 'ctrl':
            members += list(group.mons.values())
        total, ok, error = 0, False, None
        for member in members:
            val = self.read_own(member, dom, event)
            if isinstance(val, str):
                error = val
            else:
                total += val
                ok = True
        return total if ok else error

    # Injection ---------------------------------------------------------------

    def _cells(self, group, dom=None, event=None):
        state = self._states[group]
        out = []
        for (d, e), cell in state.cells.items():
            if dom is not None and d != dom:
                continue
            if event is not None and e != event:
                continue
            out.append((d, e, cell))
        if not out:
            raise KeyError('no counter %s/%s' % (dom, event))
        return out

    def inject_value(self, group, value, dom=None, event=None):
        """Pin counters to *value* (they keep any injected rate)."""
        state = self._states[group]
        for d, e, cell in self._cells(group, dom, event):
            cell.injected = True
            cell.value = float(value)
            cell.model = 0.0
            state.seen.add(d)

    def inject_rate(self, group, rate, dom=None, event=None):
        """Make counters grow by *rate* bytes per second, from now on."""
        state = self._states[group]
        for d, e, cell in self._cells(group, dom, event):
            if not cell.injected:
                cell.value = float(self._display(group, state, d, e))
                cell.model = 0.0
            cell.injected = True
            cell.rate = float(rate)
            state.seen.add(d)

    def set_sentinel(self, group, sentinel, dom=None, event=None):
        """Show *sentinel* instead of the value (None to stop)."""
        if sentinel is not None and sentinel not in SENTINELS:
            raise ValueError('unknown sentinel %r' % sentinel)
        for d, e, cell in self._cells(group, dom, event):
            cell.sentinel = sentinel

    def zero(self, group, dom, event):
        """A newly assigned counter starts from zero."""
        cell = self._states[group].cells.get((dom, event))
        if cell is not None:
            cell.value = cell.model = 0.0
            cell.wrap = 0
            cell.unavailable_until = None

    def hardware_reset(self, group, seconds=1.0, dom=None, event=None):
        """The hardware stops tracking the RMID and resets its counter.

        As on AMD without counter assignment: reads give ``Unavailable``
        for *seconds*, traffic in that time is not counted, and the
        kernel, which kept the last raw value, takes the restarted
        counter for a wrap of its ``counter_width`` bits: the file jumps
        up to the next multiple of 2^width x ``mon_scale`` and never goes
        down.
        """
        span = (1 << self.profile.mon.counter_width) * self.scale
        for d, e, cell in self._cells(group, dom, event):
            if e == OCCUPANCY:
                continue
            shown = self._display(group, self._states[group], d, e)
            cell.wrap += -shown % span
            cell.unavailable_until = self._last + seconds

    def clear(self, group, dom=None, event=None):
        """Hand counters back to the model, keeping their current value."""
        for d, e, cell in self._cells(group, dom, event):
            if cell.injected:
                cell.injected = False
                cell.rate = 0.0
                if e == OCCUPANCY:
                    self._states[group].footprint[d] = cell.value
                    cell.value = 0.0
            cell.sentinel = None
            cell.unavailable_until = None

    def describe(self, group):
        """Own counters of one RMID with their mode, for ground truth."""
        state = self._states[group]
        out = {}
        for (d, e), cell in sorted(state.cells.items()):
            out.setdefault(d, {})[e] = {
                'value': self._display(group, state, d, e),
                'sentinel': cell.sentinel,
                'injected': cell.injected,
                'rate': cell.rate if cell.injected else None,
            }
        return out
