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

from lxml import etree
from nova.virt.libvirt import config as vconfig

from nova_plugin.virt import config
from tests import base
from tests.unit.libvirt.test_elements import elements


class TestGuestConfig(base.TestCase):

    def test_cputune_keeps_nova_elements(self):
        guest = vconfig.LibvirtConfigGuest()
        guest.cputune = vconfig.LibvirtConfigGuestCPUTune()
        guest.cputune.shares = 2048
        pin = vconfig.LibvirtConfigGuestCPUTuneVCPUPin()
        pin.id, pin.cpuset = 0, set([3])
        guest.cputune.vcpupin.append(pin)
        config.apply(guest, elements(mem_bw=10, cache_l3=1))
        out = etree.fromstring(guest.cputune.to_xml())
        self.assertEqual(['shares', 'vcpupin', 'cachetune', 'memorytune'],
                         [e.tag for e in out])
        # Formatting twice gives the same XML.
        self.assertEqual(guest.cputune.to_xml(), guest.cputune.to_xml())

    def test_cputune_created_when_missing(self):
        guest = vconfig.LibvirtConfigGuest()
        config.apply(guest, elements(mem_bw=10))
        self.assertEqual(
            '<cputune><memorytune vcpus="0-1"><node id="0" bandwidth="10"/>'
            '<node id="1" bandwidth="10"/><monitor vcpus="0-1"/>'
            '</memorytune></cputune>', guest.cputune.to_xml(
                pretty_print=False))
        self.assertEqual(1, len(guest.metadata))
        self.assertIn('rdtvirt:rdt', guest.metadata[0].to_xml())

    def test_metadata_only(self):
        guest = vconfig.LibvirtConfigGuest()
        config.apply(guest, elements(strategy='shared', mem_bw=10))
        self.assertIsNone(guest.cputune)
        self.assertEqual(1, len(guest.metadata))
