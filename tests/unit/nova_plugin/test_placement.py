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

import dataclasses

from nova.compute import provider_tree
from nova import exception as nova_exception
from nova import objects

from nova_plugin.virt import claims
from nova_plugin.virt import placement
from rdt_virt.policy import fit
from tests import base
from tests.unit.nova_plugin import fakes

NODE = 'node1'
UUID = '0a6c1f7e-5b2d-4a8e-9c3f-1e2d3c4b5a60'
VCPU = {'total': 8, 'reserved': 0, 'min_unit': 1, 'max_unit': 8,
        'step_size': 1, 'allocation_ratio': 16.0}
PLAN = fit.fit(fit.es.RDTPolicy(mem_bw=10), fakes.REFERENCE)


def flavor(**extra_specs):
    return objects.Flavor(name='rdt', extra_specs=extra_specs)


class TestUpdateInventory(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tree = provider_tree.ProviderTree()
        self.tree.new_root(NODE, UUID)
        # What the libvirt driver set before.
        self.tree.update_inventory(NODE, {'VCPU': VCPU})

    def update(self, caps=fakes.REFERENCE, free=7, held=(), previous=None):
        capacity = fakes.fresh_capacity(caps, closids=free)
        placement.update_inventory(self.tree, NODE, caps, capacity,
                                   list(held), previous)
        return self.tree.data(NODE).inventory

    def test_merged_with_the_libvirt_inventory(self):
        # Reference host: 8 CLOSIDs (MB), 7 free: the default group only.
        inv = self.update()
        self.assertEqual(VCPU, inv['VCPU'])
        self.assertEqual(8, inv['CUSTOM_RDT_CLOSID']['total'])
        self.assertEqual(1, inv['CUSTOM_RDT_CLOSID']['reserved'])

    def test_claims_with_allocations_are_not_reserved(self):
        held = [claims.Claim('a', 'instance-a', PLAN, placement=1),
                claims.Claim('b', 'instance-b', PLAN, placement=1),
                claims.Claim('c', 'instance-c', PLAN)]
        # Default group, one foreign group, three instances: 3 free.
        inv = self.update(free=3, held=held)
        # The default group, the foreign group and the filter-only
        # instance.
        self.assertEqual(3, inv['CUSTOM_RDT_CLOSID']['reserved'])

    def test_closids_the_kernel_takes(self):
        amd = fakes.AMD
        wide = {n: dataclasses.replace(r, num_closids=64)
                for n, r in amd.membw.items()}
        l3 = {n: dataclasses.replace(r, num_closids=64)
              for n, r in amd.caches.items()}
        # Before 6.16 only 32 of 64 exist: that is the total.
        old = dataclasses.replace(amd, caches=l3, membw=wide,
                                  closid_limit=32)
        inv = self.update(caps=old, free=31)['CUSTOM_RDT_CLOSID']
        self.assertEqual((32, 1), (inv['total'], inv['reserved']))
        # io_alloc's CLOSID exists but is never Nova's: reserved.
        io = dataclasses.replace(amd, io_alloc=True)
        inv = self.update(caps=io, free=14)['CUSTOM_RDT_CLOSID']
        self.assertEqual((16, 2), (inv['total'], inv['reserved']))

    def test_closids_without_an_rmid_are_reserved(self):
        # 8 CLOSIDs, 7 free, but only 3 RMIDs left (other tools' monitoring
        # groups): a control group needs one of each, so 4 are reserved.
        capacity = fakes.fresh_capacity(fakes.REFERENCE, closids=7, rmids=3)
        placement.update_inventory(self.tree, NODE, fakes.REFERENCE,
                                   capacity, [])
        inv = self.tree.data(NODE).inventory['CUSTOM_RDT_CLOSID']
        self.assertEqual((8, 5), (inv['total'], inv['reserved']))

    def test_host_without_rdt(self):
        inv = self.update(caps=fakes.NONE, free=0)
        self.assertEqual({'VCPU'}, set(inv))
        # Inventory that allocations may still use is kept, all reserved.
        old = {'total': 8, 'reserved': 1, 'min_unit': 1, 'max_unit': 1,
               'step_size': 1, 'allocation_ratio': 1.0}
        inv = self.update(caps=fakes.NONE, free=0,
                          previous={'CUSTOM_RDT_CLOSID': old})
        self.assertEqual(dict(old, reserved=8), inv['CUSTOM_RDT_CLOSID'])


class TestFlavors(base.TestCase):

    def test_closids_of(self):
        rc = 'resources:CUSTOM_RDT_CLOSID'
        self.assertEqual(1, placement.closids_of(
            flavor(**{'hw:mem_bw': '10', rc: '1'})))
        self.assertEqual(0, placement.closids_of(
            flavor(**{'hw:mem_bw': '10'})))
        # What a consistent flavor could hold at most.
        self.assertEqual(0, placement.closids_of(flavor(**{rc: '1'})))
        self.assertEqual(1, placement.closids_of(
            flavor(**{'hw:mem_bw': '10', rc: '3'})))
        self.assertEqual(0, placement.closids_of(
            flavor(**{'hw:mem_bw': 'x', rc: '1'})))

    def test_check_flavor(self):
        instance = objects.Instance(uuid=UUID)
        placement.check_flavor(instance, flavor(**{'hw:mem_bw': '10'}))
        e = self.assertRaises(
            nova_exception.InstanceUnacceptable, placement.check_flavor,
            instance, flavor(**{'resources:CUSTOM_RDT_CLOSID': '1'}))
        self.assertIn('flavor rdt requests 1 CUSTOM_RDT_CLOSID, no hw: key '
                      'uses one (rdt-virt flavor-audit prints the fix)',
                      str(e))
        e = self.assertRaises(
            nova_exception.InstanceUnacceptable, placement.check_flavor,
            instance, flavor(**{'hw:mem_bw': '0'}))
        self.assertIn('hw:mem_bw', str(e))
