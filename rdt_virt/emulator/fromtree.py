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

"""Profiles as captured trees: load a real host's, render a built-in one.

A capture (``rdt-virt capabilities --capture DIR``, see
:mod:`rdt_virt.resctrl.capture`) holds ``host.json``, a copy of
``/sys/fs/resctrl`` (``info/``, the default group's files, ``mon_data``)
and the sysfs CPU caches. :func:`load` builds the :class:`Profile` that
emulates that host; :func:`render` writes the same kind of directory for
any profile, from the emulator's own files, so the built-in profiles are
data of the same kind and ``load(render(p))`` gives ``p`` back.

A captured writable value (``max_threshold_occupancy``) is served as
captured. What resctrl does not show comes from the vendor: the counter unit
(``mon_scale``: 64 KiB on Intel, 64 B on AMD), the MBM counter width (24
and 44 bits) and the counter model's rates. L2 CAT (``info/L2``) is
emulated with one domain per L2 cache id of the captured topology (mapped
onto this machine's CPUs as the L3 domains are); L2 code/data
prioritisation (``cdpl2``) is not, and is noted in
:attr:`Profile.description`.
"""

import dataclasses
import json
import os

from rdt_virt.emulator import inference
from rdt_virt.emulator import kparse
from rdt_virt.emulator import profiles

_SCALE = {'intel': 65536, 'amd': 64, 'arm': 64}
_WIDTH = {'intel': 24, 'amd': 44, 'arm': 24}
# MPAM's min_bandwidth is mbw_max_to_percent(0) = round(100 / 2^bwa_wd):
# the fraction bits it implies (8 stands for 8 or more, which all show 0).
_MPAM_BWA_WD = {0: 8, 1: 7, 2: 6, 3: 5, 6: 4, 13: 3, 25: 2, 50: 1}
#: AMD's narrowest bandwidth field: 2^11 = 2048 means unlimited.
_AMD_BW_BITS = 11


class TreeError(ValueError):
    """The directory is not a usable capture."""


_Tree = inference.Tree
_schemata = inference.schemata


def _size(text):
    text = text.strip()
    mult = {'K': 1024, 'M': 1024 * 1024}.get(text[-1:], 1)
    return int(text.rstrip('KM')) * mult


def _cpu_number(name):
    digits = name[len('cpu'):]
    return int(digits) if digits.isdigit() else -1


def _caches(tree):
    """The captured CPU caches.

    :returns: ``{(level, type): (size, ways, line)}``, ``{l3 id: size}``
        and the L2 ids under each L3, ``((l3 id, (l2 id, ...)), ...)``, in
        CPU order.
    """
    kinds, l3 = {}, {}
    ids = {}
    for cpu in sorted(tree.listdir(*tree.cpu), key=_cpu_number):
        found = {}
        for index in tree.listdir(*(tree.cpu + (cpu, 'cache'))):
            def value(name):
                return (tree.read(*(tree.cpu + (cpu, 'cache', index,
                                                name))) or '').strip()
            if not value('level') or not value('size'):
                continue
            level, ctype = int(value('level')), value('type')
            size = _size(value('size'))
            kinds.setdefault((level, ctype), (
                size, int(value('ways_of_associativity') or 0),
                int(value('coherency_line_size') or 64)))
            if level == 3 and value('id'):
                l3[int(value('id'))] = size
            if ctype == 'Unified' and value('id'):
                found[level] = int(value('id'))
        if 2 in found and 3 in found:
            l2s = ids.setdefault(found[3], [])
            if found[2] not in l2s:
                l2s.append(found[2])
    return kinds, l3, tuple((dom, tuple(l2s))
                            for dom, l2s in sorted(ids.items()))


def _cache_alloc(tree, name, flags, vendor, closid_factor=1):
    info = tree.res + ('info', name)
    level = name[:2]
    mask = tree.int(*info, 'cbm_mask', base=16)
    sparse = tree.int(*info, 'sparse_masks')
    return profiles.CacheAlloc(
        name=level,
        num_closids=tree.int(*info, 'num_closids') * closid_factor,
        cbm_len=mask.bit_length(),
        min_cbm_bits=tree.int(*info, 'min_cbm_bits', default=1),
        shareable_bits=tree.int(*info, 'shareable_bits', base=16, default=0),
        sparse_masks=bool(sparse if sparse is not None else
                          vendor == 'amd'),
        cdp_capable=(closid_factor == 2 or
                     'cdp_%s' % level.lower() in flags),
        io_alloc_capable=(tree.read(*info, 'io_alloc') or 'not supported'
                          ).strip() != 'not supported' or 'sdciae' in flags)


def _looks_like_mpam(tree, info_dirs):
    """True for an MB that is linear with no throttle mode file.

    That is mpam_resctrl.c's (see :func:`rdt_virt.resctrl.info._arch`).
    """
    if 'MB' not in info_dirs:
        return False
    info = tree.res + ('info', 'MB')
    return (tree.read(*info, 'thread_throttle_mode') is None and
            bool(tree.int(*info, 'delay_linear', default=0)))


def _bw_alloc(tree, name, vendor, root, mba_mbps):
    info = tree.res + ('info', name)
    mode = (tree.read(*info, 'thread_throttle_mode') or '').strip()
    min_bw = tree.int(*info, 'min_bandwidth', default=0)
    values = [int(v) for v in root.get(name, {}).values() if v.isdigit()]
    if vendor == 'amd':
        # Unthrottled is a power of two (1 << CPUID 0x80000020 EAX), at
        # least 2048, and no captured value exceeds it.
        maximum = 1 << max([_AMD_BW_BITS] + [(v - 1).bit_length()
                                             for v in values if v > 0])
    else:
        maximum = 100
    return profiles.BandwidthAlloc(
        name=name, num_closids=tree.int(*info, 'num_closids'),
        min_bandwidth=min_bw,
        max_bandwidth=maximum,
        bandwidth_gran=tree.int(*info, 'bandwidth_gran', default=1),
        delay_linear=bool(tree.int(*info, 'delay_linear', default=0)),
        throttle_mode=None if mode in ('', 'undefined') else mode,
        data_width=4 if vendor == 'amd' else 3,
        unit_bytes_per_second=profiles.AMD_MB_UNIT if vendor == 'amd'
        else None,
        bwa_wd=_MPAM_BWA_WD.get(min_bw, 8) if vendor == 'arm' else None)


def load(directory, name=None, mon_scale=None):
    """The profile of the host captured in *directory*.

    *directory* is a capture (``host.json``, ``resctrl/``, ``cpu/``),
    libvirt's layout (``resctrl/``, ``system/cpu/``) or a bare copy of a
    resctrl mount. What a tree without ``host.json`` does not say is read
    from the files (:mod:`inference`).

    :param mon_scale: bytes per counter unit (default: the vendor's).
    :raises TreeError: when *directory* holds no resctrl capture.
    """
    tree = _Tree(directory)
    info_dirs = tree.rlist('info')
    if not info_dirs:
        raise TreeError('%s has no resctrl info/ directory: not a capture '
                        '(see "rdt-virt capabilities --capture")'
                        % directory)
    host = json.loads(tree.read('host.json') or '{}')
    root = _schemata(tree.rread('schemata'))
    vendor = inference.vendor(tree, host, info_dirs, root)
    if vendor is None:
        vendor = 'arm' if _looks_like_mpam(tree, info_dirs) else 'intel'
    arch = 'mpam' if vendor == 'arm' else 'x86'
    flags = set(host.get('flags', ()))
    opts = host.get('mount_options')
    if opts is None:
        opts = ['cdp'] if 'L3CODE' in info_dirs else []
    kinds, l3_sizes, l2_topo = _caches(tree)
    notes = []

    l3 = None
    if 'L3' in info_dirs:
        l3 = _cache_alloc(tree, 'L3', flags, vendor)
    elif 'L3CODE' in info_dirs:
        l3 = _cache_alloc(tree, 'L3CODE', flags, vendor, closid_factor=2)
    if l3 and not l3.cdp_capable and not l2_cat_dirs(info_dirs) and (
            inference.name_width(tree.rread('schemata')) >= len('L3CODE')):
        # Kernels before 6.15 align names to the widest a CDP-capable
        # cache could show (L3CODE), CDP on or off.
        l3 = dataclasses.replace(l3, cdp_capable=True)
    l2_cat = None
    if 'L2' in info_dirs:
        l2_cat = _cache_alloc(tree, 'L2', flags, vendor)
    elif 'L2CODE' in info_dirs:
        # Emulated without the cdpl2 mount option: the plain L2 resource.
        l2_cat = _cache_alloc(tree, 'L2CODE', flags, vendor, closid_factor=2)
        notes.append('L2 code/data prioritisation (cdpl2) is not emulated')
    mba_mbps = inference.mba_mbps(host, vendor, root)
    mb = _bw_alloc(tree, 'MB', vendor, root, mba_mbps) if (
        'MB' in info_dirs) else None
    smba = _bw_alloc(tree, 'SMBA', vendor, root, False) if (
        'SMBA' in info_dirs) else None
    # SNC: mon_L3_XX holds one mon_sub_L3_YY per node.
    snc = max([1] + [
        len([n for n in tree.rlist('mon_data', d)
             if n.startswith('mon_sub_L3_')])
        for d in tree.rlist('mon_data')])
    scale = mon_scale or _SCALE[vendor]
    mon = None
    threshold = None
    if 'L3_MON' in info_dirs:
        feats = (tree.rread('info', 'L3_MON', 'mon_features') or
                 '').split()
        threshold = tree.rint('info', 'L3_MON', 'max_threshold_occupancy')
        cntrs = (tree.rread('info', 'L3_MON', 'num_mbm_cntrs') or
                 '').strip()
        num_rmids = tree.rint('info', 'L3_MON', 'num_rmids')
        num_pmg = None
        if arch == 'mpam':
            # PMG x PARTID, both halved by the emulated CDP.
            counts = [tree.rint('info', d, 'num_closids')
                      for d in info_dirs if not d.endswith('_MON')]
            partids = min([c for c in counts if c] or [1])
            num_pmg = max(num_rmids // max(partids, 1), 1)
            if 'cdp' in opts:
                num_rmids *= 2
        mon = profiles.Monitoring(
            num_rmids=num_rmids * snc,
            num_pmg=num_pmg,
            events=tuple(e for e in profiles.ALL_EVENTS if e in feats),
            mon_scale=scale, counter_width=_WIDTH[vendor],
            num_mbm_cntrs=int(cntrs.split(';')[0].split('=')[1])
            if cntrs else None,
            bmec='bmec' in flags or 'mbm_total_bytes_config' in
            tree.rlist('info', 'L3_MON'))

    telemetry = None
    if 'PERF_PKG_MON' in info_dirs:
        feats = (tree.rread('info', 'PERF_PKG_MON', 'mon_features') or
                 '').split()
        telemetry = profiles.Telemetry(
            num_rmids=tree.rint('info', 'PERF_PKG_MON', 'num_rmids'),
            events=tuple(e for e in profiles.ENERGY_EVENTS +
                         profiles.PERF_EVENTS if e in feats))

    dom_ids, l2_ids = inference.domain_ids(tree, info_dirs, root)
    if not dom_ids:
        dom_ids = tuple(sorted(l3_sizes)) or (0,)
    sizes = _cache_sizes(tree, root, 'L3', l3)
    sizes.update(l3_sizes)
    l2_sizes = _cache_sizes(tree, root, 'L2', l2_cat)
    default_size = max(sizes.values()) if sizes else 32 * profiles.MIB
    domains = tuple(profiles.CacheDomain(d, sizes.get(d, default_size))
                    for d in dom_ids)
    if mon and threshold is not None and threshold != mon.threshold(
            domains[0].l3_size):
        # Writable values are served as captured, not recomputed: the
        # kernel's own figure comes from CPUID's cache size, which the
        # capture may not match.
        mon = dataclasses.replace(mon, max_threshold_occupancy=threshold)

    g = profiles.CacheGeometry()
    l1d = kinds.get((1, 'Data'), (g.l1d_size, g.l1_ways, g.line_size))
    l1i = kinds.get((1, 'Instruction'), (g.l1i_size, g.l1_ways,
                                         g.line_size))
    l2 = kinds.get((2, 'Unified'), (
        max(l2_sizes.values()) if l2_sizes else g.l2_size, g.l2_ways,
        g.line_size))
    l3c = kinds.get((3, 'Unified'), (0, l3.cbm_len if l3 else g.l3_ways,
                                     g.line_size))
    geometry = profiles.CacheGeometry(
        l1d_size=l1d[0], l1i_size=l1i[0], l1_ways=l1d[1] or g.l1_ways,
        l2_size=l2[0], l2_ways=l2[1] or (
            l2_cat.cbm_len if l2_cat else g.l2_ways),
        l3_ways=l3c[1] or g.l3_ways, line_size=l1d[2] or g.line_size)
    cpu = None
    if host.get('vendor') and host.get('family') is not None:
        cpu = profiles.CpuId(host['vendor'], host['family'],
                             host.get('model') or 0,
                             host.get('stepping') or 0)
    description = 'captured host (%s, Linux %s)' % (
        host.get('vendor', '%s, inferred' % vendor),
        host.get('kernel', '?'))
    if notes:
        description += '; ' + '; '.join(notes)
    return profiles.Profile(
        name=name or os.path.basename(os.path.normpath(directory)),
        description=description, vendor=vendor, domains=domains, l3=l3,
        l2=l2_cat,
        l2_ids=inference.l2_layout(dom_ids, l2_ids, l2_topo)
        if l2_cat else (),
        mb=mb, smba=smba, mon=mon, cdp='cdp' in opts, mba_mbps=mba_mbps,
        geometry=geometry, cpu=cpu, cmdline=host.get('cmdline', ''),
        snc_ways=snc, telemetry=telemetry, arch=arch,
        all_domains_online=True,
        root_schemata=tuple(
            (line, tuple(sorted(vals.items())))
            for line, vals in sorted(root.items())))


def l2_cat_dirs(info_dirs):
    return [d for d in info_dirs if d.startswith('L2')]


def _cache_sizes(tree, root, level, res):
    """``{domain: bytes}`` of a cache from the root's ``size`` and masks.

    ``size`` shows the bytes of the root's mask, so the whole cache is
    that times ``cbm_len`` over the mask's bits.
    """
    sizes = {}
    for line_name, vals in _schemata(tree.rread('size')).items():
        if not line_name.startswith(level) or not res:
            continue
        for dom, val in vals.items():
            mask = root.get(line_name, {}).get(dom)
            bits = bin(int(mask, 16)).count('1') if mask else res.cbm_len
            if bits:
                sizes.setdefault(dom, int(val) * res.cbm_len // bits)
    return sizes


def assumptions(profile, kernel, kernel_reason, limbo_delay=None,
                mon_scale_given=False):
    """Lines saying what the emulation of a capture assumed.

    A capture cannot show the kernel release (unless ``host.json`` names
    it), how long freed RMIDs stay in limbo, nor the bytes per counter
    unit; these come from options with documented defaults.
    """
    lines = ['kernel %s (%s; --kernel to change)' % (kernel.spec,
                                                     kernel_reason),
             'RMID limbo checked every %gs (--limbo-delay to change)' % (
                 1.0 if limbo_delay is None else limbo_delay)]
    if profile.mon:
        lines.append('counter unit %d bytes (%s; --mon-scale to change)' % (
            profile.mon.mon_scale, 'given' if mon_scale_given else
            'the %s default' % profile.vendor))
    lines.append('vendor %s, mount options: %s' % (
        profile.vendor, ','.join(profile.mount_options) or 'none'))
    l2 = [str(i) for _, ids in profile.l2_ids for i in ids]
    lines.append('domains: L3 %s%s' % (
        ','.join(str(d.id) for d in profile.domains),
        '; L2 %s' % ','.join(l2) if l2 else ''))
    return lines


def guess_kernel(directory):
    """``(spec, reason)``: the kernel a capture came from (inference)."""
    tree = _Tree(directory)
    host = json.loads(tree.read('host.json') or '{}')
    return inference.guess_kernel(tree, tree.rlist('info'), host)


class _NoThreads(object):
    def snapshot(self):
        return {}

    def tids(self):
        return {}

    def lookup(self, tid):
        return None


def render(profile, dest, kernel=None, cpus=None):
    """Write *profile* as a capture into *dest* (see module doc).

    :param cpus: CPUs of the rendered host (default: two per domain).
    :returns: the number of files written.
    """
    # Imported here: model imports profiles, which must not import us.
    from rdt_virt.emulator import model as model_mod
    from rdt_virt.emulator import tree as tree_mod

    profile = profiles.get_profile(profile)
    cpus = list(cpus or range(2 * len(profile.domains)))
    state = model_mod.ResctrlModel(profile, _NoThreads(), online_cpus=cpus,
                                   kernel=kernel)
    view = tree_mod.ResctrlTree(state)
    count = 0

    def put(rel, text):
        path = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(text)

    def walk(path):
        nonlocal count
        for name, kind in view.readdir_modes(path):
            child = path.rstrip('/') + '/' + name
            if kind & 0o040000:
                if name not in state.groups and name != 'mon_groups':
                    walk(child)
                continue
            try:
                text = view.read(child)
            except kparse.KernelError:
                continue
            put('resctrl' + child, text)
            count += 1

    walk('/')
    # CPU flags describe the hardware, info/ what the kernel enabled.
    flags = ['cat_l3'] if profile.l3 else []
    flags += ['cdp_l3'] if profile.l3 and profile.l3.cdp_capable else []
    flags += ['cat_l2'] if profile.l2 else []
    flags += ['cdp_l2'] if profile.l2 and profile.l2.cdp_capable else []
    flags += ['mba'] if profile.mb else []
    flags += ['sdciae'] if profile.l3 and profile.l3.io_alloc_capable else []
    if profile.mon:
        names = {'llc_occupancy': 'cqm_occup_llc',
                 'mbm_total_bytes': 'cqm_mbm_total',
                 'mbm_local_bytes': 'cqm_mbm_local'}
        flags += [names[e] for e in profile.mon.events]
        flags += ['bmec'] if profile.mon.bmec else []
    cpu = profile.cpu
    host = {
        'vendor': cpu.vendor if cpu else {'intel': 'GenuineIntel',
                                          'amd': 'AuthenticAMD'}.get(
            profile.vendor, profile.vendor),
        'family': cpu and cpu.family, 'model': cpu and cpu.model,
        'stepping': cpu and cpu.stepping, 'flags': sorted(flags),
        'kernel': state.kernel.spec, 'cmdline': profile.cmdline,
        'mount_options': list(profile.mount_options),
    }
    put('host.json', json.dumps(host, indent=1, sort_keys=True))
    put(os.path.join('cpu', 'online'), kparse.format_cpulist(cpus) + '\n')
    for rel, text in profile.sysfs_cache_files(cpus).items():
        put(os.path.join('cpu', rel), text)
    return count + len(profile.sysfs_cache_files(cpus)) + 2
