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

"""Boots and deletes in quick succession, between resource reports.

The scheduler must see a host's free CLOSIDs as the host has them: every
one of them usable by the next boot, and none counted free that a boot
took, whether or not the host's periodic resource report ran since.
"""

from tests.functional.nova import base


class ChurnTest(base.RDTServersTestBase):

    def setUp(self):
        super().setUp()
        self.start_rdt_compute('mba', prepare=base.leave_closids(3))
        self.start_rdt_compute('nomba', variant='l3-cat')
        self.mem_bw = self.flavor({'hw:mem_bw': '10'})

    def fill(self, report_after=()):
        servers = []
        for i in range(3):
            server = self.boot(self.mem_bw)
            self.assertEqual('mba', server['OS-EXT-SRV-ATTR:host'])
            servers.append(server)
            if i in report_after:
                self._run_periodics()
        return servers

    def test_boots_take_every_closid(self):
        self.fill(report_after=(0,))
        server = self.boot(self.mem_bw, expected_state='ERROR')
        self.assertIn('no free CLOSID', server['fault']['message'])

    def test_a_report_taken_while_a_boot_claims_counts_it_once(self):
        # The periodic report runs between the resource tracker's claim of
        # the second server (it counts in the host's instances) and the
        # driver's (its CLOSID is not in the report's capacity): the
        # scheduler must still count that CLOSID as taken.
        driver = self.driver('mba')
        claim = driver._rdt_claim
        calls = []

        def report_first(instance, *args, **kwargs):
            calls.append(instance.uuid)
            if len(calls) == 2:
                self._run_periodics()
            return claim(instance, *args, **kwargs)
        driver._rdt_claim = report_first
        self.fill()
        self.assertEqual(3, len(calls))
        server = self.boot(self.mem_bw, expected_state='ERROR')
        self.assertIn('no free CLOSID', server['fault']['message'])
        self.assertEqual(3, len(calls), 'the fourth boot reached the host')

    def test_deleted_closids_are_free_at_once(self):
        servers = self.fill()
        self._run_periodics()
        for server in servers:
            self._delete_server(server)
        # No periodic report since: the next boots get every CLOSID back,
        # and no more.
        self.fill()
        server = self.boot(self.mem_bw, expected_state='ERROR')
        self.assertIn('no free CLOSID', server['fault']['message'])

    def test_one_delete_frees_one_closid(self):
        servers = self.fill(report_after=(2,))
        self._delete_server(servers[1])
        self.assertEqual('mba', self.boot(self.mem_bw)[
            'OS-EXT-SRV-ATTR:host'])
        server = self.boot(self.mem_bw, expected_state='ERROR')
        self.assertIn('no free CLOSID', server['fault']['message'])


class MoveChurnTest(base.RDTServersTestBase):

    def test_source_of_a_confirmed_migration_is_free_at_once(self):
        self.start_rdt_compute('a', prepare=base.leave_closids(1))
        self.start_rdt_compute('b', prepare=base.leave_closids(1))
        flavor = self.flavor({'hw:mem_bw': '10'})
        server = self.boot(flavor)
        source = server['OS-EXT-SRV-ATTR:host']
        self._run_periodics()
        server = self._migrate_server(server)
        server = self._confirm_resize(server)
        dest = server['OS-EXT-SRV-ATTR:host']
        self.assertNotEqual(source, dest)
        # Only the source is left to the next boot. (The destination's
        # stats do not count the instance that moved in before its next
        # report: its own claim settles that race, see admin/capacity.)
        service = self.admin_api.get_services(binary='nova-compute',
                                              host=dest)[0]
        self.admin_api.put_service(service['id'], {'status': 'disabled'})
        # No periodic report since: the source's CLOSID is free again.
        self.assertEqual(source, self.boot(flavor)['OS-EXT-SRV-ATTR:host'])
