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

"""What a libvirt domain XML says about RDT.

The agent learns an instance's desired state from its domain: libvirt's
``<cachetune>`` and ``<memorytune>`` under ``<cputune>``, rdt-virt's
``<rdtvirt:rdt>`` metadata (see :mod:`rdt_virt.libvirt.config`), and
whether Nova owns the domain at all (Nova writes a ``<nova:instance>``
element into ``<metadata>``; rdt-virt leaves every other domain alone).
"""

import dataclasses
import typing

from rdt_virt.libvirt import config
from rdt_virt.libvirt import xmlutil

NOVA_NAMESPACE = 'http://openstack.org/xmlns/libvirt/nova/1.1'
# Older Nova releases wrote 1.0; the instance element is the same.
NOVA_NAMESPACES = (NOVA_NAMESPACE,
                   'http://openstack.org/xmlns/libvirt/nova/1.0')

_WHAT = 'domain'


@dataclasses.dataclass(frozen=True)
class DomainRDT(object):
    """The RDT-relevant facts of one libvirt domain."""

    #: The domain's uuid (Nova's instance uuid for Nova's domains).
    uuid: str
    #: libvirt's domain name, e.g. ``instance-00000001``.
    name: str
    #: Maximum vCPUs (``<vcpu>``); vCPU ids run from 0 to ``vcpus - 1``.
    vcpus: int
    #: vCPUs online now (``<vcpu current=...>``, else ``vcpus``).
    current_vcpus: int
    #: Nova's ``<nova:instance>`` metadata is present.
    nova_owned: bool
    cachetunes: typing.Tuple[config.CacheTune, ...] = ()
    memorytunes: typing.Tuple[config.MemoryTune, ...] = ()
    #: rdt-virt's metadata element, or None.
    metadata: typing.Optional[config.RDTMetadata] = None

    @property
    def vcpu_ids(self):
        """All vCPU ids the domain can have."""
        return frozenset(range(self.vcpus))

    @property
    def has_rdt(self):
        """True if libvirt or rdt-virt applies anything to this domain."""
        return bool(self.cachetunes or self.memorytunes or self.metadata)

    def cachetune_of(self, vcpu):
        """The ``<cachetune>`` that holds ``vcpu``, or None."""
        return next((t for t in self.cachetunes if vcpu in t.vcpus), None)

    def memorytune_of(self, vcpu):
        """The ``<memorytune>`` that holds ``vcpu``, or None."""
        return next((t for t in self.memorytunes if vcpu in t.vcpus), None)

    @classmethod
    def from_element(cls, el):
        """Read a ``<domain>`` lxml element.

        :raises: InvalidXML for a domain without uuid, name or vCPU count,
            or with RDT elements that break libvirt's format.
        """
        xmlutil.expect(el, 'domain', _WHAT)
        uuid = _text(el, 'uuid')
        name = _text(el, 'name')
        vcpu_el = el.find('vcpu')
        if vcpu_el is None or not (vcpu_el.text or '').strip().isdigit():
            raise xmlutil.invalid(_WHAT, 'no <vcpu> count')
        vcpus = int(vcpu_el.text)
        current = xmlutil.uint_attr(vcpu_el, 'current', _WHAT,
                                    required=False)
        cputune = el.find('cputune')
        tunes = list(cputune) if cputune is not None else []
        metadata = el.find('metadata')
        meta_children = list(metadata) if metadata is not None else []
        rdt = [c for c in meta_children if c.tag == config.RDTMetadata.TAG]
        if len(rdt) > 1:
            raise xmlutil.invalid(_WHAT, 'two rdt-virt metadata elements')
        nova = any(c.tag == '{%s}instance' % ns for c in meta_children
                   for ns in NOVA_NAMESPACES)
        return cls(
            uuid=uuid, name=name, vcpus=vcpus,
            current_vcpus=vcpus if current is None else current,
            nova_owned=nova,
            cachetunes=tuple(config.CacheTune.from_element(t)
                             for t in tunes if t.tag == 'cachetune'),
            memorytunes=tuple(config.MemoryTune.from_element(t)
                              for t in tunes if t.tag == 'memorytune'),
            metadata=config.RDTMetadata.from_element(rdt[0]) if rdt
            else None)

    @classmethod
    def from_xml(cls, text):
        """Read a domain XML string (``virDomain.XMLDesc()``)."""
        return cls.from_element(xmlutil.parse_xml(text, _WHAT))


def _text(el, tag):
    child = el.find(tag)
    text = (child.text or '').strip() if child is not None else ''
    if not text:
        raise xmlutil.invalid(_WHAT, 'no <%s>', tag)
    return text
