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

"""Protection classes (hw:rdt_priority) through Nova: scheduler and driver.

Real nova-api, conductor, scheduler (RDTFilter, RDTWeigher) and computes
with RDTLibvirtDriver over fake resctrl trees, with the placement fixture.
"""

import os

from lxml import etree

from rdt_virt.libvirt import config as rdt_config
from tests.functional.nova import base

NS = {'rdt': rdt_config.NAMESPACE}

# libvirt's view of a host that can throttle but only measures occupancy.
CMT_ONLY_XML = base.HOST_RDT_XML['reference'].replace(
    "<feature name='mbm_total_bytes'/>", '').replace(
    "<feature name='mbm_local_bytes'/>", '')


def cmt_only(tree):
    """A ``prepare``: the reference tree without MBM events."""
    with open(os.path.join(tree, 'info', 'L3_MON', 'mon_features'),
              'w') as f:
        f.write('llc_occupancy\n')


def metadata(xml):
    """(priority class, membw group or None, has <memorytune>)."""
    root = etree.fromstring(xml)
    prio = root.find('metadata/rdt:rdt/rdt:priority', NS)
    membw = root.find('metadata/rdt:rdt/rdt:membw', NS)
    return (None if prio is None else prio.get('class'),
            None if membw is None else membw.get('group'),
            root.find('cputune/memorytune') is not None)


class TestPriorityRefused(base.RDTServersTestBase):
    """Hosts without MBA or MBM refuse high and low, like any feature."""

    def setUp(self):
        super().setUp()
        self.start_rdt_compute('nomba', variant='l3-cat')
        self.start_rdt_compute('nombm', variant='reference',
                               prepare=cmt_only, rdt_xml=CMT_ONLY_XML)

    def test_classes_find_no_host(self):
        for priority in ('high', 'low'):
            server = self.boot(self.flavor({'hw:rdt_priority': priority}),
                               expected_state='ERROR')
            message = server['fault']['message']
            self.assertIn('No valid host', message)
            self.assertIn('RDTFilter', message)
            self.assertIn('hw:rdt_priority=%s' % priority, message)
        for host in ('nomba', 'nombm'):
            self.assertEqual({}, self.claims(host))

    def test_normal_boots_anywhere(self):
        server = self.boot(self.flavor({'hw:rdt_priority': 'normal'}))
        self.assertIn(server['OS-EXT-SRV-ATTR:host'], ('nomba', 'nombm'))
        self.assertEqual((None, None, False),
                         metadata(self.domain_xml(server)))

    def test_low_with_a_dedicated_cache_finds_no_host(self):
        # Invalid together (the API validates one key at a time).
        server = self.boot(self.flavor({'hw:rdt_priority': 'low',
                                        'hw:cache_l3': '4096'}),
                           expected_state='ERROR')
        self.assertIn('low cannot be combined with hw:cache_l3',
                      server['fault']['message'])


class TestPriorityPlacement(base.RDTServersTestBase):
    """Two reference hosts: the classes in the stats and in the weigher."""

    def setUp(self):
        super().setUp()
        self.start_rdt_compute('host1')
        self.start_rdt_compute('host2')

    def test_high_instances_are_kept_apart(self):
        high = self.flavor({'hw:rdt_priority': 'high'})
        first = self.boot(high)
        one = first['OS-EXT-SRV-ATTR:host']
        other = 'host2' if one == 'host1' else 'host1'
        self._run_periodics()
        self.assertEqual({0: (1, 0), 1: (1, 0)},
                         self.reported(one).classes)
        self.assertEqual({}, self.reported(other).classes)
        second = self.boot(high)
        self.assertEqual(other, second['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(('high', None, False),
                         metadata(self.domain_xml(second)))

    def test_low_instances_go_where_no_high_one_is(self):
        high = self.boot(self.flavor({'hw:rdt_priority': 'high'}))
        self._run_periodics()
        low = self.boot(self.flavor({'hw:rdt_priority': 'low',
                                     'hw:mem_bw': '30'}))
        self.assertNotEqual(high['OS-EXT-SRV-ATTR:host'],
                            low['OS-EXT-SRV-ATTR:host'])
        # A low instance's cap is the agent's (shared group), even on a
        # per-instance host: no <memorytune>.
        self.assertEqual(('low', 'shared', False),
                         metadata(self.domain_xml(low)))
        self._run_periodics()
        self.assertEqual({0: (0, 1), 1: (0, 1)},
                         self.reported(low['OS-EXT-SRV-ATTR:host']).classes)

    def test_deleting_an_instance_updates_the_counts(self):
        server = self.boot(self.flavor({'hw:rdt_priority': 'low'}))
        host = server['OS-EXT-SRV-ATTR:host']
        self._run_periodics()
        self.assertEqual({0: (0, 1), 1: (0, 1)}, self.reported(host).classes)
        self._delete_server(server)
        self._run_periodics()
        self.assertEqual({}, self.reported(host).classes)
