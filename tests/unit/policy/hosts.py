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

"""Capability models of the hardware variants, for policy tests."""

from rdt_virt.resctrl import info

MIB = 1024 * 1024
# 35.75 MiB of L3 in 11 ways (Xeon Gold 6252).
REF_WAY = 35.75 * MIB / 11


def _l3(name='L3', closids=16, mask=0x7ff, way=int(REF_WAY), doms=(0, 1),
        min_bits=1):
    level, ctype = info.CACHE_RESOURCES[name]
    return info.CacheResource(
        name=name, level=level, type=ctype, cbm_mask=mask,
        min_cbm_bits=min_bits, shareable_bits=0, num_closids=closids,
        sparse_masks=False, domain_ids=doms,
        way_sizes=tuple((d, way) for d in doms))


def _mb(unit=info.UNIT_PERCENT, closids=8, min_bw=10, gran=10, doms=(0, 1),
        name='MB'):
    return info.MemBwResource(
        name=name, num_closids=closids, min_bandwidth=min_bw,
        bandwidth_gran=gran, delay_linear=unit == info.UNIT_PERCENT,
        thread_throttle_mode='max', unit=unit, domain_ids=doms)


def _mon(rmids=176, doms=(0, 1)):
    return info.MonitorCapability(
        num_rmids=rmids,
        features=frozenset((info.LLC_OCCUPANCY, info.MBM_TOTAL_BYTES,
                            info.MBM_LOCAL_BYTES)),
        max_threshold_occupancy=None, domain_ids=doms)


REFERENCE = info.HostCapabilities(caches={'L3': _l3()}, membw={'MB': _mb()},
                                  monitor=_mon())
CDP = info.HostCapabilities(
    caches={'L3CODE': _l3('L3CODE', closids=8),
            'L3DATA': _l3('L3DATA', closids=8)},
    membw={'MB': _mb()}, monitor=_mon())
MBPS = info.HostCapabilities(caches={'L3': _l3()},
                             membw={'MB': _mb(info.UNIT_MBPS)},
                             monitor=_mon())
AMD = info.HostCapabilities(
    caches={'L3': _l3(mask=0xffff, way=2 * MIB, doms=(0, 1, 2, 3))},
    membw={'MB': _mb(info.UNIT_AMD, 16, 0, 1, (0, 1, 2, 3)),
           'SMBA': _mb(info.UNIT_AMD, 16, 0, 1, (0, 1, 2, 3), 'SMBA')},
    monitor=_mon(256, (0, 1, 2, 3)))
L3_CAT = info.HostCapabilities(caches={'L3': _l3()})
MONITORING = info.HostCapabilities(monitor=_mon())
NONE = info.HostCapabilities()
# Intel AET (7.0): L3 monitoring with more RMIDs than the 576 of the
# package telemetry event groups (intel_aet.c); the kernel hands out 576.
AET = info.HostCapabilities(
    caches={'L3': _l3(mask=0xfff)}, membw={'MB': _mb(closids=16)},
    monitor=_mon(1024),
    package_monitor=info.PackageMonitor(
        num_rmids=576,
        features=frozenset((info.CORE_ENERGY, info.ACTIVITY_EVENT)),
        domain_ids=(0, 1)))
# Arm MPAM (7.1): 16 PARTIDs with 2 PMGs each, so 32 RMIDs in per-CLOSID
# pools; MB in percent with min_bandwidth 0 and granularity 1.
MPAM = info.HostCapabilities(
    caches={'L3': _l3()},
    membw={'MB': info.MemBwResource(
        name='MB', num_closids=16, min_bandwidth=0, bandwidth_gran=1,
        delay_linear=True, thread_throttle_mode=None,
        unit=info.UNIT_PERCENT, domain_ids=(0, 1))},
    monitor=info.MonitorCapability(
        num_rmids=32, features=frozenset((info.LLC_OCCUPANCY,)),
        max_threshold_occupancy=None, domain_ids=(0, 1)),
    arch=info.ARCH_MPAM)
