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

"""Real libvirtd and KVM guests writing rdt-virt's policies to resctrl.

Each test turns flavor extra specs into domain XML the way rdt-virt does
(policy fitted to libvirt's host capabilities), boots a real guest on the
sandbox's libvirtd and checks what libvirt wrote into the emulated resctrl:
the group, its schemata and its tasks, compared with the vCPU thread ids
QEMU itself reports.
"""

import time

import libvirt

from rdt_virt import exception
from rdt_virt.libvirt import capabilities
from rdt_virt.libvirt import elements as domain_elements
from rdt_virt.policy import default_group
from rdt_virt.policy import extra_specs
from rdt_virt.policy import fit
from rdt_virt.resctrl import bitmask
from rdt_virt.sandbox import guest
from tests.functional import emulated

VCPUS = 2


class LibvirtRDTBase(emulated.SandboxTestCase):

    def setUp(self):
        super().setUp()
        self.caps = capabilities.parse(
            self.conn.getCapabilities()).capabilities

    def reserve_default_ways(self, ways=2):
        reserved = default_group.reserved_schemata(self.caps, ways)
        self.resctrl.write_schemata(None, reserved)

    def boot(self, name, specs, vcpus=VCPUS):
        policy = extra_specs.from_extra_specs(specs)
        plan = fit.fit(policy, self.caps)
        xml = domain_elements.insert(
            guest.domain_xml(name, self.sb.image(), vcpus=vcpus),
            domain_elements.elements(policy, plan, vcpus))
        dom = self.conn.createXML(xml)
        self.addCleanup(_destroy, dom)
        return dom, plan

    def group_of(self, dom):
        """libvirt's group for all vCPUs of ``dom``."""
        name = 'qemu-%d-%s-vcpus_0-%d' % (dom.ID(), dom.name(), VCPUS - 1)
        self.assertIn(name, self.resctrl.list_groups())
        return name

    def assert_tasks_are_vcpus(self, group, dom, mon_group=None):
        self.assertEqual(sorted(guest.vcpu_thread_ids(dom)),
                         sorted(self.resctrl.read_tasks(group, mon_group)))


def _destroy(dom):
    try:
        dom.destroy()
    except libvirt.libvirtError:
        pass


class TestReferenceHost(LibvirtRDTBase):

    def test_mem_bw_is_rounded_and_throttles_the_vcpus(self):
        dom, plan = self.boot('noisy', {'hw:mem_bw': '15'})
        self.assertEqual(20, plan.mem_bw.value)
        group = self.group_of(dom)
        schemata = self.resctrl.read_schemata(group)
        self.assertEqual({0: 20, 1: 20}, schemata['MB'])
        self.assert_tasks_are_vcpus(group, dom)
        # One CLOSID for the instance: no other group was made.
        self.assertEqual([group], self.resctrl.list_groups())

    def test_cache_allocation_needs_room_in_the_default_group(self):
        specs = {'hw:cache_l3': '4096'}
        exc = self.assertRaises(libvirt.libvirtError, self.boot, 'cache',
                                specs)
        self.assertIn('Not enough room for allocation', str(exc))
        self.assertEqual([], self.resctrl.list_groups())

        self.reserve_default_ways(2)
        dom, plan = self.boot('cache', specs)
        group = self.group_of(dom)
        masks = self.resctrl.read_schemata(group)['L3']
        root = self.resctrl.read_schemata(None)['L3']
        for dom_id in (0, 1):
            # 4096 KiB is two ways of 3328 KiB, outside the default's.
            self.assertEqual(2, bitmask.popcount(masks[dom_id]))
            self.assertTrue(bitmask.is_contiguous(masks[dom_id]))
            self.assertEqual(0, masks[dom_id] & root[dom_id])
        self.assertEqual(0x3, root[0])
        self.assert_tasks_are_vcpus(group, dom)

    def test_cache_and_bandwidth_share_one_group(self):
        self.reserve_default_ways(2)
        dom, _plan = self.boot('both', {'hw:cache_l3': '6656',
                                        'hw:mem_bw': '30'})
        group = self.group_of(dom)
        schemata = self.resctrl.read_schemata(group)
        self.assertEqual({0: 30, 1: 30}, schemata['MB'])
        self.assertEqual([2, 2], [bitmask.popcount(m)
                                  for m in schemata['L3'].values()])
        self.assert_tasks_are_vcpus(group, dom)

    def test_two_allocations_get_disjoint_ways(self):
        self.reserve_default_ways(2)
        first, _ = self.boot('first', {'hw:cache_l3': '9984'})   # 3 ways
        second, _ = self.boot('second', {'hw:cache_l3': '3328'})  # 1 way
        a = self.resctrl.read_schemata(self.group_of(first))['L3'][0]
        b = self.resctrl.read_schemata(self.group_of(second))['L3'][0]
        self.assertEqual((3, 1), (bitmask.popcount(a), bitmask.popcount(b)))
        self.assertEqual(0, a & b)

    def test_without_rdt_specs_libvirt_makes_no_group(self):
        self.boot('plain', {})
        self.boot('unmonitored', {'hw:rdt_monitor': 'false'})
        self.assertEqual([], self.resctrl.list_groups())
        self.assertEqual([], self.resctrl.list_mon_groups())

    def test_domstats_report_the_emulators_counters(self):
        self.reserve_default_ways(2)
        dom, _plan = self.boot('watched', {'hw:cache_l3': '3328',
                                           'hw:mem_bw': '50'})
        group = self.group_of(dom)
        control = self.sb.sandbox.control
        control.set_counter(group, 123456789, domain=0,
                            event='mbm_total_bytes')
        control.set_counter(group, 98765, domain=1,
                            event='mbm_local_bytes')
        control.set_counter(group, 1146880, domain=1,
                            event='llc_occupancy')
        stats = self._stats(dom)
        membw = 'memory.bandwidth.monitor.0.node.%d.bytes.%s'
        self.assertEqual(123456789, stats[membw % (0, 'total')])
        self.assertEqual(98765, stats[membw % (1, 'local')])
        self.assertEqual(1146880,
                         stats['cpu.cache.monitor.0.bank.1.bytes'])
        self.assertEqual('0-1', stats['cpu.cache.monitor.0.vcpus'])

    def test_domstats_follow_counters_that_grow(self):
        dom, _plan = self.boot('grow', {'hw:mem_bw': '50'})
        group = self.group_of(dom)
        key = 'memory.bandwidth.monitor.0.node.0.bytes.total'
        # libvirt 9.0 fails the whole call on a file that reads
        # Unavailable, as a domain the guest never ran on does: give
        # every counter a value first.
        self.sb.sandbox.control.set_counter(group, 0)
        self.sb.sandbox.control.set_rate(group, 10 ** 9, domain=0,
                                         event='mbm_total_bytes')
        first = self._stats(dom)[key]
        time.sleep(0.5)
        second = self._stats(dom)[key]
        self.assertGreater(second - first, 3 * 10 ** 8)
        self.assertLess(second - first, 2 * 10 ** 9)

    def _stats(self, dom):
        ((_dom, stats),) = self.conn.domainListGetStats(
            [dom], libvirt.VIR_DOMAIN_STATS_CPU_TOTAL |
            libvirt.VIR_DOMAIN_STATS_MEMORY)
        return stats


class TestCDPHost(LibvirtRDTBase):

    PROFILE = 'cdp'

    def test_code_and_data_ways(self):
        self.assertTrue(self.caps.cdp)
        self.reserve_default_ways(2)
        dom, plan = self.boot('cdp', {'hw:cache_l3_code': '3328',
                                      'hw:cache_l3_data': '6656'})
        group = self.group_of(dom)
        schemata = self.resctrl.read_schemata(group)
        self.assertEqual([1, 1], [bitmask.popcount(m)
                                  for m in schemata['L3CODE'].values()])
        self.assertEqual([2, 2], [bitmask.popcount(m)
                                  for m in schemata['L3DATA'].values()])
        self.assert_tasks_are_vcpus(group, dom)

    def test_unsplit_cache_request_is_refused_before_libvirt(self):
        self.assertRaises(exception.HostCannotServe, self.boot, 'x',
                          {'hw:cache_l3': '1'})
        self.assertEqual([], self.resctrl.list_groups())
