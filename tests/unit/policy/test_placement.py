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

from rdt_virt import exception
from rdt_virt.policy import placement
from tests import base

RC = 'resources:CUSTOM_RDT_CLOSID'


class TestExpected(base.TestCase):

    def test_keys_per_policy(self):
        cases = [
            ({}, {}),
            ({'hw:rdt_monitor': 'true'}, {}),
            ({'hw:mem_bw': '10'},
             {RC: '1', 'trait:CUSTOM_RDT_MBA': 'required'}),
            ({'hw:mem_bw_mbps': '1000'},
             {RC: '1', 'trait:CUSTOM_RDT_MBA': 'required'}),
            ({'hw:cache_l3': '4096', 'hw:mem_bw': '20'},
             {RC: '1', 'trait:CUSTOM_RDT_L3_CAT': 'required',
              'trait:CUSTOM_RDT_MBA': 'required'}),
            ({'hw:cache_l3_code': '1024', 'hw:cache_l3_data': '1024'},
             {RC: '1', 'trait:CUSTOM_RDT_L3_CDP': 'required'}),
            # high needs MBA; without a cap the instance holds no
            # CLOSID of its own (the agent's groups are reserved).
            ({'hw:rdt_priority': 'high'},
             {'trait:CUSTOM_RDT_MBA': 'required'}),
            # low needs nothing of a host, only what its cap needs.
            ({'hw:rdt_priority': 'low'}, {}),
            ({'hw:rdt_priority': 'low', 'hw:mem_bw': '30'},
             {RC: '1', 'trait:CUSTOM_RDT_MBA': 'required'}),
            ({'hw:rdt_priority': 'normal'}, {}),
        ]
        for specs, keys in cases:
            self.assertEqual(keys, placement.audit(specs).set, specs)
            self.assertEqual(keys, placement.expected(
                placement.es.from_extra_specs(specs)))


class TestAudit(base.TestCase):

    def test_complete_flavor_is_ok(self):
        result = placement.audit({'hw:mem_bw': '10', RC: '1',
                                  'trait:CUSTOM_RDT_MBA': 'required'})
        self.assertTrue(result.ok)
        self.assertEqual((), result.conflicts)

    def test_granular_group_counts(self):
        result = placement.audit({'hw:mem_bw': '10',
                                  'resources1:CUSTOM_RDT_CLOSID': '1',
                                  'trait1:CUSTOM_RDT_MBA': 'required'})
        self.assertTrue(result.ok)

    def test_missing_keys_are_no_conflict(self):
        result = placement.audit({'hw:cache_l3': '4096'})
        self.assertFalse(result.ok)
        self.assertEqual((), result.conflicts)
        self.assertEqual(
            ['openstack flavor set --property '
             'resources:CUSTOM_RDT_CLOSID=1 --property '
             'trait:CUSTOM_RDT_L3_CAT=required \'m1 rdt\''],
            placement.fix_commands('m1 rdt', result))

    def test_kind_of_each_finding(self):
        cases = [
            # Nothing of Placement: RDTFilter alone places it.
            ({'hw:mem_bw': '10'}, placement.FILTER_ONLY),
            # Its CLOSID from Placement, a trait missing.
            ({'hw:mem_bw': '10', RC: '1'}, placement.PLACEMENT_INCOMPLETE),
            # A trait but not its CLOSID.
            ({'hw:cache_l3': '4096',
              'trait:CUSTOM_RDT_L3_CAT': 'required'},
             placement.PLACEMENT_INCOMPLETE),
            ({'hw:mem_bw': '10', RC: '2'}, placement.CONFLICTING),
            ({'hw:mem_bw': '10', RC: '1', 'trait:CUSTOM_RDT_MBA':
              'forbidden'}, placement.CONFLICTING),
        ]
        for specs, kind in cases:
            result = placement.audit(specs)
            self.assertFalse(result.ok, specs)
            self.assertEqual(kind, result.kind, specs)

    def test_conflicts(self):
        cases = [
            # A CLOSID Placement would not count.
            ({'hw:mem_bw': '10', RC: '0'}, {RC: '1'}, ()),
            # Two for one group.
            ({'hw:mem_bw': '10', RC: '2'}, {RC: '1'}, ()),
            ({'hw:mem_bw': '10', RC: '1', 'resources2:CUSTOM_RDT_CLOSID': '1'},
             {RC: '1'}, ('resources2:CUSTOM_RDT_CLOSID',)),
            # A CLOSID nothing uses.
            ({RC: '1'}, {}, (RC,)),
            ({'hw:rdt_monitor': 'true', RC: '1'}, {}, (RC,)),
            ({'hw:mem_bw': '10', RC: 'one'}, {RC: '1'}, ()),
        ]
        for specs, to_set, to_unset in cases:
            specs.setdefault('trait:CUSTOM_RDT_MBA', 'required')
            result = placement.audit(specs)
            self.assertEqual(1, len(result.conflicts), specs)
            self.assertEqual(to_set, result.set, specs)
            self.assertEqual(to_unset, result.unset, specs)

    def test_forbidden_trait_the_policy_needs(self):
        result = placement.audit({'hw:mem_bw': '10', RC: '1',
                                  'trait:CUSTOM_RDT_MBA': 'forbidden'})
        self.assertEqual(1, len(result.conflicts))
        self.assertIn('CUSTOM_RDT_MBA', result.conflicts[0])
        self.assertEqual({'trait:CUSTOM_RDT_MBA': 'required'}, result.set)
        # A trait the policy does not need may be anything.
        self.assertTrue(placement.audit({'hw:mem_bw': '10', RC: '1',
                                         'trait:CUSTOM_RDT_MBA': 'required',
                                         'trait:CUSTOM_RDT_L3_CDP':
                                         'forbidden'}).ok)

    def test_unset_and_set_commands(self):
        result = placement.audit({'hw:rdt_monitor': 'true', RC: '1'})
        self.assertEqual(
            ['openstack flavor unset --property resources:CUSTOM_RDT_CLOSID '
             'mon'], placement.fix_commands('mon', result))

    def test_forbidding_mba_contradicts_high_not_low(self):
        result = placement.audit({'hw:rdt_priority': 'high',
                                  'trait:CUSTOM_RDT_MBA': 'forbidden'})
        self.assertEqual(('forbids trait CUSTOM_RDT_MBA, its hw: keys need '
                          'it',), result.conflicts)
        # A low flavor kept off hosts with MBA is the operator's choice.
        result = placement.audit({'hw:rdt_priority': 'low',
                                  'trait:CUSTOM_RDT_MBA': 'forbidden'})
        self.assertTrue(result.ok)
        self.assertEqual((), result.conflicts)
        self.assertEqual({}, result.unneeded)
        # Not with a cap, which needs MBA.
        result = placement.audit({'hw:rdt_priority': 'low',
                                  'hw:mem_bw': '30', RC: '1',
                                  'trait:CUSTOM_RDT_MBA': 'forbidden'})
        self.assertEqual(('forbids trait CUSTOM_RDT_MBA, its hw: keys need '
                          'it',), result.conflicts)

    def test_mba_on_a_low_flavor_is_ok_and_unneeded(self):
        # What earlier releases asked for: still accepted.
        for key in ('trait:CUSTOM_RDT_MBA', 'trait1:CUSTOM_RDT_MBA'):
            result = placement.audit({'hw:rdt_priority': 'low',
                                      key: 'required'})
            self.assertTrue(result.ok)
            self.assertEqual((), result.conflicts)
            self.assertEqual([key], list(result.unneeded))
            self.assertIn('hw:rdt_priority=low runs on hosts without MBA '
                          'too', result.unneeded[key])
            self.assertEqual(
                ['openstack flavor unset --property %s batch' % key],
                placement.unneeded_commands('batch', result))
            self.assertEqual([], placement.fix_commands('batch', result))

    def test_mba_is_needed_by_high_and_by_caps(self):
        for specs in ({'hw:rdt_priority': 'high'},
                      {'hw:rdt_priority': 'low', 'hw:mem_bw': '30', RC: '1'},
                      {'hw:rdt_priority': 'low', 'hw:mem_bw_mbps': '300',
                       RC: '1'},
                      {'hw:mem_bw': '30', RC: '1'}):
            result = placement.audit(dict(specs, **{
                'trait:CUSTOM_RDT_MBA': 'required'}))
            self.assertTrue(result.ok, specs)
            self.assertEqual({}, result.unneeded, specs)
            self.assertEqual([], placement.unneeded_commands('f', result))
        # Other traits an operator requires stay theirs.
        result = placement.audit({'hw:rdt_priority': 'low',
                                  'trait:CUSTOM_RDT_MBM_TOTAL': 'required'})
        self.assertEqual({}, result.unneeded)

    def test_invalid_hw_keys_raise(self):
        self.assertRaises(exception.InvalidExtraSpec, placement.audit,
                          {'hw:mem_bw': '0', RC: '1'})


class TestInventory(base.TestCase):

    def test_reserved_is_what_allocations_do_not_cover(self):
        # 8 CLOSIDs; default group + 2 foreign groups + 3 instances, 2 of
        # them with Placement allocations.
        inv = placement.inventory(8, 6, 2)
        self.assertEqual({'total': 8, 'reserved': 4, 'min_unit': 1,
                          'max_unit': 1, 'step_size': 1,
                          'allocation_ratio': 1.0}, inv)

    def test_bounds(self):
        self.assertIsNone(placement.inventory(0, 0, 0))
        # More allocations than groups (instances sharing a group).
        self.assertEqual(0, placement.inventory(8, 2, 5)['reserved'])
        self.assertEqual(8, placement.inventory(8, 12, 0)['reserved'])
