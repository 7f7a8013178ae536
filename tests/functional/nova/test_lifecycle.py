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

"""RDT claims across the instance lifecycle paths Nova drives.

The computes run over fakelibvirt domains that make and remove resctrl
groups as libvirt does, so a claim and the group of its running domain
must be counted once, and a claim without a running domain once too.
"""

from tests.functional.nova import base

MB10 = {'hw:mem_bw': '10'}


class RDTLifecycleTest(base.RDTServersTestBase):

    def setUp(self):
        super().setUp()
        # A host without RDT: the scheduler's only alternative, which
        # an RDT flavor never passes.
        self.start_rdt_compute('plain', variant='none')

    def test_names_sharing_a_prefix_are_told_apart(self):
        # Names longer than 20 characters, alike in their first 20.
        self.flags(instance_name_template='rdt-cloud-instance-%08x')
        self.start_rdt_compute('a', prepare=base.leave_closids(2))
        flavor = self.flavor(MB10)
        first = self.boot(flavor)
        second = self.boot(flavor)
        self.assertEqual(0, self.free_closids('a'))
        # Stopped, the second keeps its CLOSID although libvirt removed
        # its group; the first's group is not the second's.
        second = self._stop_server(second)
        self.assertEqual(1, len(self.libvirt_groups('a')))
        self.assertEqual(0, self.free_closids('a'))
        self.boot(flavor, expected_state='ERROR')
        self._start_server(second)
        self.assertEqual(2, len(self.libvirt_groups('a')))
        self.assertEqual({first['id'], second['id']}, set(self.claims('a')))
