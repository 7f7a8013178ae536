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

"""Glue between rdt-virt's RDT elements and Nova's libvirt guest config.

Nova builds the domain XML from ``nova.virt.libvirt.config`` objects, whose
``LibvirtConfigGuestCPUTune`` knows no ``<cachetune>`` or ``<memorytune>``.
:class:`RDTCPUTune` is a ``<cputune>`` that also carries them, and
:class:`ElementConfig` puts any element (the rdt-virt metadata element) into
``guest.metadata``. What the elements contain is decided by
:mod:`rdt_virt.libvirt.elements`, which needs no running Nova.
"""

import copy

from nova.virt.libvirt import config as vconfig


class RDTCPUTune(vconfig.LibvirtConfigGuestCPUTune):
    """``<cputune>`` with RDT allocation elements after Nova's own."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.rdt_elements = []

    @classmethod
    def wrap(cls, cputune):
        """An RDTCPUTune with everything ``cputune`` (or None) has."""
        wrapped = cls()
        if cputune is not None:
            wrapped.__dict__.update(cputune.__dict__)
            wrapped.rdt_elements = list(getattr(cputune, 'rdt_elements', ()))
        return wrapped

    def format_dom(self):
        root = super().format_dom()
        # libvirt formats <cachetune> and <memorytune> last in <cputune>.
        for element in self.rdt_elements:
            root.append(copy.deepcopy(element))
        return root


class ElementConfig(vconfig.LibvirtConfigObject):
    """A ready-made lxml element as a Nova libvirt config object."""

    def __init__(self, element):
        super().__init__(root_name=element.tag)
        self.element = element

    def format_dom(self):
        return copy.deepcopy(self.element)


def apply(guest, elements):
    """Add RDT ``elements`` to a ``LibvirtConfigGuest``.

    :param elements: a :class:`rdt_virt.libvirt.elements.DomainElements`.
    """
    if elements.cputune:
        guest.cputune = RDTCPUTune.wrap(guest.cputune)
        guest.cputune.rdt_elements.extend(elements.cputune)
    if elements.metadata is not None:
        guest.metadata.append(ElementConfig(elements.metadata))
