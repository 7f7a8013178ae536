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

"""The flavor extra specs of rdt-virt and the policy object they make.

=====================  ====================================================
``hw:mem_bw``          memory bandwidth throttle in percent (1-100)
``hw:mem_bw_mbps``     memory bandwidth cap in MBps (hosts mounted with
                       ``mba_MBps``, and AMD hosts)
``hw:cache_l3``        dedicated L3 cache in KiB, rounded up to whole ways
``hw:cache_l3_code``   dedicated L3 for code in KiB (CDP hosts), with
``hw:cache_l3_data``   dedicated L3 for data in KiB
``hw:rdt_monitor``     monitor LLC occupancy and memory bandwidth
``hw:rdt_priority``    protection class: ``high``, ``normal`` or ``low``
=====================  ====================================================

:data:`EXTRA_SPECS` is the single definition; the Nova API validators are
generated from it.
"""

import dataclasses
import typing

from oslo_utils import strutils

from rdt_virt import exception

MEM_BW = 'hw:mem_bw'
MEM_BW_MBPS = 'hw:mem_bw_mbps'
CACHE_L3 = 'hw:cache_l3'
CACHE_L3_CODE = 'hw:cache_l3_code'
CACHE_L3_DATA = 'hw:cache_l3_data'
RDT_MONITOR = 'hw:rdt_monitor'
RDT_PRIORITY = 'hw:rdt_priority'

# Protection classes (hw:rdt_priority). The controller of rdt-virt-agent
# protects high instances by throttling low ones; it never touches normal
# ones, the default of every flavor without the key.
PRIORITY_HIGH = 'high'
PRIORITY_NORMAL = 'normal'
PRIORITY_LOW = 'low'
PRIORITIES = (PRIORITY_HIGH, PRIORITY_NORMAL, PRIORITY_LOW)

# Largest cache request accepted: 1 TiB in KiB, far beyond any LLC, so that
# absurd values are rejected by the API rather than by every host.
MAX_CACHE_KIB = 1024 ** 3
# resctrl's MBps values are u32; 2^32-1 means unthrottled.
MAX_MBPS = 2 ** 32 - 2


@dataclasses.dataclass(frozen=True)
class ExtraSpec:
    """Definition of one extra spec: its key, type and allowed values.

    ``type`` is ``int`` (with ``min`` and optionally ``max``), ``bool``, or
    ``str`` with the allowed words in ``choices`` (an enumeration).
    """

    key: str
    type: type
    description: str
    min: typing.Optional[int] = None
    max: typing.Optional[int] = None
    choices: typing.Tuple[str, ...] = ()

    def __post_init__(self):
        # One definition feeds the API, the scheduler and the hosts: a
        # malformed one must fail at import, not on the first flavor.
        if self.type is str and not self.choices:
            raise ValueError('%s: a str extra spec needs choices' % self.key)
        if self.type is int and self.min is None:
            raise ValueError('%s: an int extra spec needs min' % self.key)
        if self.type not in (int, bool, str):
            raise ValueError('%s: unsupported type %r' % (self.key,
                                                          self.type))

    @property
    def allowed(self):
        """Human-readable description of the allowed values."""
        if self.type is bool:
            return 'a boolean (%s for true; %s for false)' % (
                ', '.join(strutils.TRUE_STRINGS),
                ', '.join(strutils.FALSE_STRINGS))
        if self.type is str:
            return 'one of %s' % ', '.join(self.choices)
        if self.max is None:
            return 'an integer >= %d' % self.min
        return 'an integer from %d to %d' % (self.min, self.max)

    def parse(self, value):
        """Convert the string ``value``; raise InvalidExtraSpec if invalid."""
        if self.type is bool:
            try:
                return strutils.bool_from_string(value, strict=True)
            except ValueError:
                raise exception.InvalidExtraSpec(self.key, value,
                                                 self.allowed)
        if self.type is str:
            # Case and surrounding blanks carry no meaning, as for the
            # booleans; what comes out is always the canonical word.
            word = str(value).strip().lower()
            if word not in self.choices:
                raise exception.InvalidExtraSpec(self.key, value,
                                                 self.allowed)
            return word
        try:
            number = int(str(value).strip(), 10)
        except ValueError:
            raise exception.InvalidExtraSpec(self.key, value, self.allowed)
        if number < self.min or (self.max is not None and number > self.max):
            raise exception.InvalidExtraSpec(self.key, value, self.allowed)
        return number


EXTRA_SPECS = (
    ExtraSpec(MEM_BW, int, min=1, max=100, description=(
        'Throttle the memory bandwidth of the instance to this percentage '
        'on every memory bandwidth domain of the host. The host rounds it '
        'up to its minimum and granularity (for example 5 becomes 10 on a '
        'host with minimum 10). Cannot be combined with hw:mem_bw_mbps.')),
    ExtraSpec(MEM_BW_MBPS, int, min=1, max=MAX_MBPS, description=(
        'Cap the memory bandwidth of the instance at this many MBps per '
        'memory bandwidth domain. Only hosts whose resctrl is mounted with '
        'mba_MBps, and AMD hosts, can serve it. Cannot be combined with '
        'hw:mem_bw.')),
    ExtraSpec(CACHE_L3, int, min=1, max=MAX_CACHE_KIB, description=(
        'Dedicate this many KiB of L3 cache to the instance on every L3 '
        'cache of the host, rounded up to whole cache ways. Not on hosts '
        'with CDP enabled; use hw:cache_l3_code and hw:cache_l3_data '
        'there.')),
    ExtraSpec(CACHE_L3_CODE, int, min=1, max=MAX_CACHE_KIB, description=(
        'Dedicate this many KiB of L3 cache to the instruction fetches of '
        'the instance (code/data prioritisation, CDP). Needs '
        'hw:cache_l3_data too, and a host with CDP enabled.')),
    ExtraSpec(CACHE_L3_DATA, int, min=1, max=MAX_CACHE_KIB, description=(
        'Dedicate this many KiB of L3 cache to the data accesses of the '
        'instance (CDP). Needs hw:cache_l3_code too.')),
    ExtraSpec(RDT_MONITOR, bool, description=(
        'Monitor the LLC occupancy and memory bandwidth of the instance '
        '(CMT/MBM). Defaults to the host setting [rdt] monitoring.')),
    ExtraSpec(RDT_PRIORITY, str, choices=PRIORITIES, description=(
        'Protection class of the instance. high: rdt-virt-agent protects '
        'its memory bandwidth by throttling low instances on the same '
        'memory bandwidth domain while it is active; low: best effort, '
        'the agent may throttle it down to a floor, never above its '
        'hw:mem_bw or hw:mem_bw_mbps cap; normal (the default): never '
        'touched. high needs a host with memory bandwidth allocation (MBA) '
        'and monitoring (MBM); low runs on any host, unthrottled where '
        'there is no MBA (no high instance runs there). high and low are '
        'monitored wherever the host can, and low cannot be combined with '
        'a dedicated cache.')),
)
BY_KEY = {spec.key: spec for spec in EXTRA_SPECS}


@dataclasses.dataclass(frozen=True)
class RDTPolicy:
    """The RDT policy of an instance, from its flavor's extra specs.

    Sizes are in KiB; ``monitor`` is None when the flavor does not say;
    ``priority`` is one of :data:`PRIORITIES`.
    """

    mem_bw: typing.Optional[int] = None
    mem_bw_mbps: typing.Optional[int] = None
    cache_l3: typing.Optional[int] = None
    cache_l3_code: typing.Optional[int] = None
    cache_l3_data: typing.Optional[int] = None
    monitor: typing.Optional[bool] = None
    priority: str = PRIORITY_NORMAL

    @property
    def wants_mem_bw(self):
        return self.mem_bw is not None or self.mem_bw_mbps is not None

    @property
    def wants_cache(self):
        return any(v is not None for v in (
            self.cache_l3, self.cache_l3_code, self.cache_l3_data))

    @property
    def is_empty(self):
        """True when the flavor has no RDT extra spec at all."""
        return self == EMPTY

    @property
    def classed(self):
        """True for high and low instances, which the controller acts on.

        Such an instance is always monitored where the host can monitor.
        A high one needs a host that can throttle (MBA) and measure (MBM)
        memory bandwidth; a low one does not (see
        :func:`rdt_virt.policy.fit.fit_priority`).
        """
        return self.priority != PRIORITY_NORMAL

    @property
    def is_low(self):
        return self.priority == PRIORITY_LOW

    def monitoring(self, default):
        """Whether to monitor, given the host's default.

        High and low instances are always monitored: the controller acts
        on their measured bandwidth.
        """
        if self.classed:
            return True
        return default if self.monitor is None else self.monitor


EMPTY = RDTPolicy()


def _check_combinations(values, extra_specs):
    def conflict(key, other, why):
        raise exception.InvalidExtraSpec(key, extra_specs[key], why % other)

    if MEM_BW in values and MEM_BW_MBPS in values:
        conflict(MEM_BW_MBPS, MEM_BW, 'cannot be combined with %s')
    for key in (CACHE_L3_CODE, CACHE_L3_DATA):
        if key in values and CACHE_L3 in values:
            conflict(key, CACHE_L3, 'cannot be combined with %s')
    if (CACHE_L3_CODE in values) != (CACHE_L3_DATA in values):
        key = CACHE_L3_CODE if CACHE_L3_CODE in values else CACHE_L3_DATA
        other = CACHE_L3_DATA if key == CACHE_L3_CODE else CACHE_L3_CODE
        conflict(key, other, 'needs %s as well')
    priority = values.get(RDT_PRIORITY, PRIORITY_NORMAL)
    if priority != PRIORITY_NORMAL and values.get(RDT_MONITOR) is False:
        conflict(RDT_PRIORITY, RDT_MONITOR,
                 'needs monitoring, which %s=false turns off')
    if priority == PRIORITY_LOW:
        # A dedicated cache puts the instance's vCPUs in libvirt's own
        # group, which the controller never touches, so its bandwidth could
        # not be throttled; and dedicating cache to best-effort work
        # contradicts the class.
        for key in (CACHE_L3, CACHE_L3_CODE, CACHE_L3_DATA):
            if key in values:
                conflict(RDT_PRIORITY, key,
                         'low cannot be combined with %s: the controller '
                         'throttles low instances in rdt-virt\'s groups, '
                         'and a dedicated cache puts the instance in '
                         'libvirt\'s')


def from_extra_specs(extra_specs):
    """Build the :class:`RDTPolicy` of a flavor's extra specs.

    Keys that are not rdt-virt's are ignored.

    :param extra_specs: mapping of extra spec keys to string values.
    :raises: InvalidExtraSpec naming the key, the value and what is allowed.
    """
    values = {}
    for key, spec in BY_KEY.items():
        if key in extra_specs:
            values[key] = spec.parse(extra_specs[key])
    if not values:
        return EMPTY
    _check_combinations(values, extra_specs)
    return RDTPolicy(
        mem_bw=values.get(MEM_BW),
        mem_bw_mbps=values.get(MEM_BW_MBPS),
        cache_l3=values.get(CACHE_L3),
        cache_l3_code=values.get(CACHE_L3_CODE),
        cache_l3_data=values.get(CACHE_L3_DATA),
        monitor=values.get(RDT_MONITOR),
        priority=values.get(RDT_PRIORITY, PRIORITY_NORMAL))
