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

"""CLOSIDs the emulated kernel takes off ``num_closids``, as the agent and
the compute host report them: the 32-CLOSID limit before 6.16 and the
CLOSID io_alloc keeps for I/O (6.19+)."""

import errno
import os

import testscenarios

from rdt_virt.resctrl import fs
from tests.functional.agent import base


class ClosidTestCase(base.AgentTestCase):

    def published(self):
        self.agent.tick()
        return self.agent.sample()['host']

    def mkdir_until_enospc(self):
        """Create groups until the kernel refuses; how many it took."""
        made = 0
        while True:
            try:
                os.mkdir(self.path('probe%d' % made))
            except OSError as e:
                self.assertEqual(errno.ENOSPC, e.errno, e)
                return made
            made += 1
            self.assertLess(made, 128)

    def compute_host_capacity(self):
        # What nova-compute reads: nova_plugin.virt.host builds the same
        # Resctrl from [rdt].
        rc = fs.Resctrl(self.root,
                        osrelease=self.emulator.handle.osrelease)
        return rc.capabilities()


class TestReleaseLimit(testscenarios.WithScenarios, ClosidTestCase):

    profile = 'wide'
    scenarios = [('6.8', {'kernel': '6.8', 'usable': 32}),
                 ('newest', {'kernel': 'newest', 'usable': 64})]

    def test_reported_closids_are_the_usable_ones(self):
        self.assertEqual('64\n', self.read('info', 'L3', 'num_closids'))
        self.assertEqual(self.usable, self.published()['closids_total'])
        self.assertEqual(self.usable,
                         self.compute_host_capacity().num_closids)
        # The default group holds one.
        self.assertEqual(self.usable - 1, self.mkdir_until_enospc())


class TestIoAlloc(ClosidTestCase):

    profile = 'amd-zen5'
    kernel = 'newest'

    def test_io_alloc_closid_is_not_counted(self):
        self.assertEqual(16, self.published()['closids_total'])
        self.write('info/L3/io_alloc', '1\n')
        self.assertEqual('enabled\n', self.read('info', 'L3', 'io_alloc'))
        self.assertEqual(15, self.published()['closids_total'])
        caps = self.compute_host_capacity()
        self.assertEqual((15, 16), (caps.num_closids, caps.kernel_closids))
        self.assertEqual(14, self.mkdir_until_enospc())
        self.write('info/L3/io_alloc', '0\n')
        self.assertEqual(16, self.published()['closids_total'])
