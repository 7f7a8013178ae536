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

"""The AET (package telemetry) and Arm MPAM profiles of the emulator."""

import errno
import os

import fixtures

from rdt_virt.emulator import fromtree
from rdt_virt.emulator import telemetry
from rdt_virt.resctrl import fs
from rdt_virt.resctrl import info
from tests.unit.emulator import fakes


class TestFixedPoint(fakes.base.TestCase):

    # (raw, bin_bits, text): print_event_value() of ctrlmondata.c.
    TABLE = [
        (0, 18, '0.000000'),
        (1 << 18, 18, '1.000000'),
        ((3 << 18) + (1 << 17), 18, '3.500000'),
        # 1/2^18 = 0.0000038147: rounded to nearest at 6 places.
        (1, 18, '0.000004'),
        ((1 << 18) - 1, 18, '0.999996'),
        (12345, 0, '12345.0'),
        (5, 2, '1.3'),      # 1.25 at one place, rounded to nearest: 1.3
        (7, 3, '0.9'),      # 0.875 -> 0.9
        (1, 10, '0.0010'),
    ]

    def test_print_event_value(self):
        for raw, bits, text in self.TABLE:
            self.assertEqual(text, telemetry.format_fixed(raw, bits),
                             (raw, bits))

    def test_decimal_places_as_the_kernel_table(self):
        # decplaces[] of fs/resctrl/ctrlmondata.c.
        table = [1, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 6, 6,
                 6, 7, 7, 7, 7, 8, 8, 8, 9]
        self.assertEqual(table, [telemetry.decimal_places(b)
                                 for b in range(28)])


class TestAet(fakes.ModelTestCase):

    profile = 'aet'

    def test_info(self):
        self.assertEqual('576\n', self.read('/info/PERF_PKG_MON/num_rmids'))
        self.assertEqual('1024\n', self.read('/info/L3_MON/num_rmids'))
        events = self.read('/info/PERF_PKG_MON/mon_features').split()
        self.assertEqual(['core_energy', 'activity'], events[:2])
        self.assertEqual(9, len(events))

    def test_capabilities_read_the_smallest_pool(self):
        caps = self._caps('aet')
        self.assertEqual(576, caps.num_rmids)
        self.assertEqual(1024, caps.monitor.num_rmids)
        self.assertEqual((0, 1), caps.package_monitor.domain_ids)

    def _caps(self, profile, kernel=None):
        # The rdt-virt reader on the emulator's files, as on a host.
        dest = self.useFixture(fixtures.TempDir()).path
        fromtree.render(profile, dest, kernel=kernel)
        root = os.path.join(dest, 'resctrl')
        release = os.path.join(dest, 'osrelease')
        with open(release, 'w') as f:
            f.write('7.1.0\n')
        return fs.Resctrl(root, mountinfo='/nonexistent',
                          osrelease=release).capabilities()

    def test_energy_follows_cpu_time(self):
        self.tree.mkdir('/g1')
        self.tree.mkdir('/g1/mon_groups/m1')
        path = '/g1/mon_groups/m1/mon_data/mon_PERF_PKG_00/'
        # An RMID that never ran has no valid data.
        self.assertEqual('Unavailable\n', self.read(path + 'core_energy'))
        self.write('/g1/tasks', '100\n')
        self.write('/g1/mon_groups/m1/tasks', '100\n')
        self.read(path + 'core_energy')
        self.threads.run(100, 2.0, cpu=0)
        self.clock.advance(2.0)
        # 2 CPU-seconds x 2.5 F x 0.64 V^2 = 3.2 J; the register holds
        # floor(3.2 x 2^18) = 838860, which prints as 3.199997.
        self.assertEqual('3.199997\n', self.read(path + 'core_energy'))
        self.assertEqual('5.000000\n', self.read(path + 'activity'))
        self.assertEqual('4400000000\n',
                         self.read(path + 'unhalted_core_cycles'))
        # The other package saw nothing of this RMID.
        self.assertEqual(
            'Unavailable\n',
            self.read('/g1/mon_groups/m1/mon_data/mon_PERF_PKG_01/'
                      'core_energy'))
        # The control group sums its mon groups.
        self.assertEqual('3.199997\n', self.read(
            '/g1/mon_data/mon_PERF_PKG_00/core_energy'))

    def test_energy_before_a_move_stays_with_the_old_rmid(self):
        self.tree.mkdir('/g1')
        self.model.refresh()
        self.threads.run(100, 2.0, cpu=0)
        self.clock.advance(2.0)
        self.write('/g1/tasks', '100\n')
        self.threads.run(100, 2.0, cpu=0)
        self.clock.advance(2.0)
        self.assertEqual('3.199997\n', self.read(
            '/g1/mon_data/mon_PERF_PKG_00/core_energy'))
        root = self.model.telemetry.truth(self.model.root.rmid, 0,
                                          'core_energy')
        self.assertEqual(3.2, float(root))

    def test_injected_rate(self):
        self.tree.mkdir('/g1')
        self.model.refresh()
        self.model.telemetry.inject_rate(self.model.find('g1').rmid, 1,
                                         'core_energy', 2.5)
        path = '/g1/mon_data/mon_PERF_PKG_01/core_energy'
        self.assertEqual('0.000000\n', self.read(path))
        self.clock.advance(4.0)
        self.assertEqual('10.000000\n', self.read(path))

    def test_a_reused_rmid_keeps_its_count(self):
        # Nothing resets the aggregators' counters: a new group on a
        # freed RMID starts where the old owner stopped.
        self.model.limbo_delay = 0
        self.tree.mkdir('/g1')
        rmid = self.model.find('g1').rmid
        self.model.telemetry.inject(rmid, 0, 'core_energy', 42.5)
        self.tree.rmdir('/g1')
        self.model.rmids.free.remove(rmid)
        self.model.rmids.free.appendleft(rmid)
        self.tree.mkdir('/g2')
        self.assertEqual(rmid, self.model.find('g2').rmid)
        self.assertEqual('42.500000\n', self.read(
            '/g2/mon_data/mon_PERF_PKG_00/core_energy'))

    def test_rmids_are_the_smallest_pool(self):
        # 576 RMIDs, not 1024: the 576th mkdir (with the root's) fails.
        self.model.limbo_delay = 0
        self.tree.mkdir('/g1')
        for i in range(574):
            self.tree.mkdir('/g1/mon_groups/m%d' % i)
        self.assertFails(errno.ENOSPC, self.tree.mkdir,
                         '/g1/mon_groups/last')

    def test_no_telemetry_before_7_0(self):
        m = self.make_model('aet', kernel='6.18')
        tree = fakes.tree.ResctrlTree(m)
        self.assertNotIn('PERF_PKG_MON', tree.readdir('/info'))
        self.assertEqual(['mon_L3_00', 'mon_L3_01'],
                         tree.readdir('/mon_data'))


class TestMpam(fakes.ModelTestCase):

    profile = 'mpam'

    def test_info(self):
        self.assertEqual('256\n', self.read('/info/L3_MON/num_rmids'))
        self.assertEqual('0\n', self.read('/info/MB/min_bandwidth'))
        self.assertEqual('1\n', self.read('/info/MB/bandwidth_gran'))
        self.assertEqual('1\n', self.read('/info/MB/delay_linear'))
        self.assertNotIn('thread_throttle_mode',
                         self.tree.readdir('/info/MB'))
        self.assertEqual('llc_occupancy\n',
                         self.read('/info/L3_MON/mon_features'))

    def test_per_closid_rmid_pools(self):
        # 4 PMGs per CLOSID: the group takes one, three monitoring groups
        # fit, the fourth gets ENOSPC with most RMIDs of the host free.
        self.model.limbo_delay = 0
        self.tree.mkdir('/g1')
        for i in range(3):
            self.tree.mkdir('/g1/mon_groups/m%d' % i)
        self.assertEqual('Out of RMIDs\n', self.assertFails(
            errno.ENOSPC, self.tree.mkdir, '/g1/mon_groups/m3'))
        # Another control group has its own pool.
        self.tree.mkdir('/g2')
        self.tree.mkdir('/g2/mon_groups/m0')
        # The default group too (PMG 0 is its own).
        for i in range(3):
            self.tree.mkdir('/mon_groups/r%d' % i)
        self.assertFails(errno.ENOSPC, self.tree.mkdir, '/mon_groups/r3')

    def test_moving_a_mon_group_to_another_closid(self):
        self.tree.mkdir('/g1')
        self.tree.mkdir('/g2')
        self.tree.mkdir('/g1/mon_groups/m0')
        self.assertEqual(
            'changing parent control group not supported\n',
            self.assertFails(errno.EOPNOTSUPP, self.tree.rename,
                             '/g1/mon_groups/m0', '/g2/mon_groups/m0'))

    def test_mb_rounded_to_bands(self):
        self.tree.mkdir('/g1')
        self.write('/g1/schemata', 'MB:0=15;1=0\n')
        self.assertIn('MB:0=15;1=0', self.read('/g1/schemata'))
        self.assertWriteFails(errno.EINVAL,
                              'MB value 101 out of range [0,100]\n',
                              '/g1/schemata', 'MB:0=101\n')

    def test_cdp_emulation(self):
        m = self.make_model(fakes.model.profiles.dataclasses.replace(
            fakes.model.profiles.MPAM, cdp=True))
        tree = fakes.tree.ResctrlTree(m)
        info = tree.readdir('/info')
        self.assertIn('L3CODE', info)
        # MBW_MAX cannot hide CDP's two PARTIDs: MB is gone.
        self.assertNotIn('MB', info)
        self.assertEqual('32\n', tree.read('/info/L3CODE/num_closids'))
        self.assertEqual('128\n', tree.read('/info/L3_MON/num_rmids'))

    def test_capabilities(self):
        caps = TestAet._caps(self, 'mpam')
        self.assertEqual(info.ARCH_MPAM, caps.arch)
        self.assertEqual(info.UNIT_PERCENT, caps.mb.unit)
        self.assertEqual(4, caps.rmids_per_closid)

    def test_no_resctrl_before_7_1(self):
        m = self.make_model('mpam', kernel='7.0')
        tree = fakes.tree.ResctrlTree(m)
        self.assertEqual(['last_cmd_status'], tree.readdir('/info'))
