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

"""Where a move that RDTFilter refuses tells the operator why.

Nova handles a scheduler refusal of a move in nova-conductor, after the API
has answered 202: the server stays where it was. What carries RDTFilter's
reason (its NoValidHost, with the refused hosts counted per cause) depends
on the move, as Nova 34 does it:

* cold migration and resize: the instance fault (Nova re-raises its own
  "No valid host found for cold migrate" into the action event);
* live migration: the ``conductor_live_migrate_instance`` action event;
* unshelve: the ``schedule_instances`` action event.
"""

from nova import context as nova_context
from nova import objects
from nova.tests.functional.api import client

from tests.functional.nova import base

REASON = ('RDTFilter: no host can take hw:mem_bw=10: 1 host: the host has '
          'no memory bandwidth allocation (MBA).')


class RefusedMoveTest(base.RDTServersTestBase):

    def setUp(self):
        super().setUp()
        self.start_rdt_compute('mba')
        # L3 CAT and monitoring, no MBA: no other host for hw:mem_bw.
        self.start_rdt_compute('nomba', variant='l3-cat')
        self.server = self.boot(self.flavor({'hw:mem_bw': '10'}))
        self.assertEqual('mba', self.server['OS-EXT-SRV-ATTR:host'])

    def act(self, body):
        # The harness turns Nova's casts into calls, so the conductor's
        # NoValidHost comes back to the API here; over RPC the API has
        # answered 202 before the conductor asks the scheduler.
        try:
            self.admin_api.post_server_action(self.server['id'], body)
        except client.OpenStackApiException as e:
            self.assertIn('NoValidHost', str(e))

    def assertStayed(self):
        server = self._wait_for_state_change(self.server, 'ACTIVE')
        self.assertEqual('mba', server['OS-EXT-SRV-ATTR:host'])

    def test_cold_migration_reason_in_the_fault(self):
        self.act({'migrate': None})
        event = self._wait_for_action_fail_completion(
            self.server, 'migrate', 'cold_migrate')
        # Nova replaces the reason in the event with its own.
        self.assertEqual('No valid host was found. No valid host found for '
                         'cold migrate', event.get('details'))
        self.assertStayed()
        fault = objects.InstanceFault.get_latest_for_instance(
            nova_context.get_admin_context(), self.server['id'])
        self.assertEqual('No valid host was found. ' + REASON,
                         fault.message)

    def test_live_migration_reason_in_the_action_event(self):
        self.act({'os-migrateLive': {'host': None,
                                     'block_migration': 'auto'}})
        event = self._wait_for_action_fail_completion(
            self.server, 'live-migration',
            'conductor_live_migrate_instance')
        self.assertEqual('No valid host was found. ' + REASON,
                         event.get('details'))
        self.assertStayed()

    def test_unshelve_reason_in_the_action_event(self):
        self._shelve_server(self.server)
        # Only the host without MBA is left.
        service = self.admin_api.get_services(binary='nova-compute',
                                              host='mba')[0]
        self.admin_api.put_service(service['id'], {'status': 'disabled'})
        self.act({'unshelve': None})
        event = self._wait_for_action_fail_completion(
            self.server, 'unshelve', 'schedule_instances')
        self.assertEqual('No valid host was found. ' + REASON,
                         event.get('details'))
        self._wait_for_state_change(self.server, 'SHELVED_OFFLOADED')


class RefusedMoveOfMultiCreatedServerTest(base.RDTServersTestBase):
    """A server of a multi-create request, moved alone.

    Its RequestSpec keeps the request's ``num_instances``; the move
    schedules that one server and must get RDTFilter's reason all the
    same.
    """

    def setUp(self):
        super().setUp()
        self.start_rdt_compute('mba')
        self.start_rdt_compute('nomba', variant='l3-cat')
        flavor = self.flavor({'hw:mem_bw': '10'})
        body = self._build_server(flavor_id=flavor, networks='none')
        body.update(min_count=2, max_count=2)
        self.api.post_server({'server': body})
        servers = [self._wait_for_state_change(s, 'ACTIVE')
                   for s in self.api.get_servers(detail=True)]
        self.assertEqual(2, len(servers))
        self.server = servers[0]
        self.assertEqual('mba', self.server['OS-EXT-SRV-ATTR:host'])

    def live_migrate_to_nomba(self):
        """The API's error, if it answered with one."""
        try:
            self.admin_api.post_server_action(self.server['id'], {
                'os-migrateLive': {'host': 'nomba',
                                   'block_migration': 'auto'}})
        except client.OpenStackApiException as e:
            return str(e)

    def test_live_migration_to_a_host_without_mba(self):
        self.live_migrate_to_nomba()
        event = self._wait_for_action_fail_completion(
            self.server, 'live-migration',
            'conductor_live_migrate_instance')
        self.assertEqual('No valid host was found. ' + REASON,
                         event.get('details'))
        server = self._wait_for_state_change(self.server, 'ACTIVE')
        self.assertEqual('mba', server['OS-EXT-SRV-ATTR:host'])

    def test_synchronous_live_migration(self):
        # Before 2.34 the API waits for the conductor, whose event is
        # conductor_migrate_server (openstackclient's default version).
        self.admin_api.microversion = '2.30'
        error = self.live_migrate_to_nomba()
        # What "openstack server migrate --live-migration" prints.
        self.assertIn('"code": 400, "message": "No valid host was found. ' +
                      REASON, error)
        # Events have their details from 2.84.
        self.admin_api.microversion = 'latest'
        event = self._wait_for_action_fail_completion(
            self.server, 'live-migration', 'conductor_migrate_server')
        self.assertEqual('No valid host was found. ' + REASON,
                         event.get('details'))
