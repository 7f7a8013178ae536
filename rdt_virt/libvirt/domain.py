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

From Nova's element it also reads the project that owns the instance, for
the telemetry a tenant may see: Nova's ``LibvirtConfigGuestMetaNovaOwner``
writes ``<nova:owner><nova:project uuid="PROJECT ID">project
name</nova:project></nova:owner>``, the ``uuid`` attribute being the
Keystone project id (32 hex digits, no dashes, as Keystone makes them).
"""

import dataclasses
import typing

from lxml import etree

from rdt_virt.libvirt import config
from rdt_virt.libvirt import xmlutil

NOVA_NAMESPACE = 'http://openstack.org/xmlns/libvirt/nova/1.1'
# Older Nova releases wrote 1.0; the instance element is the same.
NOVA_NAMESPACES = (NOVA_NAMESPACE,
                   'http://openstack.org/xmlns/libvirt/nova/1.0')

_WHAT = 'domain'
# Nova's instances.project_id column holds at most 255 characters.
MAX_PROJECT_ID = 255


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
    #: The owning project's id (``<nova:owner><nova:project uuid>``), or
    #: None when Nova's element has no usable one.
    project_id: typing.Optional[str] = None

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
        nova = [c for c in meta_children for ns in NOVA_NAMESPACES
                if c.tag == '{%s}instance' % ns]
        return cls(
            uuid=uuid, name=name, vcpus=vcpus,
            current_vcpus=vcpus if current is None else current,
            nova_owned=bool(nova),
            project_id=project_id(nova[0]) if len(nova) == 1 else None,
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


def project_id(instance):
    """The project id of Nova's ``<nova:instance>`` element, or None.

    Telemetry only: an owner that is missing or cannot be read (no
    ``<nova:owner>``, no or several ``<nova:project>``, an id that is
    empty or has blanks or control characters, or is longer than Nova
    stores) leaves the instance without a project; it never makes the
    domain unreadable, whose RDT policy the agent must still apply.
    """
    ns = etree.QName(instance).namespace
    owners = instance.findall('{%s}owner' % ns)
    if len(owners) != 1:
        return None
    projects = owners[0].findall('{%s}project' % ns)
    if len(projects) != 1:
        return None
    value = projects[0].get('uuid')
    if (not value or len(value) > MAX_PROJECT_ID or not value.isprintable()
            or any(c.isspace() for c in value)):
        return None
    return value


def _text(el, tag):
    child = el.find(tag)
    text = (child.text or '').strip() if child is not None else ''
    if not text:
        raise xmlutil.invalid(_WHAT, 'no <%s>', tag)
    return text
