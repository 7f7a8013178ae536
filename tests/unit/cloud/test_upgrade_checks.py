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

"""The upgrade's checks on records read before and during a step."""

from rdt_virt.cloud import upgrade_checks as checks
from tests import base


class TestStates(base.TestCase):

    BEFORE = {'high': ('ACTIVE', 'compute1'), 'cache': ('ACTIVE',
                                                        'compute2')}

    def test_unchanged(self):
        self.assertEqual([], checks.changed_states(self.BEFORE,
                                                   dict(self.BEFORE)))

    def test_a_status_a_host_or_a_server_changed(self):
        after = {'high': ('SHUTOFF', 'compute1')}
        self.assertEqual(['cache is gone',
                          'high went from ACTIVE to SHUTOFF'],
                         checks.changed_states(self.BEFORE, after))
        after = {'high': ('ACTIVE', 'compute2'),
                 'cache': ('ACTIVE', 'compute2')}
        self.assertEqual(['high moved from compute1 to compute2'],
                         checks.changed_states(self.BEFORE, after))

    def test_a_server_moved_on_purpose_may_change_host_only(self):
        after = {'high': ('ACTIVE', 'compute2'),
                 'cache': ('ACTIVE', 'compute2')}
        self.assertEqual([], checks.changed_states(self.BEFORE, after,
                                                   moved=['high']))
        after['high'] = ('ERROR', 'compute2')
        self.assertEqual(['high went from ACTIVE to ERROR'],
                         checks.changed_states(self.BEFORE, after,
                                               moved=['high']))


class TestThreads(base.TestCase):

    BASE = {'compute1': {'101': 'qemu-1-instance-1-vcpus_0',
                         '102': 'rdtvirt-low-0'},
            'compute2': {'201': 'qemu-2-instance-2-vcpus_0'}}

    def test_threads_that_stay_pass(self):
        samples = [(0.5, self.BASE), (1.5, dict(self.BASE))]
        self.assertEqual([], checks.thread_moves(self.BASE, samples))

    def test_a_thread_seen_elsewhere_once_fails_with_when(self):
        moved = {'compute1': {'101': 'qemu-1-instance-1-vcpus_0'},
                 'compute2': self.BASE['compute2']}
        samples = [(0.5, self.BASE), (1.5, moved), (2.5, moved),
                   (3.5, self.BASE)]
        self.assertEqual(['compute1: thread 102 of rdtvirt-low-0 seen in '
                          'the default group at 1.5 s'],
                         checks.thread_moves(self.BASE, samples))

    def test_hosts_left_on_purpose_or_not_sampled_are_not_checked(self):
        samples = [(1.0, {'compute2': {}})]
        self.assertEqual([], checks.thread_moves(self.BASE, samples,
                                                 left=['compute2']))

    def test_live_threads_drop_ended_ones(self):
        self.assertEqual({'compute1': {'101': 'qemu-1-instance-1-vcpus_0'},
                          'compute2': {}},
                         checks.live_threads(self.BASE, {'compute1': {'101'}}))


class TestSchemata(base.TestCase):

    BEFORE = {'compute1': {'qemu-1': 'L3:0=7f0\nMB:0=10\n',
                           'rdtvirt-low-0': 'MB:0=40\n'}}

    def test_same_lines_in_another_order_pass(self):
        after = {'compute1': {'qemu-1': 'MB:0=10\nL3:0=7f0',
                              'rdtvirt-low-0': 'MB:0=40\n'}}
        self.assertEqual([], checks.changed_schemata(self.BEFORE, after))

    def test_changed_gone_and_new_groups(self):
        after = {'compute1': {'qemu-1': 'L3:0=7ff\nMB:0=10\n',
                              'qemu-9': 'L3:0=1\n'}}
        self.assertEqual(
            ["compute1: qemu-1 changed from 'L3:0=7f0\\nMB:0=10' to "
             "'L3:0=7ff\\nMB:0=10'", 'compute1: qemu-9 appeared',
             'compute1: rdtvirt-low-0 is gone'],
            checks.changed_schemata(self.BEFORE, after))

    def test_groups_left_out_are_not_compared(self):
        after = {'compute1': {'qemu-1': 'L3:0=7f0\nMB:0=10\n',
                              'rdtvirt-low-0': 'MB:0=10\n'}}
        self.assertEqual([], checks.changed_schemata(
            self.BEFORE, after, keep=lambda g: g.startswith('qemu-')))


class TestAllocations(base.TestCase):

    BEFORE = {'cache': {'compute2': {'CUSTOM_RDT_CLOSID': 1, 'VCPU': 1}}}

    def test_unchanged_and_changed(self):
        self.assertEqual([], checks.changed_allocations(
            self.BEFORE, {'cache': {'compute2': {'CUSTOM_RDT_CLOSID': 1,
                                                 'VCPU': 1}}}))
        self.assertEqual(['cache has no allocation'],
                         checks.changed_allocations(self.BEFORE, {}))
        changed = checks.changed_allocations(
            self.BEFORE, {'cache': {'compute2': {'VCPU': 1}}})
        self.assertEqual(1, len(changed))
        self.assertIn('became', changed[0])

    def test_a_moved_server_keeps_its_amounts_on_another_host(self):
        after = {'cache': {'compute1': {'CUSTOM_RDT_CLOSID': 1, 'VCPU': 1}}}
        self.assertEqual([], checks.changed_allocations(
            self.BEFORE, after, moved=['cache']))
        self.assertNotEqual([], checks.changed_allocations(self.BEFORE,
                                                           after))


class TestGaps(base.TestCase):

    def test_the_largest_gap_counts_the_window_edges(self):
        self.assertEqual(4, checks.largest_gap([2, 4, 6, 10], 0, 10))
        self.assertEqual(5, checks.largest_gap([5], 0, 8))
        self.assertEqual(10, checks.largest_gap([], 0, 10))
        self.assertEqual(3, checks.largest_gap([-5, 3, 20], 0, 5))

    def test_order_does_not_matter(self):
        self.assertEqual(4, checks.largest_gap([10, 6, 2, 4], 0, 10))

    def test_series_over_the_limit(self):
        measured, over = checks.gaps({'a': [0, 5, 10], 'b': [0, 10]}, 0, 10,
                                     limit=6)
        self.assertEqual({'a': 5, 'b': 10}, measured)
        self.assertEqual(['b: no point for 10 s (at most 6 s)'], over)


class TestByLabel(base.TestCase):

    def test_a_servers_series_become_one_timeline(self):
        series = [({'__name__': 'a', 'resource': 'u1'}, [5.0, 10.0]),
                  ({'__name__': 'b', 'resource': 'u1'}, [10.0, 15.0]),
                  ({'__name__': 'a', 'resource': 'u2'}, [5.0]),
                  ({'__name__': 'up'}, [5.0])]
        self.assertEqual({'u1': [5.0, 10.0, 15.0], 'u2': [5.0]},
                         checks.by_label(series, 'resource'))


class TestWithoutValues(base.TestCase):

    @staticmethod
    def monitored(uuid, points, host='compute1'):
        return ({'__name__': 'rdt_virt_instance_monitored',
                 'instance_uuid': uuid, 'fqdn': host}, points)

    def test_the_last_reading_before_the_step_counts(self):
        series = [self.monitored('idle', [(0.0, 1.0), (5.0, 0.0)]),
                  self.monitored('busy', [(0.0, 0.0), (5.0, 1.0)]),
                  self.monitored('later', [(5.0, 1.0), (15.0, 0.0)])]
        self.assertEqual({'idle'}, checks.without_values(series, 10.0))

    def test_a_moved_server_is_judged_on_its_new_host(self):
        # The old host's series stops with the move, the new one's goes on.
        series = [self.monitored('moved', [(0.0, 1.0), (5.0, 1.0)]),
                  self.monitored('moved', [(6.0, 0.0), (11.0, 0.0)],
                                 host='compute2'),
                  self.monitored('back', [(0.0, 0.0), (5.0, 0.0)]),
                  self.monitored('back', [(6.0, 1.0)], host='compute2')]
        self.assertEqual({'moved'}, checks.without_values(series, 12.0))

    def test_series_without_a_server_are_left_out(self):
        self.assertEqual(set(), checks.without_values(
            [({'__name__': 'rdt_virt_instance_monitored'}, [(0.0, 0.0)])],
            10.0))
        self.assertEqual(set(), checks.without_values([], 10.0))


class TestRates(base.TestCase):

    def test_rates_between_samples(self):
        self.assertEqual([(2.0, 5.0), (4.0, 5.0)],
                         checks.rates([(0.0, 0), (2.0, 10), (4.0, 20)]))

    def test_unread_and_restarted_counts_are_skipped(self):
        self.assertEqual([(4.0, 2.5)],
                         checks.rates([(0.0, 0), (2.0, None), (4.0, 10),
                                       (6.0, 3)]))

    def test_window_rate(self):
        samples = [(0.0, 0), (5.0, 50), (10.0, 60), (15.0, 110)]
        self.assertEqual(6.0, checks.window_rate(samples, 4.0, 16.0))
        self.assertIsNone(checks.window_rate(samples, 4.0, 6.0))
        self.assertIsNone(checks.window_rate([(0, 5), (1, 1)], 0, 1))

    def test_window_rates(self):
        samples = [(float(t), 2 * t) for t in range(0, 31, 5)]
        self.assertEqual([2.0, 2.0, 2.0],
                         checks.window_rates(samples, 0.0, 30.0, 10.0))
        # A last window shorter than half a width is left out.
        self.assertEqual([2.0, 2.0],
                         checks.window_rates(samples, 0.0, 24.0, 10.0))
        self.assertEqual([], checks.window_rates([], 0.0, 30.0, 10.0))

    def test_usage_no_server_holds(self):
        allocations = {
            'high': {'compute1': {'VCPU': 1, 'CUSTOM_RDT_CLOSID': 1}},
            'low-1': {'compute2': {'VCPU': 1, 'MEMORY_MB': 64}}}
        usages = {'compute1': {'VCPU': 1, 'CUSTOM_RDT_CLOSID': 1,
                               'MEMORY_MB': 0},
                  'compute2': {'VCPU': 1, 'MEMORY_MB': 64}}
        self.assertEqual([], checks.unowned_usage(usages, allocations))
        # low-1's live migration left its source allocation on compute1.
        usages['compute1'].update(VCPU=2, MEMORY_MB=64)
        self.assertEqual(['compute1: usage MEMORY_MB +64, VCPU +1 that no '
                          'server holds'],
                         checks.unowned_usage(usages, allocations))

    def test_a_timeline_puts_each_window_beside_the_steps_actions(self):
        # 2 units/s, then 1 from t=110: the window from 110 fell.
        samples = [(float(t), 2 * t if t <= 110 else 220 + (t - 110))
                   for t in range(100, 141, 5)]
        found = checks.windows(samples, 100.0, 140.0, 10.0)
        self.assertEqual([(100.0, 2.0), (110.0, 1.0), (120.0, 1.0),
                          (130.0, 1.0)], found)
        self.assertEqual(
            '0: 20.00, 10: 10.00, 20: 10.00, 30: 10.00; 9: low-1 migrates, '
            '31: moved',
            checks.timeline(found, [(109.5, 'low-1 migrates'),
                                    (131.0, 'moved')], 100.0,
                            lambda r: 10 * r))
        self.assertEqual('', checks.timeline([], [], 0.0, float))

    def test_rate_floor_is_the_lowest_less_the_spread(self):
        self.assertEqual(5.0, checks.rate_floor([6.0, 6.5, 7.0]))
        self.assertEqual(6.0, checks.rate_floor([6.0]))
        # A noisier baseline allows a lower window.
        self.assertLess(checks.rate_floor([5.0, 7.0]),
                        checks.rate_floor([5.0, 5.5]))

    def test_rate_drop(self):
        self.assertEqual([], checks.rate_drop(10.0, 9.5))
        self.assertEqual(1, len(checks.rate_drop(9.0, 9.5)))
        self.assertEqual(['the protected server reported no work'],
                         checks.rate_drop(None, 9.5))


class TestFirstTick(base.TestCase):

    def test_the_first_reading_with_a_tick(self):
        self.assertEqual((0, True), checks.first_tick_writes(
            [None, (0, 0), (1, 0), (2, 3)]))
        self.assertEqual((3, False), checks.first_tick_writes(
            [None, (0, 0), (2, 3)]))
        self.assertEqual((None, False), checks.first_tick_writes(
            [None, (0, 0)]))
