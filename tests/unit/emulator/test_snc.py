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

"""Sub-NUMA Clustering (6.11): monitoring per node under each L3."""

import dataclasses
import errno

from rdt_virt.emulator import profiles
from tests.unit.emulator import fakes

GIB = 1024 ** 3


class SncTest(fakes.ModelTestCase):

    profile = 'snc2'
    cpus = (0, 1, 2, 3)

    def test_layout_and_sums(self):
        self.assertEqual('96\n', self.read('/info/L3_MON/num_rmids'))
        self.assertEqual(['mon_L3_00', 'mon_L3_01'],
                         self.tree.readdir('/mon_data'))
        self.assertEqual(['llc_occupancy', 'mbm_total_bytes',
                          'mbm_local_bytes', 'mon_sub_L3_00',
                          'mon_sub_L3_01'],
                         self.tree.readdir('/mon_data/mon_L3_00'))
        self.assertEqual(['mon_sub_L3_02', 'mon_sub_L3_03'],
                         self.tree.readdir('/mon_data/mon_L3_01')[3:])
        # Schemata stay per L3.
        self.assertIn('L3:0=7ff;1=7ff', self.read('/schemata'))
        self.tree.mkdir('/g1')
        self.write('/g1/tasks', '100')
        self.write('/g1/schemata', 'MB:0=50\n')
        # CPU 0 is node 0 and CPU 1 node 1, both under L3 0.
        self.threads.run(100, 1.0, cpu=0)
        self.clock.advance(1.0)
        self.model.refresh()    # the emulator samples threads regularly
        self.threads.run(100, 1.0, cpu=1)
        self.clock.advance(1.0)
        base = '/g1/mon_data/mon_L3_00/'
        self.assertEqual('%d\n' % GIB,
                         self.read(base + 'mon_sub_L3_00/mbm_total_bytes'))
        self.assertEqual('%d\n' % GIB,
                         self.read(base + 'mon_sub_L3_01/mbm_total_bytes'))
        self.assertEqual('%d\n' % (2 * GIB),
                         self.read(base + 'mbm_total_bytes'))
        self.assertEqual('Unavailable\n', self.read(
            '/g1/mon_data/mon_L3_01/mon_sub_L3_02/mbm_total_bytes'))

    def test_only_on_the_models_the_kernel_knows(self):
        # snc_cpu_ids: not the reference host's Cascade Lake, where the
        # kernel keeps monitoring per L3 whatever the firmware does.
        clx = dataclasses.replace(
            profiles.SNC2, cpu=profiles.REFERENCE.cpu)
        tree = fakes.tree.ResctrlTree(self.make_model(clx))
        self.assertEqual('192\n', tree.read('/info/L3_MON/num_rmids'))
        self.assertEqual(['llc_occupancy', 'mbm_total_bytes',
                          'mbm_local_bytes'],
                         tree.readdir('/mon_data/mon_L3_00'))

    def test_mba_mbps_is_refused(self):
        # MBA stays per L3 while monitoring is per node.
        mbps = dataclasses.replace(profiles.SNC2, mba_mbps=True)
        e = self.assertRaises(fakes.kparse.KernelError, self.make_model,
                              mbps)
        self.assertEqual(errno.EINVAL, e.errno)
        # Before 6.11 the kernel knew no SNC and mounted.
        self.make_model(mbps, kernel='6.8')

    def test_before_6_11(self):
        tree = fakes.tree.ResctrlTree(self.make_model('snc2', kernel='6.8'))
        self.assertEqual('192\n', tree.read('/info/L3_MON/num_rmids'))
        self.assertEqual(['llc_occupancy', 'mbm_total_bytes',
                          'mbm_local_bytes'],
                         tree.readdir('/mon_data/mon_L3_00'))
