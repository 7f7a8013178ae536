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

"""Schemata writes and reads, with the kernel's exact texts."""

import errno

from tests.unit.emulator import fakes

EINVAL = errno.EINVAL


class ReferenceSchemataTest(fakes.ModelTestCase):

    def setUp(self):
        super().setUp()
        self.tree.mkdir('/g1')

    def test_initial_files(self):
        text = '    MB:0=100;1=100\n    L3:0=7ff;1=7ff\n'
        self.assertEqual(text, self.read('/schemata'))
        self.assertEqual(text, self.read('/g1/schemata'))
        self.assertEqual('    MB:0=100;1=100\n'
                         '    L3:0=37486592;1=37486592\n',
                         self.read('/g1/size'))
        self.assertEqual('ok\n', self.status())

    def test_valid_writes(self):
        # (written, schemata afterwards): partial writes keep the rest.
        cases = [
            ('L3:0=3\n', '    MB:0=100;1=100\n    L3:0=3;1=7ff\n'),
            ('L3:1=0x7f0\n', '    MB:0=100;1=100\n    L3:0=3;1=7f0\n'),
            ('MB:1=15\n', '    MB:0=100;1=20\n    L3:0=3;1=7f0\n'),
            ('MB:0=91;1=10\n', '    MB:0=100;1=10\n    L3:0=3;1=7f0\n'),
            ('  L3 :0= +1 ;1=7ff\nMB:0=50\n',
             '    MB:0=50;1=10\n    L3:0=1;1=7ff\n'),
            ('L3:0=7ff;\n', '    MB:0=50;1=10\n    L3:0=7ff;1=7ff\n'),
        ]
        for data, expected in cases:
            self.write('/g1/schemata', data)
            self.assertEqual(expected, self.read('/g1/schemata'), data)
            self.assertEqual('ok\n', self.status())
        self.assertEqual('    MB:0=50;1=10\n    L3:0=37486592;1=37486592\n',
                         self.read('/g1/size'))

    def test_invalid_writes(self):
        before = self.read('/g1/schemata')
        cases = [
            ('L3:0=f0f\n', 'Mask out of range\n'),
            ('L3:0=101\n', 'The mask 101 has non-consecutive 1-bits\n'),
            ('L3:0=0\n', 'Mask out of range\n'),
            ('L3:0=zz\n', 'Non-hex character in the mask zz\n'),
            ('L3:0=\n', 'Non-hex character in the mask \n'),
            ('L3:0=1 1\n', 'Non-hex character in the mask 1 1\n'),
            ('L3:2=1\n', 'ok\n'),   # unknown domain: EINVAL, no text
            ('L3:x=1\n', "Missing '=' or non-numeric domain\n"),
            ('L3:0\n', "Missing '=' or non-numeric domain\n"),
            ('L3: 0=1\n', "Missing '=' or non-numeric domain\n"),
            ('L3:0=1;0=3\n', 'Duplicate domain 0\n'),
            ('L3:0=1\nL3:0=3\n', 'Duplicate domain 0\n'),
            ('L2:0=1\n', "Unknown or unsupported resource name 'L2'\n"),
            ('l3:0=1\n', "Unknown or unsupported resource name 'l3'\n"),
            ('L3CODE:0=1\n',
             "Unknown or unsupported resource name 'L3CODE'\n"),
            ('L3 0=1\n', "Missing ':'\n"),
            ('L3:0=1\n\n', "Missing ':'\n"),
            ('\n', "Missing ':'\n"),
            ('L3:\n', "Missing 'L3' value\n"),
            ('MB:0=5\n', 'MB value 5 out of range [10,100]\n'),
            ('MB:0=101\n', 'MB value 101 out of range [10,100]\n'),
            ('MB:0=1e2\n', 'Invalid MB value 1e2\n'),
            ('MB:0=0x20\n', 'Invalid MB value 0x20\n'),
            ('MB:0=-10\n', 'Invalid MB value -10\n'),
            ('MB:0=4294967296\n', 'Invalid MB value 4294967296\n'),
            # A good line before a bad one is not applied either.
            ('MB:0=10\nL3:0=101\n',
             'The mask 101 has non-consecutive 1-bits\n'),
        ]
        for data, status in cases:
            self.assertWriteFails(EINVAL, status, '/g1/schemata', data)
            self.assertEqual(before, self.read('/g1/schemata'), data)

    def test_newline_required_and_status_kept(self):
        self.assertWriteFails(EINVAL, 'Mask out of range\n',
                              '/g1/schemata', 'L3:0=f0f\n')
        # Without the final newline the kernel fails before touching the
        # status: the previous text stays.
        self.assertWriteFails(EINVAL, 'Mask out of range\n',
                              '/g1/schemata', 'L3:0=3')
        self.assertEqual('    MB:0=100;1=100\n    L3:0=7ff;1=7ff\n',
                         self.read('/g1/schemata'))

    def test_min_cbm_bits_two(self):
        # Haswell-like parts need two bits; the kernel's text says so.
        import dataclasses

        from rdt_virt.emulator import profiles

        ref = profiles.REFERENCE
        hsw = dataclasses.replace(
            ref, name='hsw', l3=dataclasses.replace(ref.l3, min_cbm_bits=2))
        self.model.remount(hsw)
        self.tree.mkdir('/g1')
        self.assertWriteFails(EINVAL, 'Need at least 2 bits in the mask\n',
                              '/g1/schemata', 'L3:0=4\n')
        self.write('/g1/schemata', 'L3:0=c\n')

    def test_new_group_defaults(self):
        # Exclusive ways are left out of a new group's default; shareable
        # ones and the hardware-shared ones (600) stay in.
        self.write('/schemata', 'L3:0=7f0;1=7fc\n')
        self.write('/g1/schemata', 'L3:0=f;1=3\n')
        self.write('/g1/mode', 'exclusive\n')
        self.tree.mkdir('/g2')
        self.assertEqual('    MB:0=100;1=100\n    L3:0=7f0;1=7fc\n',
                         self.read('/g2/schemata'))
        # Free bits around an exclusive hole: only the first run is kept.
        self.write('/schemata', 'L3:0=600;1=600\n')
        self.write('/g2/schemata', 'L3:0=40;1=4\n')
        self.write('/g2/mode', 'exclusive\n')
        self.tree.mkdir('/g3')
        self.assertEqual('    MB:0=100;1=100\n    L3:0=30;1=7f8\n',
                         self.read('/g3/schemata'))

    def test_no_space_for_new_group(self):
        import dataclasses

        from rdt_virt.emulator import profiles

        ref = profiles.REFERENCE
        tight = dataclasses.replace(ref, name='tight', l3=dataclasses.replace(
            ref.l3, shareable_bits=0, min_cbm_bits=2))
        self.model.remount(tight)
        self.tree.mkdir('/g1')
        self.write('/schemata', 'L3:0=3;1=3\n')
        self.write('/g1/schemata', 'L3:0=7fc;1=7fc\n')
        self.write('/g1/mode', 'exclusive\n')
        self.write('/mode', 'exclusive\n')
        self.assertEqual('No space on L3:0\n', self.assertFails(
            errno.ENOSPC, self.tree.mkdir, '/g2'))
        self.assertNotIn('g2', self.tree.readdir('/'))
        # The CLOSID and RMID taken for the attempt were given back.
        self.write('/mode', 'shareable\n')
        self.tree.mkdir('/g2')
        self.assertEqual('    MB:0=100;1=100\n    L3:0=3;1=3\n',
                         self.read('/g2/schemata'))

    def test_exclusive_overlaps(self):
        self.write('/schemata', 'L3:0=1f0;1=1f0\n')
        self.write('/g1/schemata', 'L3:0=f;1=f\n')
        self.write('/g1/mode', 'exclusive\n')
        self.assertEqual('exclusive\n', self.read('/g1/mode'))
        self.tree.mkdir('/g2')
        self.assertWriteFails(EINVAL, 'Overlaps with exclusive group\n',
                              '/g2/schemata', 'L3:0=18\n')
        self.assertWriteFails(EINVAL, 'Overlaps with exclusive group\n',
                              '/schemata', 'L3:1=1ff\n')
        # An exclusive group may not overlap any group, nor hardware bits.
        self.assertWriteFails(EINVAL, 'Overlaps with other group\n',
                              '/g1/schemata', 'L3:0=1f\n')
        self.write('/g2/schemata', 'L3:0=600;1=600\n')
        self.assertEqual('Schemata overlaps\n', self.assertFails(
            EINVAL, self.write, '/g2/mode', 'exclusive\n'))
        self.assertEqual('shareable\n', self.read('/g2/mode'))
        self.write('/g1/mode', 'shareable\n')
        self.write('/g2/schemata', 'L3:0=18\n')

    def test_bit_usage(self):
        self.write('/schemata', 'L3:0=7f0;1=1f\n')
        self.write('/g1/schemata', 'L3:0=f;1=60\n')
        self.write('/g1/mode', 'exclusive\n')
        self.assertEqual('0=XXSSSSSEEEE;1=HH00EESSSSS\n',
                         self.read('/info/L3/bit_usage'))

    def test_mode_file(self):
        cases = [
            ('shareable\n', 'ok\n'),
            ('pseudo-locked\n', 'Unknown or unsupported mode\n'),
            ('exclusive \n', 'Unknown or unsupported mode\n'),
            ('pseudo-locksetup\n', 'Pseudo-locking not supported\n'),
        ]
        for data, status in cases:
            if status == 'ok\n':
                self.write('/g1/mode', data)
                continue
            self.assertWriteFails(EINVAL, status, '/g1/mode', data)
        self.assertWriteFails(EINVAL, 'Cannot pseudo-lock default group\n',
                              '/mode', 'pseudo-locksetup\n')
        self.assertWriteFails(EINVAL, 'Cannot pseudo-lock default group\n',
                              '/g1/mode', 'shareable')
        self.assertEqual('shareable\n', self.read('/mode'))


class CdpSchemataTest(fakes.ModelTestCase):

    profile = 'cdp'

    def test_code_and_data(self):
        self.tree.mkdir('/g1')
        self.assertEqual('    MB:0=100;1=100\nL3DATA:0=7ff;1=7ff\n'
                         'L3CODE:0=7ff;1=7ff\n', self.read('/g1/schemata'))
        self.write('/g1/schemata', 'L3CODE:0=3\nL3DATA:1=c\n')
        self.assertEqual('    MB:0=100;1=100\nL3DATA:0=7ff;1=c\n'
                         'L3CODE:0=3;1=7ff\n', self.read('/g1/schemata'))
        self.assertEqual('    MB:0=100;1=100\n'
                         'L3DATA:0=37486592;1=6815744\n'
                         'L3CODE:0=6815744;1=37486592\n',
                         self.read('/g1/size'))
        self.assertWriteFails(
            EINVAL, "Unknown or unsupported resource name 'L3'\n",
            '/g1/schemata', 'L3:0=3\n')
        self.assertEqual('8\n', self.read('/info/L3CODE/num_closids'))
        self.assertEqual(['last_cmd_status', 'MB', 'L3DATA', 'L3CODE',
                          'L3_MON'], self.tree.readdir('/info'))

    def test_peer_overlap(self):
        # The data mask of an exclusive group blocks the code masks too.
        self.write('/schemata', 'L3CODE:0=7c0;1=7c0\nL3DATA:0=7c0;1=7c0\n')
        self.tree.mkdir('/g1')
        self.write('/g1/schemata', 'L3DATA:0=f;1=f\nL3CODE:0=30;1=30\n')
        self.write('/g1/mode', 'exclusive\n')
        self.tree.mkdir('/g2')
        self.assertWriteFails(EINVAL, 'Overlaps with exclusive group\n',
                              '/g2/schemata', 'L3CODE:0=3\n')
        self.assertWriteFails(EINVAL, 'CDP enabled\n', '/g2/mode',
                              'pseudo-locksetup\n')


class MbpsSchemataTest(fakes.ModelTestCase):

    profile = 'mba-mbps'

    def test_mbps_values(self):
        self.tree.mkdir('/g1')
        self.assertEqual('    MB:0=4294967295;1=4294967295\n'
                         '    L3:0=7ff;1=7ff\n', self.read('/g1/schemata'))
        # Any 32-bit MBps value, taken as is: no range, no rounding.
        self.write('/g1/schemata', 'MB:0=5;1=12345\n')
        self.assertEqual('    MB:0=5;1=12345\n    L3:0=7ff;1=7ff\n',
                         self.read('/g1/schemata'))
        self.assertEqual('    MB:0=5;1=12345\n'
                         '    L3:0=37486592;1=37486592\n',
                         self.read('/g1/size'))
        self.assertWriteFails(EINVAL, 'Invalid MB value 4294967296\n',
                              '/g1/schemata', 'MB:0=4294967296\n')


class AmdSchemataTest(fakes.ModelTestCase):

    profile = 'amd'

    def test_amd(self):
        self.tree.mkdir('/g1')
        self.assertEqual('SMBA:0=2048;1=2048\n  MB:0=2048;1=2048\n'
                         '  L3:0=ffff;1=ffff\n', self.read('/g1/schemata'))
        # Sparse masks and empty masks are fine; units are absolute.
        self.write('/g1/schemata', 'L3:0=f0f;1=0\nMB:0=1\nSMBA:1=0\n')
        self.assertEqual('SMBA:0=2048;1=0\n  MB:0=1;1=2048\n'
                         '  L3:0=f0f;1=0\n', self.read('/g1/schemata'))
        self.assertWriteFails(EINVAL, 'MB value 2049 out of range [0,2048]\n',
                              '/g1/schemata', 'MB:0=2049\n')
        self.assertWriteFails(EINVAL, 'Mask out of range\n', '/g1/schemata',
                              'L3:0=10000\n')
        self.assertEqual('1\n', self.read('/info/L3/sparse_masks'))
        self.assertEqual('0\n', self.read('/info/L3/min_cbm_bits'))
        self.assertEqual(['bandwidth_gran', 'delay_linear', 'min_bandwidth',
                          'num_closids'], self.tree.readdir('/info/SMBA'))
        self.assertEqual('0\n', self.read('/info/MB/delay_linear'))


class LegacySchemataTest(fakes.ModelTestCase):

    legacy = True

    def test_padded_and_older_texts(self):
        self.tree.mkdir('/g1')
        self.write('/g1/schemata', 'L3:0=3\nMB:1=10\n')
        self.assertEqual('    MB:0=100;1= 10\n    L3:0=003;1=7ff\n',
                         self.read('/g1/schemata'))
        self.assertWriteFails(EINVAL, 'Non-decimal digit in MB value x\n',
                              '/g1/schemata', 'MB:0=x\n')
        self.assertWriteFails(EINVAL, 'MB value 5 out of range [10,100]\n',
                              '/g1/schemata', 'MB:0=5\n')
        self.assertNotIn('sparse_masks', self.tree.readdir('/info/L3'))


class MonitoringOnlyTest(fakes.ModelTestCase):

    profile = 'monitoring'

    def test_no_allocation(self):
        self.assertEqual('', self.read('/schemata'))
        self.assertEqual('', self.read('/size'))
        self.assertEqual(['last_cmd_status', 'L3_MON'],
                         self.tree.readdir('/info'))
        self.assertWriteFails(
            EINVAL, "Unknown or unsupported resource name 'L3'\n",
            '/schemata', 'L3:0=1\n')
        self.assertEqual('Cannot be exclusive without CAT/CDP\n',
                         self.assertFails(EINVAL, self.write, '/mode',
                                          'exclusive\n'))
