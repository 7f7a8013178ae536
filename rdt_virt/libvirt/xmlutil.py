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

"""Reading and writing libvirt's XML scalars: bitmaps, sizes, attributes.

Every error is :class:`~rdt_virt.exception.InvalidXML` naming what was
being read.
"""

import re

from lxml import etree

from rdt_virt import exception

# A bound on vCPU ids, so that a hostile "0-4000000000" cannot exhaust
# memory; libvirt's own limit on guest CPUs is far below it.
MAX_VCPU = 65535

_BINARY_UNITS = ('B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB')
_PREFIXES = 'kmgtpe'
_UINT = re.compile(r'\A[0-9]+\Z')


def invalid(what, reason, *args):
    """An InvalidXML for ``what``; ``reason`` is %-formatted with args."""
    return exception.InvalidXML(what=what,
                                reason=reason % args if args else reason)


def parse_size(value, unit=None, what='size'):
    """Bytes from a libvirt scaled integer (``size`` and ``unit``).

    Units as libvirt accepts them: none, ``b``, ``byte``, ``bytes``; ``k``,
    ``KiB`` (1024) or ``KB`` (1000), and so on up to ``E``; the letter is
    case-insensitive.
    """
    text = str(value).strip()
    if not _UINT.match(text):
        raise invalid(what, 'not a non-negative integer: %r', value)
    number = int(text)
    unit = (unit or '').strip()
    if unit.lower() in ('', 'b', 'byte', 'bytes'):
        return number
    prefix, rest = unit[0].lower(), unit[1:]
    if prefix not in _PREFIXES or rest.lower() not in ('', 'ib', 'b'):
        raise invalid(what, 'unknown unit %r', unit)
    base = 1000 if rest == 'B' else 1024
    return number * base ** (_PREFIXES.index(prefix) + 1)


def format_size(size):
    """``(value, unit)`` in the largest binary unit that divides ``size``.

    This is how libvirt prints sizes: 3 MiB, 3328 KiB, 1000 B.
    """
    unit = 0
    while size and size % 1024 == 0 and unit < len(_BINARY_UNITS) - 1:
        size //= 1024
        unit += 1
    return size, _BINARY_UNITS[unit]


def parse_vcpus(text, what='vcpus'):
    """A libvirt CPU bitmap (``0-3,5``, ``0-7,^3``) as a frozenset.

    Items apply left to right, as in libvirt: ``^N`` or ``^N-M`` removes
    what the items before it added. An empty result is an error.
    """
    if not isinstance(text, str) or not text.strip():
        raise invalid(what, 'empty CPU list %r', text)
    result = set()
    for item in text.split(','):
        item = item.strip()
        negate = item.startswith('^')
        first, sep, last = item.lstrip('^').partition('-')
        first, last = first.strip(), last.strip()
        if not _UINT.match(first) or (sep and not _UINT.match(last)):
            raise invalid(what, 'bad item %r in %r', item, text)
        low, high = int(first), int(last) if sep else int(first)
        if low > high or high > MAX_VCPU:
            raise invalid(what, 'bad range %r in %r', item, text)
        ids = range(low, high + 1)
        if negate:
            result.difference_update(ids)
        else:
            result.update(ids)
    if not result:
        raise invalid(what, 'no CPU left in %r', text)
    return frozenset(result)


def format_vcpus(vcpus, what='vcpus'):
    """Format CPU ids as libvirt does: ``0-3,5``."""
    ranges = []
    for vcpu in sorted(vcpus):
        if not isinstance(vcpu, int) or isinstance(vcpu, bool) or vcpu < 0:
            raise invalid(what, 'bad CPU id %r', vcpu)
        if ranges and ranges[-1][1] == vcpu - 1:
            ranges[-1][1] = vcpu
        else:
            ranges.append([vcpu, vcpu])
    return ','.join('%d' % a if a == b else '%d-%d' % (a, b)
                    for a, b in ranges)


def parse_xml(text, what='libvirt'):
    """Parse ``text`` (str or bytes) into an lxml element, safely.

    Entities are not resolved and nothing is fetched from the network.
    """
    parser = etree.XMLParser(resolve_entities=False, no_network=True,
                             remove_blank_text=True)
    if isinstance(text, str):
        # lxml refuses str input that declares an encoding.
        text = text.encode('utf-8')
    try:
        return etree.fromstring(text, parser)
    except (etree.XMLSyntaxError, ValueError, TypeError) as e:
        raise invalid(what, 'not well-formed: %s', e)


def expect(el, tag, what):
    """Raise unless ``el`` is the element ``tag`` (``{ns}name`` form)."""
    if not isinstance(el.tag, str) or el.tag != tag:
        raise invalid(what, 'expected element <%s>, got <%s>', tag, el.tag)


def attr(el, name, what, required=True):
    """Attribute ``name`` of ``el``; None when optional and absent."""
    value = el.get(name)
    if value is None and required:
        raise invalid(what, '<%s> lacks attribute %s',
                      etree.QName(el).localname, name)
    return value


def uint_attr(el, name, what, required=True):
    """A non-negative decimal attribute as an int (None if absent)."""
    value = attr(el, name, what, required)
    if value is None:
        return None
    if not _UINT.match(value.strip()):
        raise invalid(what, '%s=%r is not a non-negative integer', name,
                      value)
    return int(value)


def children(el, tag):
    """The direct children of ``el`` named ``tag``."""
    return [child for child in el if child.tag == tag]
