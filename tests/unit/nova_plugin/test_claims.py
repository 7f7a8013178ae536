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

from nova_plugin.virt import claims
from rdt_virt import exception
from rdt_virt.policy import capacity
from rdt_virt.policy import extra_specs as es
from rdt_virt.policy import fit
from tests import base
from tests.unit.nova_plugin import fakes

PREFIX = 'rdtvirt-'
UUID1 = '11111111-1111-4111-8111-111111111111'
UUID2 = '22222222-2222-4222-8222-222222222222'


def plan(strategy='per-instance', **policy):
    return fit.fit(es.RDTPolicy(**policy), fakes.REFERENCE, strategy)


def claim(uuid=UUID1, name='instance-00000001', **policy):
    return claims.Claim(uuid, name, plan(**policy))


class TestAvailable(base.TestCase):

    def setUp(self):
        super().setUp()
        self.free = fakes.fresh_capacity(fakes.REFERENCE, free_ways=0x0f0,
                                         closids=3)

    def test_unrealized_claims_are_subtracted(self):
        left = claims.available(self.free, [claim(mem_bw=10)], [], PREFIX)
        self.assertEqual(2, left.free_closids)
        self.assertEqual(self.free.free_rmids - 1, left.free_rmids)

    def test_group_libvirt_created_is_not_counted_twice(self):
        groups = ['qemu-7-instance-00000001-vcpus_0-1']
        running = {UUID1: 'qemu-7-instance-00000001'}
        left = claims.available(self.free, [claim(mem_bw=10)], groups,
                                PREFIX, machines=running)
        self.assertEqual(3, left.free_closids)
        # A different domain's group does not realize the claim.
        left = claims.available(self.free, [claim(mem_bw=10)],
                                ['qemu-7-instance-00000011-vcpus_0-1'],
                                PREFIX, machines=running)
        self.assertEqual(2, left.free_closids)
        # Nor does a group of the same name left from an earlier start.
        left = claims.available(self.free, [claim(mem_bw=10)], groups,
                                PREFIX,
                                machines={UUID1: 'qemu-9-instance-00000001'})
        self.assertEqual(2, left.free_closids)
        # Nor one while the domain is not running.
        left = claims.available(self.free, [claim(mem_bw=10)], groups,
                                PREFIX)
        self.assertEqual(2, left.free_closids)

    def test_names_sharing_a_prefix(self):
        # instance_name_template names longer than 20 characters used to
        # look alike; libvirt 9 keeps the whole name.
        first = claims.Claim(UUID1, 'cloud-a-instance-00000001',
                             plan(mem_bw=10))
        second = claims.Claim(UUID2, 'cloud-a-instance-00000002',
                              plan(mem_bw=10))
        running = {UUID1: claims.machine_name(3, first.name)}
        left = claims.available(
            self.free, [first, second],
            ['qemu-3-cloud-a-instance-00000001-vcpus_0-1'], PREFIX,
            machines=running)
        self.assertEqual(2, left.free_closids)

    def test_previous_claim_is_never_present(self):
        # A same-host resize: the group of the new flavor is the
        # instance's, but the old claim still needs its own CLOSID.
        old = claim(mem_bw=10)
        new = claim(cache_l3=4096)
        left = claims.available(
            self.free, [new], ['qemu-8-instance-00000001-vcpus_0-1'],
            PREFIX, machines={UUID1: 'qemu-8-instance-00000001'},
            previous=[old])
        self.assertEqual(2, left.free_closids)

    def test_machine_name(self):
        # The cases of libvirt's own virsystemdtest.
        for dom_id, name, expected in (
                (1, 'demo', 'qemu-1-demo'),
                (3, 'demo!name', 'qemu-3-demoname'),
                (4, '.demo', 'qemu-4-demo'),
                (6, 'demo..name', 'qemu-6-demo.name'),
                (7, '1234567890' * 6,
                 'qemu-7-' + ('1234567890' * 6)[:57]),
                (100, 'kstest-network-device-default-httpks_'
                      '(c9eed63e-981e-48ec-acdc-56b3f8c5f678)',
                 'qemu-100-kstest-network-device-default-httpksc9eed63e-'
                 '981e-48ec')):
            self.assertEqual(expected, claims.machine_name(dom_id, name))

    def test_agent_instance_group(self):
        caps = fakes.MBPS
        free = fakes.fresh_capacity(caps, closids=3)
        mbps = claims.Claim(UUID1, 'instance-00000001', fit.fit(
            es.RDTPolicy(mem_bw_mbps=1000), caps))
        self.assertEqual(2, claims.available(free, [mbps], [], PREFIX)
                         .free_closids)
        self.assertEqual(3, claims.available(
            free, [mbps], ['rdtvirt-i-' + UUID1], PREFIX).free_closids)

    def test_shared_group(self):
        shared = claims.Claim(UUID1, 'instance-00000001',
                              plan('shared', mem_bw=10))
        left = claims.available(self.free, [shared], [], PREFIX)
        self.assertEqual(2, left.free_closids)
        self.assertEqual(frozenset([10]), left.shared_groups)
        # A second instance at 10% joins the same group.
        other = dataclasses.replace(shared, uuid=UUID2)
        left = claims.available(self.free, [shared, other], [], PREFIX)
        self.assertEqual(2, left.free_closids)
        existing = dataclasses.replace(self.free,
                                       shared_groups=frozenset([10]))
        self.assertEqual(3, claims.available(existing, [shared], [],
                                             PREFIX).free_closids)

    def test_cache_ways(self):
        # 4096 KiB is 2 ways; 4 contiguous ways are free.
        first = claim(cache_l3=4096)
        second = claim(UUID2, 'instance-00000002', cache_l3=4096)
        left = claims.available(self.free, [first, second], [], PREFIX)
        self.assertEqual({0: 0, 1: 0}, left.free_masks['L3'])
        self.assertEqual(1, left.free_closids)

    def test_overcommitted_claims_still_count(self):
        # Three claims for two free ways (an operator took ways away after
        # the claims were made): whatever is left is gone, nothing raises.
        held = [claim(cache_l3=4096),
                claim(UUID2, 'instance-00000002', cache_l3=4096),
                claim('33333333-3333-4333-8333-333333333333',
                      'instance-00000003', cache_l3=4096)]
        free = dataclasses.replace(self.free, free_closids=2)
        left = claims.available(free, held, [], PREFIX)
        self.assertEqual(0, left.free_closids)
        self.assertEqual({0: 0, 1: 0}, left.free_masks['L3'])
        self.assertRaises(exception.CapacityExhausted, left.check,
                          plan(mem_bw=10))

    def test_consume_without_ways_zeroes_the_domain(self):
        free = dataclasses.replace(
            self.free, free_masks={'L3': {0: 0b1, 1: 0xff}})
        left = capacity.consume(free, plan(cache_l3=4096))
        self.assertEqual(0, left.free_masks['L3'][0])
        self.assertEqual(0xff & ~0b11, left.free_masks['L3'][1])


class TestClaims(base.TestCase):

    def test_lifecycle(self):
        table = claims.Claims()
        first = claim(mem_bw=10)
        table.add(first)
        self.assertIs(first, table.get(UUID1))
        # Same-host resize keeps the old claim aside.
        new = claim(mem_bw=20)
        table.add(new, keep_previous=True)
        self.assertIs(new, table.get(UUID1))
        self.assertTrue(table.has_previous(UUID1))
        self.assertEqual(2, len(table))
        self.assertCountEqual([first, new], table.all())
        # Revert: the new claim is released, the old one is back.
        self.assertIs(new, table.release(UUID1))
        self.assertIs(first, table.restore_previous(UUID1))
        self.assertIs(first, table.get(UUID1))
        self.assertEqual(1, len(table))
        # Confirm of another resize: the old claim goes.
        table.add(new, keep_previous=True)
        self.assertIs(first, table.release_previous(UUID1))
        self.assertEqual([new], table.all())
        self.assertIsNone(table.release(UUID2))
        self.assertIsNone(table.restore_previous(UUID1))

    def test_add_replaces_without_keeping(self):
        table = claims.Claims()
        table.add(claim(mem_bw=10))
        table.add(claim(mem_bw=20))
        self.assertEqual(1, len(table))
        self.assertEqual(20, table.get(UUID1).plan.mem_bw.value)


class TestCapacityIsImmutable(base.TestCase):

    def test_available_does_not_change_its_input(self):
        free = fakes.fresh_capacity(fakes.REFERENCE)
        before = dataclasses.replace(free)
        claims.available(free, [claim(cache_l3=4096)], [], PREFIX)
        self.assertEqual(before, free)
        self.assertIsInstance(free, capacity.Capacity)
