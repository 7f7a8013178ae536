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

"""The RDT capability model, built from resctrl's ``info/`` directory.

``info/`` has one directory per resource the kernel enables:

* cache allocation: ``L3`` (or ``L3CODE`` and ``L3DATA`` when mounted with
  ``cdp``), ``L2`` (or ``L2CODE``/``L2DATA`` with ``cdpl2``), each with
  ``cbm_mask``, ``min_cbm_bits``, ``shareable_bits``, ``num_closids`` and,
  on newer kernels, ``sparse_masks``;
* memory bandwidth allocation: ``MB`` (and ``SMBA`` on AMD) with
  ``min_bandwidth``, ``bandwidth_gran``, ``delay_linear``, ``num_closids``
  and ``thread_throttle_mode``;
* monitoring: ``L3_MON`` with ``num_rmids``, ``mon_features`` and
  ``max_threshold_occupancy``; since 6.18, where the hardware assigns MBM
  counters (AMD ABMC), also ``mbm_assign_mode`` (the active mode in
  brackets: ``[mbm_event]`` or ``[default]``), ``num_mbm_cntrs`` and
  ``available_mbm_cntrs`` (``<domain>=<count>;...``) and
  ``mbm_assign_on_mkdir`` (``1``: a new group gets counters if any are
  free). In ``mbm_event`` mode only groups with an assigned counter count
  bandwidth; the others read ``Unassigned``.

Every control group uses one CLOSID in every allocation resource, so the
number of groups a host can hold is the minimum of ``num_closids`` over them,
and two things the kernel takes off that (see :attr:`HostCapabilities.
num_closids`): before 6.16 at most 32 CLOSIDs are usable
(:mod:`~rdt_virt.resctrl.release`), and from 6.19, while a cache's
``io_alloc`` file reads ``enabled`` (AMD SDCIAE), the kernel keeps the highest
CLOSID for I/O traffic (``resctrl_io_alloc_closid()`` and
``closid_alloc_fixed()`` in ``fs/resctrl/rdtgroup.c``): no group can get it.

Memory bandwidth values come in three units. Intel MBA takes a percentage
(``min_bandwidth``..100, in steps of ``bandwidth_gran``). Mounted with
``mba_MBps`` the same resource takes MBps (unlimited is 2^32-1). AMD takes
absolute units of 1/8 GBps and reports a ``min_bandwidth`` of 0, which no
Intel part does. Its unlimited value is ``1 << bw_len`` from CPUID leaf
0x80000020 (2048 on the parts seen so far); the kernel has no info file for
it but gives it to every group at mount, so it is read from the root
group's schemata, rounded up to a power of two in case another tool
throttled the root.

Arm MPAM (``drivers/resctrl/mpam_resctrl.c``, Linux 7.1) fills the same
files with other meanings. Its MB resource is a percentage with
``delay_linear`` 1 and no ``thread_throttle_mode`` file (the throttle mode
is ``THREAD_THROTTLE_UNDEFINED``, and ``thread_throttle_mode_init()`` in
``fs/resctrl/rdtgroup.c`` only creates the file for a defined one); its
``min_bandwidth`` is ``mbw_max_to_percent(0)``, 0 once the hardware has 8 or
more fraction bits, and its ``bandwidth_gran`` 1. AMD reports
``delay_linear`` 0 (``__rdt_get_mem_config_amd()``) and an unthrottled root
value of ``1 << bw_len``, Intel always has a ``thread_throttle_mode``. So
the unit follows from all of these (:func:`_membw_unit`), not from
``min_bandwidth`` alone. MPAM's RMIDs are not independent numbers:
``resctrl_arch_system_num_rmid_idx()`` is PMG count x PARTID count, which is
what ``info/L3_MON/num_rmids`` shows, but an RMID belongs to one CLOSID
(``resctrl_arch_rmid_idx_encode()``), and ``alloc_rmid(closid)`` in
``fs/resctrl/monitor.c`` answers ENOSPC once that CLOSID's PMGs are taken.
:attr:`HostCapabilities.rmids_per_closid` carries that pool size.

Intel Application Energy Telemetry (Linux 7.0,
``arch/x86/kernel/cpu/resctrl/intel_aet.c``) adds a second monitoring
resource, ``PERF_PKG``: ``info/PERF_PKG_MON`` (``num_rmids``,
``mon_features``) and ``mon_data/mon_PERF_PKG_XX`` per package. On x86
``resctrl_arch_system_num_rmid_idx()`` is then the minimum of ``num_rmid``
over every monitoring resource, so the RMIDs a group can get are fewer than
``info/L3_MON/num_rmids`` says: :attr:`HostCapabilities.num_rmids` is that
minimum, and :attr:`HostCapabilities.rmid_limit` names the resource that
sets it.

Domain ids come from the root group's ``schemata``; the bytes per cache way
from the root group's ``size`` divided by the bits of its mask.
"""

import dataclasses
import typing

from rdt_virt import exception
from rdt_virt.resctrl import bitmask
from rdt_virt.resctrl import release as release_mod
from rdt_virt.resctrl import schemata as schemata_mod

# Cache resource name -> (level, type).
CACHE_RESOURCES = {
    'L3': (3, 'both'),
    'L3CODE': (3, 'code'),
    'L3DATA': (3, 'data'),
    'L2': (2, 'both'),
    'L2CODE': (2, 'code'),
    'L2DATA': (2, 'data'),
}
MEMBW_RESOURCES = ('MB', 'SMBA')
MONITOR_RESOURCE = 'L3_MON'
PKG_MONITOR_RESOURCE = 'PERF_PKG_MON'

ARCH_X86 = 'x86'
ARCH_MPAM = 'mpam'

UNIT_PERCENT = 'percent'
UNIT_MBPS = 'MBps'
UNIT_AMD = 'amd'

MAX_PERCENT = 100
MAX_MBPS = 2 ** 32 - 1
MAX_AMD = 2048

# Feature names; nova_plugin reports each as the trait CUSTOM_RDT_<name>.
L3_CAT = 'L3_CAT'
L3_CDP = 'L3_CDP'
L2_CAT = 'L2_CAT'
L2_CDP = 'L2_CDP'
MBA = 'MBA'
MBA_MBPS = 'MBA_MBPS'
SMBA = 'SMBA'
CMT = 'CMT'
MBM_TOTAL = 'MBM_TOTAL'
MBM_LOCAL = 'MBM_LOCAL'
ENERGY = 'ENERGY'
ACTIVITY = 'ACTIVITY'
ALL_FEATURES = (L3_CAT, L3_CDP, L2_CAT, L2_CDP, MBA, MBA_MBPS, SMBA, CMT,
                MBM_TOTAL, MBM_LOCAL, ENERGY, ACTIVITY)

LLC_OCCUPANCY = 'llc_occupancy'
MBM_TOTAL_BYTES = 'mbm_total_bytes'
MBM_LOCAL_BYTES = 'mbm_local_bytes'
_MON_FEATURES = {
    LLC_OCCUPANCY: CMT,
    MBM_TOTAL_BYTES: MBM_TOTAL,
    MBM_LOCAL_BYTES: MBM_LOCAL,
}
# Package telemetry events (``mon_event_all[]`` in fs/resctrl/monitor.c):
# the two of the "energy" event group print decimal fixed point, the seven
# of the "perf" group integers.
CORE_ENERGY = 'core_energy'
ACTIVITY_EVENT = 'activity'
_PKG_FEATURES = {
    CORE_ENERGY: ENERGY,
    ACTIVITY_EVENT: ACTIVITY,
}


@dataclasses.dataclass(frozen=True)
class CacheResource:
    """A cache allocation resource (``L3``, ``L3CODE``, ``L2``, ...)."""

    name: str
    level: int
    type: str
    cbm_mask: int
    min_cbm_bits: int
    shareable_bits: int
    num_closids: int
    sparse_masks: bool
    domain_ids: typing.Tuple[int, ...]
    # Bytes per way for each domain id; empty when no size was known.
    way_sizes: typing.Tuple[typing.Tuple[int, int], ...] = ()

    @property
    def cbm_width(self):
        """Number of ways (bits) in a full mask."""
        return self.cbm_mask.bit_length()

    def way_size(self, domain_id):
        """Bytes per way in ``domain_id``, or None when unknown."""
        return dict(self.way_sizes).get(domain_id)

    def cache_size(self, domain_id):
        """Total bytes of the cache in ``domain_id``, or None."""
        size = self.way_size(domain_id)
        return None if size is None else size * self.cbm_width

    def validate_mask(self, mask):
        """Raise InvalidMask if the kernel would refuse ``mask``."""
        bitmask.validate(mask, self.cbm_mask, self.min_cbm_bits,
                         self.sparse_masks)


@dataclasses.dataclass(frozen=True)
class MemBwResource:
    """A memory bandwidth allocation resource (``MB`` or AMD ``SMBA``)."""

    name: str
    num_closids: int
    min_bandwidth: int
    bandwidth_gran: int
    delay_linear: bool
    thread_throttle_mode: typing.Optional[str]
    unit: str
    domain_ids: typing.Tuple[int, ...]
    # The hardware's unthrottled value where it varies (AMD); 0: the
    # unit's usual one.
    max_value: int = 0

    @property
    def max_bandwidth(self):
        """The value meaning "unthrottled" in this resource's unit."""
        if self.max_value:
            return self.max_value
        return {UNIT_PERCENT: MAX_PERCENT, UNIT_MBPS: MAX_MBPS,
                UNIT_AMD: MAX_AMD}[self.unit]


ASSIGN_MBM_EVENT = 'mbm_event'


@dataclasses.dataclass(frozen=True)
class MonitorCapability:
    """L3 monitoring (CMT and MBM) with its RMIDs."""

    num_rmids: int
    features: typing.FrozenSet[str]
    max_threshold_occupancy: typing.Optional[int]
    domain_ids: typing.Tuple[int, ...]
    # Counter assignment (6.18+): the active mode, or None before 6.18.
    assign_mode: typing.Optional[str] = None
    # ((domain id, counters), ...) in mbm_event mode.
    num_mbm_cntrs: typing.Tuple[typing.Tuple[int, int], ...] = ()
    assign_on_mkdir: bool = False

    @property
    def assigns_counters(self):
        """MBM counts only in groups given a counter (``mbm_event``)."""
        return self.assign_mode == ASSIGN_MBM_EVENT

    @property
    def mbm_events(self):
        """The MBM events this host counts, sorted."""
        return tuple(sorted(e for e in self.features
                            if e in (MBM_TOTAL_BYTES, MBM_LOCAL_BYTES)))


@dataclasses.dataclass(frozen=True)
class PackageMonitor:
    """Package-scoped telemetry (``PERF_PKG_MON``, Intel AET, 7.0)."""

    num_rmids: int
    features: typing.FrozenSet[str]
    # Package ids of the mon_data/mon_PERF_PKG_XX directories.
    domain_ids: typing.Tuple[int, ...] = ()

    @property
    def energy(self):
        return CORE_ENERGY in self.features


@dataclasses.dataclass(frozen=True)
class HostCapabilities:
    """What RDT a host offers, as resctrl (or libvirt) reports it."""

    caches: typing.Mapping[str, CacheResource] = dataclasses.field(
        default_factory=dict)
    membw: typing.Mapping[str, MemBwResource] = dataclasses.field(
        default_factory=dict)
    monitor: typing.Optional[MonitorCapability] = None
    # The kernel's own limit on CLOSIDs (32 before 6.16), 0 for none.
    closid_limit: int = 0
    # A cache's io_alloc is enabled: the highest CLOSID serves I/O.
    io_alloc: bool = False
    # Package telemetry (Intel AET), or None.
    package_monitor: typing.Optional[PackageMonitor] = None
    # ARCH_X86 or ARCH_MPAM, as the files tell (see _arch()).
    arch: str = ARCH_X86

    @property
    def kernel_closids(self):
        """CLOSIDs the kernel uses: groups, default group and io_alloc."""
        counts = [r.num_closids for r in self.caches.values()]
        counts += [r.num_closids for r in self.membw.values()]
        if not counts:
            return 0
        if self.closid_limit:
            counts.append(self.closid_limit)
        return min(counts)

    @property
    def num_closids(self):
        """Control groups the host can hold, the default group included."""
        count = self.kernel_closids
        return max(count - 1, 0) if count and self.io_alloc else count

    @property
    def num_rmids(self):
        """RMIDs groups can get: the smallest monitoring resource's.

        ``resctrl_arch_system_num_rmid_idx()`` on x86 takes the minimum of
        ``num_rmid`` over every monitoring resource, so with package
        telemetry a host has fewer than ``info/L3_MON/num_rmids``.
        """
        if not self.monitor:
            return 0
        counts = [self.monitor.num_rmids]
        if self.package_monitor and self.package_monitor.num_rmids:
            counts.append(self.package_monitor.num_rmids)
        return min(counts)

    @property
    def rmid_limit(self):
        """Which pool limits :attr:`num_rmids`, as a short reason."""
        if not self.monitor:
            return None
        pkg = self.package_monitor
        if pkg and pkg.num_rmids and pkg.num_rmids < self.monitor.num_rmids:
            return ('PERF_PKG_MON has %d RMIDs, fewer than L3_MON\'s %d: '
                    'the kernel hands out the smaller number' % (
                        pkg.num_rmids, self.monitor.num_rmids))
        if self.rmids_per_closid:
            return ('MPAM: %d PMGs per CLOSID; an RMID belongs to one '
                    'control group' % self.rmids_per_closid)
        return None

    @property
    def rmids_per_closid(self):
        """RMIDs of each CLOSID's own pool on MPAM, 0 where independent.

        MPAM's ``num_rmids`` is PMG count x PARTID count (halved with its
        emulated CDP, as is ``num_closids``), so the PMG count is their
        ratio. Each control group takes one of its pool for itself.
        """
        if self.arch != ARCH_MPAM or not self.monitor:
            return 0
        closids = self._partids()
        if not closids:
            return 0
        return max(self.monitor.num_rmids // closids, 1)

    def _partids(self):
        # The CLOSIDs as the kernel counts them for RMID indexes: with
        # MPAM every resource reports the same system-wide PARTID count.
        counts = [r.num_closids for r in self.caches.values()]
        counts += [r.num_closids for r in self.membw.values()]
        return min(counts) if counts else 0

    @property
    def mon_groups_per_closid(self):
        """Monitoring groups one control group can hold (MPAM), or None."""
        pool = self.rmids_per_closid
        return max(pool - 1, 0) if pool else None

    @property
    def cdp(self):
        """L3 code/data prioritisation is enabled (mounted with ``cdp``)."""
        return 'L3CODE' in self.caches

    @property
    def mb(self):
        """The ``MB`` resource, or None."""
        return self.membw.get('MB')

    def cache(self, level, type='both'):
        """The cache resource of ``level`` and ``type``, or None."""
        for res in self.caches.values():
            if res.level == level and res.type == type:
                return res
        return None

    @property
    def features(self):
        """The feature names (``L3_CAT``, ``MBA``, ...) this host has."""
        found = set()
        for res in self.caches.values():
            found.add('L%d_CAT' % res.level)
            if res.type != 'both':
                found.add('L%d_CDP' % res.level)
        if self.mb:
            found.add(MBA)
            if self.mb.unit == UNIT_MBPS:
                found.add(MBA_MBPS)
        if 'SMBA' in self.membw:
            found.add(SMBA)
        if self.monitor:
            found.update(_MON_FEATURES[f] for f in self.monitor.features
                         if f in _MON_FEATURES)
        if self.package_monitor:
            found.update(_PKG_FEATURES[f]
                         for f in self.package_monitor.features
                         if f in _PKG_FEATURES)
        return frozenset(found)

    @property
    def rdt_enabled(self):
        return bool(self.caches or self.membw or self.monitor or
                    self.package_monitor)


def _number(info, path, default=None, base=10):
    text = info.get(path)
    if text is None:
        if default is None:
            raise exception.InvalidCapabilities(
                source='info/' + path, reason='missing')
        return default
    try:
        return int(text.strip(), base)
    except ValueError:
        what = 'hexadecimal' if base == 16 else 'a number'
        raise exception.InvalidCapabilities(
            source='info/' + path, reason='not %s: %r' % (what, text))


def _int(info, path, default=None):
    return _number(info, path, default)


def _hex(info, path, default=None):
    return _number(info, path, default, base=16)


def _resources(info):
    return {path.split('/', 1)[0] for path in info}


def _domain_ids(root, name):
    if name not in root:
        raise exception.InvalidCapabilities(
            source='schemata', reason='no line for resource %s' % name)
    return tuple(sorted(root[name]))


def _cache(name, info, root, sizes):
    level, ctype = CACHE_RESOURCES[name]
    cbm_mask = _hex(info, name + '/cbm_mask')
    domain_ids = _domain_ids(root, name)
    way_sizes = []
    for dom in domain_ids:
        ways = bitmask.popcount(root[name][dom])
        size = sizes.get(name, {}).get(dom)
        # The kernel computes size as cache bytes / cbm_len * bits set.
        if size and ways:
            way_sizes.append((dom, size // ways))
    return CacheResource(
        name=name, level=level, type=ctype, cbm_mask=cbm_mask,
        min_cbm_bits=_int(info, name + '/min_cbm_bits', 1),
        shareable_bits=_hex(info, name + '/shareable_bits', 0),
        num_closids=_int(info, name + '/num_closids'),
        sparse_masks=bool(_int(info, name + '/sparse_masks', 0)),
        domain_ids=domain_ids, way_sizes=tuple(way_sizes))


def _membw_unit(min_bandwidth, root_values, mount_options,
                delay_linear=False, throttle_mode=None):
    """The unit of an MB resource's values, from everything it shows.

    ``min_bandwidth`` 0 is AMD's and MPAM's alike, so on its own it proves
    nothing. AMD has no delay and says ``delay_linear`` 0; MPAM says 1 and
    takes percentages up to 100; Intel always has ``thread_throttle_mode``
    and a ``min_bandwidth`` of 10 or more. AMD's unthrottled root value is
    ``1 << bw_len`` (2048 so far), MBps's 2^32-1, a percentage's 100.
    """
    if 'mba_MBps' in mount_options:
        return UNIT_MBPS
    values = list(root_values)
    if any(v == MAX_MBPS for v in values):
        # mba_MBps seen without mountinfo (a container, a copied tree).
        return UNIT_MBPS
    if throttle_mode is None and not delay_linear and min_bandwidth == 0:
        return UNIT_AMD
    if any(v > MAX_PERCENT for v in values):
        # Above any percentage: AMD units if nothing says Intel, else MBps.
        return UNIT_AMD if throttle_mode is None else UNIT_MBPS
    return UNIT_PERCENT


def _amd_max(root_values):
    """The unthrottled AMD value: a power of two, at least the root's."""
    top = max(root_values, default=0)
    return 1 << (top - 1).bit_length() if top > 1 else MAX_AMD


def _membw(name, info, root, mount_options):
    domain_ids = _domain_ids(root, name)
    min_bw = _int(info, name + '/min_bandwidth')
    mode = info.get(name + '/thread_throttle_mode')
    mode = mode.strip() if mode else None
    linear = bool(_int(info, name + '/delay_linear', 0))
    unit = _membw_unit(min_bw, root[name].values(), mount_options,
                       delay_linear=linear, throttle_mode=mode)
    return MemBwResource(
        name=name,
        num_closids=_int(info, name + '/num_closids'),
        min_bandwidth=min_bw,
        bandwidth_gran=_int(info, name + '/bandwidth_gran', 1) or 1,
        delay_linear=linear,
        thread_throttle_mode=mode,
        unit=unit,
        domain_ids=domain_ids,
        max_value=_amd_max(root[name].values()) if unit == UNIT_AMD else 0)


def parse_assign_mode(text):
    """The active mode of ``mbm_assign_mode`` (the one in brackets)."""
    for word in (text or '').split():
        if word.startswith('[') and word.endswith(']'):
            return word[1:-1]
    return None


def parse_domain_counts(text, source='num_mbm_cntrs'):
    """``0=32;1=32`` as ``{0: 32, 1: 32}``."""
    counts = {}
    for item in (text or '').strip().split(';'):
        if not item.strip():
            continue
        dom, _eq, value = item.partition('=')
        try:
            counts[int(dom)] = int(value)
        except ValueError:
            raise exception.InvalidCapabilities(
                source='info/L3_MON/' + source,
                reason='not <domain>=<count>: %r' % item)
    return counts


def _monitor(info, mon_domain_ids):
    # With BMEC (6.3+) mon_features also names the info files that
    # configure an event (rdt_mon_features_show()): they are not events
    # and have no file under mon_data.
    features = frozenset(
        f for f in info.get(MONITOR_RESOURCE + '/mon_features', '').split()
        if not f.endswith('_config'))
    occupancy = info.get(MONITOR_RESOURCE + '/max_threshold_occupancy')
    mode = parse_assign_mode(info.get(MONITOR_RESOURCE + '/mbm_assign_mode'))
    counters = parse_domain_counts(info.get(
        MONITOR_RESOURCE + '/num_mbm_cntrs')) if mode else {}
    return MonitorCapability(
        num_rmids=_int(info, MONITOR_RESOURCE + '/num_rmids'),
        features=features,
        max_threshold_occupancy=(
            _int(info, MONITOR_RESOURCE + '/max_threshold_occupancy')
            if occupancy is not None else None),
        domain_ids=tuple(sorted(mon_domain_ids)),
        assign_mode=mode,
        num_mbm_cntrs=tuple(sorted(counters.items())),
        assign_on_mkdir=info.get(
            MONITOR_RESOURCE + '/mbm_assign_on_mkdir', '0').strip() == '1')


def _package_monitor(info, pkg_domain_ids):
    return PackageMonitor(
        num_rmids=_int(info, PKG_MONITOR_RESOURCE + '/num_rmids'),
        features=frozenset(
            info.get(PKG_MONITOR_RESOURCE + '/mon_features', '').split()),
        domain_ids=tuple(sorted(pkg_domain_ids)))


# info/MB/thread_throttle_mode appeared in 5.10; before, Intel's MB lacks
# the file too, so its absence says nothing on older kernels.
_THROTTLE_MODE_SINCE = (5, 10)


def _arch(info, membw, caches, version=None):
    """ARCH_MPAM when the files look like mpam_resctrl.c's, else ARCH_X86.

    MPAM's MB is linear with no throttle mode file, which no x86 MB is
    (Intel always has the file, AMD is not linear). Without MB, MPAM's
    caches say every bit is shareable (``mpam_resctrl_control_init()``
    sets ``shareable_bits`` to the whole mask, since unknown devices use
    PARTID 0 with all portions) and allow sparse masks, which no Intel or
    AMD L3 has been seen to report together.
    """
    if version is not None and version < _THROTTLE_MODE_SINCE:
        return ARCH_X86
    mb = membw.get('MB')
    if mb is not None:
        if (mb.delay_linear and mb.thread_throttle_mode is None and
                mb.unit == UNIT_PERCENT):
            return ARCH_MPAM
        return ARCH_X86
    if PKG_MONITOR_RESOURCE in _resources(info):
        return ARCH_X86
    l3 = caches.get('L3') or caches.get('L3CODE')
    if l3 is not None and l3.sparse_masks and (
            l3.shareable_bits == l3.cbm_mask):
        return ARCH_MPAM
    return ARCH_X86


def _io_alloc(info, caches):
    # With CDP both L3CODE and L3DATA show it; either enabled counts.
    return any(info.get(name + '/io_alloc', '').strip() == 'enabled'
               for name in caches)


def parse(info, root_schemata='', root_size='', mount_options=(),
          mon_domain_ids=(), kernel_release=None, pkg_domain_ids=()):
    """Build :class:`HostCapabilities` from the contents of resctrl files.

    :param info: ``{'L3/cbm_mask': '7ff', 'MB/min_bandwidth': '10', ...}``:
        the files under ``info/``, by path relative to it.
    :param root_schemata: the root group's ``schemata`` text.
    :param root_size: the root group's ``size`` text (for way sizes).
    :param mount_options: options of the resctrl mount (``cdp``,
        ``mba_MBps``, ...).
    :param mon_domain_ids: ids of the ``mon_data/mon_L3_XX`` directories.
    :param kernel_release: the text of ``/proc/sys/kernel/osrelease``, or
        None when unknown (then no release-bound limit applies).
    :param pkg_domain_ids: ids of the ``mon_data/mon_PERF_PKG_XX``
        directories.
    :raises: InvalidCapabilities when a needed file is missing or garbled,
        InvalidSchemata when the root group's schemata or size is.
    """
    root = schemata_mod.parse(root_schemata) if root_schemata else {}
    sizes = schemata_mod.parse(root_size, decimal=True) if root_size else {}
    present = _resources(info)
    caches = {name: _cache(name, info, root, sizes)
              for name in CACHE_RESOURCES if name in present}
    membw = {name: _membw(name, info, root, set(mount_options))
             for name in MEMBW_RESOURCES if name in present}
    monitor = (_monitor(info, mon_domain_ids)
               if MONITOR_RESOURCE in present else None)
    package = (_package_monitor(info, pkg_domain_ids)
               if PKG_MONITOR_RESOURCE in present else None)
    return HostCapabilities(
        caches=caches, membw=membw, monitor=monitor,
        closid_limit=release_mod.closid_limit(kernel_release),
        io_alloc=_io_alloc(info, caches), package_monitor=package,
        arch=_arch(info, membw, caches, release_mod.parse(kernel_release)))
