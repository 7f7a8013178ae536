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

"""The hardware variants of tests/fixtures/resctrl and what they contain.

One table serves the resctrl tests and the libvirt capability tests, so the
two readers are held to the same truth.
"""

import os
import shutil
import tempfile

import fixtures

from rdt_virt.resctrl import info
from tests import base

RESCTRL_DIR = os.path.join(base.FIXTURES_DIR, 'resctrl')

KIB = 1024
MIB = 1024 * KIB
REF_L3 = 36608 * KIB
REF_WAY = REF_L3 // 11
AMD_L3 = 32 * MIB
AMD_WAY = AMD_L3 // 16

UUID_A = '1d7a0f6e-3b52-4c1a-9a57-0f1e2d3c4b5a'
UUID_B = '2e8b1f7f-4c63-4d2b-8b68-1a2f3e4d5c6b'
UUID_C = '3f9c2a8a-5d74-4e3c-9c79-2b3a4f5e6d7c'
UUID_D = '4a0d3b9b-6e85-4f4d-8d8a-3c4b5a6f7e8d'
UUID_E = '5b1e4cac-7f96-4a5e-9e9b-4d5c6b7a8f9e'
LIBVIRT_GROUP = 'qemu-1-instance-00000001-vcpus_0-1'
LIBVIRT_MON = 'qemu-2-instance-00000002-vcpus_0'
SHARED = 'rdtvirt-mb10'
INSTANCE = 'rdtvirt-i-' + UUID_E
MON_B = 'rdtvirt-m-' + UUID_B
MON_C = 'rdtvirt-m-' + UUID_C
MON_D = 'rdtvirt-m-' + UUID_D

ALL_EVENTS = frozenset((info.LLC_OCCUPANCY, info.MBM_TOTAL_BYTES,
                        info.MBM_LOCAL_BYTES))


def _l3(name='L3', closids=16, mask=0x7ff, way=REF_WAY, doms=(0, 1),
        min_bits=1, shareable=0x600, sparse=False):
    level, ctype = info.CACHE_RESOURCES[name]
    return info.CacheResource(
        name=name, level=level, type=ctype, cbm_mask=mask,
        min_cbm_bits=min_bits, shareable_bits=shareable,
        num_closids=closids, sparse_masks=sparse, domain_ids=doms,
        way_sizes=tuple((d, way) for d in doms))


def _mb(name='MB', unit=info.UNIT_PERCENT, closids=8, min_bw=10, gran=10,
        linear=True, mode='max', doms=(0, 1), max_value=0):
    return info.MemBwResource(
        name=name, num_closids=closids, min_bandwidth=min_bw,
        bandwidth_gran=gran, delay_linear=linear, thread_throttle_mode=mode,
        unit=unit, domain_ids=doms, max_value=max_value)


def _mon(rmids=192, doms=(0, 1), features=ALL_EVENTS):
    return info.MonitorCapability(
        num_rmids=rmids, features=frozenset(features),
        max_threshold_occupancy=131072, domain_ids=doms)


AMD_DOMS = (0, 2, 4, 6)
_AMD_BW = dict(unit=info.UNIT_AMD, closids=16, min_bw=0, gran=1,
               linear=False, mode=None, doms=AMD_DOMS, max_value=2048)

#: The capabilities each fixture tree must yield.
CAPABILITIES = {
    'reference': info.HostCapabilities(
        caches={'L3': _l3()}, membw={'MB': _mb()}, monitor=_mon()),
    'cdp': info.HostCapabilities(
        caches={'L3CODE': _l3('L3CODE', closids=8),
                'L3DATA': _l3('L3DATA', closids=8)},
        membw={'MB': _mb()}, monitor=_mon()),
    'mba-mbps': info.HostCapabilities(
        caches={'L3': _l3()}, membw={'MB': _mb(unit=info.UNIT_MBPS)},
        monitor=_mon()),
    'amd': info.HostCapabilities(
        caches={'L3': _l3(mask=0xffff, way=AMD_WAY, doms=AMD_DOMS,
                          min_bits=0, shareable=0, sparse=True)},
        membw={'MB': _mb(**_AMD_BW), 'SMBA': _mb('SMBA', **_AMD_BW)},
        # mon_features also names the BMEC _config files: not events.
        monitor=_mon(256, AMD_DOMS, ALL_EVENTS)),
    'l3-cat': info.HostCapabilities(caches={'L3': _l3()}),
    'monitoring': info.HostCapabilities(monitor=_mon()),
    'none': None,
}

#: Mount options each variant stands for.
MOUNT_OPTIONS = {'cdp': ('cdp',), 'mba-mbps': ('mba_MBps',)}

#: Control groups (default group excluded) in each tree.
GROUPS = {
    'reference': ['batch', LIBVIRT_GROUP, SHARED],
    'cdp': ['batch', LIBVIRT_GROUP, SHARED],
    'mba-mbps': ['batch', LIBVIRT_GROUP, INSTANCE],
    'amd': ['batch', LIBVIRT_GROUP, INSTANCE],
    'l3-cat': ['batch', LIBVIRT_GROUP],
    'monitoring': [],
    'none': None,
}

#: Monitoring groups of the default group, per variant that can monitor.
ROOT_MON_GROUPS = sorted([LIBVIRT_MON, MON_D])

#: Kernels before 6.15 pad schemata; these trees are from such a kernel.
PADDED = frozenset(('reference', 'cdp'))

VARIANTS = tuple(CAPABILITIES)
RDT_VARIANTS = tuple(v for v in VARIANTS if CAPABILITIES[v] is not None)


def path(variant):
    """The read-only fixture tree of ``variant``."""
    return os.path.join(RESCTRL_DIR, variant)


def read(variant, *parts):
    """Text of a file of a fixture tree."""
    with open(os.path.join(path(variant), *parts)) as f:
        return f.read()


def scenarios(variants=VARIANTS):
    """testscenarios scenarios, one per variant."""
    return [(v, {'variant': v}) for v in variants]


class ResctrlTree(fixtures.Fixture):
    """A writable copy of a fixture tree in a temporary directory."""

    def __init__(self, variant):
        super().__init__()
        self.variant = variant

    def _setUp(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, True)
        self.root = os.path.join(tmp, 'resctrl')
        shutil.copytree(path(self.variant), self.root, symlinks=True)

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def read(self, *parts):
        with open(self.path(*parts)) as f:
            return f.read()

    def write(self, text, *parts):
        with open(self.path(*parts), 'w') as f:
            f.write(text)
