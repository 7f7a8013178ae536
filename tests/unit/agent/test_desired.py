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

"""Domain XML -> the agent's Instance."""

import os

from rdt_virt.agent import desired
from rdt_virt.agent import model
from rdt_virt import exception
from tests import base

FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', 'fixtures',
                        'libvirt')
NOVA = ('<nova:instance xmlns:nova="http://openstack.org/xmlns/libvirt/nova/'
        '1.1"><nova:name>vm</nova:name></nova:instance>')
RDT = ('<rdtvirt:rdt xmlns:rdtvirt="http://openstack.org/xmlns/libvirt/'
       'rdt-virt/1.0" version="1">%s</rdtvirt:rdt>')


def domain(cputune='', metadata=NOVA, dom_id=7, name='instance-00000007'):
    return '''<domain type='kvm' id='%d'>
  <name>%s</name>
  <uuid>AAAAAAAA-0000-4000-8000-000000000007</uuid>
  <metadata>%s</metadata>
  <vcpu placement='static'>4</vcpu>
  <cputune>%s</cputune>
</domain>''' % (dom_id, name, metadata, cputune)


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return f.read()


class TestMachineName(base.TestCase):

    def test_like_libvirt(self):
        self.assertEqual('qemu-3-instance-00000003',
                         desired.machine_name(3, 'instance-00000003'))
        self.assertEqual('qemu-1-a.b-c',
                         desired.machine_name(1, '-a..b--c.-'))
        # Only host name characters survive.
        self.assertEqual('qemu-1-vm1', desired.machine_name(1, 'vm_1'))
        self.assertEqual('qemu-2-ab', desired.machine_name(2, 'a b'))
        self.assertLessEqual(len(desired.machine_name(1, 'x' * 200)), 64)


class TestParse(base.TestCase):

    def test_fixture_with_cachetune_memorytune(self):
        inst = desired.parse(fixture('domain-nova-rdt.xml'))
        self.assertEqual('1d7a0f6e-3b52-4c1a-9a57-0f1e2d3c4b5a', inst.uuid)
        alloc, = inst.allocations
        self.assertEqual('qemu-1-instance-00000001-vcpus_0-3', alloc.group)
        self.assertEqual(frozenset(range(4)), alloc.vcpus)
        self.assertEqual({0: 20, 1: 20}, alloc.bandwidth)
        self.assertEqual(6656 * 1024, alloc.caches[0].size)
        self.assertTrue(alloc.monitor)
        # What the host holds per L3 and the bandwidth the group gets
        # (hw:mem_bw=15 in steps of 10), the request beside it.
        self.assertEqual({'mem_bw': 20, 'mem_bw_requested': 15,
                          'cache_l3': 6656, 'cache_l3_requested': 4096},
                         inst.policy)

    def test_cdp_caches_in_the_policy(self):
        inst = desired.parse(domain(metadata=NOVA + RDT % (
            '<rdtvirt:membw unit="percent" value="10" group="instance"/>'),
            cputune="<cachetune vcpus='0-3' id='vcpus_0-3'>"
            "<cache id='0' level='3' type='code' size='3328' unit='KiB'/>"
            "<cache id='0' level='3' type='data' size='6656' unit='KiB'/>"
            "<cache id='1' level='3' type='code' size='3328' unit='KiB'/>"
            "<cache id='1' level='3' type='data' size='6656' unit='KiB'/>"
            "</cachetune>"))
        self.assertEqual({'mem_bw': 10, 'cache_l3_code': 3328,
                          'cache_l3_data': 6656}, inst.policy)

    def test_fixture_shared(self):
        inst = desired.parse(fixture('domain-nova-shared.xml'))
        self.assertEqual(model.BandwidthPolicy('percent', 10, 10,
                                               model.SHARED),
                         inst.bandwidth)
        self.assertTrue(inst.monitor)
        self.assertEqual((), inst.allocations)

    def test_not_novas(self):
        self.assertIsNone(desired.parse(fixture('domain-plain.xml')))
        self.assertIsNone(desired.parse(domain(metadata='')))

    def test_not_running(self):
        self.assertIsNone(desired.parse(domain(dom_id=-1)))

    def test_monitor_only_cachetune_is_libvirts(self):
        inst = desired.parse(domain(
            "<cachetune vcpus='2' id='vcpus_2'><monitor level='3' "
            "vcpus='2'/></cachetune>"))
        self.assertEqual((), inst.allocations)

    def test_allocation_id_without_live_id(self):
        inst = desired.parse(domain(
            "<memorytune vcpus='0-1'><node id='0' bandwidth='30'/>"
            "</memorytune>"))
        self.assertEqual('qemu-7-instance-00000007-vcpus_0-1',
                         inst.allocations[0].group)
        self.assertFalse(inst.allocations[0].monitor)

    def test_cachetune_and_memorytune_share_a_group(self):
        inst = desired.parse(domain(
            "<cachetune vcpus='0-3' id='vcpus_0-3'><cache id='0' level='3' "
            "type='both' size='3' unit='MiB'/></cachetune><memorytune "
            "vcpus='0-3' id='vcpus_0-3'><node id='0' bandwidth='50'/>"
            "<monitor vcpus='0-3'/></memorytune>"))
        alloc, = inst.allocations
        self.assertEqual({0: 50}, alloc.bandwidth)
        self.assertEqual(3 * 1024 * 1024, alloc.caches[0].size)
        self.assertTrue(alloc.monitor)

    def test_amd_units_with_the_request(self):
        inst = desired.parse(domain(metadata=NOVA + RDT % (
            '<rdtvirt:membw unit="amd" value="8" requested="1000" '
            'group="instance"/><rdtvirt:monitor enabled="no"/>')))
        self.assertEqual(model.BandwidthPolicy('amd', 8, 1000,
                                               model.INSTANCE),
                         inst.bandwidth)
        # 8 units of 1/8 GBps: the 1000 MBps asked for.
        self.assertEqual({'mem_bw_mbps': 1000}, inst.policy)
        self.assertFalse(inst.monitor)
        inst = desired.parse(domain(metadata=NOVA + RDT % (
            '<rdtvirt:membw unit="amd" value="8" requested="900" '
            'group="instance"/>')))
        self.assertEqual({'mem_bw_mbps': 1000, 'mem_bw_mbps_requested': 900},
                         inst.policy)

    def test_applied_bandwidth(self):
        for bw, policy in (
                (model.BandwidthPolicy('percent', 10, 10, model.SHARED),
                 {'mem_bw': 10}),
                (model.BandwidthPolicy('percent', 20, 15, model.LIBVIRT),
                 {'mem_bw': 20, 'mem_bw_requested': 15}),
                (model.BandwidthPolicy('MBps', 2000, 1990, model.INSTANCE),
                 {'mem_bw_mbps': 2000, 'mem_bw_mbps_requested': 1990})):
            self.assertEqual(policy, desired.applied_bandwidth(bw))

    def test_monitoring_only_metadata(self):
        inst = desired.parse(domain(metadata=NOVA + RDT % (
            '<rdtvirt:monitor enabled="yes"/>')), default_monitor=False)
        self.assertTrue(inst.monitor)
        self.assertIsNone(inst.bandwidth)

    def test_priority(self):
        low = desired.parse(domain(metadata=NOVA + RDT % (
            '<rdtvirt:membw unit="percent" value="20" requested="15" '
            'group="shared"/><rdtvirt:monitor enabled="yes"/>'
            '<rdtvirt:priority class="low"/>')))
        self.assertEqual('low', low.priority)
        self.assertEqual(model.BandwidthPolicy('percent', 20, 15,
                                               model.SHARED), low.bandwidth)
        high = desired.parse(domain(metadata=NOVA + RDT % (
            '<rdtvirt:monitor enabled="yes"/>'
            '<rdtvirt:priority class="high"/>')))
        self.assertEqual('high', high.priority)
        self.assertIsNone(high.bandwidth)

    def test_priority_default_is_normal(self):
        # No rdt-virt element at all, and one without a class.
        self.assertEqual('normal', desired.parse(domain()).priority)
        self.assertEqual('normal', desired.parse(domain(
            metadata=NOVA + RDT % '<rdtvirt:monitor enabled="yes"/>'))
            .priority)

    def test_unknown_priority_is_refused(self):
        self.assertRaises(exception.InvalidXML, desired.parse, domain(
            metadata=NOVA + RDT % '<rdtvirt:priority class="urgent"/>'))

    def test_default_monitoring(self):
        self.assertTrue(desired.parse(domain()).monitor)
        self.assertFalse(desired.parse(domain(), default_monitor=False)
                         .monitor)

    def test_project_of_the_owner(self):
        self.assertEqual('5e0d2f4a6b8c4d1e8f0a2b4c6d8e0f1a', desired.parse(
            fixture('domain-nova-rdt.xml')).project_id)
        # Nova's element without an owner.
        self.assertIsNone(desired.parse(domain()).project_id)
        # A malformed owner costs the project, never the instance.
        owner = NOVA.replace(
            '</nova:instance>', '<nova:owner><nova:project uuid="a b">x'
            '</nova:project></nova:owner></nova:instance>')
        inst = desired.parse(domain(
            "<memorytune vcpus='0-1'><node id='0' bandwidth='30'/>"
            "</memorytune>", metadata=owner))
        self.assertIsNone(inst.project_id)
        self.assertEqual(1, len(inst.allocations))

    def test_garbage(self):
        self.assertRaises(exception.InvalidXML, desired.parse, '<domain')
        self.assertRaises(exception.InvalidXML, desired.parse, domain(
            "<memorytune vcpus='0'><node id='x' bandwidth='1'/>"
            "</memorytune>"))
