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

"""From Nova's driver to a real libvirtd: the bridge test.

The domain XML ``RDTLibvirtDriver`` produces in Nova's in-process harness is
reduced to devices the sandbox can run (a boot disk and a serial port: the
fake host's disks and networks do not exist) and to 32 MiB of memory, then
started on the sandbox's real libvirtd over the emulated resctrl of the same
hardware. libvirt must create the group the driver asked for.
"""

from lxml import etree

from rdt_virt.agent import desired
from rdt_virt.libvirt import domain as domain_mod
from rdt_virt.policy import default_group
from rdt_virt.resctrl import bitmask
from rdt_virt.sandbox import guest
from rdt_virt.sandbox import launcher
from tests import base as tests_base
from tests.functional import emulated
from tests.functional.nova import base

# What the driver decides stays; what only exists on Nova's fake host goes.
_KEEP = ('name', 'uuid', 'metadata', 'vcpu', 'cputune', 'features', 'clock')


def reduce_for_sandbox(driver_xml, image):
    """The driver's domain with the devices and memory of a tiny guest."""
    driver = etree.fromstring(driver_xml)
    tiny = etree.fromstring(guest.domain_xml(
        driver.findtext('name'), image, memory_mib=32,
        vcpus=int(driver.findtext('vcpu'))))
    for tag in _KEEP:
        old = tiny.find(tag)
        new = driver.find(tag)
        if new is None:
            continue
        if old is not None:
            tiny.replace(old, new)
        else:
            tiny.append(new)
    return etree.tostring(tiny, encoding='unicode')


class TestDriverXMLOnRealLibvirt(base.RDTServersTestBase):

    def setUp(self):
        super().setUp()
        reasons = launcher.missing_prerequisites()
        if reasons:
            message = 'sandbox prerequisites: %s' % '; '.join(reasons)
            if tests_base.in_ci():
                self.fail(message)
            self.skipTest(message)
        self.sb = self.useFixture(emulated.SandboxFixture('reference'))
        self.start_rdt_compute('compute1', 'reference')

    def test_driver_xml_makes_the_expected_group(self):
        flavor = self.flavor({'hw:mem_bw': '15', 'hw:cache_l3': '4096'},
                             vcpu=2)
        server = self.boot(flavor)
        driver_xml = self.domain_xml(server)
        xml = reduce_for_sandbox(driver_xml, self.sb.image())

        # The sandbox's default group keeps two ways, as the agent makes it
        # with [rdt] default_group_l3_ways = 2.
        caps = self.sb.resctrl.capabilities()
        self.sb.resctrl.write_schemata(
            None, default_group.reserved_schemata(caps, 2))
        dom = self.sb.conn.createXML(xml)
        self.addCleanup(dom.destroy)

        name = 'qemu-%d-%s-vcpus_0-1' % (dom.ID(), dom.name())
        self.assertEqual([name], self.sb.resctrl.list_groups())
        schemata = self.sb.resctrl.read_schemata(name)
        # hw:mem_bw=15 rounded to the reference host's 10% steps.
        self.assertEqual({0: 20, 1: 20}, schemata['MB'])
        self.assertEqual([2, 2], [bitmask.popcount(m)
                                  for m in schemata['L3'].values()])
        self.assertEqual(sorted(guest.vcpu_thread_ids(dom)),
                         sorted(self.sb.resctrl.read_tasks(name)))

        # What libvirt kept is what the driver wrote, metadata included.
        live = domain_mod.DomainRDT.from_xml(dom.XMLDesc(0))
        wrote = domain_mod.DomainRDT.from_xml(driver_xml)
        self.assertTrue(live.nova_owned)
        self.assertEqual(server['id'], live.uuid)
        self.assertEqual(wrote.metadata, live.metadata)
        # The agent publishes what the group holds, the request beside it.
        held = 2 * caps.caches['L3'].way_size(0) // 1024
        self.assertEqual(dict({'mem_bw': 20, 'mem_bw_requested': 15,
                               'cache_l3': held},
                              **({} if held == 4096 else
                                 {'cache_l3_requested': 4096})),
                         desired.parse(dom.XMLDesc(0)).policy)
        self.assertEqual(
            [(t.vcpus, t.caches) for t in wrote.cachetunes],
            [(t.vcpus, t.caches) for t in live.cachetunes])
        self.assertEqual(
            [(t.vcpus, t.nodes) for t in wrote.memorytunes],
            [(t.vcpus, t.nodes) for t in live.memorytunes])
