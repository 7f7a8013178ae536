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

"""The CMT/MBM counter model, with fake CPU time and clock."""

import errno

from rdt_virt.emulator import counters
from tests.unit.emulator import fakes

GIB = 1024 ** 3
MIB = 1024 ** 2
UNIT = 65536        # the reference host's counter unit
WAY = 3407872       # one L3 way of the reference host


def units(nbytes):
    return int(nbytes // UNIT * UNIT)


class CounterTestCase(fakes.ModelTestCase):

    def setUp(self):
        super().setUp()
        self.tree.mkdir('/g1')
        self.tree.mkdir('/g1/mon_groups/m1')

    def counter(self, group, dom, event='mbm_total_bytes'):
        prefix = '/' + group + '/' if group else '/'
        text = self.read('%smon_data/mon_L3_%02d/%s' % (prefix, dom, event))
        return int(text) if text.strip().isdigit() else text.strip()

    def busy(self, tid, seconds, cpu):
        self.threads.run(tid, seconds, cpu)
        self.clock.advance(seconds)


class ModelTest(CounterTestCase):

    def test_traffic_scaled_by_mb_throttle(self):
        self.write('/g1/schemata', 'MB:1=50\n')
        self.write('/g1/tasks', '100')
        self.busy(100, 1.0, cpu=1)
        self.assertEqual(GIB, self.counter('g1', 1))
        self.assertEqual(units(0.8 * GIB), self.counter('g1', 1,
                                                        'mbm_local_bytes'))
        # Domain 0 never saw the group's traffic: no value yet.
        self.assertEqual('Unavailable', self.counter('g1', 0))
        # The throttle applies from the write on, not to the past.
        self.write('/g1/schemata', 'MB:1=10\n')
        self.busy(100, 1.0, cpu=1)
        self.assertEqual(GIB + units(0.1 * 2 * GIB), self.counter('g1', 1))
        # CPU 0 is domain 0.
        self.busy(100, 0.5, cpu=0)
        self.assertEqual(units(0.5 * 2 * GIB), self.counter('g1', 0))

    def test_cpu_time_before_a_move_stays_with_the_old_group(self):
        self.busy(100, 1.0, cpu=0)
        self.write('/g1/tasks', '100')
        self.busy(100, 0.25, cpu=0)
        self.assertEqual(units(0.5 * GIB), self.counter('g1', 0))
        self.assertEqual(2 * GIB, self.counter('', 0))

    def test_a_move_looks_at_the_moved_threads_only(self):
        snapshots = []
        real = self.threads.snapshot
        self.threads.snapshot = lambda: snapshots.append(1) or real()
        self.write('/g1/tasks', '100,101')
        self.write('/g1/mon_groups/m1/tasks', '101')
        self.write('/tasks', '100')
        self.assertEqual([], snapshots)

    def test_the_past_of_each_move_stays_with_its_group(self):
        self.tree.mkdir('/g2')
        self.busy(100, 0.5, cpu=0)
        self.write('/g1/tasks', '100')
        self.busy(100, 0.25, cpu=0)
        self.write('/g1/mon_groups/m1/tasks', '100')
        self.busy(100, 0.125, cpu=1)
        self.write('/g2/tasks', '100')
        self.busy(100, 0.5, cpu=1)
        # No counter was read between the moves.
        self.assertEqual(GIB, self.counter('', 0))
        self.assertEqual(units(0.5 * GIB), self.counter('g1', 0))
        self.assertEqual(units(0.25 * GIB),
                         self.counter('g1/mon_groups/m1', 1))
        self.assertEqual(units(0.25 * GIB), self.counter('g1', 1))
        self.assertEqual(GIB, self.counter('g2', 1))

    def test_the_past_of_a_moved_thread_outlives_it(self):
        self.busy(100, 0.5, cpu=1)
        self.write('/g1/tasks', '100')
        self.threads.exit(100)
        self.assertEqual(GIB, self.counter('', 1))
        self.assertEqual('Unavailable', self.counter('g1', 1))

    def test_control_group_sums_its_mon_groups(self):
        self.write('/g1/tasks', '100,101')
        self.write('/g1/mon_groups/m1/tasks', '101')
        self.busy(100, 0.5, cpu=1)
        self.busy(101, 0.25, cpu=1)
        self.assertEqual(units(0.5 * GIB), self.counter('g1/mon_groups/m1',
                                                        1))
        self.assertEqual(GIB + units(0.5 * GIB), self.counter('g1', 1))
        self.assertEqual(self.counter('g1', 1),
                         self.model.counter_truth()['g1']['shown'][1][
                             'mbm_total_bytes'])

    def test_occupancy_bounded_by_mask_and_decaying(self):
        self.write('/g1/tasks', '100')
        self.busy(100, 0.125, cpu=1)             # footprint 8 MiB
        self.assertEqual(8 * MIB, self.counter('g1', 1, 'llc_occupancy'))
        self.write('/g1/schemata', 'L3:1=1\n')   # one way
        self.assertEqual(WAY, self.counter('g1', 1, 'llc_occupancy'))
        self.write('/g1/schemata', 'L3:1=7ff\n')
        self.clock.advance(2.0)                  # one half-life idle
        self.assertEqual(4 * MIB, self.counter('g1', 1, 'llc_occupancy'))
        self.busy(100, 10.0, cpu=1)
        self.assertEqual(11 * WAY, self.counter('g1', 1, 'llc_occupancy'))

    def test_default_group_tasks_use_the_cpu_owner(self):
        # Thread 100 stays in the default group; CPU 1 belongs to g1.
        self.tree.mkdir('/g2')
        self.write('/g1/cpus_list', '1')
        self.write('/g1/schemata', 'MB:1=50\n')
        self.busy(100, 1.0, cpu=1)
        self.assertEqual(GIB, self.counter('g1', 1))
        self.assertEqual(0, self.counter('', 1))
        self.busy(100, 1.0, cpu=0)
        self.assertEqual(2 * GIB, self.counter('', 0))
        # A monitoring group holding the CPU gets the RMID.
        self.write('/g1/mon_groups/m1/cpus_list', '1')
        self.busy(100, 0.5, cpu=1)
        self.assertEqual(units(0.5 * GIB), self.counter('g1/mon_groups/m1',
                                                        1))
        # A thread with its own group keeps it on any CPU.
        self.write('/g2/tasks', '101')
        self.busy(101, 0.5, cpu=1)
        self.assertEqual(GIB, self.counter('g2', 1))

    def test_new_threads_count_from_zero(self):
        self.write('/g1/tasks', '100')
        self.model.refresh()
        self.threads.add(200, tgid=100, cpu=1, cpu_ns=int(0.25e9))
        self.clock.advance(0.25)
        self.assertEqual(units(0.5 * GIB), self.counter('g1', 1))

    def test_recreated_group_starts_from_zero(self):
        self.write('/g1/tasks', '100')
        self.busy(100, 1.0, cpu=1)
        self.assertNotEqual(0, self.counter('g1', 1))
        self.tree.rmdir('/g1')
        self.tree.mkdir('/g1')
        # A new RMID that has not run reads Unavailable, then counts from
        # zero.
        self.assertEqual('Unavailable', self.counter('g1', 1))
        self.assertEqual('Unavailable',
                         self.counter('g1', 1, 'llc_occupancy'))
        self.write('/g1/tasks', '100')
        self.busy(100, 1.0, cpu=1)
        self.assertEqual(2 * GIB, self.counter('g1', 1))


class ProfileModelTest(CounterTestCase):

    profile = 'amd'

    def test_amd_units(self):
        # AMD's values are absolute: 8 units of 1/8 GB/s cap the group at
        # 1 GiB/s, half of what one busy CPU moves here.
        self.write('/g1/schemata', 'MB:0=8\n')
        self.write('/g1/tasks', '100')
        self.busy(100, 1.0, cpu=0)
        self.assertEqual(GIB, self.counter('g1', 0))
        # 2048, the hardware's unlimited value, does not throttle; 512
        # (64 GiB/s) is above the demand of one CPU.
        for value in (2048, 512):
            self.write('/g1/schemata', 'MB:0=%d\n' % value)
            before = self.counter('g1', 0)
            self.busy(100, 1.0, cpu=0)
            self.assertEqual(2 * GIB, self.counter('g1', 0) - before)

    def test_hardware_reset_reads_as_a_wrap(self):
        self.write('/g1/tasks', '100')
        self.write('/g1/mon_groups/m1/tasks', '100')
        self.busy(100, 1.0, cpu=0)
        m1 = 'g1/mon_groups/m1'
        self.assertEqual(2 * GIB, self.counter(m1, 0))
        self.model.counters.hardware_reset(self.model.find(m1), 2.0, dom=0)
        # Not tracked: Unavailable, and the traffic meanwhile is lost.
        self.busy(100, 1.0, cpu=0)
        self.assertEqual('Unavailable', self.counter(m1, 0))
        self.assertEqual('Unavailable', self.counter(m1, 0,
                                                     'mbm_local_bytes'))
        # Never run on domain 1, and g1's own RMID never ran at all.
        self.assertEqual('Unavailable', self.counter(m1, 1))
        self.assertEqual('Unavailable', self.counter('g1', 0))
        self.busy(100, 1.0, cpu=0)
        # Counting again from zero; the kernel, which kept the last raw
        # value, reads the restart as a wrap of the 44-bit counter.
        span = (1 << 44) * 64
        self.assertEqual(span + 2 * GIB, self.counter(m1, 0))
        self.assertEqual(span + 2 * GIB, self.counter('g1', 0))
        self.assertGreater(self.counter(m1, 0), 5e13)

    def test_unlimited_value_from_cpuid(self):
        self.model.remount('amd-mb4096')
        self.assertIn('MB:0=4096;1=4096', self.read('/schemata'))
        self.tree.mkdir('/g2')
        self.assertIn('MB:0=4096;1=4096', self.read('/g2/schemata'))
        self.assertEqual(
            'MB value 4097 out of range [0,4096]\n', self.assertFails(
                errno.EINVAL, self.write, '/g2/schemata',
                'MB:0=4097\n'))


class MbpsModelTest(CounterTestCase):

    profile = 'mba-mbps'

    def test_mbps_cap_applies_to_the_control_group(self):
        self.write('/g1/schemata', 'MB:1=100\n')
        self.write('/g1/tasks', '100,101')
        self.write('/g1/mon_groups/m1/tasks', '101')
        self.threads.run(100, 1.0, cpu=1)
        self.threads.run(101, 1.0, cpu=1)
        self.clock.advance(1.0)
        # 100 MBps for one second, shared by the group's two RMIDs.
        self.assertEqual(100 * MIB, self.counter('g1', 1))
        self.assertEqual(50 * MIB, self.counter('g1/mon_groups/m1', 1))


class InjectionTest(CounterTestCase):

    def test_value_rate_clear_reset(self):
        c = self.model.counters
        m1 = self.model.find('g1/mon_groups/m1')
        self.write('/g1/tasks', '100')
        self.write('/g1/mon_groups/m1/tasks', '100')
        c.inject_value(m1, 12345, 1, 'mbm_total_bytes')
        self.busy(100, 1.0, cpu=1)        # ignored while injected
        self.assertEqual(12345, self.counter('g1/mon_groups/m1', 1))
        # A constant rate is exact ground truth on the model clock.
        c.inject_rate(m1, 1000000, 1, 'mbm_total_bytes')
        self.busy(100, 2.5, cpu=1)
        self.assertEqual(12345 + 2500000,
                         self.counter('g1/mon_groups/m1', 1))
        # Domain 0 and the other events still follow the model.
        self.assertEqual(units(2 * GIB * 3.5 * 0.8), self.counter(
            'g1/mon_groups/m1', 1, 'mbm_local_bytes'))
        # Cleared: the model continues from the current value.
        c.clear(m1, 1, 'mbm_total_bytes')
        self.busy(100, 0.5, cpu=1)
        self.assertEqual(2512345 + GIB, self.counter('g1/mon_groups/m1', 1))
        # Reset zeroes every counter of the RMID.
        c.reset(m1)
        self.assertEqual(0, self.counter('g1/mon_groups/m1', 1))
        self.assertEqual(0, self.counter('g1/mon_groups/m1', 1,
                                         'llc_occupancy'))
        # An occupancy can be pinned too, and applies to all domains.
        c.inject_value(m1, 4096, event='llc_occupancy')
        self.assertEqual([4096, 4096], [
            self.counter('g1/mon_groups/m1', d, 'llc_occupancy')
            for d in (0, 1)])

    def test_sentinels(self):
        c = self.model.counters
        g1 = self.model.find('g1')
        m1 = self.model.find('g1/mon_groups/m1')
        c.inject_value(g1, 1000)
        c.inject_value(m1, 24)
        self.assertEqual(1024, self.counter('g1', 0))
        for sentinel in counters.SENTINELS:
            c.set_sentinel(m1, sentinel, 0, 'mbm_total_bytes')
            self.assertEqual(sentinel, self.counter('g1/mon_groups/m1', 0))
            # The control group counts what reads fine.
            self.assertEqual(1000, self.counter('g1', 0))
        # All fail: the file shows the last error read (its mon group's).
        c.set_sentinel(g1, 'Error', 0, 'mbm_total_bytes')
        self.assertEqual('Unassigned', self.counter('g1', 0))
        self.assertEqual(24, self.counter('g1/mon_groups/m1', 1))
        c.set_sentinel(m1, None)
        self.assertEqual(24, self.counter('g1', 0))
        c.clear(g1)
        self.assertRaises(ValueError, c.set_sentinel, g1, 'Bogus')

    def test_remount_keeps_root_counters(self):
        c = self.model.counters
        c.inject_value(self.model.root, 777, 0, 'mbm_total_bytes')
        self.model.remount()
        self.assertEqual(777, self.counter('', 0))
        self.assertNotIn('g1', self.tree.readdir('/'))
        self.model.remount('amd')   # other hardware: counters start over
        self.assertEqual(0, self.counter('', 0))


class HyperthreadTest(CounterTestCase):
    """thread_throttle_mode=max: a core runs at its threads' lowest MB."""

    cpus = (0, 1, 2, 3)    # domain 0: core {0, 1}; domain 1: core {2, 3}

    def test_core_runs_at_the_lowest_mb_of_its_threads(self):
        self.tree.mkdir('/g2')
        self.write('/g1/schemata', 'MB:0=10\n')
        self.write('/g1/tasks', '100')
        self.write('/g2/tasks', '101')
        # Alone on the core, g2 (MB 100) runs at full speed.
        self.threads.run(101, 1.0, cpu=1)
        self.clock.advance(1.0)
        self.assertEqual(2 * GIB, self.counter('g2', 0))
        # With g1 (MB 10) on the sibling, both run at 10%.
        self.threads.run(100, 1.0, cpu=0)
        self.threads.run(101, 1.0, cpu=1)
        self.clock.advance(1.0)
        self.assertEqual(units(2 * GIB * 0.1), self.counter('g1', 0))
        self.assertEqual(2 * GIB + units(2 * GIB * 0.1),
                         self.counter('g2', 0))
        # Another core is not affected.
        self.threads.run(100, 1.0, cpu=0)
        self.threads.run(101, 1.0, cpu=2)
        self.clock.advance(1.0)
        self.assertEqual(2 * GIB, self.counter('g2', 1))

    def test_per_thread_and_amd_are_independent(self):
        import dataclasses

        from rdt_virt.emulator import profiles
        per_thread = dataclasses.replace(
            profiles.REFERENCE, name='icx', mb=dataclasses.replace(
                profiles.REFERENCE.mb, throttle_mode='per-thread'))
        self.assertEqual({}, self.make_model(per_thread).counters.siblings)
        self.assertEqual({}, self.make_model('amd').counters.siblings)
        self.assertEqual({0: (1,), 1: (0,), 2: (3,), 3: (2,)},
                         self.model.counters.siblings)


class IdleGroupTest(CounterTestCase):

    def test_new_group_reads_unavailable_until_it_runs(self):
        # mon_event_count(): a new group "may report -EINVAL/Unavailable
        # if the monitor hasn't seen any traffic".
        for event in ('llc_occupancy', 'mbm_total_bytes',
                      'mbm_local_bytes'):
            self.assertEqual('Unavailable',
                             self.counter('g1/mon_groups/m1', 0, event))
        self.write('/g1/tasks', '100')
        self.write('/g1/mon_groups/m1/tasks', '100')
        self.busy(100, 1.0, cpu=0)
        self.assertEqual(2 * GIB, self.counter('g1/mon_groups/m1', 0))
        # The control group sums what reads; its own RMID never ran.
        self.assertEqual(2 * GIB, self.counter('g1', 0))
        self.assertEqual('Unavailable', self.counter('g1/mon_groups/m1', 1))

    def test_default_group_has_run(self):
        self.assertIsInstance(self.counter('', 0, 'llc_occupancy'), int)
