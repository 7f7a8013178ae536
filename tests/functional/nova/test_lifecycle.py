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

import time

import fixtures
from nova.tests.functional.api import client

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

    def wait_built(self, server):
        """``server`` once its build has ended, ACTIVE or ERROR."""
        for _ in range(600):
            server = self.api.get_server(server['id'])
            if server['status'] != 'BUILD':
                return server
            time.sleep(0.1)
        self.fail('%s is still building' % server['id'])

    def test_same_host_rebuild_keeps_its_claim(self):
        self.start_rdt_compute('a', prepare=base.leave_closids(1))
        flavor = self.flavor(MB10)
        server = self.boot(flavor)
        driver = self.driver('a')
        destroy = driver.destroy
        others = []

        def destroy_then_boot(context, instance, *args, **kwargs):
            result = destroy(context, instance, *args, **kwargs)
            if instance.task_state == 'rebuilding' and not others:
                # Another boot comes while the rebuild is between its
                # destroy and its spawn.
                others.append(self.wait_built(self.api.post_server(
                    {'server': self._build_server(flavor_id=flavor,
                                                  networks='none')})))
            return result

        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.libvirt.driver.LibvirtDriver.destroy',
            lambda drv, *a, **k: (destroy_then_boot if drv is driver
                                  else destroy)(*a, **k)))
        server = self._rebuild_server(server, server['image']['id'])
        self.assertEqual(1, len(others))
        self.assertEqual('ERROR', others[0]['status'])
        # The rebuilt instance runs, with its group, on its claim.
        self.assertEqual('ACTIVE', server['status'])
        self.assertEqual({server['id']}, set(self.claims('a')))
        self.assertEqual(1, len(self.libvirt_groups('a')))
        self.assertEqual(0, self.free_closids('a'))

    def test_failed_live_migration_releases_the_destination(self):
        self.start_rdt_compute('src', prepare=base.leave_closids(2))
        self.start_rdt_compute('dst', prepare=base.leave_closids(1))
        server = self.boot(self.flavor(MB10), host='src')
        # The migration fails in libvirt; the instance path is shared
        # here, so Nova does not roll the destination back.
        self.live_migrations_raise()
        self.api.post_server_action(server['id'], {'os-migrateLive': {
            'host': 'dst', 'block_migration': 'auto'}})
        self._wait_for_migration_status(server, ['error', 'failed'])
        # Nova puts an instance whose migration raised in ERROR; it runs
        # on, on the source.
        server = self._wait_for_server_parameter(
            server, {'OS-EXT-STS:task_state': None,
                     'OS-EXT-SRV-ATTR:host': 'src'})
        self.assertEqual(1, self.free_closids('dst'))
        self.assertEqual({}, self.claims('dst'))
        self.assertEqual({server['id']}, set(self.claims('src')))
        self.assertEqual(1, self.free_closids('src'))

    def test_failed_finish_migration_then_hard_reboot(self):
        self.start_rdt_compute('a', prepare=base.leave_closids(2))
        self.start_rdt_compute('b', prepare=base.leave_closids(1))
        flavor = self.flavor(MB10)
        server = self.boot(flavor, host='a')
        # Another tool takes b's last CLOSID; the scheduler learns of it
        # only at b's next report.
        base.add_groups(self.roots['b'], 1)
        # Casts run as calls here: the API answers with the fault.
        self.assertRaises(client.OpenStackApiException,
                          self.api.post_server_action, server['id'],
                          {'migrate': {'host': 'b'}})
        server = self._wait_for_state_change(server, 'ERROR')
        self.assertEqual('b', server['OS-EXT-SRV-ATTR:host'])
        # The source gives its claim back once the records say the
        # instance is gone for good.
        self.assertEqual(2, self.free_closids('a'))
        self.assertEqual({}, self.claims('a'))
        # A hard reboot does not start the domain without the capacity.
        self.assertRaises(client.OpenStackApiException,
                          self.api.post_server_action, server['id'],
                          {'reboot': {'type': 'HARD'}})
        server = self._wait_for_server_parameter(
            server, {'status': 'ERROR', 'OS-EXT-STS:task_state': None})
        self.assertIn('RDT capacity exhausted on this host',
                      server['fault']['message'])
        self.assertNotIn(server['id'], self.claims('b'))
        self.assertEqual([], self.libvirt_groups('b'))
        self.assertEqual(0, self.free_closids('b'))

    def test_restart_during_same_host_resize_keeps_the_old_claim(self):
        self.flags(allow_resize_to_same_host=True)
        self.start_rdt_compute('a', prepare=base.leave_closids(2))
        server = self.boot(self.flavor(MB10))
        server = self._resize_server(server, self.flavor(
            {'hw:mem_bw': '20'}))
        self.assertEqual(0, self.free_closids('a'))
        self.restart_rdt_compute('a')
        self.assertEqual(0, self.free_closids('a'))
        self.boot(self.flavor(MB10), expected_state='ERROR')
        server = self._revert_resize(server)
        self.assertIn('<node id="0" bandwidth="10"/>',
                      self.domain_xml(server))
        self.assertEqual(1, self.free_closids('a'))

    def test_multi_create_takes_capacity_per_instance(self):
        self.start_rdt_compute('a', prepare=base.leave_closids(1))
        flavor = self.flavor(MB10)
        body = self._build_server(flavor_id=flavor, networks='none')
        body.update(min_count=2, max_count=2, return_reservation_id=True)
        reservation = self.api.post_server({'server': body})
        servers = self.api.get_servers(
            search_opts={'reservation_id': reservation['reservation_id']})
        self.assertEqual(2, len(servers))
        for server in servers:
            server = self._wait_for_state_change(server, 'ERROR')
            self.assertIn('No valid host', server['fault']['message'])
        self.assertEqual({}, self.claims('a'))
        self.assertEqual(0, self.failed_builds('a'))
        # Two hosts with one CLOSID each: one instance on each, at once.
        self.start_rdt_compute('b', prepare=base.leave_closids(1))
        body = self._build_server(flavor_id=flavor, networks='none')
        body.update(min_count=2, max_count=2, return_reservation_id=True)
        reservation = self.api.post_server({'server': body})
        servers = self.api.get_servers(
            search_opts={'reservation_id': reservation['reservation_id']})
        hosts = {self._wait_for_state_change(s, 'ACTIVE')[
            'OS-EXT-SRV-ATTR:host'] for s in servers}
        self.assertEqual({'a', 'b'}, hosts)
        for host in ('a', 'b'):
            self.assertEqual(0, self.failed_builds(host))

    def test_same_host_revert_keeps_the_old_claim_between_its_steps(self):
        # Nova reverts a same-host resize in two steps: revert_resize
        # destroys the new flavor's domain, then finish_revert_resize
        # creates the old one's. In between, no domain is defined.
        self.flags(allow_resize_to_same_host=True)
        self.start_rdt_compute('a', prepare=base.leave_closids(2))
        flavor = self.flavor(MB10)
        server = self.boot(flavor)
        server = self._resize_server(server, self.flavor(
            {'hw:mem_bw': '20'}))
        self.assertEqual(0, self.free_closids('a'))
        driver = self.driver('a')
        destroy = driver.destroy
        seen = []

        def destroy_then_look(context, instance, *args, **kwargs):
            result = destroy(context, instance, *args, **kwargs)
            if instance.task_state == 'resize_reverting' and not seen:
                # The periodic reconciliation runs, and another boot
                # comes, while the revert is between its steps.
                seen.append((set(self.claims('a')), self.free_closids('a')))
                others.append(self.wait_built(self.api.post_server(
                    {'server': self._build_server(flavor_id=flavor,
                                                  networks='none')})))
            return result

        others = []
        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.libvirt.driver.LibvirtDriver.destroy',
            lambda drv, *a, **k: (destroy_then_look if drv is driver
                                  else destroy)(*a, **k)))
        server = self._revert_resize(server)
        # The old flavor's claim held the CLOSID the revert needs.
        self.assertEqual([({server['id']}, 1)], seen)
        self.assertEqual('ACTIVE', others[0]['status'])
        self.assertEqual('ACTIVE', server['status'])
        self.assertIn('<node id="0" bandwidth="10"/>',
                      self.domain_xml(server))
        self.assertEqual({server['id'], others[0]['id']},
                         set(self.claims('a')))
        self.assertEqual(2, len(self.libvirt_groups('a')))
        self.assertEqual(0, self.free_closids('a'))

    def test_adoption_checks_the_capacity_of_stopped_domains(self):
        self.start_rdt_compute('a', prepare=base.leave_closids(2))
        flavor = self.flavor(MB10)
        running = self.boot(flavor)
        stopped = self._stop_server(self.boot(flavor))
        self.assertEqual(0, self.free_closids('a'))
        # While nova-compute is down, another tool takes the CLOSID the
        # stopped instance would need.
        self.computes['a'].stop()
        base.add_groups(self.roots['a'], 1)
        self.restart_rdt_compute('a')
        # The running domain's group is in resctrl: adopted. The stopped
        # one no longer fits: not adopted, and not counted.
        self.assertEqual({running['id']}, set(self.claims('a')))
        self.assertEqual(0, self.free_closids('a'))
        # Starting it claims with a check, and fails with the reason.
        # (Casts run as calls here: the API answers with the fault.)
        error = self.assertRaises(client.OpenStackApiException,
                                  self.api.post_server_action,
                                  stopped['id'], {'os-start': None})
        self.assertIn('ComputeResourcesUnavailable', str(error))
        self._wait_for_server_parameter(
            stopped, {'status': 'SHUTOFF', 'OS-EXT-STS:task_state': None})
        self.assertEqual({running['id']}, set(self.claims('a')))
        self.assertEqual(1, len(self.libvirt_groups('a')))
