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

"""A running domain's XML -> the :class:`~rdt_virt.agent.model.Instance`
the agent must keep in place.

:class:`rdt_virt.libvirt.domain.DomainRDT` reads the parts libvirt and
rdt-virt define: Nova's ownership (``<nova:instance>``; other domains are
not the agent's business), ``<cachetune>``/``<memorytune>`` and rdt-virt's
``<rdtvirt:rdt>`` metadata element. This module adds what the agent needs
on top:

* libvirt's resctrl group of each allocation. libvirt makes one group per
  allocation ``id`` (the live XML carries it, e.g. ``vcpus_0-3``) named
  ``<machine name>-<id>``, the machine name being ``qemu-<domain id>-<domain
  name>`` with the name cut down to host name characters as libvirt's
  ``virDomainDriverGenerateMachineName`` does. Monitor-only ``<cachetune>``
  elements are libvirt's own monitoring groups, not allocations.
* who applies the bandwidth limit: libvirt when the domain has a
  ``<memorytune>`` for the vCPUs, else the agent: in the shared group of
  that percentage (``group="shared"``) or in the instance's own group
  (``group="instance"``: MBps and AMD values, which libvirt cannot write).
* the protection class (``hw:rdt_priority``) of the metadata element, for
  the controller; ``normal`` when the domain has no such element.
* the owning project's id from Nova's element, which the agent only
  publishes (telemetry per project); None when Nova's element has none.
"""

import uuid as uuid_mod

from lxml import etree

from rdt_virt.agent import model
from rdt_virt import exception
from rdt_virt.libvirt import config
from rdt_virt.libvirt import domain as domain_mod
from rdt_virt.libvirt import machine as machine_mod
from rdt_virt.policy import fit
from rdt_virt.resctrl import fs
from rdt_virt.resctrl import info

machine_name = machine_mod.machine_name
# Suffix of the key that holds what the flavor asked, where the host
# applies something else.
REQUESTED = '_requested'
_OWNERS = {'shared': model.SHARED, 'instance': model.INSTANCE,
           'libvirt': model.LIBVIRT}


def _alloc_id(tune):
    return tune.id or 'vcpus_%s' % config.format_vcpus(tune.vcpus)


def allocations(dom, machine):
    """The libvirt allocations (one resctrl group each) of a domain."""
    by_id = {}

    def entry(tune):
        return by_id.setdefault(_alloc_id(tune), {
            'vcpus': tune.vcpus, 'caches': [], 'bandwidth': {},
            'monitor': False})

    for tune in dom.cachetunes:
        found = entry(tune)
        found['caches'] += [model.CacheRequest(c.level, c.type, c.id,
                                               c.size) for c in tune.caches]
        found['monitor'] |= any(m.vcpus == tune.vcpus
                                for m in tune.monitors)
    for tune in dom.memorytunes:
        found = entry(tune)
        found['bandwidth'].update(tune.bandwidths)
        found['monitor'] |= any(m.vcpus == tune.vcpus
                                for m in tune.monitors)
    out = []
    for alloc_id, found in sorted(by_id.items()):
        if not found['caches'] and not found['bandwidth']:
            continue
        group = '%s-%s' % (machine, alloc_id)
        fs.validate_group_name(group)
        out.append(model.Allocation(
            group=group, vcpus=found['vcpus'],
            caches=tuple(found['caches']), bandwidth=found['bandwidth'],
            monitor=found['monitor']))
    return tuple(out)


def held_caches(allocs):
    """The cache libvirt holds for an instance, in KiB per cache.

    Keyed like the flavor's extra specs (``cache_l3``, ``cache_l3_code``,
    ...), for the state file, ``rdt-virt top`` and the samples' metadata;
    the size is what the host holds, the request rounded up to ways.
    """
    per_cache = {}
    for alloc in allocs:
        for cache in alloc.caches:
            key = cache_key(cache.level, cache.type)
            per_cache[key, cache.cache_id] = per_cache.get(
                (key, cache.cache_id), 0) + cache.size // 1024
    held = {}
    for (key, _), kib in per_cache.items():
        held[key] = max(held.get(key, 0), kib)
    return held


def cache_key(level, ctype):
    """``cache_l3``, ``cache_l3_code``, ...: the extra spec's name."""
    return 'cache_l%d' % level + ('' if ctype == 'both' else '_' + ctype)


def requested_caches(requests, held):
    """``{<key>_requested: KiB}`` where the host holds more than asked.

    :param requests: the metadata's CacheMetadata elements.
    :param held: :func:`held_caches`.
    """
    out = {}
    for req in requests:
        key = cache_key(req.level, req.type)
        if key in held and held[key] != req.requested:
            out[key + REQUESTED] = req.requested
    return out


def _bandwidth(unit, value, requested, owner):
    return model.BandwidthPolicy(
        unit=unit, value=int(value),
        requested=int(value if requested is None else requested),
        group=_OWNERS[owner or 'instance'])


def applied_bandwidth(bandwidth):
    """The bandwidth policy as published: ``{key: value}``.

    Keyed like the flavor's extra spec (``mem_bw`` or ``mem_bw_mbps``),
    with the value the kernel enforces (the request rounded as the host
    rounds it; AMD units back in MBps), and ``<key>_requested`` beside it
    when the flavor asked for something else, so that a reader never takes
    ``hw:mem_bw=15`` for the 20 percent the group holds.
    """
    if bandwidth.unit == info.UNIT_PERCENT:
        key, value = 'mem_bw', bandwidth.value
    elif bandwidth.unit == info.UNIT_AMD:
        key, value = 'mem_bw_mbps', bandwidth.value * fit.AMD_MBPS_PER_UNIT
    else:
        key, value = 'mem_bw_mbps', bandwidth.value
    policy = {key: value}
    if bandwidth.requested != value:
        policy[key + REQUESTED] = bandwidth.requested
    return policy


def _from_rdtvirt(meta, default_monitor):
    bandwidth = policy = None
    if meta.membw is not None:
        bw = meta.membw
        bandwidth = _bandwidth(bw.unit, bw.value, bw.requested, bw.group)
        policy = applied_bandwidth(bandwidth)
    monitor = default_monitor if meta.monitor is None else meta.monitor
    return policy or {}, bandwidth, monitor


def parse(xml, default_monitor=True):
    """The :class:`~rdt_virt.agent.model.Instance` of a running domain.

    :param xml: the live domain XML (``virDomainGetXMLDesc``).
    :param default_monitor: ``[rdt] monitoring``, for instances whose
        flavor has no RDT extra spec (no rdt-virt metadata).
    :returns: the Instance, or None for a domain Nova does not own or one
        that is not running.
    :raises: InvalidXML when the RDT parts cannot be understood.
    """
    try:
        root = config.parse_xml(xml, 'domain')
        dom = domain_mod.DomainRDT.from_element(root)
        if not dom.nova_owned:
            return None
        # One canonical form: group names and the QEMU command line use
        # it, and a uuid that is not one must not reach a group name.
        uuid = str(uuid_mod.UUID(dom.uuid))
        domain_id = int(root.get('id', '-1'))
        if domain_id < 0:
            return None
        allocs = allocations(dom, machine_name(domain_id, dom.name))
        policy, bandwidth, monitor = {}, None, default_monitor
        priority = model.Instance.priority
        if dom.metadata is not None:
            policy, bandwidth, monitor = _from_rdtvirt(dom.metadata,
                                                       default_monitor)
            priority = dom.metadata.priority
        held = held_caches(allocs)
        policy = dict(policy, **held)
        if dom.metadata is not None:
            policy.update(requested_caches(dom.metadata.caches, held))
    except (etree.XMLSyntaxError, AttributeError, KeyError, TypeError,
            ValueError, exception.InvalidGroupName) as e:
        raise exception.InvalidXML(what='domain', reason=e)
    return model.Instance(uuid=uuid, name=dom.name,
                          domain_id=domain_id, allocations=allocs,
                          bandwidth=bandwidth, monitor=monitor,
                          policy=policy, priority=priority,
                          project_id=dom.project_id)
