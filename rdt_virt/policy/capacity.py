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

"""Free RDT capacity of a host, and claims against it.

Capabilities say what a host can do; capacity says what is left now:

* CLOSIDs: every control group, the default one included, holds one, so a
  host has ``num_closids - 1 - groups`` free for new groups.
* RMIDs: every control group and every monitoring group holds one. On a
  host that can monitor, creating a control group fails without a free
  RMID too (the kernel allocates one with the CLOSID). The count is
  :attr:`~rdt_virt.resctrl.info.HostCapabilities.num_rmids`, the smallest
  monitoring resource's (Intel's package telemetry has fewer RMIDs than
  L3).
* Cache ways: libvirt carves dedicated ways from those that no group uses,
  the default group included, and needs them contiguous. What counts is
  the longest free run on each cache id.

:class:`Capacity` is immutable; :meth:`Capacity.claim` returns what is left
after an instance takes its share, choosing ways by best fit as libvirt
does, so several claims in a row stay honest.
"""

import dataclasses
import typing

from rdt_virt import exception
from rdt_virt.policy import groups
from rdt_virt.resctrl import bitmask


@dataclasses.dataclass(frozen=True)
class Capacity:
    """What a host has left for new instances."""

    free_closids: int
    # None when the host cannot monitor (no RMIDs to count).
    free_rmids: typing.Optional[int]
    # Unused ways, {resource: {domain_id: mask}}, and full masks alike.
    free_masks: typing.Mapping[str, typing.Mapping[int, int]]
    # Percentages of the shared bandwidth groups that exist already.
    shared_groups: typing.FrozenSet[int] = frozenset()

    def largest_free_run(self, resource, domain_id):
        """Longest run of contiguous unused ways of a cache domain."""
        free = self.free_masks.get(resource, {}).get(domain_id, 0)
        return max((length for _start, length in bitmask.runs(free)),
                   default=0)

    def needs_closid(self, plan):
        """True if ``plan`` needs a new control group on this host."""
        if plan.own_group:
            return True
        value = plan.shared_value
        return value is not None and value not in self.shared_groups

    def check(self, plan, closids=True):
        """Raise CapacityExhausted unless ``plan`` fits now.

        :param closids: False to leave CLOSIDs out, for a request whose
            CLOSID Placement allocated (it does not count RMIDs).
        """
        if self.needs_closid(plan):
            if closids and self.free_closids < 1:
                raise exception.CapacityExhausted(
                    'no free CLOSID for a new resctrl control group')
            if self.free_rmids is not None and self.free_rmids < 1:
                raise exception.CapacityExhausted(
                    'no free RMID for a new resctrl control group')
        for alloc in plan.caches:
            for dom, ways, _size in alloc.domains:
                run = self.largest_free_run(alloc.resource, dom)
                if run < ways:
                    raise exception.CapacityExhausted(
                        '%s cache %d has no %d contiguous free ways (the '
                        'longest free run is %d)' % (
                            alloc.resource, dom, ways, run))

    def claim(self, plan):
        """Check ``plan`` and return the capacity left after it.

        Monitoring groups are not claimed: they degrade (rotate) when RMIDs
        run out instead of failing a boot.
        """
        self.check(plan)
        closids, rmids = self.free_closids, self.free_rmids
        shared = self.shared_groups
        if self.needs_closid(plan):
            closids -= 1
            if rmids is not None:
                rmids -= 1
            if plan.shared_value is not None:
                shared = shared | {plan.shared_value}
        masks = {res: dict(doms) for res, doms in self.free_masks.items()}
        for alloc in plan.caches:
            for dom, ways, _size in alloc.domains:
                free = masks[alloc.resource][dom]
                taken = bitmask.best_fit(0, free, ways)
                masks[alloc.resource][dom] = free & ~taken
        return dataclasses.replace(self, free_closids=closids,
                                   free_rmids=rmids, free_masks=masks,
                                   shared_groups=shared)


def consume(capacity, plan):
    """``capacity`` after ``plan``, even when it does not fit any more.

    Claims made earlier must be counted even if resctrl changed under them
    (an operator created groups, the default group took ways back): then
    whatever the plan needs and is not free is simply gone. The compute
    host subtracts its unrealised claims with it, and the scheduler the
    instances it has placed in this run.
    """
    try:
        return capacity.claim(plan)
    except exception.CapacityExhausted:
        pass
    closids, rmids = capacity.free_closids, capacity.free_rmids
    shared = capacity.shared_groups
    if capacity.needs_closid(plan):
        closids = max(closids - 1, 0)
        if rmids is not None:
            rmids = max(rmids - 1, 0)
        if plan.shared_value is not None:
            shared = shared | {plan.shared_value}
    masks = {res: dict(doms) for res, doms in capacity.free_masks.items()}
    for alloc in plan.caches:
        for dom, ways, _size in alloc.domains:
            free = masks.get(alloc.resource, {}).get(dom)
            if free is None:
                continue
            if capacity.largest_free_run(alloc.resource, dom) >= ways:
                # Take them as Capacity.claim does.
                masks[alloc.resource][dom] = free & ~bitmask.best_fit(
                    0, free, ways)
            else:
                masks[alloc.resource][dom] = 0
    return dataclasses.replace(capacity, free_closids=closids,
                               free_rmids=rmids, free_masks=masks,
                               shared_groups=shared)


def from_state(caps, group_schemata, mon_groups, prefix):
    """Compute a host's :class:`Capacity` from its resctrl state.

    :param caps: the host's HostCapabilities.
    :param group_schemata: ``{group_name: schemata}`` of every control
        group, ``None`` naming the default group.
    :param mon_groups: number of monitoring groups, in all control groups.
    :param prefix: ``[rdt] group_prefix``, to recognise shared groups.
    """
    ctrl = [name for name in group_schemata if name is not None]
    free_masks = {}
    for name, res in caps.caches.items():
        per_dom = {}
        for dom in res.domain_ids:
            used = 0
            for sch in group_schemata.values():
                used |= sch.get(name, {}).get(dom, 0)
            per_dom[dom] = res.cbm_mask & ~used
        free_masks[name] = per_dom
    rmids = None
    if caps.monitor:
        # num_rmids is what the kernel hands out: with package telemetry
        # the smallest monitoring resource's, not L3_MON's. On MPAM every
        # CLOSID brings its own pool, so a new control group finds an RMID
        # whenever it finds a CLOSID and the count stays consistent.
        rmids = max(caps.num_rmids - 1 - len(ctrl) - mon_groups, 0)
    shared = set()
    for name in ctrl:
        kind = groups.parse(prefix, name)
        if kind and kind[0] == 'shared':
            shared.add(kind[1])
    return Capacity(free_closids=max(caps.num_closids - 1 - len(ctrl), 0),
                    free_rmids=rmids, free_masks=free_masks,
                    shared_groups=frozenset(shared))
