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

from rdt_virt.emulator import profiles
from tests import base


class ProfileTest(base.TestCase):

    # profile: (schemata names in print order, usable CLOSIDs, name width,
    #           mount options, RMIDs)
    EXPECTED = {
        'reference': (('MB', 'L3'), 8, 6, (), 192),
        'reference-stock': (('MB', 'L3'), 8, 6, (), 192),
        'reference-no-mba': (('MB', 'L3'), 8, 6, (), 192),
        'snc2': (('MB', 'L3'), 8, 6, (), 192),
        'cdp': (('MB', 'L3DATA', 'L3CODE'), 8, 6, ('cdp',), 192),
        'mba-mbps': (('MB', 'L3'), 8, 6, ('mba_MBps',), 192),
        'amd': (('SMBA', 'MB', 'L3'), 16, 4, (), 256),
        'amd-mb4096': (('SMBA', 'MB', 'L3'), 16, 4, (), 256),
        'amd-zen5': (('SMBA', 'MB', 'L3'), 16, 4, (), 256),
        'l3-cat': (('L3',), 16, 6, (), None),
        'wide': (('L3',), 64, 6, (), 192),
        'monitoring': ((), 0, 0, (), 192),
        'aet': (('MB', 'L3'), 16, 6, (), 1024),
        'mpam': (('MB', 'L3'), 64, 6, (), 256),
    }

    def test_profiles(self):
        self.assertEqual(set(self.EXPECTED), set(profiles.PROFILES))
        for name, (schemas, closids, width, opts, rmids) in \
                self.EXPECTED.items():
            prof = profiles.get_profile(name)
            self.assertEqual(schemas, tuple(s.name for s in prof.schemas),
                             name)
            self.assertEqual(closids, prof.num_closids, name)
            self.assertEqual(width, prof.name_width, name)
            self.assertEqual(opts, prof.mount_options, name)
            self.assertEqual(rmids, prof.mon and prof.mon.num_rmids, name)
            self.assertTrue(prof.description)

    def test_reference_matches_design(self):
        ref = profiles.REFERENCE
        self.assertEqual(0x7ff, ref.l3.cbm_mask)
        self.assertEqual(16, ref.l3.num_closids)
        self.assertEqual((10, 10, 8), (ref.mb.min_bandwidth,
                                       ref.mb.bandwidth_gran,
                                       ref.mb.num_closids))
        self.assertEqual([0, 1], [d.id for d in ref.domains])
        self.assertEqual(35.75 * profiles.MIB, ref.domains[0].l3_size)
        # CDP halves the L3 CLOSIDs per schema.
        self.assertEqual([8, 8, 8], [s.num_closids
                                     for s in profiles.CDP.schemas])

    def test_unknown_profile(self):
        e = self.assertRaises(profiles.UnknownProfile, profiles.get_profile,
                              'skylake')
        self.assertIn("unknown profile 'skylake'", str(e))
        self.assertIn('reference', str(e))

    def test_assign_cpus(self):
        ref = profiles.REFERENCE
        cases = [
            ([0, 1], {0: [0], 1: [1]}),
            ([0], {0: [0]}),      # domain 1 has no CPU: offline
            ([0, 1, 2, 3], {0: [0, 1], 1: [2, 3]}),
            ([0, 1, 2, 3, 4], {0: [0, 1], 1: [2, 3, 4]}),
            ([4, 2, 8], {0: [2], 1: [4, 8]}),
        ]
        for cpus, expected in cases:
            self.assertEqual(expected, ref.assign_cpus(cpus), cpus)
        self.assertEqual({0: 0, 1: 0, 2: 1, 3: 1},
                         ref.cpu_domains([0, 1, 2, 3]))

    def test_sysfs_cache_files(self):
        files = profiles.REFERENCE.sysfs_cache_files([0, 1, 2, 3])
        l3 = {k.split('/')[-1]: v for k, v in files.items()
              if k.startswith('cpu2/cache/index3/')}
        self.assertEqual({
            'id': '1\n', 'level': '3\n', 'type': 'Unified\n',
            'size': '36608K\n', 'shared_cpu_list': '2-3\n',
            'shared_cpu_map': 'c\n', 'coherency_line_size': '64\n',
            'ways_of_associativity': '11\n', 'number_of_sets': '53248\n',
            'physical_line_partition': '1\n'}, l3)
        self.assertEqual('Data\n', files['cpu0/cache/index0/type'])
        self.assertEqual('Instruction\n', files['cpu0/cache/index1/type'])
        self.assertEqual('1024K\n', files['cpu0/cache/index2/size'])
        self.assertEqual('0\n', files['cpu1/cache/index3/id'])
        self.assertEqual('32768K\n', profiles.AMD.sysfs_cache_files(
            [0, 1])['cpu1/cache/index3/size'])

    def test_cache_topology_agrees_with_domains(self):
        # libvirt's granularity is size / cbm bits: it must be whole bytes.
        for prof in profiles.PROFILES.values():
            topo = prof.cache_topology([0, 1])
            for cpu, dom in prof.cpu_domains([0, 1]).items():
                l3 = topo[cpu][3]
                self.assertEqual(dom, l3['id'])
                self.assertEqual(prof.domain(dom).l3_size, l3['size'])
                if prof.l3:
                    self.assertEqual(0, l3['size'] % prof.l3.cbm_len)
