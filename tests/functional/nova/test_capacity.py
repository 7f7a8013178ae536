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

"""RDT capacity: filtering full hosts, weighing, racing for the last CLOSID.

Every host here is the reference host; tests fill their resctrl trees with
foreign groups to leave a chosen number of CLOSIDs, and give them measured
memory bandwidth through rdt-virt-agent's state file.
"""

import json
import os
import time

from nova import context as nova_context
from nova import objects

from rdt_virt.policy import hoststats
from tests.functional.nova import base

leave_closids = base.leave_closids


class RDTCapacityTest(base.RDTServersTestBase):

    def publish_bandwidth(self, hostname, bps):
        """Write rdt-virt-agent's state file for ``hostname``."""
        path = self.driver(hostname)._rdt_state_file
        with open(path, 'w') as f:
            json.dump({'version': 1, 'time': time.time(), 'interval': 10,
                       'host': {'mbm_total_bps': bps}, 'instances': {}}, f)

    def reported(self, hostname):
        """The RDT state ``hostname`` reported to the scheduler."""
        node = objects.ComputeNode.get_by_nodename(
            nova_context.get_admin_context(), hostname)
        return hoststats.decode(node.stats)

    def create_error_reasons(self, server):
        """The faults of the instance.create.error notifications."""
        return [n['payload']['nova_object.data']['fault'][
                    'nova_object.data']['exception_message']
                for n in self.notifier.versioned_notifications
                if n['event_type'] == 'instance.create.error' and
                n['payload']['nova_object.data']['uuid'] == server['id']]

    def test_full_host_is_filtered(self):
        self.start_rdt_compute('full', prepare=leave_closids(0))
        self.start_rdt_compute('free', prepare=leave_closids(2))
        flavor = self.flavor({'hw:mem_bw': '10'})
        for _ in range(2):
            server = self.boot(flavor)
            self.assertEqual('free', server['OS-EXT-SRV-ATTR:host'])
            # The scheduler learns of the claim from the next report.
            self._run_periodics()
        self.assertEqual(0, self.reported('free').capacity.free_closids)
        # Both full now: no valid host, and no claim anywhere.
        server = self.boot(flavor, expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])
        self.assertEqual(2, len(self.claims('free')))
        self.assertEqual({}, self.claims('full'))
        # A plain flavor still boots on a full host.
        self.assertIn(self.boot(self.flavor({}))['OS-EXT-SRV-ATTR:host'],
                      ('full', 'free'))

    def test_shared_strategy_needs_no_closid_for_an_existing_group(self):
        # rdtvirt-mb10 exists in the reference tree: 10% shares it.
        self.start_rdt_compute('shared', strategy='shared',
                               prepare=leave_closids(0))
        self.start_rdt_compute('other', variant='none')
        server = self.boot(self.flavor({'hw:mem_bw': '10'}))
        self.assertEqual('shared', server['OS-EXT-SRV-ATTR:host'])
        # Percent-only under the shared strategy: metadata, no memorytune.
        xml = self.domain_xml(server)
        self.assertNotIn('<cputune>', xml)
        self.assertIn('<rdtvirt:membw unit="percent" value="10" '
                      'group="shared"/>', xml)
        # 20% needs a new shared group, and there is no CLOSID for it.
        server = self.boot(self.flavor({'hw:mem_bw': '20'}),
                           expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])

    def test_contiguous_ways(self):
        # Cache 0 of the reference tree has two free ways (bits 2-3).
        self.start_rdt_compute('a')
        self.start_rdt_compute('b')
        three_ways = self.flavor({'hw:cache_l3': '8000'})
        server = self.boot(three_ways, expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])
        two_ways = self.flavor({'hw:cache_l3': '6656'})
        hosts = set()
        for _ in range(2):
            hosts.add(self.boot(two_ways)['OS-EXT-SRV-ATTR:host'])
            self._run_periodics()
        self.assertEqual({'a', 'b'}, hosts)
        self.assertEqual(0, self.reported('a').capacity.largest_free_run(
            'L3', 0))

    def test_weigher_prefers_headroom(self):
        self.start_rdt_compute('tight', prepare=leave_closids(1))
        self.start_rdt_compute('roomy', prepare=leave_closids(3))
        server = self.boot(self.flavor({'hw:mem_bw': '10'}))
        self.assertEqual('roomy', server['OS-EXT-SRV-ATTR:host'])

    def test_weigher_prefers_low_bandwidth(self):
        self.start_rdt_compute('busy')
        self.start_rdt_compute('quiet')
        self.publish_bandwidth('busy', 9e9)
        self.publish_bandwidth('quiet', 1e9)
        self._run_periodics()
        self.assertEqual(9e9, self.reported('busy').mbw)
        server = self.boot(self.flavor({'hw:mem_bw': '10'}))
        self.assertEqual('quiet', server['OS-EXT-SRV-ATTR:host'])
        # Swapped measurements, swapped choice.
        self.publish_bandwidth('busy', 1e8)
        self._run_periodics()
        server = self.boot(self.flavor({'hw:mem_bw': '20'}))
        self.assertEqual('busy', server['OS-EXT-SRV-ATTR:host'])

    def test_scheduler_counts_what_it_placed(self):
        # 'a' has one CLOSID left and measures less bandwidth, so the
        # scheduler prefers it; its stats say one CLOSID is free until its
        # next resource report, but the scheduler counts the instance it
        # placed there.
        self.start_rdt_compute('a', prepare=leave_closids(1))
        self.start_rdt_compute('b', prepare=leave_closids(2))
        self.publish_bandwidth('a', 1e8)
        self.publish_bandwidth('b', 9e9)
        self._run_periodics()
        flavor = self.flavor({'hw:mem_bw': '10'})

        first = self.boot(flavor)
        self.assertEqual('a', first['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(1, self.reported('a').capacity.free_closids)
        second = self.boot(flavor)
        self.assertEqual('b', second['OS-EXT-SRV-ATTR:host'])
        self.assertEqual([], self.create_error_reasons(second))
        self._check_nothing_leaked(first, second)

    def test_race_for_the_last_closid(self):
        # Something the scheduler cannot see takes 'a''s last CLOSID
        # after its report: 'a' refuses the boot, Nova reschedules it to
        # the alternate host, and 'a' is not marked as failing builds.
        self.start_rdt_compute('a', prepare=leave_closids(2))
        self.start_rdt_compute('b', prepare=leave_closids(2))
        self.publish_bandwidth('a', 1e8)
        self.publish_bandwidth('b', 9e9)
        self._run_periodics()
        flavor = self.flavor({'hw:mem_bw': '10'})
        first = self.boot(flavor)
        self.assertEqual('a', first['OS-EXT-SRV-ATTR:host'])
        self._run_periodics()
        base.add_groups(self.roots['a'], 1)
        second = self.boot(flavor)
        self.assertEqual('b', second['OS-EXT-SRV-ATTR:host'])
        reasons = self.create_error_reasons(second)
        self.assertEqual(1, len(reasons), reasons)
        self.assertIn('RDT capacity exhausted on this host: no free CLOSID',
                      reasons[0])
        self.assertEqual(0, self.failed_builds('a'))
        self.assertEqual([first['id']], list(self.claims('a')))
        self.assertEqual([second['id']], list(self.claims('b')))

    def _check_nothing_leaked(self, first, second):
        # Each host holds exactly its own instance...
        self.assertEqual([first['id']], list(self.claims('a')))
        self.assertEqual([second['id']], list(self.claims('b')))
        self._run_periodics()
        self.assertEqual(0, self.reported('a').capacity.free_closids)
        self.assertEqual(1, self.reported('b').capacity.free_closids)
        # ... and gives everything back on delete.
        for server in (first, second):
            self._delete_server(server)
            self._wait_until_deleted(server)
        self._run_periodics()
        self.assertEqual({}, self.claims('a'))
        self.assertEqual({}, self.claims('b'))
        self.assertEqual(1, self.reported('a').capacity.free_closids)
        self.assertEqual(2, self.reported('b').capacity.free_closids)

    def test_exhaustion_without_alternate_says_why(self):
        self.start_rdt_compute('only', prepare=leave_closids(2))
        self.start_rdt_compute('none', variant='none')
        flavor = self.flavor({'hw:mem_bw': '10'})
        self.boot(flavor)
        self._run_periodics()
        # Stale stats: another resctrl user took the last CLOSID after the
        # report, the scheduler still sees it free on 'only'. With no
        # alternate host, Nova's fault only says that it ran out of hosts;
        # the reason is in the instance.create.error notification.
        base.add_groups(self.roots['only'], 1)
        server = self.boot(flavor, expected_state='ERROR')
        self.assertIn('Exhausted all hosts available',
                      server['fault']['message'])
        self.assertIn('no free CLOSID',
                      self.create_error_reasons(server)[0])
        # The failed build left the host, which reported what it has: the
        # scheduler refuses the next boot itself.
        server = self.boot(flavor, expected_state='ERROR')
        self.assertIn('RDTFilter: no host can take hw:mem_bw=10: 1 host: '
                      'no free CLOSID', server['fault']['message'])
        # Stale again: the other user gives its CLOSID back, the host
        # reports it, and takes it once more.
        other = sorted(n for n in os.listdir(self.roots['only'])
                       if n.startswith('other-'))[-1]
        os.rmdir(os.path.join(self.roots['only'], other, 'mon_groups'))
        os.remove(os.path.join(self.roots['only'], other, 'schemata'))
        os.rmdir(os.path.join(self.roots['only'], other))
        self._run_periodics()
        base.add_groups(self.roots['only'], 1)
        # Without rescheduling, the reason is the instance's fault.
        self.flags(max_attempts=1, group='scheduler')
        server = self.boot(flavor, expected_state='ERROR')
        self.assertEqual(
            'Insufficient compute resources: RDT capacity exhausted on this '
            'host: no free CLOSID for a new resctrl control group.',
            server['fault']['message'])
        self.assertEqual(1, len(self.claims('only')))

    def test_stopped_instance_keeps_its_closid(self):
        # libvirt removes a group when its domain stops; the claim stays.
        self.start_rdt_compute('a', prepare=leave_closids(1))
        self.start_rdt_compute('b', variant='none')
        server = self.boot(self.flavor({'hw:mem_bw': '10'}))
        server = self._stop_server(server)
        server = self._start_server(server)
        self._reboot_server(server, hard=True)
        self._run_periodics()
        self.assertEqual([server['id']], list(self.claims('a')))
        self.assertEqual(0, self.reported('a').capacity.free_closids)
        self.assertIn('<memorytune vcpus="0-1">', self.domain_xml(server))

    def test_same_host_resize_holds_both_until_confirmed(self):
        self.flags(allow_resize_to_same_host=True)
        self.start_rdt_compute('a', prepare=leave_closids(2))
        self.start_rdt_compute('plain', variant='none')
        server = self.boot(self.flavor({'hw:mem_bw': '10'}))
        self.assertEqual('a', server['OS-EXT-SRV-ATTR:host'])

        cache = self.flavor({'hw:cache_l3': '4096'})
        server = self._resize_server(server, cache)
        self.assertEqual('a', server['OS-EXT-SRV-ATTR:host'])
        self.assertIn('<cache id="0" level="3" type="both" size="6656" '
                      'unit="KiB"/>', self.domain_xml(server))
        self.assertNotIn('<memorytune', self.domain_xml(server))
        # Both flavors' groups are held: no CLOSID left for anyone else.
        self._run_periodics()
        self.assertEqual(0, self.reported('a').capacity.free_closids)
        server = self._revert_resize(server)
        self.assertIn('<memorytune vcpus="0-1">', self.domain_xml(server))
        self._run_periodics()
        self.assertEqual(1, self.reported('a').capacity.free_closids)
        self.assertEqual(10, self.claims('a')[server['id']].mem_bw.value)

        monitor = self.flavor({'hw:rdt_monitor': 'true'})
        server = self._resize_server(server, monitor)
        server = self._confirm_resize(server)
        self.assertNotIn('<cputune>', self.domain_xml(server))
        self._run_periodics()
        # A monitored instance needs no control group of its own.
        self.assertEqual(2, self.reported('a').capacity.free_closids)
