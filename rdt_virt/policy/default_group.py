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

"""The L3 ways the default resctrl group keeps (``[rdt]
default_group_l3_ways``).

After a mount the default group owns every way, and libvirt only carves
dedicated ways out of ways no group uses. Shrinking the default group to its
lowest N ways makes the rest allocatable; every thread not in another group
(the host, its services, instances without a cache policy) then shares
those N ways. The ways the hardware shares with I/O (``shareable_bits``) are
kept too when the mask stays valid: they are never clean for an instance.
A ``shareable_bits`` of the whole mask (Arm MPAM's placeholder) names no
such ways and is ignored.
"""

from rdt_virt import exception
from rdt_virt.resctrl import bitmask

OPTION = '[rdt] default_group_l3_ways'


def reserved_schemata(caps, ways):
    """The partial schemata that leaves the default group ``ways`` L3 ways.

    :param caps: the host's HostCapabilities.
    :param ways: ways to keep; 0 leaves the default group alone.
    :returns: ``{resource: {domain_id: mask}}`` for every L3 resource (both
        CDP halves on a CDP host); empty when there is nothing to write.
    :raises: InvalidConfig when the host cannot keep that many ways.
    """
    if not ways:
        return {}
    result = {}
    for res in caps.caches.values():
        if res.level != 3:
            continue
        if ways < res.min_cbm_bits:
            raise exception.InvalidConfig(
                option=OPTION, value=ways,
                reason='%s needs at least %d ways per group' % (
                    res.name, res.min_cbm_bits))
        if ways >= res.cbm_width:
            raise exception.InvalidConfig(
                option=OPTION, value=ways,
                reason='%s has only %d ways; keep fewer so that some are '
                       'left for instances' % (res.name, res.cbm_width))
        mask = bitmask.low_ways(res.cbm_mask, ways)
        shared = mask | res.shareable_bits
        # Arm MPAM reports every bit shareable (mpam_resctrl_control_init():
        # devices it has not configured use PARTID 0 with all portions): it
        # names no I/O ways, and keeping them all would leave none free.
        if res.shareable_bits != res.cbm_mask and (
                res.sparse_masks or bitmask.is_contiguous(shared)):
            mask = shared
        result[res.name] = {dom: mask for dom in res.domain_ids}
    return result


def needs_update(current, reserved):
    """True if the default group's schemata differs from ``reserved``."""
    return any(current.get(res, {}).get(dom) != mask
               for res, doms in reserved.items()
               for dom, mask in doms.items())
