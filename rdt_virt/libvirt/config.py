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

"""Objects for libvirt's resctrl elements and rdt-virt's metadata, and XML.

libvirt (formatdomain, "CPU Tuning") puts these under ``<cputune>``::

    <cachetune vcpus='0-1'>
      <cache id='0' level='3' type='both' size='3' unit='MiB'/>
      <monitor level='3' vcpus='0-1'/>
    </cachetune>
    <memorytune vcpus='0-1'>
      <node id='0' bandwidth='20'/>
      <monitor vcpus='0-1'/>
    </memorytune>

``vcpus`` is a libvirt bitmap (``0-3,5``; ``^N`` excludes). ``size`` is
scaled by ``unit`` (bytes by default; ``KiB``/``k``, ``KB``, ``MiB``/``M``,
... as libvirt's scaled integers), and written back in the largest binary
unit that divides it, as libvirt does. A live domain's XML also carries
``id`` on ``cachetune`` and ``memorytune`` (libvirt's group suffix, e.g.
``vcpus_0-1``); it is kept when present and never required. Each cache
(level, id) takes either ``both`` or ``code`` and ``data``; monitor vCPUs lie
within their element's vCPUs.

rdt-virt records what libvirt cannot carry in its own ``<metadata>``
element::

    <rdtvirt:rdt
        xmlns:rdtvirt="http://openstack.org/xmlns/libvirt/rdt-virt/1.0"
        version="1">
      <rdtvirt:membw unit="percent" value="10" requested="5" group="shared"/>
      <rdtvirt:monitor enabled="yes"/>
      <rdtvirt:priority class="low"/>
    </rdtvirt:rdt>

* ``membw``: the instance's memory bandwidth limit. ``value`` is what is
  applied, in ``unit`` (``percent``, ``MBps`` under ``mba_MBps``, or ``amd``:
  1/8 GBps units); ``requested`` is the flavor's value before rounding
  (omitted when it is the same number in the same unit). ``group`` says who
  holds the instance's vCPUs: ``shared``, the agent's ``<prefix>mb<value>``
  group of all instances with that percentage; ``instance``, a group of its
  own, which is libvirt's when the domain has a ``<memorytune>``, otherwise
  the agent's ``<prefix>i-<uuid>`` (MBps or AMD values, which libvirt
  refuses above 100).
* ``monitor``: whether the instance is monitored (CMT/MBM) at all.
* ``priority``: the protection class of ``hw:rdt_priority``, ``high`` or
  ``low``; written only for those, so a domain without it is ``normal``
  (and a reader that does not know the element treats it as such).

Every child is optional. ``version`` is 1; a reader refuses any other
version rather than guess, and ignores attributes and elements it does not
know. Objects are immutable and compare by value; children are kept in
libvirt's order (caches by level, type and id; nodes by id), so a domain
that went through libvirt compares equal to what was written.
"""

import dataclasses
import typing

from lxml import etree

from rdt_virt.libvirt import xmlutil
from rdt_virt.policy import extra_specs
from rdt_virt.resctrl import info

NAMESPACE = 'http://openstack.org/xmlns/libvirt/rdt-virt/1.0'
PREFIX = 'rdtvirt'
METADATA_VERSION = 1

CACHE_TYPES = ('both', 'code', 'data')
MEMBW_UNITS = (info.UNIT_PERCENT, info.UNIT_MBPS, info.UNIT_AMD)
GROUP_SHARED = 'shared'
GROUP_INSTANCE = 'instance'
MEMBW_GROUPS = (GROUP_SHARED, GROUP_INSTANCE)

_YES_NO = {'yes': True, 'no': False}

# The scalar helpers, under the names callers expect here.
parse_vcpus = xmlutil.parse_vcpus
format_vcpus = xmlutil.format_vcpus
parse_size = xmlutil.parse_size
format_size = xmlutil.format_size
parse_xml = xmlutil.parse_xml
_invalid = xmlutil.invalid


def _vcpu_set(value, what):
    """Normalise a bitmap string or an iterable of ids to a frozenset."""
    if isinstance(value, str):
        return parse_vcpus(value, what)
    try:
        vcpus = frozenset(value)
    except TypeError:
        raise _invalid(what, 'vcpus must be ids or a bitmap, not %r', value)
    format_vcpus(vcpus, what)
    if not vcpus:
        raise _invalid(what, 'empty vcpus')
    return vcpus


def _uint_field(value, what, name, minimum=0):
    if (not isinstance(value, int) or isinstance(value, bool) or
            value < minimum):
        raise _invalid(what, '%s must be an integer >= %d, not %r', name,
                       minimum, value)


class _XMLObject(object):
    """to_xml/from_xml around each class's to_element/from_element."""

    what = 'libvirt'

    def to_element(self):
        """The object as a new lxml element."""
        raise NotImplementedError()

    def to_xml(self, pretty_print=False):
        """The object as an XML string (no XML declaration)."""
        return etree.tostring(self.to_element(), encoding='unicode',
                              pretty_print=pretty_print)

    @classmethod
    def from_element(cls, el):
        """Build the object from an lxml element.

        :raises: InvalidXML when the element is not this one or breaks
            its rules.
        """
        raise NotImplementedError()

    @classmethod
    def from_xml(cls, text):
        """Build the object from an XML string.

        :raises: InvalidXML when the text is not this element or breaks
            its rules.
        """
        return cls.from_element(parse_xml(text, cls.what))


def _freeze(obj, name, value):
    object.__setattr__(obj, name, value)


# <cachetune> -----------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class CacheTuneCache(_XMLObject):
    """``<cache id level type size unit/>``: ``size`` bytes of cache ``id``."""

    id: int
    level: int
    type: str
    size: int

    what = 'cachetune cache'

    def __post_init__(self):
        _uint_field(self.id, self.what, 'id')
        _uint_field(self.level, self.what, 'level', 1)
        _uint_field(self.size, self.what, 'size')
        if self.type not in CACHE_TYPES:
            raise _invalid(self.what, 'type must be one of %s, not %r',
                           ', '.join(CACHE_TYPES), self.type)

    def to_element(self):
        value, unit = format_size(self.size)
        return etree.Element('cache', id=str(self.id), level=str(self.level),
                             type=self.type, size=str(value), unit=unit)

    @classmethod
    def from_element(cls, el):
        xmlutil.expect(el, 'cache', cls.what)
        return cls(id=xmlutil.uint_attr(el, 'id', cls.what),
                   level=xmlutil.uint_attr(el, 'level', cls.what),
                   type=xmlutil.attr(el, 'type', cls.what),
                   size=parse_size(xmlutil.attr(el, 'size', cls.what),
                                   el.get('unit'), cls.what))


@dataclasses.dataclass(frozen=True)
class CacheTuneMonitor(_XMLObject):
    """``<monitor level vcpus/>`` inside ``<cachetune>``."""

    level: int
    vcpus: typing.FrozenSet[int]

    what = 'cachetune monitor'

    def __post_init__(self):
        _uint_field(self.level, self.what, 'level', 1)
        _freeze(self, 'vcpus', _vcpu_set(self.vcpus, self.what))

    def to_element(self):
        return etree.Element('monitor', level=str(self.level),
                             vcpus=format_vcpus(self.vcpus))

    @classmethod
    def from_element(cls, el):
        xmlutil.expect(el, 'monitor', cls.what)
        return cls(level=xmlutil.uint_attr(el, 'level', cls.what),
                   vcpus=xmlutil.attr(el, 'vcpus', cls.what))


def _check_monitors(what, vcpus, monitors):
    seen = set()
    for mon in monitors:
        if not mon.vcpus <= vcpus:
            raise _invalid(what, 'monitor vcpus %s are not within %s',
                           format_vcpus(mon.vcpus), format_vcpus(vcpus))
        key = (getattr(mon, 'level', None), mon.vcpus)
        if key in seen:
            raise _invalid(what, 'two monitors of vcpus %s',
                           format_vcpus(mon.vcpus))
        seen.add(key)


def _monitor_key(mon):
    return (getattr(mon, 'level', 0), min(mon.vcpus), len(mon.vcpus),
            sorted(mon.vcpus))


@dataclasses.dataclass(frozen=True)
class CacheTune(_XMLObject):
    """``<cachetune vcpus=...>``: cache allocations and cache monitors."""

    vcpus: typing.FrozenSet[int]
    caches: typing.Tuple[CacheTuneCache, ...] = ()
    monitors: typing.Tuple[CacheTuneMonitor, ...] = ()
    id: typing.Optional[str] = None

    what = 'cachetune'

    def __post_init__(self):
        _freeze(self, 'vcpus', _vcpu_set(self.vcpus, self.what))
        caches = tuple(sorted(self.caches, key=lambda c: (
            c.level, CACHE_TYPES.index(c.type), c.id)))
        seen = {}
        for cache in caches:
            types = seen.setdefault((cache.level, cache.id), set())
            # Only code and data may share a cache; 'both' stands alone.
            if types and (cache.type in types or 'both' in types or
                          cache.type == 'both'):
                raise _invalid(self.what, 'colliding types for level %d '
                               'cache %d', cache.level, cache.id)
            types.add(cache.type)
        _check_monitors(self.what, self.vcpus, self.monitors)
        _freeze(self, 'caches', caches)
        _freeze(self, 'monitors', tuple(sorted(self.monitors,
                                               key=_monitor_key)))

    def to_element(self):
        el = etree.Element('cachetune', vcpus=format_vcpus(self.vcpus))
        if self.id is not None:
            el.set('id', self.id)
        el.extend(c.to_element() for c in self.caches)
        el.extend(m.to_element() for m in self.monitors)
        return el

    @classmethod
    def from_element(cls, el):
        xmlutil.expect(el, 'cachetune', cls.what)
        return cls(vcpus=xmlutil.attr(el, 'vcpus', cls.what),
                   caches=[CacheTuneCache.from_element(c)
                           for c in xmlutil.children(el, 'cache')],
                   monitors=[CacheTuneMonitor.from_element(m)
                             for m in xmlutil.children(el, 'monitor')],
                   id=el.get('id'))


# <memorytune> ----------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class MemoryTuneNode(_XMLObject):
    """``<node id bandwidth/>``: the limit on memory bandwidth node ``id``."""

    id: int
    bandwidth: int

    what = 'memorytune node'

    def __post_init__(self):
        _uint_field(self.id, self.what, 'id')
        _uint_field(self.bandwidth, self.what, 'bandwidth')

    def to_element(self):
        return etree.Element('node', id=str(self.id),
                             bandwidth=str(self.bandwidth))

    @classmethod
    def from_element(cls, el):
        xmlutil.expect(el, 'node', cls.what)
        return cls(id=xmlutil.uint_attr(el, 'id', cls.what),
                   bandwidth=xmlutil.uint_attr(el, 'bandwidth', cls.what))


@dataclasses.dataclass(frozen=True)
class MemoryTuneMonitor(_XMLObject):
    """``<monitor vcpus/>`` inside ``<memorytune>`` (MBM)."""

    vcpus: typing.FrozenSet[int]

    what = 'memorytune monitor'

    def __post_init__(self):
        _freeze(self, 'vcpus', _vcpu_set(self.vcpus, self.what))

    def to_element(self):
        return etree.Element('monitor', vcpus=format_vcpus(self.vcpus))

    @classmethod
    def from_element(cls, el):
        xmlutil.expect(el, 'monitor', cls.what)
        return cls(vcpus=xmlutil.attr(el, 'vcpus', cls.what))


@dataclasses.dataclass(frozen=True)
class MemoryTune(_XMLObject):
    """``<memorytune vcpus=...>``: bandwidth limits and MBM monitors."""

    vcpus: typing.FrozenSet[int]
    nodes: typing.Tuple[MemoryTuneNode, ...] = ()
    monitors: typing.Tuple[MemoryTuneMonitor, ...] = ()
    id: typing.Optional[str] = None

    what = 'memorytune'

    def __post_init__(self):
        _freeze(self, 'vcpus', _vcpu_set(self.vcpus, self.what))
        nodes = tuple(sorted(self.nodes, key=lambda n: n.id))
        ids = [n.id for n in nodes]
        if len(set(ids)) != len(ids):
            raise _invalid(self.what, 'node ids repeat: %s', ids)
        _check_monitors(self.what, self.vcpus, self.monitors)
        _freeze(self, 'nodes', nodes)
        _freeze(self, 'monitors', tuple(sorted(self.monitors,
                                               key=_monitor_key)))

    @property
    def bandwidths(self):
        """``{node id: bandwidth}``."""
        return {n.id: n.bandwidth for n in self.nodes}

    def to_element(self):
        el = etree.Element('memorytune', vcpus=format_vcpus(self.vcpus))
        if self.id is not None:
            el.set('id', self.id)
        el.extend(n.to_element() for n in self.nodes)
        el.extend(m.to_element() for m in self.monitors)
        return el

    @classmethod
    def from_element(cls, el):
        xmlutil.expect(el, 'memorytune', cls.what)
        return cls(vcpus=xmlutil.attr(el, 'vcpus', cls.what),
                   nodes=[MemoryTuneNode.from_element(n)
                          for n in xmlutil.children(el, 'node')],
                   monitors=[MemoryTuneMonitor.from_element(m)
                             for m in xmlutil.children(el, 'monitor')],
                   id=el.get('id'))


# rdt-virt <metadata> ---------------------------------------------------------

def _ns(tag):
    return '{%s}%s' % (NAMESPACE, tag)


@dataclasses.dataclass(frozen=True)
class MemBwMetadata(_XMLObject):
    """``<rdtvirt:membw unit value requested group/>``."""

    unit: str
    value: int
    group: str
    requested: typing.Optional[int] = None

    what = 'rdt-virt membw metadata'

    def __post_init__(self):
        if self.unit not in MEMBW_UNITS:
            raise _invalid(self.what, 'unit must be one of %s, not %r',
                           ', '.join(MEMBW_UNITS), self.unit)
        if self.group not in MEMBW_GROUPS:
            raise _invalid(self.what, 'group must be one of %s, not %r',
                           ', '.join(MEMBW_GROUPS), self.group)
        _uint_field(self.value, self.what, 'value', 1)
        if self.requested is not None:
            _uint_field(self.requested, self.what, 'requested', 1)
        # A percentage names a shared group (<prefix>mb<N>): one above
        # 100 would name a group that is not recognisably rdt-virt's.
        if self.unit == info.UNIT_PERCENT and max(
                self.value, self.requested or 0) > info.MAX_PERCENT:
            raise _invalid(self.what, 'a percentage is at most %d, not %r',
                           info.MAX_PERCENT, max(self.value,
                                                 self.requested or 0))

    def to_element(self):
        el = etree.Element(_ns('membw'), nsmap={PREFIX: NAMESPACE})
        el.set('unit', self.unit)
        el.set('value', str(self.value))
        if self.requested is not None:
            el.set('requested', str(self.requested))
        el.set('group', self.group)
        return el

    @classmethod
    def from_element(cls, el):
        xmlutil.expect(el, _ns('membw'), cls.what)
        return cls(unit=xmlutil.attr(el, 'unit', cls.what),
                   value=xmlutil.uint_attr(el, 'value', cls.what),
                   group=xmlutil.attr(el, 'group', cls.what),
                   requested=xmlutil.uint_attr(el, 'requested', cls.what,
                                               required=False))


@dataclasses.dataclass(frozen=True)
class RDTMetadata(_XMLObject):
    """rdt-virt's ``<rdtvirt:rdt>`` element in a domain's ``<metadata>``."""

    membw: typing.Optional[MemBwMetadata] = None
    monitor: typing.Optional[bool] = None
    priority: str = extra_specs.PRIORITY_NORMAL

    what = 'rdt-virt metadata'
    #: The tag, as lxml names it, to find the element in a domain.
    TAG = _ns('rdt')

    def __post_init__(self):
        if self.membw is not None and not isinstance(self.membw,
                                                     MemBwMetadata):
            raise _invalid(self.what, 'membw must be a MemBwMetadata')
        if self.monitor not in (None, True, False):
            raise _invalid(self.what, 'monitor must be a bool or None')
        if self.priority not in extra_specs.PRIORITIES:
            raise _invalid(self.what, 'priority must be one of %s, not %r',
                           ', '.join(extra_specs.PRIORITIES), self.priority)

    def to_element(self):
        el = etree.Element(self.TAG, nsmap={PREFIX: NAMESPACE},
                           version=str(METADATA_VERSION))
        if self.membw is not None:
            el.append(self.membw.to_element())
        if self.monitor is not None:
            etree.SubElement(el, _ns('monitor'),
                             enabled='yes' if self.monitor else 'no')
        if self.priority != extra_specs.PRIORITY_NORMAL:
            etree.SubElement(el, _ns('priority'), {'class': self.priority})
        return el

    @classmethod
    def from_element(cls, el):
        xmlutil.expect(el, cls.TAG, cls.what)
        version = xmlutil.attr(el, 'version', cls.what)
        if version.strip() != str(METADATA_VERSION):
            raise _invalid(cls.what, 'unsupported version %r (this reader '
                           'knows %d)', version, METADATA_VERSION)
        membw = xmlutil.children(el, _ns('membw'))
        monitors = xmlutil.children(el, _ns('monitor'))
        priorities = xmlutil.children(el, _ns('priority'))
        if len(membw) > 1 or len(monitors) > 1 or len(priorities) > 1:
            raise _invalid(cls.what, 'membw, monitor and priority may '
                           'appear once')
        monitor = None
        if monitors:
            enabled = xmlutil.attr(monitors[0], 'enabled', cls.what)
            if enabled not in _YES_NO:
                raise _invalid(cls.what, 'monitor enabled=%r is not yes or '
                               'no', enabled)
            monitor = _YES_NO[enabled]
        priority = extra_specs.PRIORITY_NORMAL
        if priorities:
            # A class this reader does not know is refused, not guessed:
            # treating it as normal would drop a protection silently.
            priority = xmlutil.attr(priorities[0], 'class', cls.what)
        return cls(membw=MemBwMetadata.from_element(membw[0])
                   if membw else None, monitor=monitor, priority=priority)
