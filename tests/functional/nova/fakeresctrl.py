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

"""fakelibvirt domains that make resctrl groups as libvirt 9 does.

Nova's fakelibvirt ignores ``<cachetune>`` and ``<memorytune>``. Real
libvirt (``qemu_process.c``, ``virresctrl.c``) does this with them:

* **start** (``qemuProcessLaunch`` → ``qemuProcessResctrlCreate``): for each
  allocation, ``mkdir /sys/fs/resctrl/<machine name>-<id>``, where the
  machine name is ``qemu-<domain id>-<domain name, only [A-Za-z0-9.-]>``
  (``virDomainDriverGenerateMachineName``, at most 64 characters before the
  allocation id) and the id is the ``id`` attribute or ``vcpus_<list>``. A
  ``<memorytune>`` with the same vCPUs as a ``<cachetune>`` shares its
  group. The schemata gets, for each requested cache, the best fitting run
  of ways unused by every group, the default group included ("Not enough
  room for allocation ..." otherwise), the default group's masks and
  bandwidth elsewhere. A cache id or memory bandwidth node the host lacks
  fails the start. A start that fails to make a group fails.
* **stop** (destroy, shutdown, managed save; ``qemuProcessStop``): the
  groups are removed. Define, undefine, pause and reset leave them alone.
* Every start gets a new domain id; a stopped domain has id -1.

The groups are made in the compute's resctrl tree (a copy of a fixture
tree, or an emulator mount), which then shows them to the driver as
resctrl shows libvirt's groups. A plain tree cannot refuse a ``mkdir`` as
the kernel does when CLOSIDs run out, so that check is made here.
"""

import errno
import os
import shutil

from lxml import etree
from nova.tests.fixtures import libvirt as fakelibvirt

from rdt_virt.libvirt import elements
from rdt_virt.libvirt import machine as machine_mod

_NOT_GROUPS = frozenset(('info', 'mon_groups', 'mon_data'))


def format_vcpus(vcpus):
    """``0-1,4`` for {0, 1, 4}, as virBitmapFormat writes it."""
    parts = []
    ordered = sorted(vcpus)
    start = prev = None
    for cpu in ordered + [None]:
        if start is None:
            start = prev = cpu
        elif cpu is not None and cpu == prev + 1:
            prev = cpu
        else:
            parts.append(str(start) if start == prev else
                         '%d-%d' % (start, prev))
            start = prev = cpu
    return ','.join(parts)


def parse_vcpus(text):
    cpus = set()
    for part in text.split(','):
        if '-' in part:
            low, high = part.split('-')
            cpus.update(range(int(low), int(high) + 1))
        else:
            cpus.add(int(part))
    return frozenset(cpus)


_UNITS = {'B': 1, 'KiB': 1024, 'MiB': 1024 ** 2, 'GiB': 1024 ** 3}


def allocations(domain_xml):
    """The resctrl allocations of a domain XML, as libvirt groups them.

    :returns: a list of dicts with ``id``, ``vcpus``, ``caches`` (a list of
        ``(resource, cache id, bytes)``) and ``mb`` (``{node: value}``).
    """
    root = etree.fromstring(domain_xml.encode()
                            if isinstance(domain_xml, str) else domain_xml)
    allocs = []
    for tune in root.findall('./cputune/cachetune'):
        vcpus = parse_vcpus(tune.get('vcpus'))
        caches = []
        for cache in tune.findall('cache'):
            resource = {'both': 'L3', 'code': 'L3CODE',
                        'data': 'L3DATA'}[cache.get('type')]
            if cache.get('level') != '3':
                resource = resource.replace('L3', 'L' + cache.get('level'))
            caches.append((resource, int(cache.get('id')),
                           int(cache.get('size')) *
                           _UNITS[cache.get('unit', 'B')]))
        allocs.append({'id': tune.get('id'), 'vcpus': vcpus,
                       'caches': caches, 'mb': {}})
    for tune in root.findall('./cputune/memorytune'):
        vcpus = parse_vcpus(tune.get('vcpus'))
        mb = {int(n.get('id')): int(n.get('bandwidth'))
              for n in tune.findall('node')}
        for alloc in allocs:
            if alloc['vcpus'] == vcpus:
                alloc['mb'].update(mb)
                break
        else:
            allocs.append({'id': tune.get('id'), 'vcpus': vcpus,
                           'caches': [], 'mb': mb})
    for alloc in allocs:
        if not alloc['id']:
            alloc['id'] = 'vcpus_' + format_vcpus(alloc['vcpus'])
    return allocs


def _read(path):
    with open(path) as f:
        return f.read()


def _parse_schemata(text):
    """``{resource: {domain id: value string}}``."""
    out = {}
    for line in text.splitlines():
        if ':' not in line:
            continue
        name, _, values = line.strip().partition(':')
        doms = {}
        for item in values.split(';'):
            if '=' in item:
                dom, _, value = item.partition('=')
                doms[int(dom)] = value.strip()
        out[name.strip()] = doms
    return out


def _best_fit(free, need, width):
    """Lowest bit of the smallest free run of at least ``need`` bits."""
    best = best_len = None
    pos = 0
    while pos < width:
        if not free & (1 << pos):
            pos += 1
            continue
        end = pos
        while end < width and free & (1 << end):
            end += 1
        length = end - pos
        if length == need:
            return pos
        if length > need and (best is None or length < best_len):
            best, best_len = pos, length
        pos = end
    return best


class ResctrlError(Exception):
    pass


class LibvirtResctrl(object):
    """libvirt's resctrl handling, on the tree at ``root``."""

    def __init__(self, root):
        self.root = root

    def _info(self, resource, name):
        return _read(os.path.join(self.root, 'info', resource,
                                  name)).strip()

    def _groups(self):
        return [n for n in os.listdir(self.root)
                if n not in _NOT_GROUPS and
                os.path.isdir(os.path.join(self.root, n))]

    def _num_closids(self):
        info = os.path.join(self.root, 'info')
        values = [int(self._info(r, 'num_closids'))
                  for r in os.listdir(info)
                  if os.path.exists(os.path.join(info, r, 'num_closids'))]
        return min(values) if values else 0

    def _unused(self, resource):
        """{cache id: mask} of ways no group (the default included) uses."""
        full = int(self._info(resource, 'cbm_mask'), 16)
        paths = [self.root] + [os.path.join(self.root, g)
                               for g in self._groups()]
        unused = {}
        for path in paths:
            schemata = _parse_schemata(_read(os.path.join(path,
                                                          'schemata')))
            for dom, value in schemata.get(resource, {}).items():
                unused[dom] = unused.get(dom, full) & ~int(value, 16)
        return unused

    def create(self, machine, alloc, cache_sizes):
        """Make the group of ``alloc``; returns its name.

        :param cache_sizes: ``{resource: bytes of the whole cache}``.
        """
        name = '%s-%s' % (machine, alloc['id'])
        path = os.path.join(self.root, name)
        default = _parse_schemata(_read(os.path.join(self.root, 'schemata')))
        schemata = {res: dict(doms) for res, doms in default.items()}
        unused = {}
        for resource, dom, size in alloc['caches']:
            if resource not in unused:
                unused[resource] = self._unused(resource)
            width = bin(int(self._info(resource, 'cbm_mask'), 16)).count(
                '1')
            way = cache_sizes[resource] // width
            if size % way:
                raise ResctrlError(
                    'Cache allocation of size %d is not divisible by '
                    'granularity %d' % (size, way))
            need = size // way
            if need < int(self._info(resource, 'min_cbm_bits')):
                raise ResctrlError(
                    'Cache allocation of size %d is smaller than the '
                    'minimum allowed allocation %d' % (
                        size, way * int(self._info(resource,
                                                   'min_cbm_bits'))))
            free = unused[resource].get(dom, 0)
            pos = _best_fit(free, need, width)
            if pos is None:
                raise ResctrlError(
                    "Not enough room for allocation of %d bytes for level "
                    "%s cache %d scope type '%s'" % (
                        size, resource[1], dom,
                        {'L3': 'both', 'L3CODE': 'code',
                         'L3DATA': 'data'}.get(resource, 'both')))
            mask = ((1 << need) - 1) << pos
            unused[resource][dom] = free & ~mask
            width_hex = len(self._info(resource, 'cbm_mask'))
            schemata[resource][dom] = '%0*x' % (width_hex, mask)
        for node, value in alloc['mb'].items():
            if node not in default.get('MB', {}):
                # virResctrlAllocMemoryBandwidthIsValid: a node the host's
                # memory bandwidth information lacks.
                raise ResctrlError(
                    'bandwidth controller id %d does not exist' % node)
            schemata.setdefault('MB', {})[node] = str(value)
        if (name not in self._groups() and
                len(self._groups()) + 1 >= self._num_closids()):
            raise ResctrlError(
                "Cannot create resctrl directory '%s': %s" % (
                    path, os.strerror(errno.ENOSPC)))
        os.makedirs(path, exist_ok=True)
        if not os.path.ismount(self.root):
            # What the kernel shows in a new group.
            for fname in ('tasks', 'cpus', 'cpus_list'):
                open(os.path.join(path, fname), 'a').close()
            with open(os.path.join(path, 'mode'), 'w') as f:
                f.write('shareable\n')
            if os.path.isdir(os.path.join(self.root, 'mon_groups')):
                os.makedirs(os.path.join(path, 'mon_groups'), exist_ok=True)
        text = ''.join('%s:%s\n' % (res, ';'.join(
            '%d=%s' % (d, v) for d, v in sorted(doms.items())))
            for res, doms in schemata.items())
        with open(os.path.join(path, 'schemata'), 'w') as f:
            f.write(text)
        return name

    def remove(self, name):
        path = os.path.join(self.root, name)
        if os.path.ismount(self.root):
            os.rmdir(path)
        else:
            shutil.rmtree(path, ignore_errors=True)


class RDTDomain(fakelibvirt.Domain):
    """A fakelibvirt domain with libvirt's resctrl groups."""

    def __init__(self, connection, xml, running=False, transient=False):
        self.rdt_xml = xml
        self.rdt_groups = []
        super().__init__(connection, xml, running=running,
                         transient=transient)

    def createWithFlags(self, flags):
        conn = self._connection
        self._id = conn._id_counter
        conn.rdt_start(self)
        super().createWithFlags(flags)

    def XMLDesc(self, flags):
        # fakelibvirt writes its XML from what it parsed, which knows no
        # <cachetune>, <memorytune> or metadata: add them back as libvirt
        # would show them.
        xml = etree.fromstring(super().XMLDesc(flags).encode())
        src = etree.fromstring(self.rdt_xml.encode())
        tunes = src.findall('./cputune/cachetune') + src.findall(
            './cputune/memorytune')
        if tunes:
            cputune = xml.find('cputune')
            if cputune is None:
                cputune = etree.SubElement(xml, 'cputune')
            cputune.extend(tunes)
        metadata = src.find('metadata')
        if metadata is not None and xml.find('metadata') is None:
            xml.append(metadata)
        if not self._connection.rdt_extra_specs_in_metadata:
            # As Nova 31 writes it: the flavor without its extra specs.
            for specs in xml.iter('{%s}extraSpecs' % elements.NOVA_NAMESPACE):
                specs.getparent().remove(specs)
        return etree.tostring(xml, encoding='unicode')

    def reset(self, flags):
        # A guest reset: libvirt keeps the process and its groups.
        self._state = fakelibvirt.VIR_DOMAIN_RUNNING


class ResctrlConnectionMixin(object):
    """For a fakelibvirt Connection: domains that make resctrl groups.

    Needs ``self.rdt_root`` (None: no resctrl) and ``self.rdt_cache_sizes``.
    """

    rdt_root = None
    rdt_cache_sizes = None
    # False: domains show the metadata Nova 31 writes, without
    # <nova:extraSpecs> (Nova 32 added it).
    rdt_extra_specs_in_metadata = True

    def rdt_start(self, dom):
        if self.rdt_root is None:
            return
        allocs = allocations(dom.rdt_xml)
        if not allocs:
            return
        if not os.path.isdir(os.path.join(self.rdt_root, 'info')):
            raise fakelibvirt.make_libvirtError(
                fakelibvirt.libvirtError,
                'unsupported configuration: Resource control is not '
                'supported on this host',
                error_code=fakelibvirt.VIR_ERR_CONFIG_UNSUPPORTED,
                error_domain=fakelibvirt.VIR_FROM_QEMU)
        resctrl = LibvirtResctrl(self.rdt_root)
        machine = machine_mod.machine_name(dom._id, dom.name())
        made = []
        try:
            for alloc in allocs:
                made.append(resctrl.create(machine, alloc,
                                           self.rdt_cache_sizes or {}))
        except (ResctrlError, OSError) as e:
            for name in made:
                resctrl.remove(name)
            raise fakelibvirt.make_libvirtError(
                fakelibvirt.libvirtError, str(e),
                error_code=fakelibvirt.VIR_ERR_INTERNAL_ERROR,
                error_domain=fakelibvirt.VIR_FROM_QEMU)
        dom.rdt_groups = made

    def rdt_stop(self, dom):
        if self.rdt_root is None:
            return
        resctrl = LibvirtResctrl(self.rdt_root)
        for name in getattr(dom, 'rdt_groups', ()):
            resctrl.remove(name)
        dom.rdt_groups = []

    def _mark_not_running(self, dom):
        if dom in self._running_vms.values():
            self.rdt_stop(dom)
        super()._mark_not_running(dom)

    def defineXML(self, xml):
        dom = RDTDomain(connection=self, running=False, transient=False,
                        xml=xml)
        old = self._vms.get(dom.name())
        if old is not None and old.isActive():
            # A running domain keeps its process, id and groups; the new
            # definition applies from its next start.
            dom._state, dom._id = old._state, old._id
            dom.rdt_groups = old.rdt_groups
            for key, value in list(self._running_vms.items()):
                if value is old:
                    self._running_vms[key] = dom
        self._vms[dom.name()] = dom
        self._emit_lifecycle(dom, fakelibvirt.VIR_DOMAIN_EVENT_DEFINED, 0)
        return dom

    def createXML(self, xml, flags):
        dom_id = self._id_counter
        probe = RDTDomain(connection=self, running=False, transient=True,
                          xml=xml)
        probe._id = dom_id
        self.rdt_start(probe)
        dom = RDTDomain(connection=self, running=True, transient=True,
                        xml=xml)
        dom._id = dom_id
        dom.rdt_groups = probe.rdt_groups
        self._vms[dom.name()] = dom
        self._emit_lifecycle(dom, fakelibvirt.VIR_DOMAIN_EVENT_STARTED, 0)
        return dom
