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

"""What a resctrl tree shows about the host beyond its info/ values.

:mod:`fromtree` turns a captured tree into a profile. A capture made by
``rdt-virt capabilities --capture`` says in ``host.json`` which vendor,
mount options and kernel it came from; any other resctrl tree (libvirt's
test data, a ``cp -r`` of ``/sys/fs/resctrl``) does not. The functions
here read those facts from the files themselves, where the kernel's
formats give them away:

- *Domains.* Every file that lists domains (the root ``schemata``,
  ``info/*/bit_usage``, ``info/L3_MON/*_config``, ``mon_data/mon_L3_XX``)
  names the online ones; L2 lines name L2 cache ids, the others L3 ids.
- *Vendor.* Only AMD has SMBA, BMEC ``_config`` files, bandwidth in
  absolute units (``MB`` above 100 without ``mba_MBps``) and no
  ``thread_throttle_mode`` with a non-linear MB.
- *mba_MBps.* On Intel the software controller's unthrottled value is
  U32_MAX (``MBA_MAX_MBPS``), never a percentage.
- *Kernel release.* ``info/L3_MON/mbm_assign_mode`` exists on every 6.18+
  L3_MON, ``sparse_masks`` on every 6.7+ cache resource, and before 6.15
  values were padded to a column (``MB:0= 10``). The newest listed release
  that agrees with every such sign is assumed.
"""

import os
import re

from rdt_virt.emulator import kernels

#: MB's unthrottled value with mba_MBps (the kernel's MBA_MAX_MBPS).
U32_MAX = (1 << 32) - 1

_VENDORS = {'GenuineIntel': 'intel', 'AuthenticAMD': 'amd',
            'HygonGenuine': 'amd', 'arm': 'arm', 'ARM': 'arm'}


class Tree(object):
    """Reads a capture: ``DIR/resctrl`` or a bare resctrl tree, CPUs.

    :ivar res: path parts of the resctrl copy below the base.
    :ivar cpu: path parts of the sysfs CPU directory (``cpu`` in our
        captures, ``system/cpu`` in libvirt's test data).
    """

    def __init__(self, base):
        self.base = base
        if os.path.isdir(os.path.join(base, 'resctrl', 'info')):
            self.res = ('resctrl',)
        else:
            self.res = ()
        self.cpu = ('cpu',)
        if not os.path.isdir(os.path.join(base, 'cpu')) and os.path.isdir(
                os.path.join(base, 'system', 'cpu')):
            self.cpu = ('system', 'cpu')

    def read(self, *parts):
        try:
            with open(os.path.join(self.base, *parts)) as f:
                return f.read()
        except OSError:
            return None

    def int(self, *parts, base=10, default=None):
        text = self.read(*parts)
        if text is None or not text.strip():
            return default
        return int(text.strip(), base)

    def listdir(self, *parts):
        try:
            return sorted(os.listdir(os.path.join(self.base, *parts)))
        except OSError:
            return []

    def rread(self, *parts):
        return self.read(*(self.res + parts))

    def rint(self, *parts, **kwargs):
        return self.int(*(self.res + parts), **kwargs)

    def rlist(self, *parts):
        return self.listdir(*(self.res + parts))


def schemata(text):
    """``{name: {dom: value text}}`` of a schemata file."""
    out = {}
    for line in (text or '').splitlines():
        name, _, rest = line.strip().partition(':')
        vals = {}
        for item in rest.split(';'):
            dom, eq, val = item.partition('=')
            if eq:
                vals[int(dom)] = val.strip()
        out[name.strip()] = vals
    return out


def vendor(tree, host, info_dirs, root):
    """``'intel'``, ``'amd'`` or ``'arm'`` (None: MPAM is for the caller)."""
    if host.get('vendor') in _VENDORS:
        return _VENDORS[host['vendor']]
    if 'SMBA' in info_dirs or any(
            n.endswith('_config') for n in tree.rlist('info', 'L3_MON')):
        return 'amd'
    if 'MB' in info_dirs:
        values = [int(v) for v in root.get('MB', {}).values()
                  if v.isdigit()]
        linear = tree.rint('info', 'MB', 'delay_linear', default=1)
        mode = tree.rread('info', 'MB', 'thread_throttle_mode')
        if values and 100 < max(values) < U32_MAX:
            return 'amd'
        if mode is None and not linear:
            return 'amd'
    return None


def mba_mbps(host, vendor_name, root):
    """True when MB takes MBps (the ``mba_MBps`` mount option)."""
    if 'mount_options' in host:
        return 'mba_MBps' in host['mount_options']
    values = [int(v) for v in root.get('MB', {}).values() if v.isdigit()]
    return vendor_name != 'amd' and bool(values) and max(values) > 100


def _listed(text):
    """Domain ids of a ``0=...;1=...`` file."""
    ids = set()
    for item in (text or '').strip().split(';'):
        dom, eq, _ = item.partition('=')
        if eq and dom.strip().isdigit():
            ids.add(int(dom))
    return ids


def domain_ids(tree, info_dirs, root):
    """The L3 domain ids and the L2 ones every file agrees to show.

    :returns: ``(l3 ids, l2 ids)``, sorted tuples.
    """
    l3, l2 = set(), set()
    for name, vals in root.items():
        (l2 if name.startswith('L2') else l3).update(vals)
    for name in info_dirs:
        ids = _listed(tree.rread('info', name, 'bit_usage'))
        (l2 if name.startswith('L2') else l3).update(ids)
    for name in tree.rlist('info', 'L3_MON'):
        if name.endswith('_config'):
            l3 |= _listed(tree.rread('info', 'L3_MON', name))
    for entry in tree.rlist('mon_data'):
        if entry.startswith('mon_L3_') and entry[7:].isdigit():
            l3.add(int(entry[len('mon_L3_'):]))
    return tuple(sorted(l3)), tuple(sorted(l2))


def l2_layout(l3_ids, l2_ids, captured):
    """The L2 ids under each L3 domain, ``((l3, (l2, ...)), ...)``.

    *captured* comes from the sysfs cacheinfo of the capture; it is used
    when it names exactly the L2 ids resctrl shows. Otherwise the L2 ids
    are shared out over the L3 domains in order, in equal contiguous
    blocks, so that the topology agrees with resctrl's ids.
    """
    if not l2_ids:
        return ()
    seen = sorted(i for _, ids in captured for i in ids)
    if seen == sorted(l2_ids) and {d for d, _ in captured} <= set(l3_ids):
        return captured
    doms = list(l3_ids) or [0]
    n, k = len(l2_ids), len(doms)
    return tuple((d, tuple(l2_ids[i * n // k:(i + 1) * n // k]))
                 for i, d in enumerate(doms) if i * n // k < n)


def _version(text):
    m = re.match(r'(\d+)\.(\d+)', text or '')
    return (int(m.group(1)), int(m.group(2))) if m else None


def kernel_from_release(text):
    """The kernel spec of a release string (``6.8.0-49-generic``).

    The listed release at or below it, plus the features of the releases
    between (``6.5`` gives ``6.1+bmec+mon_rename``). None when *text*
    is no release or older than every listed one.
    """
    version = _version(text)
    if version is None:
        return None
    listed = [r for r in kernels.RELEASES if _version(r) <= version]
    if not listed:
        return None
    base = listed[-1]
    have = kernels.release_features(base)
    extra = sorted(
        name for name, feat in kernels.FEATURES.items()
        if feat.release and name not in have and
        _version(feat.release) <= version)
    return base + ''.join('+' + f for f in extra)


def _padded(text):
    """True when the schemata pads its values, as before 6.15; else None.

    Older kernels zero-pad masks and space-pad bandwidth values to the
    widest resource's column. Names are right-aligned in every release,
    so they say nothing; an unpadded value may just be as wide as the
    column, so only padding is a sign.
    """
    for line in (text or '').splitlines():
        for item in line.partition(':')[2].split(';'):
            val = item.partition('=')[2]
            if val[:1] == ' ' or (len(val) > 1 and val[:1] == '0'):
                return True
    return None


def kernel_signs(tree, info_dirs):
    """``{feature: present}`` for the features the tree shows."""
    signs = {}
    if _padded(tree.rread('schemata')):
        signs['no_padding'] = False
    caches = [d for d in info_dirs if d[:2] in ('L2', 'L3') and
              not d.endswith('_MON')]
    if caches:
        signs['sparse_masks'] = all(
            'sparse_masks' in tree.rlist('info', d) for d in caches)
    if 'L3_MON' in info_dirs:
        signs['mbm_assign'] = 'mbm_assign_mode' in tree.rlist(
            'info', 'L3_MON')
    return signs


def guess_kernel(tree, info_dirs, host):
    """The kernel spec to emulate and why.

    With no release in ``host.json``: the newest listed release that has
    none of the features the tree shows absent, plus the ones it shows
    present (``6.12+no_padding`` for a 6.15 tree).

    :returns: ``(spec, reason)``.
    """
    spec = kernel_from_release(host.get('kernel'))
    if spec:
        return spec, 'the capture\'s kernel release %s' % host['kernel']
    signs = kernel_signs(tree, info_dirs)
    why = ', '.join('%s %s' % (f, 'present' if p else 'absent')
                    for f, p in sorted(signs.items())) or 'no sign'
    for release in reversed(kernels.RELEASES):
        have = kernels.release_features(release)
        if not any(f in have for f, p in signs.items() if not p):
            spec = release + ''.join(
                '+' + f for f, p in sorted(signs.items())
                if p and f not in have)
            return spec, 'the files show %s' % why
    return kernels.NEWEST, 'no listed release matches the files'


def name_width(text):
    """Width schema names are right-aligned to in *text* (0: none)."""
    lines = [ln for ln in (text or '').splitlines() if ln.strip()]
    if not any(ln[:1] == ' ' for ln in lines):
        return 0
    return max(len(ln.partition(':')[0]) for ln in lines)
