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

"""The agent on a captured host with L2 CAT: ``L2:`` lines with the L2
caches' own ids in every schemata file."""

import os
import shutil
import tempfile

from rdt_virt.emulator import fromtree
from rdt_virt.resctrl import info
from tests.functional.agent import base
from tests.unit.emulator import test_l2

P = base.PREFIX


class TestL2Host(base.AgentTestCase):

    def setUp(self):
        # "rdt-virt caps --capture" of such a host, then --from-tree.
        tmp = tempfile.mkdtemp(prefix='l2-capture-')
        self.capture = os.path.join(tmp, 'capture')
        fromtree.render(test_l2.HOST, self.capture, cpus=range(8))
        self.mount_kwargs = {'from_tree': self.capture}
        super().setUp()
        self.addCleanup(shutil.rmtree, tmp, True)

    def test_converges_and_leaves_l2_alone(self):
        self.flags(default_group_l3_ways=4, group='rdt')
        self.agent = self.new_agent()
        self.assertIn('L2:', self.read('schemata'))
        l2_before = self.schemata()['L2']
        shared = self.boot(base.shared(10), vcpus=2)
        own = self.boot(base.own(30, 'percent'), vcpus=2)
        plain = self.boot()
        self.agent.tick()
        self.assertEqual(0, self.agent.totals['errors'])
        self.assertIn(info.L2_CAT, self.agent.caps.features)
        self.assertPlaced(shared, P + 'mb10')
        self.assertPlaced(own, P + 'i-' + own, mon=None)
        self.assertPlaced(plain, None)
        # The agent reserved L3 ways for the default group and touched no
        # L2 mask; its groups got the kernel's L2 defaults.
        self.assertEqual({0: 0xf, 1: 0xf}, self.schemata()['L3'])
        self.assertEqual(l2_before, self.schemata()['L2'])
        self.assertEqual(sorted(l2_before),
                         sorted(self.schemata(P + 'mb10')['L2']))
        seq = self.mark()
        for _ in range(2):
            self.assertEqual(0, self.agent.tick().writes)
        self.assertEqual([], self.mutations(seq))
