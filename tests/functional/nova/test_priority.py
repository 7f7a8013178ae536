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
import shutil

from lxml import etree
from nova.tests.functional.api import client

from rdt_virt.libvirt import config as rdt_config
from tests.functional.nova import base

NS = {'rdt': rdt_config.NAMESPACE}

# libvirt's view of a host that can throttle but only measures occupancy.
CMT_ONLY_XML = base.HOST_RDT_XML['reference'].replace(
    "<feature name='mbm_total_bytes'/>", '').replace(
    "<feature name='mbm_local_bytes'/>", '')
# libvirt's view of the reference host booted with rdt=!mba: L3 CAT and
# monitoring, no memory bandwidth allocation.
NO_MBA_XML = base.HOST_RDT_XML['reference'].split('<memory_bandwidth>')[0]

HIGH_NO_MBA = ('hw:rdt_priority=high needs memory bandwidth allocation '
               '(MBA), which the host does not have')
HIGH_NO_MBM = ('hw:rdt_priority=high needs memory bandwidth monitoring '
               '(MBM), which the host does not have')


def cmt_only(tree):
    """A ``prepare``: the reference tree without MBM events."""
    with open(os.path.join(tree, 'info', 'L3_MON', 'mon_features'),
              'w') as f:
        f.write('llc_occupancy\n')


def no_mba(tree):
    """A ``prepare``: the reference tree as booted with ``rdt=!mba``."""
    shutil.rmtree(os.path.join(tree, 'info', 'MB'))
    for path, _dirs, files in os.walk(tree):
        if 'schemata' in files:
            name = os.path.join(path, 'schemata')
            with open(name) as f:
                lines = [line for line in f
                         if not line.strip().startswith('MB:')]
            with open(name, 'w') as f:
                f.writelines(lines)


def metadata(xml):
    """(priority class, membw group or None, has <memorytune>)."""
    root = etree.fromstring(xml)
    prio = root.find('metadata/rdt:rdt/rdt:priority', NS)
    membw = root.find('metadata/rdt:rdt/rdt:membw', NS)
    return (None if prio is None else prio.get('class'),
            None if membw is None else membw.get('group'),
            root.find('cputune/memorytune') is not None)


class TestPriorityWithoutMBA(base.RDTServersTestBase):
    """Hosts without MBA or MBM refuse high, and take low.

    A high instance needs MBA and MBM, like any feature a host lacks. A
    low one is throttled only for a high one beside it, and no high one
    runs where MBA or MBM is missing: there it runs unthrottled.
    """

    def setUp(self):
        super().setUp()
        self.start_rdt_compute('nomba', variant='l3-cat')
        self.start_rdt_compute('nombm', variant='reference',
                               prepare=cmt_only, rdt_xml=CMT_ONLY_XML)

    def test_high_finds_no_host(self):
        server = self.boot(self.flavor({'hw:rdt_priority': 'high'}),
                           expected_state='ERROR')
        message = server['fault']['message']
        self.assertIn('No valid host', message)
        self.assertIn('RDTFilter: no host can take hw:rdt_priority=high: ',
                      message)
        # Nova keeps 255 characters of a fault.
        self.assertIn('1 host: %s; 1 host: %s' % (HIGH_NO_MBA,
                                                  HIGH_NO_MBM[:40]), message)
        for host in ('nomba', 'nombm'):
            self.assertEqual({}, self.claims(host))

    def test_low_boots_on_either(self):
        low = self.flavor({'hw:rdt_priority': 'low'})
        # Monitored where the host can monitor (CMT here), not on a host
        # that has only L3 CAT.
        for host, monitored in (('nomba', False), ('nombm', True)):
            server = self.boot(low, host=host)
            self.assertEqual(host, server['OS-EXT-SRV-ATTR:host'])
            self.assertEqual(('low', None, False),
                             metadata(self.domain_xml(server)))
            plan = self.claims(host)[server['id']]
            self.assertEqual('low', plan.priority)
            self.assertEqual(monitored, plan.monitor)
            self.assertIsNone(plan.mem_bw)

    def test_low_with_a_cap_needs_mba_all_the_same(self):
        server = self.boot(self.flavor({'hw:rdt_priority': 'low',
                                        'hw:mem_bw': '30'}),
                           host='nomba', expected_state='ERROR')
        self.assertIn('no memory bandwidth allocation (MBA)',
                      server['fault']['message'])

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


class TestLowMovesOffTheHighHost(base.RDTServersTestBase):
    """A host with MBA beside one booted without it (``rdt=!mba``).

    The test cloud's two hosts: the cloud loop moves a noisy low instance
    from beside a high one to the host without MBA, where no high
    instance can follow it.
    """

    def setUp(self):
        super().setUp()
        self.start_rdt_compute('mba')
        self.start_rdt_compute('nomba', prepare=no_mba, rdt_xml=NO_MBA_XML)
        self.live_migrations_complete()
        self.high = self.boot(self.flavor({'hw:rdt_priority': 'high'}))
        self.assertEqual('mba', self.high['OS-EXT-SRV-ATTR:host'])
        self.low_flavor = self.flavor({'hw:rdt_priority': 'low'})

    def test_low_goes_where_no_high_one_is(self):
        self._run_periodics()
        self.assertEqual({0: (1, 0), 1: (1, 0)},
                         self.reported('mba').classes)
        # The host without MBA counts no class (it has no memory
        # bandwidth domain), and holds no high instance: RDTWeigher sends
        # the low one there.
        low = self.boot(self.low_flavor)
        self.assertEqual('nomba', low['OS-EXT-SRV-ATTR:host'])
        self._run_periodics()
        self.assertEqual({}, self.reported('nomba').classes)

    def test_low_live_migrates_to_the_host_without_mba(self):
        low = self.boot(self.low_flavor, host='mba')
        self.assertEqual('mba', low['OS-EXT-SRV-ATTR:host'])
        # As Watcher's action: no destination, the scheduler chooses.
        low = self._live_migrate(low)
        self.assertEqual('nomba', low['OS-EXT-SRV-ATTR:host'])
        xml = self.migrated_xmls[-1]
        self.assertEqual(('low', None, False), metadata(xml))
        monitor = etree.fromstring(xml).find('metadata/rdt:rdt/rdt:monitor',
                                             NS)
        self.assertEqual('yes', monitor.get('enabled'))
        self.assertEqual({low['id']}, set(self.claims('nomba')))
        self.assertEqual({self.high['id']}, set(self.claims('mba')))
        # And back, to a host with MBA, where the agent can throttle it.
        low = self.live_migrate_to(low, 'mba')
        self.assertEqual('mba', low['OS-EXT-SRV-ATTR:host'])
        self.assertEqual({}, self.claims('nomba'))

    def test_high_is_refused_the_host_without_mba(self):
        try:
            self.admin_api.post_server_action(self.high['id'], {
                'os-migrateLive': {'host': 'nomba',
                                   'block_migration': 'auto'}})
        except client.OpenStackApiException as e:
            # The harness turns casts into calls.
            self.assertIn('NoValidHost', str(e))
        event = self._wait_for_action_fail_completion(
            self.high, 'live-migration', 'conductor_live_migrate_instance')
        self.assertEqual(
            'No valid host was found. RDTFilter: no host can take '
            'hw:rdt_priority=high: 1 host: %s.' % HIGH_NO_MBA,
            event.get('details'))
        server = self._wait_for_state_change(self.high, 'ACTIVE')
        self.assertEqual('mba', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual({}, self.claims('nomba'))


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
