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

# Largest cache request accepted: 1 TiB in KiB, far beyond any LLC, so that
# absurd values are rejected by the API rather than by every host.
MAX_CACHE_KIB = 1024 ** 3
# resctrl's MBps values are u32; 2^32-1 means unthrottled.
MAX_MBPS = 2 ** 32 - 2


@dataclasses.dataclass(frozen=True)
class ExtraSpec:
    """Definition of one extra spec: its key, type and allowed range."""

    key: str
    type: type
    description: str
    min: typing.Optional[int] = None
    max: typing.Optional[int] = None

    @property
    def allowed(self):
        """Human-readable description of the allowed values."""
        if self.type is bool:
            return 'a boolean (%s for true; %s for false)' % (
                ', '.join(strutils.TRUE_STRINGS),
                ', '.join(strutils.FALSE_STRINGS))
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
)
BY_KEY = {spec.key: spec for spec in EXTRA_SPECS}


@dataclasses.dataclass(frozen=True)
class RDTPolicy:
    """The RDT policy of an instance, from its flavor's extra specs.

    Sizes are in KiB; ``monitor`` is None when the flavor does not say.
    """

    mem_bw: typing.Optional[int] = None
    mem_bw_mbps: typing.Optional[int] = None
    cache_l3: typing.Optional[int] = None
    cache_l3_code: typing.Optional[int] = None
    cache_l3_data: typing.Optional[int] = None
    monitor: typing.Optional[bool] = None

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

    def monitoring(self, default):
        """Whether to monitor, given the host's default."""
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
        monitor=values.get(RDT_MONITOR))
