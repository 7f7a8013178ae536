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

"""Fit an :class:`~rdt_virt.policy.extra_specs.RDTPolicy` to a host.

The result is a :class:`Plan` with concrete values in the host's own units,
or :class:`~rdt_virt.exception.HostCannotServe` with the reason.

Rounding follows the kernel and libvirt, so what the plan says is what the
hardware applies:

* MBA percentages are raised to ``min_bandwidth`` and rounded up to
  ``bandwidth_gran`` (libvirt refuses other values; the kernel would round
  up too).
* Cache sizes are rounded up to whole ways, at least ``min_cbm_bits``.
* MBps caps need a host mounted with ``mba_MBps``; AMD hosts take them in
  units of 1/8 GBps (125 MBps), rounded up. Percentages have no meaning on
  AMD, whose unthrottled value is an absolute number of units from the
  hardware (2048 so far).

Who applies the bandwidth part depends on the host's strategy (``[rdt]
mb_strategy``) and on libvirt, which only accepts ``<memorytune>`` values up
to 100:

* ``libvirt``: a percentage with the per-instance strategy, or together with
  a cache allocation (the instance has its own group anyway);
* ``shared``: a percentage alone with the shared strategy; rdt-virt-agent
  keeps one control group per percentage;
* ``instance``: MBps and AMD values; rdt-virt-agent writes them into the
  instance's own group (libvirt's cache group when there is one).

Protection classes (``hw:rdt_priority``) change two things:

* ``high`` needs a host that can throttle (MBA) and measure (MBM) memory
  bandwidth: the controller protects a high instance by measuring it and
  its neighbours and throttling the low ones. Other hosts refuse it like
  any missing feature. ``low`` asks nothing of a host: it needs throttling
  only beside a high instance, and no high instance runs where MBA or MBM
  is missing, so a host that cannot throttle it has nothing to protect
  from it. Both are monitored wherever the host can monitor.
* A ``low`` instance's bandwidth belongs to rdt-virt-agent whatever the
  host's strategy, because its controller moves it between levels: a
  percentage joins the shared group (``shared``), an MBps or AMD value the
  agent's own group (``instance``), and without a static cap the instance
  starts unthrottled in the default group until the controller throttles
  it. The static cap stays the ceiling of the controller's levels. A low
  instance never has a cache allocation (the flavor is refused), so it is
  never in a libvirt group, which the controller does not touch.
"""

import dataclasses
import typing

from rdt_virt.conf import rdt as rdt_conf
from rdt_virt import exception
from rdt_virt.policy import extra_specs as es
from rdt_virt.resctrl import info

MB_LIBVIRT = 'libvirt'
MB_SHARED = 'shared'
MB_INSTANCE = 'instance'

# One AMD bandwidth unit is 1/8 GBps.
AMD_MBPS_PER_UNIT = 125


@dataclasses.dataclass(frozen=True)
class CacheAllocation:
    """Dedicated ways of one cache resource on every domain."""

    resource: str
    level: int
    type: str
    requested_kib: int
    # ((domain_id, ways, bytes), ...) for every domain of the resource.
    domains: typing.Tuple[typing.Tuple[int, int, int], ...]

    @property
    def ways(self):
        """The largest number of ways needed on any domain."""
        return max(ways for _dom, ways, _size in self.domains)


@dataclasses.dataclass(frozen=True)
class MemBwAllocation:
    """A memory bandwidth limit for every memory bandwidth domain."""

    unit: str
    value: int
    requested: int
    domain_ids: typing.Tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Plan:
    """What an instance gets on one host."""

    caches: typing.Tuple[CacheAllocation, ...] = ()
    mem_bw: typing.Optional[MemBwAllocation] = None
    monitor: bool = False
    strategy: str = rdt_conf.PER_INSTANCE
    # hw:rdt_priority: 'high', 'normal' or 'low'.
    priority: str = es.PRIORITY_NORMAL

    @property
    def mb_owner(self):
        """Who applies the bandwidth limit (None when there is none).

        One of :data:`MB_LIBVIRT`, :data:`MB_SHARED`, :data:`MB_INSTANCE`.
        """
        if self.mem_bw is None:
            return None
        if self.mem_bw.unit != info.UNIT_PERCENT:
            return MB_INSTANCE
        if self.caches:
            return MB_LIBVIRT
        # The controller moves a low instance between the agent's shared
        # groups; libvirt's <memorytune> would pin it to one value.
        if self.strategy == rdt_conf.PER_INSTANCE and \
                self.priority != es.PRIORITY_LOW:
            return MB_LIBVIRT
        return MB_SHARED

    @property
    def libvirt_group(self):
        """True if libvirt creates a control group for the instance."""
        return bool(self.caches) or self.mb_owner == MB_LIBVIRT

    @property
    def own_group(self):
        """True if the instance needs a control group of its own."""
        return self.libvirt_group or self.mb_owner == MB_INSTANCE

    @property
    def shared_value(self):
        """The percentage of the shared group the instance joins, or None."""
        return self.mem_bw.value if self.mb_owner == MB_SHARED else None

    @property
    def is_empty(self):
        return (not self.caches and self.mem_bw is None and
                not self.monitor and self.priority == es.PRIORITY_NORMAL)


def _round_up(value, step):
    return -(-value // step) * step


def round_percent(mb, value):
    """The percentage the ``mb`` resource applies for ``value``.

    Raised to its minimum, rounded up to its granularity, at most 100.
    """
    value = _round_up(max(value, mb.min_bandwidth), mb.bandwidth_gran or 1)
    return min(value, info.MAX_PERCENT)


def fit_mem_bw(policy, caps):
    """The :class:`MemBwAllocation` of ``policy`` on ``caps``, or None."""
    if not policy.wants_mem_bw:
        return None
    mb = caps.mb
    if mb is None:
        raise exception.HostCannotServe(
            'the host has no memory bandwidth allocation (MBA)')
    if policy.mem_bw is not None:
        if mb.unit == info.UNIT_MBPS:
            raise exception.HostCannotServe(
                'resctrl on the host is mounted with mba_MBps; %s needs '
                'percent, use %s' % (es.MEM_BW, es.MEM_BW_MBPS))
        if mb.unit == info.UNIT_AMD:
            raise exception.HostCannotServe(
                'the host throttles memory bandwidth in absolute units '
                '(AMD); use %s' % es.MEM_BW_MBPS)
        return MemBwAllocation(info.UNIT_PERCENT,
                               round_percent(mb, policy.mem_bw),
                               policy.mem_bw, mb.domain_ids)
    if mb.unit == info.UNIT_PERCENT:
        raise exception.HostCannotServe(
            '%s needs resctrl mounted with mba_MBps, the host throttles in '
            'percent' % es.MEM_BW_MBPS)
    if mb.unit == info.UNIT_AMD:
        units = -(-policy.mem_bw_mbps // AMD_MBPS_PER_UNIT)
        return MemBwAllocation(info.UNIT_AMD, min(units, mb.max_bandwidth),
                               policy.mem_bw_mbps, mb.domain_ids)
    return MemBwAllocation(info.UNIT_MBPS, policy.mem_bw_mbps,
                           policy.mem_bw_mbps, mb.domain_ids)


def _fit_cache(res, kib):
    domains = []
    for dom in res.domain_ids:
        way = res.way_size(dom)
        if not way:
            raise exception.HostCannotServe(
                'the size of %s cache %d is unknown' % (res.name, dom))
        ways = max(-(-kib * 1024 // way), res.min_cbm_bits)
        if ways > res.cbm_width:
            raise exception.HostCannotServe(
                '%d KiB of %s needs %d ways, cache %d has %d ways of %d '
                'KiB' % (kib, res.name, ways, dom, res.cbm_width,
                         way // 1024))
        domains.append((dom, ways, ways * way))
    return CacheAllocation(res.name, res.level, res.type, kib,
                           tuple(domains))


def fit_caches(policy, caps):
    """The :class:`CacheAllocation` tuple of ``policy`` on ``caps``."""
    if not policy.wants_cache:
        return ()
    if policy.cache_l3 is not None:
        res = caps.cache(3, 'both')
        if res is None:
            if caps.cdp:
                raise exception.HostCannotServe(
                    'L3 CDP is enabled on the host; use %s and %s instead '
                    'of %s' % (es.CACHE_L3_CODE, es.CACHE_L3_DATA,
                               es.CACHE_L3))
            raise exception.HostCannotServe(
                'the host has no L3 cache allocation (CAT)')
        return (_fit_cache(res, policy.cache_l3),)
    code, data = caps.cache(3, 'code'), caps.cache(3, 'data')
    if code is None or data is None:
        raise exception.HostCannotServe(
            '%s and %s need L3 CDP, which the host does not have enabled'
            % (es.CACHE_L3_CODE, es.CACHE_L3_DATA))
    return (_fit_cache(code, policy.cache_l3_code),
            _fit_cache(data, policy.cache_l3_data))


def fit_monitor(policy, caps, default):
    """Whether the instance is monitored on ``caps``."""
    wanted = policy.monitoring(default)
    if not wanted:
        return False
    if caps.monitor is None:
        if policy.monitor:
            raise exception.HostCannotServe(
                '%s=true needs cache or memory bandwidth monitoring '
                '(CMT/MBM)' % es.RDT_MONITOR)
        return False
    return True


def fit_priority(policy, caps):
    """Check that ``caps`` can serve the protection class of ``policy``.

    The controller protects a high instance by measuring it and its
    neighbours (MBM) and throttling the low ones (MBA); a host without
    either cannot keep the promise of the class, so it refuses a high
    instance rather than run it unprotected.

    A low instance needs neither: it is throttled only for a high one
    beside it, and a host without MBA or MBM holds no high instance (this
    check refuses one wherever an instance is placed or started). There
    it runs
    unthrottled, as a normal instance would, which is what the class
    allows; a host without MBA is where a noisy low instance can go to
    leave protected ones alone.

    :returns: the class.
    :raises: HostCannotServe with the reason.
    """
    if policy.priority != es.PRIORITY_HIGH:
        return policy.priority
    if caps.mb is None:
        raise exception.HostCannotServe(
            '%s=%s needs memory bandwidth allocation (MBA), which the host '
            'does not have' % (es.RDT_PRIORITY, policy.priority))
    if caps.monitor is None or not caps.monitor.mbm_events:
        raise exception.HostCannotServe(
            '%s=%s needs memory bandwidth monitoring (MBM), which the host '
            'does not have' % (es.RDT_PRIORITY, policy.priority))
    return policy.priority


def fit(policy, caps, strategy=rdt_conf.PER_INSTANCE, monitoring=True):
    """Fit ``policy`` to a host.

    :param policy: an :class:`~rdt_virt.policy.extra_specs.RDTPolicy`.
    :param caps: the host's :class:`~rdt_virt.resctrl.info.HostCapabilities`.
    :param strategy: the host's ``[rdt] mb_strategy``.
    :param monitoring: the host's ``[rdt] monitoring`` default.
    :returns: a :class:`Plan`.
    :raises: HostCannotServe with the reason.
    """
    priority = fit_priority(policy, caps)
    plan = Plan(caches=fit_caches(policy, caps),
                mem_bw=fit_mem_bw(policy, caps),
                monitor=fit_monitor(policy, caps, monitoring),
                strategy=strategy, priority=priority)
    if plan.libvirt_group and caps.mb is not None and \
            caps.mb.min_bandwidth == 0:
        # libvirt reads every group's schemata before it creates one, and
        # refuses an MB line when info/MB/min_bandwidth is 0 (AMD): "Missing
        # or inconsistent resctrl info for memory bandwidth allocation".
        # Arm MPAM shows the same 0 once its MB control has 8 or more
        # fraction bits (mbw_max_to_percent(0) in mpam_resctrl.c).
        raise exception.HostCannotServe(
            'libvirt cannot create resctrl groups on a host whose memory '
            'bandwidth allocation has no minimum (AMD, Arm MPAM)')
    return plan
