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

"""Hardware profiles of the emulated RDT host.

A profile is what the kernel learns from CPUID at boot plus the options
resctrl was mounted with: the allocation resources (L3 CAT, MBA, SMBA), the
monitoring resource (L3_MON), the cache domains and their sizes, and the
defaults of the counter model. ``cdp`` and ``mba-mbps`` are the reference
hardware mounted with ``-o cdp`` and ``-o mba_MBps``; switching to them is a
remount, which destroys every group, exactly as on a real host.

The values follow the parts they name: the reference host is a two-socket
Xeon Gold 6252 (Cascade Lake: 35.75 MiB of L3 in 11 ways per socket, CBM
``7ff`` with the top two ways, ``600``, shared with I/O, 16 L3 CLOSIDs, 8 MBA
CLOSIDs with a 10% step, eight RMIDs per core = 192); the AMD profile is an
EPYC with 32 MiB of L3 in 16 ways per domain, sparse masks, no minimum mask,
absolute bandwidth units of 1/8 GB/s where 2^CPUID.0x80000020.1:EAX (2048)
means unlimited, and 44-bit MBM counters. The counter unit
(``mon_scale``) and the counter model's rates are plausible values, not
measurements.

CPU and cache topology
----------------------
Resctrl names its domains after the L3 cache ids, and libvirt does not read
them from resctrl: it reads ``/sys/devices/system/cpu/cpuN/cache/indexM/``
(``id``, ``level``, ``type``, ``size``, ``shared_cpu_list``) and refuses a
cache id or memory-bandwidth node it did not see there. The machines that run
the emulator have one real L3 (here: id 0 shared by CPUs 0-1), which does
not match a two-socket profile. We therefore present the *profile's*
topology, never the real one: :meth:`Profile.assign_cpus` maps the host's
online CPUs onto the profile's domains in contiguous blocks (two CPUs and two
domains: cpu0 -> domain 0, cpu1 -> domain 1), the emulator attributes a
thread's counters to the domain of the CPU it last ran on through that map,
and :meth:`Profile.sysfs_cache_files` renders the matching ``cache/indexM``
files so that the sandbox can mount them over ``/sys/devices/system/cpu``
inside its private mount namespace. A domain that gets no CPU is offline and,
as in the kernel, absent from resctrl.
"""

import dataclasses
import typing

KIB = 1024
MIB = 1024 * KIB

#: Events in the kernel's order in ``info/L3_MON/mon_features``.
ALL_EVENTS = ('llc_occupancy', 'mbm_total_bytes', 'mbm_local_bytes')


@dataclasses.dataclass(frozen=True)
class CacheAlloc:
    """A cache allocation resource (CAT), as CPUID describes it."""

    name: str
    num_closids: int
    cbm_len: int
    min_cbm_bits: int
    shareable_bits: int
    sparse_masks: bool
    cdp_capable: bool
    #: Cache allocation for I/O traffic (AMD SDCIAE): ``io_alloc``.
    io_alloc_capable: bool = False

    @property
    def cbm_mask(self):
        return (1 << self.cbm_len) - 1


@dataclasses.dataclass(frozen=True)
class BandwidthAlloc:
    """A memory bandwidth allocation resource (MBA or SMBA)."""

    name: str
    num_closids: int
    min_bandwidth: int
    max_bandwidth: int
    bandwidth_gran: int
    delay_linear: bool
    #: ``'max'``, ``'per-thread'`` or None (undefined: the file is absent).
    throttle_mode: typing.Optional[str]
    #: Column width older kernels (e.g. Linux 6.1) padded values to.
    data_width: int
    #: Bytes per second of one unit when values are absolute (AMD: 1/8
    #: GB/s, ``max_bandwidth`` = 2^CPUID 0x80000020 EAX = unlimited);
    #: None when values are percentages.
    unit_bytes_per_second: typing.Optional[int] = None
    #: Arm MPAM: fraction bits of the MBW_MAX control (``bwa_wd``); the
    #: kernel converts percentages to bands and back (mpam_resctrl.c
    #: ``percent_to_mbw_max()``/``mbw_max_to_percent()``). None on x86.
    bwa_wd: typing.Optional[int] = None


@dataclasses.dataclass(frozen=True)
class Monitoring:
    """The L3 monitoring resource (CMT and MBM)."""

    num_rmids: int
    events: tuple
    #: Bytes per hardware counter unit; counters are multiples of it.
    mon_scale: int
    #: Width of the MBM hardware counters in bits (24 + CPUID offset;
    #: AMD: 44).
    counter_width: int = 24
    #: Assignable MBM counters per domain (AMD ABMC); None without.
    num_mbm_cntrs: typing.Optional[int] = None
    #: Bandwidth event configuration (AMD BMEC): which traffic the MBM
    #: events count, ``info/L3_MON/mbm_*_bytes_config``.
    bmec: bool = False
    #: ``max_threshold_occupancy`` at mount, as a captured host showed
    #: it; None: computed as the kernel does (:meth:`threshold`).
    max_threshold_occupancy: typing.Optional[int] = None

    #: Arm MPAM: PMGs per PARTID. ``num_rmids`` is then PMG x PARTID and
    #: every CLOSID allocates from its own pool of ``num_pmg`` RMIDs.
    num_pmg: typing.Optional[int] = None

    def threshold(self, l3_size):
        """The threshold at mount: captured, or L3 size / RMIDs."""
        if self.max_threshold_occupancy is not None:
            return self.max_threshold_occupancy
        return l3_size // self.num_rmids // self.mon_scale * self.mon_scale


#: Package telemetry events in the kernel's order (``mon_event_all[]`` in
#: fs/resctrl/monitor.c): the "energy" event group's two, then the "perf"
#: group's seven (intel_aet.c).
ENERGY_EVENTS = ('core_energy', 'activity')
PERF_EVENTS = ('stalls_llc_hit', 'c1_res', 'unhalted_core_cycles',
               'stalls_llc_miss', 'c6_res', 'unhalted_ref_cycles',
               'uops_retired')


@dataclasses.dataclass(frozen=True)
class Telemetry:
    """Intel Application Energy Telemetry: the ``PERF_PKG`` resource.

    ``intel_aet.c`` knows two event groups of Clearwater Forest, "energy"
    (GUID 0x26696143) and "perf" (GUID 0x26557651), each with 576 RMIDs;
    ``enable_events()`` sets the resource's ``num_rmid`` to the smallest
    group's. Energy and activity are fixed point with 18 fraction bits,
    the perf events integers.

    What the events count here is emulation (:mod:`telemetry`): a busy
    CPU-second switches ``farads_per_cpu_second`` of activity and spends
    that times ``volts_squared`` joules; cycles follow the CPU time at
    ``hz``, uops at ``uops_per_cycle``.
    """

    num_rmids: int = 576
    events: tuple = ENERGY_EVENTS + PERF_EVENTS
    bin_bits: int = 18
    farads_per_cpu_second: float = 2.5
    volts_squared: float = 0.64
    hz: float = 2.2e9
    uops_per_cycle: float = 1.5


@dataclasses.dataclass(frozen=True)
class CacheDomain:
    """One L3 cache instance: a resctrl domain."""

    id: int
    l3_size: int


@dataclasses.dataclass(frozen=True)
class CacheGeometry:
    """Per-core caches and the L3 associativity, for the sysfs files."""

    l1d_size: int = 32 * KIB
    l1i_size: int = 32 * KIB
    l1_ways: int = 8
    l2_size: int = 1 * MIB
    l2_ways: int = 16
    l3_ways: int = 11
    line_size: int = 64


@dataclasses.dataclass(frozen=True)
class CounterModel:
    """Defaults of the counter model (see :mod:`counters`)."""

    #: Unthrottled memory traffic of one busy CPU, bytes per CPU-second.
    mbm_bytes_per_cpu_second: float = 2.0 * 1024 * MIB
    #: Share of the traffic that goes to the local NUMA node.
    local_fraction: float = 0.8
    #: How fast a busy CPU fills the cache, bytes per CPU-second.
    occupancy_bytes_per_cpu_second: float = 64.0 * MIB
    #: Half-life in seconds of the footprint of an idle group.
    occupancy_half_life: float = 2.0


@dataclasses.dataclass(frozen=True)
class Schema:
    """One line of the schemata file (the kernel's ``resctrl_schema``)."""

    name: str
    resource: object
    #: ``'both'``, ``'code'`` or ``'data'``.
    conf_type: str
    num_closids: int

    @property
    def is_cache(self):
        return isinstance(self.resource, CacheAlloc)


@dataclasses.dataclass(frozen=True)
class CpuId:
    """The CPU identity the kernel's quirks look at (/proc/cpuinfo)."""

    vendor: str
    family: int
    model: int
    stepping: int


@dataclasses.dataclass(frozen=True)
class Profile:
    """An emulated RDT host: hardware plus resctrl mount options.

    The resources are what CPUID reports; :func:`boot.apply` removes what
    the kernel turns off for ``cpu`` and ``cmdline`` (``rdt=``).
    """

    name: str
    description: str
    vendor: str
    domains: tuple
    l3: typing.Optional[CacheAlloc] = None
    #: L2 CAT (Intel Atom and some server parts), one domain per L2 cache.
    l2: typing.Optional[CacheAlloc] = None
    mb: typing.Optional[BandwidthAlloc] = None
    smba: typing.Optional[BandwidthAlloc] = None
    mon: typing.Optional[Monitoring] = None
    cdp: bool = False
    mba_mbps: bool = False
    geometry: CacheGeometry = CacheGeometry()
    counters: CounterModel = CounterModel()
    cpu: typing.Optional[CpuId] = None
    #: Kernel command line the host was booted with (``rdt=`` matters).
    cmdline: str = ''
    #: Sub-NUMA Cluster nodes per L3 (1: no SNC).
    snc_ways: int = 1
    #: Hyperthreads per core; consecutive CPUs of a domain are siblings.
    threads_per_core: int = 1
    #: L2 cache ids under each L3 domain, ``((l3 id, (l2 id, ...)), ...)``,
    #: from a captured host's topology; empty: one L2 per CPU, id = CPU.
    l2_ids: tuple = ()
    #: Package telemetry (Intel AET, 7.0), one package per L3 domain.
    telemetry: typing.Optional[Telemetry] = None
    #: ``'x86'`` or ``'mpam'`` (drivers/resctrl/mpam_resctrl.c, 7.1).
    arch: str = 'x86'
    #: A captured host: every domain of :attr:`domains` (and of
    #: :attr:`l2_ids`) was online when captured, so resctrl shows it even
    #: when this machine has fewer CPUs than the host had domains.
    all_domains_online: bool = False
    #: The default group's schemata as captured, ``((schema, ((domain,
    #: value text), ...)), ...)``: written once at the first mount, as the
    #: captured host's operator had (a remount resets it, as the kernel
    #: does). Empty: the kernel's defaults.
    root_schemata: tuple = ()

    def siblings(self, online_cpus):
        """``{cpu: (other threads of its core)}`` of the emulated host."""
        out = {}
        n = self.threads_per_core
        for cpus in self.assign_cpus(online_cpus).values():
            for i in range(0, len(cpus), n):
                core = cpus[i:i + n]
                for cpu in core:
                    out[cpu] = tuple(c for c in core if c != cpu)
        return out

    @property
    def alloc_capable(self):
        return bool(self.l3 or self.l2 or self.mb or self.smba)

    @property
    def mon_capable(self):
        return self.mon is not None

    @property
    def mount_options(self):
        """The resctrl mount options this profile stands for."""
        opts = []
        if self.cdp:
            opts.append('cdp')
        if self.mba_mbps:
            opts.append('mba_MBps')
        return tuple(opts)

    @property
    def schemas(self):
        """Schemata lines in the order the kernel prints them.

        The kernel walks L3, L2, MB, SMBA and pushes each schema at the head
        of its list, so the file shows them in reverse: SMBA, MB, L2, then
        L3 (``L3DATA`` before ``L3CODE`` with CDP).
        """
        out = []
        if self.l3:
            if self.cdp:
                half = self.l3.num_closids // 2
                out.append(Schema('L3CODE', self.l3, 'code', half))
                out.append(Schema('L3DATA', self.l3, 'data', half))
            else:
                out.append(Schema('L3', self.l3, 'both',
                                  self.l3.num_closids))
        if self.l2:
            out.append(Schema('L2', self.l2, 'both', self.l2.num_closids))
        for res in (self.mb, self.smba):
            if res and not (self.arch == 'mpam' and self.cdp):
                # MPAM: MBW_MAX is per PARTID and cannot hide the CDP
                # emulation's two PARTIDs, so MB goes with cdp
                # (resctrl_arch_set_cdp_enabled()).
                out.append(Schema(res.name, res, 'both', res.num_closids))
        return tuple(reversed(out))

    @property
    def num_rmids(self):
        """RMIDs groups get: the smallest monitoring resource's.

        ``resctrl_arch_system_num_rmid_idx()`` takes the minimum over L3
        and PERF_PKG on x86; on MPAM it is PMG x PARTID, halved by its
        emulated CDP (``resctrl_arch_set_cdp_enabled()``).
        """
        if not self.mon:
            return 0
        counts = [self.mon.num_rmids]
        if self.telemetry:
            counts.append(self.telemetry.num_rmids)
        count = min(counts)
        if self.arch == 'mpam' and self.cdp:
            count //= 2
        return count

    def schema(self, name):
        for s in self.schemas:
            if s.name == name:
                return s
        return None

    @property
    def num_closids(self):
        """CLOSIDs usable by groups: the minimum over the schemas."""
        counts = [s.num_closids for s in self.schemas]
        return min(counts) if counts else 0

    @property
    def name_width(self):
        """Width the schema names are right-aligned to.

        A CDP-capable resource counts with its ``CODE`` suffix even when CDP
        is off, so that the column does not move between mounts.
        """
        width = 0
        for s in self.schemas:
            n = len(s.name)
            if s.is_cache and s.resource.cdp_capable and not self.cdp:
                n += 4
            width = max(width, n)
        return width

    @property
    def data_width(self):
        """Value column width of older kernels (the widest resource)."""
        widths = [0]
        for cache in (self.l3, self.l2):
            if cache:
                widths.append((cache.cbm_len + 3) // 4)
        for res in (self.mb, self.smba):
            if res:
                widths.append(res.data_width)
        return max(widths)

    def domain(self, dom_id):
        for d in self.domains:
            if d.id == dom_id:
                return d
        return None

    def assign_cpus(self, online_cpus):
        """Map host CPUs onto the profile's domains.

        CPUs are split in contiguous blocks in domain order; with fewer CPUs
        than domains each CPU gets its own domain and the remaining domains
        stay offline (absent), unless :attr:`all_domains_online`: then
        they are present with no CPU, as the captured host showed them.

        :param online_cpus: iterable of CPU numbers.
        :returns: ``{domain_id: [cpu, ...]}`` for the online domains only.
        """
        return _blocks(sorted(set(online_cpus)),
                       [d.id for d in self.domains],
                       self.all_domains_online)

    def cpu_domains(self, online_cpus):
        """``{cpu: domain_id}``, the inverse of :meth:`assign_cpus`."""
        return {cpu: dom for dom, cpus in self.assign_cpus(online_cpus).items()
                for cpu in cpus}

    def l2_domains(self, online_cpus):
        """Map host CPUs onto L2 caches: ``{l2 id: [cpu, ...]}``.

        Within each L3 domain's CPUs (:meth:`assign_cpus`), in contiguous
        blocks over that domain's :attr:`l2_ids`, as :meth:`assign_cpus`
        does over the L3 domains; an L2 with no CPU stays offline. Without
        ``l2_ids`` every CPU has its own L2, whose id is the CPU number.
        """
        ids = dict(self.l2_ids)
        out = {}
        for dom, cpus in self.assign_cpus(online_cpus).items():
            l2s = ids.get(dom)
            if not l2s:
                out.update((cpu, [cpu]) for cpu in cpus)
                continue
            out.update(_blocks(cpus, l2s, self.all_domains_online))
        return out

    def cache_topology(self, online_cpus):
        """The CPU caches the emulated host presents, per CPU.

        :returns: ``{cpu: [cache, ...]}`` where each cache is a dict with
            ``index``, ``level``, ``type`` (``Data``, ``Instruction``,
            ``Unified``), ``size`` (bytes), ``id``, ``ways``, ``line_size``
            and ``shared_cpus`` (sorted list). CPUs in no domain are left out.
        """
        g = self.geometry
        out = {}
        l2_of = {cpu: (l2, cpus)
                 for l2, cpus in self.l2_domains(online_cpus).items()
                 for cpu in cpus}
        for dom_id, cpus in self.assign_cpus(online_cpus).items():
            l3 = self.domain(dom_id).l3_size
            for cpu in cpus:
                out[cpu] = [
                    dict(index=0, level=1, type='Data', size=g.l1d_size,
                         id=cpu, ways=g.l1_ways, line_size=g.line_size,
                         shared_cpus=[cpu]),
                    dict(index=1, level=1, type='Instruction',
                         size=g.l1i_size, id=cpu, ways=g.l1_ways,
                         line_size=g.line_size, shared_cpus=[cpu]),
                    dict(index=2, level=2, type='Unified', size=g.l2_size,
                         id=l2_of[cpu][0], ways=g.l2_ways,
                         line_size=g.line_size,
                         shared_cpus=list(l2_of[cpu][1])),
                    dict(index=3, level=3, type='Unified', size=l3,
                         id=dom_id, ways=g.l3_ways, line_size=g.line_size,
                         shared_cpus=list(cpus)),
                ]
        return out

    def sysfs_cache_files(self, online_cpus, nr_cpu_ids=None):
        """Render :meth:`cache_topology` as sysfs ``cacheinfo`` files.

        :param nr_cpu_ids: width of ``shared_cpu_map`` (default: highest
            online CPU + 1).
        :returns: ``{'cpu0/cache/index3/size': '36608K\\n', ...}``, paths
            relative to ``/sys/devices/system/cpu``.
        """
        # Imported here: kparse is pure and has no dependency on profiles.
        from rdt_virt.emulator import kparse

        cpus = sorted(set(online_cpus))
        nbits = nr_cpu_ids or (cpus[-1] + 1 if cpus else 1)
        files = {}
        for cpu, caches in self.cache_topology(cpus).items():
            for c in caches:
                base = 'cpu%d/cache/index%d/' % (cpu, c['index'])
                sets = c['size'] // (c['ways'] * c['line_size'])
                values = {
                    'id': c['id'], 'level': c['level'], 'type': c['type'],
                    'size': '%dK' % (c['size'] // KIB),
                    'coherency_line_size': c['line_size'],
                    'ways_of_associativity': c['ways'],
                    'number_of_sets': sets,
                    'physical_line_partition': 1,
                    'shared_cpu_list': kparse.format_cpulist(
                        c['shared_cpus']),
                    'shared_cpu_map': kparse.format_cpumask(
                        c['shared_cpus'], nbits),
                }
                for key, val in values.items():
                    files[base + key] = '%s\n' % val
        return files


def _blocks(cpus, ids, keep_empty):
    """``{id: [cpu, ...]}``: *cpus* in contiguous blocks over *ids*."""
    n, k = len(cpus), len(ids)
    out = {}
    for i, dom in enumerate(ids):
        block = cpus[i * n // k:(i + 1) * n // k] if n >= k else (
            cpus[i:i + 1])
        if block or keep_empty:
            out[dom] = block
    return out


# The reference host: two-socket Xeon Gold 6252 (DESIGN.md section 1).
_CLX_L3 = 36608 * KIB
REFERENCE = Profile(
    name='reference',
    description='2-socket Xeon Gold 6252: L3 CAT (7ff, 16 CLOSIDs), '
                'MBA 10-100% step 10 (8 CLOSIDs), CMT+MBM (192 RMIDs)',
    vendor='intel',
    domains=(CacheDomain(0, _CLX_L3), CacheDomain(1, _CLX_L3)),
    l3=CacheAlloc(name='L3', num_closids=16, cbm_len=11, min_cbm_bits=1,
                  shareable_bits=0x600, sparse_masks=False,
                  cdp_capable=True),
    mb=BandwidthAlloc(name='MB', num_closids=8, min_bandwidth=10,
                      max_bandwidth=100, bandwidth_gran=10,
                      delay_linear=True, throttle_mode='max', data_width=3),
    mon=Monitoring(num_rmids=192, events=ALL_EVENTS, mon_scale=65536),
    geometry=CacheGeometry(l3_ways=11),
    # Cascade Lake stepping 7: the kernel turns L3 CAT off unless booted
    # with rdt=l3cat, as the reference host is.
    cpu=CpuId('GenuineIntel', 6, 0x55, 7),
    cmdline='rdt=l3cat',
    threads_per_core=2,
)

REFERENCE_STOCK = dataclasses.replace(
    REFERENCE, name='reference-stock', cmdline='',
    description='reference host booted without rdt=l3cat: the kernel '
                'turns L3 CAT off on this stepping (MBA and CMT+MBM only)')

# rdt=!mba: the kernel leaves MBA out, so the host has L3 CAT and CMT+MBM
# and the L3's 16 CLOSIDs instead of the 8 both resources share.
REFERENCE_NO_MBA = dataclasses.replace(
    REFERENCE, name='reference-no-mba', cmdline='rdt=l3cat,!mba',
    description='reference host booted with rdt=l3cat,!mba: L3 CAT and '
                'CMT+MBM, no MBA')

# The kernel knows SNC only on the models of quirks.SNC_MODELS, so this
# host is a Sapphire Rapids: on the reference host's Cascade Lake the
# kernel keeps monitoring per L3 whatever the firmware does.
SNC2 = dataclasses.replace(
    REFERENCE, name='snc2', snc_ways=2,
    cpu=CpuId('GenuineIntel', 6, 0x8f, 8), cmdline='',
    description='Sapphire Rapids with the reference caches and Sub-NUMA '
                'Clustering, two nodes per L3: monitoring per node '
                '(mon_sub_L3_*, 6.11+)')

CDP = dataclasses.replace(
    REFERENCE, name='cdp', cdp=True,
    description='reference host mounted with -o cdp: L3CODE/L3DATA, '
                '8 CLOSIDs each')

MBA_MBPS = dataclasses.replace(
    REFERENCE, name='mba-mbps', mba_mbps=True,
    description='reference host mounted with -o mba_MBps: MB in MBps '
                '(software controller)')

_GENOA_L3 = 32 * MIB
#: AMD's bandwidth unit: 1/8 GB/s.
AMD_MB_UNIT = 1024 * MIB // 8


def _amd_bw(name, bw_len):
    return BandwidthAlloc(name=name, num_closids=16, min_bandwidth=0,
                          max_bandwidth=1 << bw_len, bandwidth_gran=1,
                          delay_linear=False, throttle_mode=None,
                          data_width=4, unit_bytes_per_second=AMD_MB_UNIT)


AMD = Profile(
    name='amd',
    description='AMD EPYC: L3 CAT (ffff, sparse, 16 CLOSIDs), MBA and SMBA '
                'in 1/8 GB/s units (2048 = unlimited), CMT+MBM (256 RMIDs, '
                '44-bit counters)',
    vendor='amd',
    domains=(CacheDomain(0, _GENOA_L3), CacheDomain(1, _GENOA_L3)),
    l3=CacheAlloc(name='L3', num_closids=16, cbm_len=16, min_cbm_bits=0,
                  shareable_bits=0, sparse_masks=True, cdp_capable=False),
    mb=_amd_bw('MB', 11),
    smba=_amd_bw('SMBA', 11),
    mon=Monitoring(num_rmids=256, events=ALL_EVENTS, mon_scale=64,
                   counter_width=44, bmec=True),
    geometry=CacheGeometry(l2_ways=8, l3_ways=16),
    cpu=CpuId('AuthenticAMD', 0x19, 0x11, 1),
)

# The kernel takes the unlimited value from CPUID (1 << EAX of leaf
# 0x80000020); this variant reports a 12-bit field.
AMD_MB4096 = dataclasses.replace(
    AMD, name='amd-mb4096', mb=_amd_bw('MB', 12), smba=_amd_bw('SMBA', 12),
    description='AMD EPYC variant whose CPUID reports a 12-bit bandwidth '
                'field: 4096 = unlimited')

AMD_ZEN5 = dataclasses.replace(
    AMD, name='amd-zen5',
    mon=dataclasses.replace(AMD.mon, num_mbm_cntrs=32),
    l3=dataclasses.replace(AMD.l3, io_alloc_capable=True),
    description='AMD EPYC Zen 5: the amd profile plus assignable MBM '
                'counters (ABMC, 32 per domain) and L3 io_alloc')

L3_CAT = dataclasses.replace(
    REFERENCE, name='l3-cat', mb=None, mon=None,
    description='reference caches with L3 CAT only: no MBA, no monitoring')

# No x86 part rdt-virt knows reports more than 16 CLOSIDs; this one shows
# what kernels before 6.16 do with more (closid_init() in
# arch/x86/kernel/cpu/resctrl/rdtgroup.c: at most 32 usable).
WIDE = dataclasses.replace(
    REFERENCE, name='wide', mb=None,
    l3=dataclasses.replace(REFERENCE.l3, num_closids=64),
    description='reference caches whose L3 CAT reports 64 CLOSIDs, no '
                'MBA: kernels before 6.16 use only 32 of them')

MONITORING = dataclasses.replace(
    REFERENCE, name='monitoring', l3=None, mb=None,
    description='reference caches with CMT+MBM only: no allocation')

# Intel Xeon 6 with E-cores, Clearwater Forest: the platform whose event
# groups intel_aet.c knows (the XML files under xml/CWF in Intel-PMT). Two
# packages, one L3 each; the L3 figures (12 ways, 16 CLOSIDs, 1024 L3
# RMIDs) are plausible values, not from a datasheet: what matters is that
# L3_MON has more RMIDs than PERF_PKG's 576.
_CWF_L3 = 108 * MIB
AET = Profile(
    name='aet',
    description='2-socket Xeon 6 (Clearwater Forest) with Application '
                'Energy Telemetry: L3 CAT, MBA, CMT+MBM (1024 RMIDs) and '
                'PERF_PKG energy/perf events (576 RMIDs, 7.0+)',
    vendor='intel',
    domains=(CacheDomain(0, _CWF_L3), CacheDomain(1, _CWF_L3)),
    l3=CacheAlloc(name='L3', num_closids=16, cbm_len=12, min_cbm_bits=1,
                  shareable_bits=0, sparse_masks=True, cdp_capable=True),
    mb=BandwidthAlloc(name='MB', num_closids=16, min_bandwidth=10,
                      max_bandwidth=100, bandwidth_gran=10,
                      delay_linear=True, throttle_mode='per-thread',
                      data_width=3),
    mon=Monitoring(num_rmids=1024, events=ALL_EVENTS, mon_scale=65536),
    telemetry=Telemetry(),
    geometry=CacheGeometry(l2_size=4 * MIB, l3_ways=12),
    cpu=CpuId('GenuineIntel', 6, 0xdd, 1),
)

# An Arm Neoverse server with MPAM on the L3 (CPOR portions, CSU counters)
# and a memory-side MBW_MAX control, through drivers/resctrl/mpam_resctrl.c
# (7.1). PARTID and PMG counts are implementation defined: 64 PARTIDs and 4
# PMGs are plausible values, not from one part's manual. 8 fraction bits
# of MBW_MAX give min_bandwidth 0 and bandwidth_gran 1; the CSU monitor
# is the only counter this kernel reads (resctrl_arch_rmid_read()).
_NEOVERSE_L3 = 64 * MIB
MPAM = Profile(
    name='mpam',
    description='Arm Neoverse with MPAM (7.1): L3 portions (16, sparse, 64 '
                'PARTIDs), MB 0-100% step 1, llc_occupancy with 4 PMGs per '
                'PARTID (256 RMIDs in per-CLOSID pools)',
    vendor='arm',
    arch='mpam',
    domains=(CacheDomain(0, _NEOVERSE_L3), CacheDomain(1, _NEOVERSE_L3)),
    l3=CacheAlloc(name='L3', num_closids=64, cbm_len=16, min_cbm_bits=1,
                  shareable_bits=0xffff, sparse_masks=True,
                  cdp_capable=True),
    mb=BandwidthAlloc(name='MB', num_closids=64, min_bandwidth=0,
                      max_bandwidth=100, bandwidth_gran=1,
                      delay_linear=True, throttle_mode=None, data_width=3,
                      bwa_wd=8),
    mon=Monitoring(num_rmids=256, events=('llc_occupancy',), mon_scale=64,
                   num_pmg=4),
    geometry=CacheGeometry(l2_size=2 * MIB, l3_ways=16),
)

PROFILES = {p.name: p for p in (REFERENCE, REFERENCE_STOCK,
                                REFERENCE_NO_MBA, SNC2, CDP,
                                MBA_MBPS, AMD, AMD_MB4096, AMD_ZEN5, L3_CAT,
                                WIDE, MONITORING, AET, MPAM)}


class UnknownProfile(KeyError):
    def __str__(self):
        return 'unknown profile %r (known: %s)' % (
            self.args[0], ', '.join(sorted(PROFILES)))


def get_profile(name, cmdline=None):
    """Return the profile called *name*, or raise :class:`UnknownProfile`.

    :param cmdline: boot the host with this kernel command line instead of
        the profile's own.
    """
    if isinstance(name, Profile):
        profile = name
    else:
        try:
            profile = PROFILES[name]
        except KeyError:
            raise UnknownProfile(name) from None
    if cmdline is not None:
        profile = dataclasses.replace(profile, cmdline=cmdline)
    return profile
