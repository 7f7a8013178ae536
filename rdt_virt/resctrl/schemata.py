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

"""Parse and format resctrl ``schemata`` files, pure functions.

A schemata file has one line per resource, each a list of ``id=value``
pairs, one per control domain::

        L3:0=7ff;1=7ff
        MB:0=100;1=100

Cache resources (``L3``, ``L3CODE``, ``L2DATA``, ...) carry hexadecimal bit
masks; memory bandwidth resources (``MB``, ``SMBA``) carry decimal numbers.
Kernels before 6.15 right-align the resource names and pad values (``MB:0=
10``), newer ones do not; the parser accepts both. A write may name only some
resources and some domains (a partial update): the kernel keeps the rest.

Values are kept as integers: ``{'L3': {0: 0x7ff, 1: 0x7ff}, 'MB': {...}}``.

A group in ``pseudo-locksetup`` mode shows ``L3:uninitialized`` (one such
line per allocation resource) until its region is locked; those lines
parse to no entry.
"""

import re

from rdt_virt import exception

MEMBW_RESOURCES = frozenset(('MB', 'SMBA'))
# What a pseudo-locksetup group's schemata shows for each resource.
UNINITIALIZED = 'uninitialized'

# What the kernel's parsers accept (kstrtoul with base 16 or 10): no sign,
# no Python-only digit separators.
_DOMAIN = re.compile(r'\A[0-9]+\Z')
_HEX = re.compile(r'\A(0[xX])?[0-9a-fA-F]+\Z')
_DEC = re.compile(r'\A[0-9]+\Z')


def is_cache_resource(name):
    """True for resources whose values are cache bit masks."""
    return name not in MEMBW_RESOURCES


def _parse_value(resource, text, decimal):
    if is_cache_resource(resource) and not decimal:
        if not _HEX.match(text):
            raise ValueError(text)
        return int(text, 16)
    if not _DEC.match(text):
        raise ValueError(text)
    return int(text, 10)


def parse_line(line, decimal=False):
    """Parse one ``RES:id=val;id=val`` line into ``(resource, {id: val})``.

    :param decimal: every value is decimal, as in a group's ``size`` file.
    """
    name, sep, rest = line.partition(':')
    name = name.strip()
    if not sep or not name:
        raise exception.InvalidSchemata(text=line,
                                        reason="missing 'resource:'")
    domains = {}
    for item in rest.split(';'):
        item = item.strip()
        if not item:
            continue
        dom, eq, val = item.partition('=')
        try:
            if not _DOMAIN.match(dom.strip()):
                raise ValueError(dom)
            dom_id = int(dom.strip(), 10)
            value = _parse_value(name, val.strip(), decimal)
        except ValueError:
            raise exception.InvalidSchemata(
                text=line, reason='bad domain entry %r' % item)
        if not eq or dom_id in domains:
            raise exception.InvalidSchemata(
                text=line, reason='bad or repeated domain entry %r' % item)
        domains[dom_id] = value
    if not domains:
        raise exception.InvalidSchemata(text=line, reason='no domains')
    return name, domains


def parse(text, decimal=False):
    """Parse a whole schemata file into ``{resource: {domain_id: value}}``.

    The resources keep the file's order. With ``decimal`` every value is
    read as a decimal number, which parses a group's ``size`` file (bytes
    per domain, same layout).
    """
    result = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.partition(':')[2].strip() == UNINITIALIZED:
            continue
        name, domains = parse_line(line, decimal)
        if name in result:
            raise exception.InvalidSchemata(
                text=text, reason='resource %s appears twice' % name)
        result[name] = domains
    return result


def format_value(resource, value):
    if is_cache_resource(resource):
        return '%x' % value
    return '%d' % value


def format_line(resource, domains):
    """Format ``{id: value}`` as one schemata line (no newline)."""
    items = ';'.join('%d=%s' % (dom, format_value(resource, domains[dom]))
                     for dom in sorted(domains))
    return '%s:%s' % (resource, items)


def format(schemata):
    """Format ``{resource: {id: value}}`` as a schemata file, one line each.

    This is also the text to write for a (partial) update.
    """
    return ''.join(format_line(res, doms) + '\n'
                   for res, doms in schemata.items())


def merge(base, update):
    """Return ``base`` with the resources and domains of ``update`` applied.

    This is what the kernel does with a partial write; neither argument is
    changed.
    """
    result = {res: dict(doms) for res, doms in base.items()}
    for res, doms in update.items():
        result.setdefault(res, {}).update(doms)
    return result
