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

"""Values the reconciliation compares and computes, pure.

Schemata are ``{resource: {domain id: value}}`` dicts
(:mod:`rdt_virt.resctrl.schemata`). What the kernel shows can differ from
what was written (MB percentages are rounded up), so comparisons are made
with the values the kernel would show.
"""

from rdt_virt import exception
from rdt_virt.policy import default_group
from rdt_virt.policy import fit
from rdt_virt.resctrl import bitmask
from rdt_virt.resctrl import info
from rdt_virt.resctrl import schemata as schemata_mod


def default_masks(caps, ways):
    """The default group's L3 masks for ``[rdt] default_group_l3_ways``.

    ``{}`` when ``ways`` is 0 or this host cannot keep that many ways (the
    agent reports that when it reads the capabilities).
    """
    try:
        return default_group.reserved_schemata(caps, ways)
    except exception.InvalidConfig:
        return {}


def expected_mb(caps, value):
    """What the kernel shows after ``value`` is written to an MB line."""
    mb = caps.mb
    if mb is None or mb.unit != info.UNIT_PERCENT:
        return value
    return fit.round_percent(mb, value)


def mb_shown(caps, value):
    """Values the kernel may show after ``value`` is written to MB.

    Kernels before the 2024 ``bw_validate`` fix (about 6.12; some
    distributions backport it) round MBps values up to ``bandwidth_gran``
    as they round percentages; later ones keep them as written. Either is
    the value written, so a converged group is never rewritten.
    """
    mb = caps.mb if caps is not None else None
    if mb is None or mb.unit != info.UNIT_MBPS or mb.bandwidth_gran <= 1:
        return (value,)
    gran = mb.bandwidth_gran
    return (value, -(-value // gran) * gran)


def diff(actual, desired, caps=None):
    """The partial schemata update that makes ``actual`` ``desired``.

    :param caps: the host's capabilities, to accept what the kernel shows
        for a bandwidth value (see :func:`mb_shown`).
    """
    update = {}
    for res, doms in desired.items():
        have = (actual or {}).get(res, {})
        for dom, value in doms.items():
            shown = have.get(dom)
            if shown == value or (res == 'MB' and shown is not None and
                                  shown in mb_shown(caps, value)):
                continue
            update.setdefault(res, {})[dom] = value
    return update


def cache_lines(schemata):
    """The cache resources' lines of a schemata (no MB)."""
    return {res: dict(doms) for res, doms in (schemata or {}).items()
            if schemata_mod.is_cache_resource(res)}


def cache_resources(caps, level, ctype):
    """Cache resources that hold a ``<cache level type>`` request."""
    res = caps.cache(level, ctype)
    if res is not None:
        return [res]
    if ctype == 'both':
        # Unified request on a CDP host: same ways for code and data.
        return [r for r in (caps.cache(level, 'code'),
                            caps.cache(level, 'data')) if r is not None]
    return []


class NoRoom(Exception):
    """No free ways for an allocation that must be restored."""


def carve(alloc, caps, used):
    """Masks for a restored libvirt allocation, from ways nobody uses.

    Best fit in the free runs, as libvirt allocates; ``used`` (``{resource:
    {domain id: mask}}``) is updated with what was taken.

    :raises: NoRoom.
    """
    update = {}
    taken = {}
    for req in alloc.caches:
        resources = cache_resources(caps, req.level, req.type)
        if not resources:
            raise NoRoom('no L%d %s cache resource' % (req.level, req.type))
        for res in resources:
            way = res.way_size(req.cache_id)
            if not way:
                raise NoRoom('unknown way size of %s %d' % (
                    res.name, req.cache_id))
            ways = max(-(-req.size // way), res.min_cbm_bits)
            busy = used.get(res.name, {}).get(req.cache_id, 0)
            busy |= taken.get((res.name, req.cache_id), 0)
            mask = bitmask.best_fit(busy, res.cbm_mask, ways)
            if mask is None:
                raise NoRoom('no %d free contiguous ways in %s cache %d' % (
                    ways, res.name, req.cache_id))
            taken[(res.name, req.cache_id)] = busy | mask
            update.setdefault(res.name, {})[req.cache_id] = mask
    for (name, dom), mask in taken.items():
        used.setdefault(name, {})[dom] = mask
    return update
