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

"""rdt-virt caps --capture on a fixture tree, loaded by the emulator."""

import io
import os

import fixtures

from rdt_virt.cmd import cli
from rdt_virt.emulator import fromtree
from tests import base


class CaptureCliTest(base.TestCase):

    def test_capture_reference_fixture(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        root = os.path.join(base.FIXTURES_DIR, 'resctrl', 'reference')
        dest = os.path.join(tmp, 'host')
        out = io.StringIO()
        self.assertEqual(0, cli.main(['--resctrl-root', root, 'caps',
                                      '--capture', dest], out=out))
        self.assertIn('--from-tree %s' % dest, out.getvalue())
        for rel in ('host.json', 'resctrl/info/L3/cbm_mask',
                    'resctrl/info/L3_MON/num_rmids', 'resctrl/schemata'):
            self.assertTrue(os.path.exists(os.path.join(dest, rel)), rel)
        profile = fromtree.load(dest)
        self.assertEqual((11, 0x600, 16), (profile.l3.cbm_len,
                                           profile.l3.shareable_bits,
                                           profile.l3.num_closids))
        self.assertEqual(192, profile.mon.num_rmids)
        self.assertEqual(10, profile.mb.bandwidth_gran)
