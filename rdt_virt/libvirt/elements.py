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

"""The RDT elements of an instance's domain XML, without Nova.

Given an instance's policy and its plan on a host, :func:`elements` returns
what goes into the domain XML:

* ``<cachetune vcpus=all>`` for a cache plan, one ``<cache>`` per cache
  domain and type;
* ``<memorytune vcpus=all>`` only when libvirt applies the bandwidth limit
  (``plan.mb_owner == 'libvirt'``: a percentage, per instance or with a
  cache allocation). libvirt refuses values above 100, so MBps and AMD
  limits are never written here: rdt-virt-agent applies them from the
  metadata element, as it applies the shared strategy's percentages;
* ``<monitor>`` only inside an allocation with the same vCPUs, where it
  reuses the allocation group's RMID. A monitor-only ``<cachetune>`` would
  make libvirt fail the domain start when RMIDs run out, and monitoring
  must never block a boot; rdt-virt-agent monitors everything else;
* the rdt-virt ``<metadata>`` element, whenever the flavor has an RDT extra
  spec, so the agent sees the whole policy: requested and applied values,
  who applies the bandwidth limit, and the protection class.

:func:`insert` puts them into a whole domain XML document, for tools and
tests that run libvirt without Nova; :func:`replace` swaps a domain's for
those of another host's plan (live migration). The objects and their XML are
:mod:`rdt_virt.libvirt.config`'s; this module only decides what they say.
"""

import collections

from lxml import etree

from rdt_virt.conf import rdt as rdt_conf
from rdt_virt.libvirt import config
from rdt_virt.libvirt import xmlutil
from rdt_virt.policy import extra_specs
from rdt_virt.policy import fit as fit_mod
from rdt_virt.resctrl import info

NOVA_NAMESPACE = 'http://openstack.org/xmlns/libvirt/nova/1.1'

DomainElements = collections.namedtuple('DomainElements',
                                        ['cputune', 'metadata'])
DomainElements.__doc__ = """RDT elements of a domain: ``cputune`` is a
list of ``<cachetune>``/``<memorytune>`` elements for ``<cputune>``,
``metadata`` the rdt-virt element for ``<metadata>`` (or None)."""

NOTHING = DomainElements([], None)

# Who holds the instance's vCPUs, as the metadata element says it.
_GROUPS = {
    fit_mod.MB_LIBVIRT: config.GROUP_INSTANCE,
    fit_mod.MB_INSTANCE: config.GROUP_INSTANCE,
    fit_mod.MB_SHARED: config.GROUP_SHARED,
}


def cachetune(plan, vcpus):
    """The :class:`~rdt_virt.libvirt.config.CacheTune` of ``plan``, or None.

    :param vcpus: the instance's vCPU ids.
    """
    if not plan.caches:
        return None
    caches = [config.CacheTuneCache(id=dom, level=alloc.level,
                                    type=alloc.type, size=size)
              for alloc in plan.caches
              for dom, _ways, size in alloc.domains]
    monitors = ([config.CacheTuneMonitor(level=3, vcpus=vcpus)]
                if plan.monitor else [])
    return config.CacheTune(vcpus=vcpus, caches=caches, monitors=monitors)


def memorytune(plan, vcpus):
    """The :class:`~rdt_virt.libvirt.config.MemoryTune` of ``plan``, or None.

    Only when libvirt applies the limit: a percentage, per instance or with
    a cache allocation.
    """
    if plan.mb_owner != fit_mod.MB_LIBVIRT:
        return None
    nodes = [config.MemoryTuneNode(id=node, bandwidth=plan.mem_bw.value)
             for node in plan.mem_bw.domain_ids]
    monitors = ([config.MemoryTuneMonitor(vcpus=vcpus)]
                if plan.monitor else [])
    return config.MemoryTune(vcpus=vcpus, nodes=nodes, monitors=monitors)


def metadata(plan):
    """The :class:`~rdt_virt.libvirt.config.RDTMetadata` of ``plan``.

    It carries the protection class too (``hw:rdt_priority``), which the
    agent's controller reads; a normal instance's element has none.
    """
    membw = None
    mem_bw = plan.mem_bw
    if mem_bw is not None:
        # The flavor's MBps become AMD units: then the request is in
        # another unit and always recorded.
        same = mem_bw.unit != info.UNIT_AMD and mem_bw.requested == \
            mem_bw.value
        membw = config.MemBwMetadata(
            unit=mem_bw.unit, value=mem_bw.value,
            group=_GROUPS[plan.mb_owner],
            requested=None if same else mem_bw.requested)
    caches = [config.CacheMetadata(level=alloc.level, type=alloc.type,
                                   requested=alloc.requested_kib)
              for alloc in plan.caches]
    return config.RDTMetadata(membw=membw, monitor=plan.monitor,
                              priority=plan.priority, caches=caches)


def elements(policy, plan, vcpus):
    """All RDT elements of an instance (:data:`NOTHING` for no policy).

    :param policy: the flavor's RDTPolicy.
    :param plan: its Plan on this host (``fit()``).
    :param vcpus: the instance's vCPU count.
    """
    if policy.is_empty:
        return NOTHING
    ids = range(vcpus)
    tunes = [tune.to_element()
             for tune in (cachetune(plan, ids), memorytune(plan, ids))
             if tune is not None]
    return DomainElements(tunes, metadata(plan).to_element())


def for_flavor(flavor_extra_specs, vcpus, caps,
               strategy=rdt_conf.PER_INSTANCE, monitoring=True):
    """The RDT elements of a flavor on a host, as the driver writes them.

    :param flavor_extra_specs: the flavor's extra specs (strings).
    :param vcpus: the flavor's vCPU count.
    :param caps: the host's HostCapabilities (for example
        ``nova_plugin.virt.host.read_resctrl(...).caps``).
    :param strategy: the host's ``[rdt] mb_strategy``.
    :param monitoring: the host's ``[rdt] monitoring``.
    :raises: InvalidExtraSpec, HostCannotServe.
    """
    policy = extra_specs.from_extra_specs(flavor_extra_specs)
    if policy.is_empty:
        return NOTHING
    return elements(policy, fit_mod.fit(policy, caps, strategy, monitoring),
                    vcpus)


def domain_xml(base_xml, flavor_extra_specs, caps,
               strategy=rdt_conf.PER_INSTANCE, monitoring=True):
    """``base_xml`` with the RDT elements of a flavor, sized by its vCPUs.

    For running a domain with rdt-virt's elements on a libvirt without
    Nova: :func:`for_flavor` for the domain's ``<vcpu>`` count, then
    :func:`insert`.
    """
    root = xmlutil.parse_xml(base_xml, 'domain')
    vcpus = int(root.findtext('vcpu', '1').strip())
    return insert(base_xml, for_flavor(flavor_extra_specs, vcpus, caps,
                                       strategy, monitoring))


def insert(domain_xml, domain_elements):
    """``domain_xml`` (a string) with ``domain_elements`` added.

    Creates ``<cputune>`` and ``<metadata>`` when the domain has none.
    """
    root = xmlutil.parse_xml(domain_xml, 'domain')
    if domain_elements.cputune:
        cputune = root.find('cputune')
        if cputune is None:
            cputune = etree.SubElement(root, 'cputune')
        cputune.extend(domain_elements.cputune)
    if domain_elements.metadata is not None:
        meta = root.find('metadata')
        if meta is None:
            meta = etree.SubElement(root, 'metadata')
        meta.append(domain_elements.metadata)
    return etree.tostring(root, encoding='unicode')


def replace(domain_xml, domain_elements):
    """``domain_xml`` with its RDT elements replaced by ``domain_elements``.

    Removes every ``<cachetune>`` and ``<memorytune>`` of ``<cputune>`` and
    the rdt-virt metadata element, then :func:`insert`. For a domain that
    moves to another host, whose plan (cache ids and sizes, memory
    bandwidth node ids) is that host's.
    """
    root = xmlutil.parse_xml(domain_xml, 'domain')
    cputune = root.find('cputune')
    if cputune is not None:
        for tune in cputune.findall('cachetune') + cputune.findall(
                'memorytune'):
            cputune.remove(tune)
    meta = root.find('metadata')
    if meta is not None:
        for old in meta.findall(config.RDTMetadata.TAG):
            meta.remove(old)
    return insert(etree.tostring(root, encoding='unicode'), domain_elements)


def flavor_extra_specs(domain_xml):
    """The flavor extra specs Nova recorded in a domain's metadata.

    Nova writes them under ``<nova:instance><nova:flavor><nova:extraSpecs>``
    (Nova 32 and later); they survive nova-compute restarts with the
    domain. None when the domain has no Nova metadata or Nova did not
    record them (Nova 31: see :mod:`nova_plugin.compat`).
    """
    root = xmlutil.parse_xml(domain_xml, 'domain')
    specs = root.find('metadata/{%(ns)s}instance/{%(ns)s}flavor/'
                      '{%(ns)s}extraSpecs' % {'ns': NOVA_NAMESPACE})
    if specs is None:
        return None
    return {spec.get('name'): spec.text or ''
            for spec in specs.iterfind('{%s}extraSpec' % NOVA_NAMESPACE)
            if spec.get('name')}


def policy_from_domain(domain_xml):
    """The RDTPolicy of the flavor a domain was defined with.

    None when the domain's metadata does not record the flavor's extra
    specs (:func:`flavor_extra_specs`).
    """
    specs = flavor_extra_specs(domain_xml)
    return None if specs is None else extra_specs.from_extra_specs(specs)
