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

"""Live migration of RDT instances between hosts that differ.

The destination's libvirt starts the domain from the XML the source sends
(fakelibvirt's domains make resctrl groups as libvirt does, and refuse a
cache id or memory bandwidth node the host lacks), so the XML must carry
the destination's plan, and the destination must refuse, before the
conductor commits to it, an instance it cannot hold.
"""

from lxml import etree
from nova.tests.functional.api import client

from tests.functional.nova import base

MB10 = {'hw:mem_bw': '10'}
# One way of each L3 cache (3328 KiB) and 10% of each node's bandwidth.
CACHE_MB10 = {'hw:cache_l3': '3328', 'hw:mem_bw': '10'}


def _one_socket(free):
    def prepare(tree):
        base.one_socket(tree)
        base.leave_closids(free)(tree)
    return prepare


class RDTLiveMigrationTest(base.RDTServersTestBase):

    def setUp(self):
        super().setUp()
        self.start_rdt_compute('plain', variant='none')
        self.live_migrations_complete()

    def test_destination_plan_in_the_migrated_xml(self):
        self.start_rdt_compute('a', prepare=base.leave_closids(2))
        # One L3 cache and one memory bandwidth node where the source has
        # two of each.
        self.start_rdt_compute('b', prepare=_one_socket(1),
                               rdt_xml=base.ONE_SOCKET_XML)
        server = self.boot(self.flavor(CACHE_MB10), host='a')
        xml = etree.fromstring(self.domain_xml(server))
        self.assertEqual(['0', '1'], [cache.get('id') for cache in
                                      xml.iterfind('cputune/cachetune/cache')])
        self.assertEqual(['0', '1'], [node.get('id') for node in
                                      xml.iterfind('cputune/memorytune/node')])
        server = self.live_migrate_to(server, 'b')
        self.assertEqual('b', server['OS-EXT-SRV-ATTR:host'])
        xml = etree.fromstring(self.migrated_xmls[-1])
        self.assertEqual([('0', '3328')], [
            (cache.get('id'), cache.get('size'))
            for cache in xml.iterfind('cputune/cachetune/cache')])
        self.assertEqual(['0'], [node.get('id') for node in xml.iterfind(
            'cputune/memorytune/node')])
        self.assertEqual({server['id']}, set(self.claims('b')))
        self.assertEqual(1, len(self.libvirt_groups('b')))
        self.assertEqual(0, self.free_closids('b'))
        self.assertEqual({}, self.claims('a'))
        self.assertEqual([], self.libvirt_groups('a'))
        self.assertEqual(2, self.free_closids('a'))

    def test_precheck_sends_the_conductor_to_the_next_host(self):
        self.start_rdt_compute('a', prepare=base.leave_closids(2))
        self.start_rdt_compute('b', prepare=base.leave_closids(2))
        self.start_rdt_compute('c', prepare=base.leave_closids(1))
        server = self.boot(self.flavor(MB10), host='a')
        self.assertEqual(2, self.free_closids('b'))
        # Another tool takes b's CLOSIDs; the scheduler, which still
        # sees b with the most room, learns of it only at b's next report.
        base.add_groups(self.roots['b'], 2)
        server = self._live_migrate(server)
        self.assertEqual('c', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual({}, self.claims('b'))
        self.assertEqual({server['id']}, set(self.claims('c')))
        self.assertEqual(0, self.free_closids('c'))
        self.assertEqual(0, self.free_closids('b'))
        self.assertEqual(2, self.free_closids('a'))

    def test_precheck_refusal_keeps_the_instance_on_its_host(self):
        self.start_rdt_compute('a', prepare=base.leave_closids(2))
        self.start_rdt_compute('b', prepare=base.leave_closids(1))
        server = self.boot(self.flavor(MB10), host='a')
        self.assertEqual(1, self.free_closids('b'))
        base.add_groups(self.roots['b'], 1)
        # Casts run as calls here: the API answers with the conductor's
        # NoValidHost.
        self.assertRaises(client.OpenStackApiException,
                          self.api.post_server_action, server['id'],
                          {'os-migrateLive': {'host': None,
                                              'block_migration': 'auto'}})
        self._wait_for_migration_status(server, ['error'])
        server = self._wait_for_server_parameter(
            server, {'status': 'ACTIVE', 'OS-EXT-STS:task_state': None,
                     'OS-EXT-SRV-ATTR:host': 'a'})
        self.assertEqual({}, self.claims('b'))
        self.assertEqual({server['id']}, set(self.claims('a')))
        self.assertEqual(1, len(self.libvirt_groups('a')))
        self.assertEqual(1, self.free_closids('a'))
