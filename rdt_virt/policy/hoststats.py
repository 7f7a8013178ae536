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

"""The RDT state of a host as Nova compute node stats, and back.

nova-compute reports ``get_available_resource()['stats']``; the scheduler
sees it as ``HostState.stats``, where every value is a string. rdt-virt puts
one JSON document under :data:`KEY` holding the capabilities, the free
capacity, the host's strategy and the measured memory bandwidth, so the
scheduler can run the same :func:`~rdt_virt.policy.fit.fit` and
:meth:`~rdt_virt.policy.capacity.Capacity.check` as the compute host.

It also counts the host's high and low instances (``hw:rdt_priority``) per
memory bandwidth domain (:func:`count_classes`), for RDTWeigher. An
instance counts on every domain its vCPUs may run on; the driver does not
narrow an instance to the domains of its NUMA cells, so today every
instance counts on every domain of the host. Stats without the counts
(older drivers) read as no classed instance.

Schedulers one release older and newer than the compute hosts read the
stat during an upgrade (doc/source/admin/upgrade.rst). A writer adds
keys, or values at the end of a row, and every reader ignores those it
does not know; anything a reader of the current :data:`VERSION` would
misread changes the version. :func:`decode` refuses a stat it cannot read
whole, and a value it does not know where one changes what fits (the
strategy, the architecture): the scheduler then sees a host without RDT
and places no RDT flavor there.
"""

import dataclasses
import json
import typing

from rdt_virt.conf import rdt as rdt_conf
from rdt_virt.policy import capacity as capacity_mod
from rdt_virt.policy import extra_specs as es
from rdt_virt.resctrl import info

KEY = 'rdt_virt'
VERSION = 1
# What fit() and the capacity check know; another value is a newer
# writer's, read as no RDT rather than as one of these.
_STRATEGIES = (rdt_conf.PER_INSTANCE, rdt_conf.SHARED)
_ARCHES = (info.ARCH_X86, info.ARCH_MPAM)
# Compute node stat naming the report the ``rdt_virt`` stat comes from (a
# time in ns): two reports of equal content are still two reports, and
# the scheduler must not take the second for the first
# (nova_plugin.scheduler.state).
REPORT_KEY = 'rdt_virt_report'


@dataclasses.dataclass(frozen=True)
class HostRDT:
    """What the scheduler knows about a host's RDT."""

    caps: info.HostCapabilities
    capacity: capacity_mod.Capacity
    strategy: str
    monitoring: bool
    # Measured memory bandwidth of the host's instances in bytes/s (None
    # when no agent reports it).
    mbw: typing.Optional[float] = None
    # {memory bandwidth domain id: (high instances, low instances)}.
    classes: typing.Mapping[int, typing.Tuple[int, int]] = \
        dataclasses.field(default_factory=dict)
    # UUIDs of the instances whose claims ``capacity`` counts, in a
    # periodic report; None in a report taken as an instance left, and
    # from an older rdt-virt: the scheduler tells by them whether a
    # periodic report counts a boot it placed.
    claimed: typing.Optional[typing.FrozenSet[str]] = None

    @property
    def most_high(self):
        """High instances on the domain that has the most of them."""
        return max((high for high, _low in self.classes.values()),
                   default=0)

    @property
    def most_low(self):
        """Low instances on the domain that has the most of them."""
        return max((low for _high, low in self.classes.values()), default=0)


def count_classes(priorities, domain_ids):
    """High and low instances per memory bandwidth domain.

    :param priorities: the ``hw:rdt_priority`` class of each instance of
        the host.
    :param domain_ids: the host's memory bandwidth domains.
    :returns: ``{domain id: (high, low)}``, empty without classed instances
        or without MBA.
    """
    high = low = 0
    for priority in priorities:
        if priority == es.PRIORITY_HIGH:
            high += 1
        elif priority == es.PRIORITY_LOW:
            low += 1
    if not high and not low:
        return {}
    return {dom: (high, low) for dom in domain_ids}


def add_instance(classes, priority, domain_ids):
    """``classes`` with one more instance of ``priority`` on ``domain_ids``.

    The scheduler's estimate between two reports of a host.
    """
    if priority not in (es.PRIORITY_HIGH, es.PRIORITY_LOW):
        return classes
    out = dict(classes)
    for dom in domain_ids:
        high, low = out.get(dom, (0, 0))
        out[dom] = ((high + 1, low) if priority == es.PRIORITY_HIGH
                    else (high, low + 1))
    return out


def encode(host):
    """``{KEY: json}`` for a :class:`HostRDT`."""
    caps, cap = host.caps, host.capacity
    doc = {
        'v': VERSION,
        'strategy': host.strategy,
        'monitoring': host.monitoring,
        'caches': [
            [r.name, r.cbm_mask, r.min_cbm_bits, r.num_closids,
             int(r.sparse_masks), [list(w) for w in r.way_sizes],
             list(r.domain_ids)]
            for r in caps.caches.values()],
        # The unthrottled value last: AMD's comes from CPUID (1 << bw_len),
        # so the scheduler must not assume 2048. Decoders of older stats
        # without it fall back on the unit's usual value.
        'membw': [
            [r.name, r.num_closids, r.min_bandwidth, r.bandwidth_gran,
             r.unit, list(r.domain_ids), r.max_value]
            for r in caps.membw.values()],
        'monitor': ([caps.monitor.num_rmids, sorted(caps.monitor.features),
                     list(caps.monitor.domain_ids)]
                    if caps.monitor else None),
        # Package telemetry (Intel AET): its RMIDs bound num_rmids; older
        # decoders ignore the key and see L3_MON's count.
        'pkg': ([caps.package_monitor.num_rmids,
                 sorted(caps.package_monitor.features),
                 list(caps.package_monitor.domain_ids)]
                if caps.package_monitor else None),
        # MPAM: RMIDs are per-CLOSID pools (see info.HostCapabilities).
        'arch': caps.arch,
        # What the kernel takes off num_closids (32 CLOSIDs before 6.16, the
        # io_alloc CLOSID): headroom is relative to what groups can use.
        'closid_limit': caps.closid_limit,
        'io_alloc': int(caps.io_alloc),
        'free_closids': cap.free_closids,
        'free_rmids': cap.free_rmids,
        'free_masks': {res: {str(d): m for d, m in doms.items()}
                       for res, doms in cap.free_masks.items()},
        'shared': sorted(cap.shared_groups),
        'mbw': host.mbw,
        'classes': {str(d): list(c) for d, c in host.classes.items()},
    }
    if host.claimed is not None:
        # Older decoders ignore the key.
        doc['claimed'] = sorted(host.claimed)
    return {KEY: json.dumps(doc, separators=(',', ':'), sort_keys=True)}


def decode(stats):
    """The :class:`HostRDT` in a compute node's ``stats``, or None.

    None means the host runs no rdt-virt driver (or an incompatible one);
    such a host has no RDT as far as the scheduler is concerned.
    """
    raw = stats.get(KEY) if stats else None
    if not raw:
        return None
    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict) or doc.get('v') != VERSION:
            return None
        arch = doc.get('arch') or info.ARCH_X86
        if doc['strategy'] not in _STRATEGIES or arch not in _ARCHES:
            return None
        caches = {}
        # Rows may grow at the end (see the module): read what is known.
        for row in doc['caches']:
            name, mask, min_bits, closids, sparse, ways, doms = row[:7]
            level, ctype = info.CACHE_RESOURCES[name]
            caches[name] = info.CacheResource(
                name=name, level=level, type=ctype, cbm_mask=mask,
                min_cbm_bits=min_bits, shareable_bits=0,
                num_closids=closids, sparse_masks=bool(sparse),
                domain_ids=tuple(doms),
                way_sizes=tuple(tuple(w) for w in ways))
        membw = {}
        for row in doc['membw']:
            name, closids, min_bw, gran, unit, doms = row[:6]
            membw[name] = info.MemBwResource(
                name=name, num_closids=closids, min_bandwidth=min_bw,
                bandwidth_gran=gran, delay_linear=True,
                thread_throttle_mode=None, unit=unit, domain_ids=tuple(doms),
                max_value=int(row[6]) if len(row) > 6 else 0)
        monitor = None
        if doc['monitor']:
            rmids, features, doms = doc['monitor'][:3]
            monitor = info.MonitorCapability(
                num_rmids=rmids, features=frozenset(features),
                max_threshold_occupancy=None, domain_ids=tuple(doms))
        package = None
        if doc.get('pkg'):
            rmids, features, doms = doc['pkg'][:3]
            package = info.PackageMonitor(
                num_rmids=rmids, features=frozenset(features),
                domain_ids=tuple(doms))
        cap = capacity_mod.Capacity(
            free_closids=doc['free_closids'],
            free_rmids=doc['free_rmids'],
            free_masks={res: {int(d): m for d, m in doms.items()}
                        for res, doms in doc['free_masks'].items()},
            shared_groups=frozenset(doc['shared']))
        return HostRDT(
            caps=info.HostCapabilities(
                caches=caches, membw=membw, monitor=monitor,
                closid_limit=int(doc.get('closid_limit') or 0),
                io_alloc=bool(doc.get('io_alloc')),
                package_monitor=package,
                arch=arch),
            capacity=cap, strategy=doc['strategy'],
            monitoring=bool(doc['monitoring']), mbw=doc.get('mbw'),
            classes={int(d): (int(c[0]), int(c[1]))
                     for d, c in (doc.get('classes') or {}).items()},
            claimed=(frozenset(doc['claimed']) if 'claimed' in doc
                     else None))
    except (ValueError, KeyError, TypeError, AttributeError, IndexError):
        # A value in a shape this reader does not know: a filter must
        # never fail on one host's stat.
        return None
