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

"""L2 CAT of a captured host: its own domains, from the cache topology."""

import dataclasses
import errno
import os

from rdt_virt.emulator import boot
from rdt_virt.emulator import fromtree
from rdt_virt.emulator import profiles
from tests import base
from tests.unit.emulator import fakes

# Two L3 caches, two L2 caches (of two hyperthreads each) under each, with
# the gaps real L2 ids have.
L2_IDS = ((0, (0, 4)), (1, (8, 12)))
HOST = dataclasses.replace(
    profiles.REFERENCE, name='l2-host', threads_per_core=2,
    l2=profiles.CacheAlloc(name='L2', num_closids=8, cbm_len=16,
                           min_cbm_bits=1, shareable_bits=0,
                           sparse_masks=False, cdp_capable=True),
    l2_ids=L2_IDS)


class CapturedL2Test(fakes.ModelTestCase):

    cpus = (0, 1, 2, 3)

    def setUp(self):
        super().setUp()
        # What "rdt-virt caps --capture" writes on such a host.
        path = os.path.join(self.useFixture(base.fixtures.TempDir()).path,
                            'capture')
        fromtree.render(HOST, path, cpus=range(8))
        with open(os.path.join(path, 'resctrl', 'info', 'L2',
                               'cbm_mask')) as f:
            self.assertEqual('ffff\n', f.read())
        self.loaded = fromtree.load(path)
        self.model = self.make_model(self.loaded)
        self.tree = fakes.tree.ResctrlTree(self.model)

    def test_loaded_from_the_capture(self):
        self.assertEqual((HOST.l2, L2_IDS),
                         (self.loaded.l2, self.loaded.l2_ids))
        self.assertNotIn('not emulated', self.loaded.description)

    def test_schemata_and_info(self):
        # Four CPUs here: one per L2, in the order of the capture.
        self.assertEqual('    L2:0=ffff;4=ffff;8=ffff;12=ffff\n',
                         self.read('/schemata').splitlines(True)[1])
        self.assertIn('L2', self.tree.readdir('/info'))
        self.assertEqual('8\n', self.read('/info/L2/num_closids'))
        self.assertEqual('0=SSSSSSSSSSSSSSSS;4=SSSSSSSSSSSSSSSS;'
                         '8=SSSSSSSSSSSSSSSS;12=SSSSSSSSSSSSSSSS\n',
                         self.read('/info/L2/bit_usage'))
        size = HOST.geometry.l2_size
        self.assertIn('L2:0=%d;4=%d' % (size, size), self.read('/size'))

    def test_writes_are_per_l2_domain(self):
        self.tree.mkdir('/g1')
        self.write('/g1/schemata', 'L2:0=ff;12=f0\n')
        lines = [line.strip() for line in self.read('/g1/schemata')
                 .splitlines()]
        self.assertIn('L2:0=ff;4=ffff;8=ffff;12=f0', lines)
        # An L3 id that is no L2 id: unknown domain, no status text.
        self.assertFails(errno.EINVAL, self.write, '/g1/schemata',
                         'L2:1=f\n')
        self.assertWriteFails(errno.EINVAL,
                              'The mask f0f has non-consecutive 1-bits\n',
                              '/g1/schemata', 'L2:4=f0f\n')
        # L3 lines keep the L3 ids.
        self.assertIn('L3:0=7ff;1=7ff', lines)

    def test_cache_topology_agrees(self):
        files = self.loaded.sysfs_cache_files(self.cpus)
        self.assertEqual(('4\n', '1\n'),
                         (files['cpu1/cache/index2/id'],
                          files['cpu1/cache/index2/shared_cpu_list']))
        self.assertEqual('3\n', files['cpu3/cache/index2/shared_cpu_list'])

    def test_rdt_option_turns_l2_off(self):
        off = boot.apply(dataclasses.replace(self.loaded,
                                             cmdline='rdt=!l2cat'))
        self.assertIsNone(off.l2)
