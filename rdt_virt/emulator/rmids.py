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

"""RMID allocation and the limbo of freed RMIDs.

What the kernel does (``fs/resctrl/monitor.c``, before 6.16
``arch/x86/kernel/cpu/resctrl/monitor.c``):

* RMID 0 belongs to the default group. The others sit on a free list in
  LRU order: ``alloc_rmid()`` takes the head, a released RMID joins the
  tail.
* Without CMT (no ``llc_occupancy``) a freed RMID is free at once. With
  it, cache lines tagged with the RMID stay in the L3 after the group is
  gone, and a new owner would inherit them, so a freed RMID enters
  *limbo*, busy on every domain.
  Since 6.9 (``add_rmid_to_limbo()`` after "x86/resctrl: Allow
  resctrl_arch_rmid_read() to sleep") that is all it does. Before, it
  read the occupancy on the domain of the CPU doing the rmdir and left
  that domain clean when the read failed or gave at most the threshold,
  so on a one-domain host an idle RMID was free at once.
* A worker per domain runs about once a second (``CQM_LIMBOCHECK_INTERVAL``,
  1000 ms) while the domain has busy RMIDs. ``__check_limbo()`` reads
  each busy RMID's occupancy and counts it dirty when the read fails or
  the value is at least ``info/L3_MON/max_threshold_occupancy``, otherwise
  it clears the domain's busy bit (so with a threshold of 0 nothing is
  ever freed). An RMID busy on no domain is free again. Cache-resident
  data never drains, and neither does an RMID whose occupancy cannot be
  read: such an RMID can stay in limbo indefinitely.
* When the free list is empty, allocation fails with EBUSY if any RMID is
  in limbo and ENOSPC otherwise.

Here the occupancy of an RMID in limbo decays from what its group had
when freed, halving every ``half_life`` seconds (the counter model's idle
decay), unless a test pins it (:meth:`RmidAllocator.set_occupancy`). The
check runs every ``interval`` seconds from the time limbo became
non-empty; ``interval`` 0 turns limbo off.
"""

import collections
import errno
import math

from rdt_virt.emulator import kparse


#: :meth:`RmidAllocator.set_occupancy` value of a read that fails.
UNREADABLE = 'Unavailable'


def _int(value):
    return None if value is None else int(value)


class _Limbo(object):
    """One RMID in limbo: per-domain occupancy from ``since``."""

    __slots__ = ('rmid', 'since', 'start', 'pinned', 'busy')

    def __init__(self, rmid, since, occupancy):
        self.rmid = rmid
        self.since = since
        self.start = dict(occupancy)      # bytes per domain at ``since``
        self.pinned = {}                  # domain -> bytes, no decay
        self.busy = set(occupancy)

    def occupancy(self, dom, now, half_life):
        if dom in self.pinned:
            return self.pinned[dom]
        value = self.start.get(dom, 0.0)
        if half_life and now > self.since:
            value *= math.pow(0.5, (now - self.since) / half_life)
        return value


class RmidAllocator(object):
    """The free list and limbo of one mount's RMIDs.

    :param num_rmids: ``info/L3_MON/num_rmids``.
    :param domains: monitoring domain ids.
    :param use_limbo: the hardware has CMT (``llc_occupancy``).
    :param interval: seconds between two limbo checks (0: no limbo).
    :param half_life: seconds in which an idle RMID's occupancy halves.
    :param threshold: ``f() -> bytes``: the current
        ``max_threshold_occupancy``.
    :param always: every freed RMID enters limbo (6.9 and later); when
        False the local domain is read first (see :meth:`put`).
    """

    def __init__(self, num_rmids, domains, use_limbo, interval=1.0,
                 half_life=2.0, threshold=lambda: 0, always=True):
        self.free = collections.deque(range(1, num_rmids))
        self.domains = tuple(domains)
        self.use_limbo = use_limbo
        self.interval = interval
        self.half_life = half_life
        self.threshold = threshold
        self.always = always
        self.limbo = collections.OrderedDict()
        self.next_check = None
        self.checks = 0

    # Checks ------------------------------------------------------------------

    def release(self, now):
        """Run every limbo check that was due by *now*."""
        while self.limbo and self.next_check is not None and (
                self.next_check <= now):
            self._check(self.next_check)
            self.next_check += self.interval
        if not self.limbo:
            self.next_check = None

    def _check(self, when):
        self.checks += 1
        limit = self.threshold()
        for entry in list(self.limbo.values()):
            for dom in sorted(entry.busy):
                value = entry.occupancy(dom, when, self.half_life)
                # __check_limbo(): a failed read is dirty, and so is a
                # value at the threshold.
                if value is not None and value < limit:
                    entry.busy.discard(dom)
            if not entry.busy:
                del self.limbo[entry.rmid]
                self.free.append(entry.rmid)

    # Allocation --------------------------------------------------------------

    def alloc(self, now, closid=0):
        """The least recently freed RMID, or KernelError EBUSY/ENOSPC.

        x86 RMIDs are independent of CLOSIDs: *closid* is ignored.
        """
        self.release(now)
        if not self.free:
            raise kparse.KernelError(
                errno.EBUSY if self.limbo else errno.ENOSPC, "Out of RMIDs\n")
        return self.free.popleft()

    def put(self, rmid, now, occupancy=None):
        """Free *rmid*; *occupancy* is ``{domain: bytes}`` it still holds."""
        if not (self.use_limbo and self.interval > 0):
            self.free.append(rmid)
            return
        self.release(now)
        occupancy = occupancy or {}
        occupancy = {d: (None if occupancy.get(d, 0) is None
                         else float(occupancy.get(d, 0)))
                     for d in self.domains}
        entry = _Limbo(rmid, now, {d: v or 0.0
                                   for d, v in occupancy.items()})
        if not self.always and self.domains:
            # Before 6.9: one read on the caller's domain (here the
            # first); a failed read or a value at most the threshold
            # leaves that domain clean.
            local = self.domains[0]
            value = occupancy[local]
            if value is None or value <= self.threshold():
                entry.busy.discard(local)
            if not entry.busy:
                self.free.append(rmid)
                return
        self.limbo[rmid] = entry
        if self.next_check is None:
            self.next_check = now + self.interval

    # Inspection and injection ------------------------------------------------

    def describe(self, now):
        """The limbo as plain data, oldest first."""
        self.release(now)
        return {
            'threshold': self.threshold(),
            'interval': self.interval,
            'next_check': self.next_check,
            'free': len(self.free),
            'limbo': [{
                'rmid': e.rmid,
                'seconds': now - e.since,
                'busy_domains': sorted(e.busy),
                'occupancy': {d: _int(e.occupancy(d, now, self.half_life))
                              for d in self.domains},
                'pinned': sorted(e.pinned),
            } for e in self.limbo.values()],
        }

    def set_occupancy(self, rmid, value, now, dom=None):
        """Pin the occupancy of *rmid* in limbo.

        *value*: bytes, None to let it decay, or :data:`UNREADABLE` for
        a read that fails.

        :raises KeyError: *rmid* is not in limbo.
        """
        self.release(now)
        entry = self.limbo[rmid]
        for d in ([dom] if dom is not None else self.domains):
            if d not in self.domains:
                raise KeyError('no domain %r' % d)
            if value is None:
                current = entry.occupancy(d, now, self.half_life) or 0.0
                entry.pinned.pop(d, None)
                # Decay resumes from the pinned value, from now.
                entry.start[d] = current * math.pow(
                    0.5, -(now - entry.since) / self.half_life) if (
                    self.half_life) else current
            else:
                # A domain already found clean stays clean, as in the
                # kernel, which no longer looks at it.
                entry.pinned[d] = (None if value == UNREADABLE
                                   else float(value))


class PooledRmidAllocator(RmidAllocator):
    """Arm MPAM's RMIDs: a pool of PMGs per CLOSID.

    ``resctrl_arch_rmid_idx_encode()`` in mpam_resctrl.c makes the RMID
    index ``closid * num_pmg + pmg``, and with ``RESCTRL_RMID_DEPENDS_ON_
    CLOSID`` ``alloc_rmid(closid)`` only looks at the entries of that
    CLOSID: ENOSPC once they are taken (EBUSY while one is in limbo) even
    when other CLOSIDs have free ones. Index 0 (CLOSID 0, PMG 0) is the
    default group's.

    :param num_closids: PARTIDs usable by groups.
    :param num_pmg: PMGs per PARTID.
    """

    def __init__(self, num_closids, num_pmg, domains, use_limbo,
                 interval=1.0, half_life=2.0, threshold=lambda: 0,
                 always=True):
        super().__init__(num_closids * num_pmg, domains, use_limbo,
                         interval, half_life, threshold, always)
        self.num_pmg = num_pmg

    def closid_of(self, rmid):
        return rmid // self.num_pmg

    def alloc(self, now, closid=0):
        self.release(now)
        for rmid in self.free:
            if self.closid_of(rmid) == closid:
                self.free.remove(rmid)
                return rmid
        busy = any(self.closid_of(r) == closid for r in self.limbo)
        raise kparse.KernelError(
            errno.EBUSY if busy else errno.ENOSPC, "Out of RMIDs\n")

    def dirty(self, closid, now):
        """RMIDs of *closid* in limbo (``resctrl_find_cleanest_closid``)."""
        self.release(now)
        return sum(1 for r in self.limbo if self.closid_of(r) == closid)
