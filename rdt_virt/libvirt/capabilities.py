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

"""RDT in libvirt's host capabilities, as the resctrl capability model.

libvirt (formatcaps) reports, under ``<host>``::

    <cache>
      <bank id='0' level='3' type='both' size='36608' unit='KiB'
            cpus='0-23,48-71'>
        <control granularity='3328' unit='KiB' type='both' maxAllocs='16'/>
      </bank>
      <monitor level='3' reuseThreshold='131072' maxMonitors='192'>
        <feature name='llc_occupancy'/>
      </monitor>
    </cache>
    <memory_bandwidth>
      <node id='0' cpus='0-23,48-71'>
        <control granularity='10' min='10' maxAllocs='8'/>
      </node>
      <monitor maxMonitors='192'>
        <feature name='mbm_total_bytes'/>
      </monitor>
    </memory_bandwidth>

libvirt derives these from resctrl's ``info/``: ``granularity`` is the cache
size divided by the bits of ``cbm_mask`` (one way), ``min`` is
``min_cbm_bits`` ways and is printed only when ``min_cbm_bits`` is not 1,
``maxAllocs`` is ``num_closids``, CDP shows as two controls of type ``code``
and ``data``, ``maxMonitors`` is ``num_rmids`` and ``reuseThreshold`` is
``max_threshold_occupancy``. Memory bandwidth nodes are the last-level cache
banks. ``parse`` turns this back into
:class:`~rdt_virt.resctrl.info.HostCapabilities`.

What libvirt does not say, and the safe value used instead:

* ``shareable_bits``: 0. Ways shared with I/O look dedicated.
* ``sparse_masks``: False (contiguous masks only, as every libvirt
  allocation is anyway).
* ``min_cbm_bits`` when ``min`` is absent: 1. libvirt omits ``min`` for 0
  (AMD) as well as for 1; 1 never yields a mask the kernel refuses.
* the memory bandwidth unit: ``amd`` when ``min`` is 0 (only AMD reports
  that), otherwise percent; libvirt shows the same control under
  ``mba_MBps``, so callers that know the mount pass ``mb_unit``.
* ``delay_linear``: guessed as True except on AMD; ``thread_throttle_mode``:
  None.
* AMD's ``SMBA``: not reported at all.
* the default group's masks and every group: capabilities say what exists,
  never what is free.
"""

import dataclasses
import typing

from rdt_virt import exception
from rdt_virt.libvirt import config
from rdt_virt.libvirt import xmlutil
from rdt_virt.resctrl import info

_WHAT = 'libvirt capabilities'
_TYPE_SUFFIX = {'both': '', 'code': 'CODE', 'data': 'DATA'}


def _fail(reason, *args):
    raise exception.InvalidCapabilities(source=_WHAT, reason=reason % args)


def resource_name(level, ctype):
    """The resctrl name of a cache resource: ``L3``, ``L3CODE``, ..."""
    return 'L%d%s' % (level, _TYPE_SUFFIX[ctype])


@dataclasses.dataclass(frozen=True)
class HostRDT(object):
    """What libvirt's capabilities say about RDT on this host."""

    #: The capability model, as resctrl would give it (see module notes).
    capabilities: info.HostCapabilities
    #: CPUs of every cache bank, controlled or not: ``{('L3', id): cpus}``.
    bank_cpus: typing.Mapping[typing.Tuple[str, int], typing.FrozenSet[int]]
    #: Bytes of every cache bank: ``{('L3', id): size}``.
    bank_sizes: typing.Mapping[typing.Tuple[str, int], int]
    #: CPUs of every memory bandwidth node: ``{id: cpus}``.
    node_cpus: typing.Mapping[int, typing.FrozenSet[int]]

    def domain_ids(self):
        """``{resource: ids}`` libvirt accepts in cachetune and memorytune.

        libvirt refuses a ``<cache id>`` or ``<node id>`` it did not report,
        so this is what a resctrl view must be restricted to.
        """
        caps = self.capabilities
        ids = {name: res.domain_ids for name, res in caps.caches.items()}
        ids.update((name, res.domain_ids)
                   for name, res in caps.membw.items())
        return ids


def _size(el, value_attr):
    return xmlutil.parse_size(xmlutil.attr(el, value_attr, _WHAT),
                              el.get('unit'), _WHAT)


def _cpus(el):
    text = el.get('cpus')
    return xmlutil.parse_vcpus(text) if text else frozenset()


def _features(monitor):
    return sorted(info.monitor_events(
        f.get('name') for f in monitor.findall('feature') if f.get('name')))


class _CacheControls(object):
    """Collects one resource's controls over the banks that carry it."""

    def __init__(self, name, level, ctype):
        self.name, self.level, self.type = name, level, ctype
        self.bits = self.closids = self.min_bits = None
        self.ways = {}

    def add(self, bank_id, bank_size, control):
        granularity = _size(control, 'granularity')
        if granularity <= 0 or bank_size < granularity:
            _fail('bank %d: granularity %d does not fit the cache size %d',
                  bank_id, granularity, bank_size)
        # libvirt computed granularity as size // bits, so size //
        # granularity gives the bits back (rounded down either way).
        bits = bank_size // granularity
        min_bytes = granularity
        if control.get('min') is not None:
            min_bytes = _size(control, 'min')
        closids = xmlutil.uint_attr(control, 'maxAllocs', _WHAT)
        values = (bits, closids, max(min_bytes // granularity, 1))
        if self.bits is not None and values != (
                self.bits, self.closids, self.min_bits):
            _fail('%s banks disagree on ways, maxAllocs or min', self.name)
        self.bits, self.closids, self.min_bits = values
        self.ways[bank_id] = granularity

    def resource(self):
        doms = tuple(sorted(self.ways))
        return info.CacheResource(
            name=self.name, level=self.level, type=self.type,
            cbm_mask=(1 << self.bits) - 1, min_cbm_bits=self.min_bits,
            shareable_bits=0, num_closids=self.closids, sparse_masks=False,
            domain_ids=doms, way_sizes=tuple((d, self.ways[d])
                                             for d in doms))


def _caches(cache_el, bank_cpus, bank_sizes):
    controls = {}
    for bank in cache_el.findall('bank') if cache_el is not None else ():
        level = xmlutil.uint_attr(bank, 'level', _WHAT)
        bank_id = xmlutil.uint_attr(bank, 'id', _WHAT)
        btype = bank.get('type', 'both')
        if btype not in _TYPE_SUFFIX:
            _fail('bank %d has unknown type %r', bank_id, btype)
        size = _size(bank, 'size')
        key = (resource_name(level, btype), bank_id)
        bank_cpus[key] = _cpus(bank)
        bank_sizes[key] = size
        for control in bank.findall('control'):
            ctype = control.get('type', 'both')
            if ctype not in _TYPE_SUFFIX:
                _fail('bank %d has a control of unknown type %r', bank_id,
                      ctype)
            name = resource_name(level, ctype)
            if name not in info.CACHE_RESOURCES:
                continue
            coll = controls.setdefault(name, _CacheControls(name, level,
                                                            ctype))
            coll.add(bank_id, size, control)
    return {name: coll.resource() for name, coll in controls.items()}


def _membw(mb_el, mb_unit, node_cpus):
    nodes = mb_el.findall('node') if mb_el is not None else []
    found = None
    ids = []
    for node in nodes:
        node_id = xmlutil.uint_attr(node, 'id', _WHAT)
        node_cpus[node_id] = _cpus(node)
        control = node.find('control')
        if control is None:
            continue
        values = (xmlutil.uint_attr(control, 'granularity', _WHAT),
                  xmlutil.uint_attr(control, 'min', _WHAT),
                  xmlutil.uint_attr(control, 'maxAllocs', _WHAT))
        if found is not None and values != found:
            _fail('memory bandwidth nodes disagree on their control')
        found = values
        ids.append(node_id)
    if found is None:
        return {}
    gran, minimum, closids = found
    unit = mb_unit or (info.UNIT_AMD if minimum == 0 else info.UNIT_PERCENT)
    if unit not in config.MEMBW_UNITS:
        _fail('unknown memory bandwidth unit %r', unit)
    return {'MB': info.MemBwResource(
        name='MB', num_closids=closids, min_bandwidth=minimum,
        bandwidth_gran=gran or 1, delay_linear=unit != info.UNIT_AMD,
        thread_throttle_mode=None, unit=unit, domain_ids=tuple(sorted(ids)))}


def _monitor(cache_el, mb_el, bank_cpus, node_cpus):
    monitors = [el.find('monitor') for el in (cache_el, mb_el)
                if el is not None]
    monitors = [m for m in monitors if m is not None]
    if not monitors:
        return None
    features, rmids = [], []
    threshold, level = None, 3
    for mon in monitors:
        features += _features(mon)
        rmids.append(xmlutil.uint_attr(mon, 'maxMonitors', _WHAT))
        if mon.get('reuseThreshold') is not None:
            threshold = xmlutil.uint_attr(mon, 'reuseThreshold', _WHAT)
        if mon.get('level') is not None:
            level = xmlutil.uint_attr(mon, 'level', _WHAT)
    # Monitoring domains are the cache banks of the monitored level (the
    # memory bandwidth nodes are the same banks).
    doms = sorted(i for (name, i) in bank_cpus
                  if name == resource_name(level, 'both'))
    return info.MonitorCapability(
        num_rmids=min(rmids), features=frozenset(features),
        max_threshold_occupancy=threshold,
        domain_ids=tuple(doms or sorted(node_cpus)))


def parse_element(el, mb_unit=None):
    """:func:`parse` for an lxml ``<capabilities>`` or ``<host>`` element."""
    host = el if el.tag == 'host' else el.find('host')
    if el.tag not in ('capabilities', 'host') or host is None:
        _fail('expected <capabilities> or <host>, got <%s>', el.tag)
    cache_el = host.find('cache')
    mb_el = host.find('memory_bandwidth')
    bank_cpus, bank_sizes, node_cpus = {}, {}, {}
    try:
        caches = _caches(cache_el, bank_cpus, bank_sizes)
        membw = _membw(mb_el, mb_unit, node_cpus)
        monitor = _monitor(cache_el, mb_el, bank_cpus, node_cpus)
    except exception.InvalidXML as e:
        _fail('%s', e.kwargs.get('reason', e))
    return HostRDT(
        capabilities=info.HostCapabilities(caches=caches, membw=membw,
                                           monitor=monitor),
        bank_cpus=bank_cpus, bank_sizes=bank_sizes, node_cpus=node_cpus)


def parse(text, mb_unit=None):
    """Read RDT from libvirt's host capabilities XML.

    :param text: ``virConnect.getCapabilities()`` output (or its
        ``<host>``).
    :param mb_unit: the memory bandwidth unit when the caller knows it
        (``MBps`` from the resctrl mount options); libvirt does not say.
    :returns: :class:`HostRDT`.
    :raises: InvalidCapabilities for XML that is not well-formed or breaks
        libvirt's format.
    """
    try:
        el = xmlutil.parse_xml(text, _WHAT)
    except exception.InvalidXML as e:
        _fail('%s', e.kwargs.get('reason', e))
    return parse_element(el, mb_unit)
