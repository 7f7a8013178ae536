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

"""Memory-bandwidth pools: the L3 domains that share memory controllers.

resctrl counts and throttles per L3 domain, but the bottleneck the
controller protects against is the memory behind it, and that is not
always one per L3 domain:

* a two-socket Intel host without Sub-NUMA Clustering has one L3 domain
  and one NUMA node per socket: each domain is its own pool;
* on AMD EPYC every CCX is an L3 domain, and with one NUMA node per
  socket (NPS1) all of a socket's CCXs draw on the same memory channels:
  a neighbour on another CCX takes bandwidth from a protected instance as
  surely as one on its own;
* with Sub-NUMA Clustering one L3 domain spans several nodes.

A pool is therefore a connected set of L3 domains and NUMA nodes, linked
where they share a CPU: the domains of one pool share at least one node's
memory, directly or through another domain. The controller reads a pool's
pressure and throttles the low-priority instances anywhere in it.

The topology comes from libvirt's host capabilities (``<cache><bank
level='3' cpus=...>`` and ``<topology><cells><cell><cpus>``), which is what
libvirtd, and so Nova, sees of the host. Pure functions, apart from what
the caller passes in.
"""

from rdt_virt import exception
from rdt_virt.libvirt import capabilities
from rdt_virt.libvirt import xmlutil

#: ``[rdt_agent] controller_pools`` values.
NUMA = 'numa'
DOMAIN = 'domain'

_WHAT = 'host capabilities'


def topology(text):
    """``({L3 id: cpus}, {NUMA node id: cpus})`` from capabilities XML.

    The banks as :func:`rdt_virt.libvirt.capabilities.parse_element` reads
    them for the scheduler.

    :raises: InvalidXML or InvalidCapabilities.
    """
    root = xmlutil.parse_xml(text, _WHAT)
    host = root if root.tag == 'host' else root.find('host')
    banks = {bank: cpus for (level, bank), cpus in
             capabilities.parse_element(root).bank_cpus.items()
             if level == 'L3'}
    nodes = {}
    for cell in host.findall('topology/cells/cell'):
        cpus = frozenset(xmlutil.uint_attr(cpu, 'id', _WHAT)
                         for cpu in cell.findall('cpus/cpu'))
        if cpus:
            nodes[xmlutil.uint_attr(cell, 'id', _WHAT)] = cpus
    return banks, nodes


def pools(domain_cpus, node_cpus):
    """``{domain id: pool id}``: domains linked through shared NUMA nodes.

    A pool's id is its lowest domain id, so a host whose every domain is
    its own pool keeps its domain ids.

    :param domain_cpus: ``{L3 domain id: cpus}``.
    :param node_cpus: ``{NUMA node id: cpus}``.
    """
    parent = {d: d for d in domain_cpus}

    def find(d):
        while parent[d] != d:
            parent[d] = parent[parent[d]]
            d = parent[d]
        return d

    for cpus in node_cpus.values():
        linked = sorted(d for d, dcpus in domain_cpus.items()
                        if dcpus & cpus)
        for d in linked[1:]:
            a, b = find(linked[0]), find(d)
            if a != b:
                parent[max(a, b)] = min(a, b)
    return {d: find(d) for d in domain_cpus}


def from_capabilities(text):
    """:func:`pools` of the host that ``text`` describes.

    :raises: InvalidXML or InvalidCapabilities.
    """
    return pools(*topology(text))


def members(pool_of):
    """``{pool id: (domain ids)}``, the inverse of :func:`pools`."""
    out = {}
    for dom, pool in sorted(pool_of.items()):
        out.setdefault(pool, []).append(dom)
    return {pool: tuple(doms) for pool, doms in out.items()}


def merge(by_domain, pool_of):
    """Per-domain figures summed per pool.

    A domain the topology does not name (it came online since it was
    read) is a pool of its own.
    """
    if by_domain is None:
        return None
    out = {}
    for dom, value in by_domain.items():
        pool = pool_of.get(dom, dom)
        out[pool] = out.get(pool, 0.0) + value
    return out


def read(source):
    """Pools from a domain source's capabilities, or None with the reason.

    :param source: has ``capabilities()``, libvirt's capabilities XML.
    :returns: ``(pool_of or None, reason or None)``.
    """
    try:
        return from_capabilities(source.capabilities()), None
    except (exception.InvalidXML, exception.InvalidCapabilities) as e:
        return None, 'bad host capabilities: %s' % e
    except Exception as e:      # libvirt errors: the caller retries
        return None, 'cannot read the host capabilities: %s' % e
