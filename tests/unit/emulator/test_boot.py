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

"""Boot: CPU quirks and rdt= decide which resources the kernel shows."""

import dataclasses

from rdt_virt.emulator import boot
from rdt_virt.emulator import profiles
from tests.unit.emulator import fakes


class BootTest(fakes.ModelTestCase):

    def booted(self, profile, cmdline=None):
        model = self.make_model(profiles.get_profile(profile, cmdline))
        return fakes.tree.ResctrlTree(model)

    def test_reference_with_and_without_rdt_l3cat(self):
        tree = self.booted('reference')
        self.assertEqual(['last_cmd_status', 'MB', 'L3', 'L3_MON'],
                         tree.readdir('/info'))
        for stock in (self.booted('reference-stock'),
                      self.booted('reference', cmdline='quiet')):
            # Cascade Lake stepping 7: L3 CAT off, the rest stays.
            self.assertEqual(['last_cmd_status', 'MB', 'L3_MON'],
                             stock.readdir('/info'))
            self.assertEqual('MB:0=100;1=100\n', stock.read('/schemata'))
            self.assertEqual('8\n', stock.read('/info/MB/num_closids'))
            stock.mkdir('/g1')

    def test_reference_without_mba(self):
        tree = self.booted('reference-no-mba')
        self.assertEqual(['last_cmd_status', 'L3', 'L3_MON'],
                         tree.readdir('/info'))
        # Without MBA the L3's 16 CLOSIDs are all usable.
        self.assertEqual('16\n', tree.read('/info/L3/num_closids'))
        self.assertEqual('L3:0=7ff;1=7ff', tree.read('/schemata').strip())
        self.assertEqual('llc_occupancy\nmbm_total_bytes\nmbm_local_bytes\n',
                         tree.read('/info/L3_MON/mon_features'))

    def test_early_skylake_loses_monitoring_too(self):
        early = dataclasses.replace(
            profiles.REFERENCE, name='skx-early', cmdline='',
            cpu=profiles.CpuId('GenuineIntel', 6, 0x55, 4))
        tree = self.booted(early)
        self.assertEqual(['last_cmd_status', 'MB'], tree.readdir('/info'))
        self.assertNotIn('mon_data', tree.readdir('/'))
        # Forcing on beats the quirk.
        tree = self.booted(early, cmdline='rdt=l3cat,cmt')
        self.assertEqual(['llc_occupancy\n'],
                         [tree.read('/info/L3_MON/mon_features')])

    def test_rdt_option(self):
        tree = self.booted('reference', cmdline='rdt=l3cat,!mba,!mbmlocal')
        self.assertEqual(['last_cmd_status', 'L3', 'L3_MON'],
                         tree.readdir('/info'))
        self.assertEqual('llc_occupancy\nmbm_total_bytes\n',
                         tree.read('/info/L3_MON/mon_features'))
        tree = self.booted('amd', cmdline='rdt=!smba')
        self.assertEqual(['last_cmd_status', 'MB', 'L3', 'L3_MON'],
                         tree.readdir('/info'))
        # Forcing on never adds what CPUID lacks.
        tree = self.booted('l3-cat', cmdline='rdt=l3cat,mba,cmt')
        self.assertEqual(['last_cmd_status', 'L3'], tree.readdir('/info'))

    def test_parse(self):
        self.assertEqual(({'l3cat', 'mba'}, {'cmt'}), boot.parse_rdt_option(
            'BOOT_IMAGE=/vmlinuz ro rdt=l3cat,!cmt,mba,nope quiet'))
        self.assertEqual((set(), set()), boot.parse_rdt_option(''))
        self.assertEqual((set(), None), boot.quirks(None))
