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

"""Booting, resizing and migrating RDT flavors across different hosts.

Four computes with different RDT hardware:

* ``ref``: the reference host (L3 CAT, MBA in percent, CMT/MBM);
* ``cdp``: the same host mounted with CDP, with two CLOSIDs fewer free
  than ``ref``, so that RDTWeigher prefers ``ref`` where both fit;
* ``mbps``: the reference host mounted with ``mba_MBps``;
* ``plain``: no RDT at all.
"""

from lxml import etree
from nova import context as nova_context
from nova import objects

from rdt_virt.policy import hoststats
from tests.functional.nova import base

RDT_NS = 'http://openstack.org/xmlns/libvirt/rdt-virt/1.0'


def fragment(domain_xml, path, namespaces=None):
    """The element at ``path`` as compact XML, or None."""
    root = etree.fromstring(domain_xml.encode())
    found = root.find(path, namespaces)
    if found is None:
        return None
    found = etree.fromstring(etree.tostring(found))
    for el in found.iter():
        el.tail = None
        if el.text is not None and not el.text.strip():
            el.text = None
    etree.cleanup_namespaces(found)
    return etree.tostring(found, encoding='unicode')


def compact(xml):
    parser = etree.XMLParser(remove_blank_text=True)
    return etree.tostring(etree.fromstring(xml, parser), encoding='unicode')


def cputune(domain_xml):
    return fragment(domain_xml, 'cputune')


def rdt_metadata(domain_xml):
    return fragment(domain_xml, 'metadata/rdt:rdt', {'rdt': RDT_NS})


RDT_MB10 = compact('''
<rdtvirt:rdt xmlns:rdtvirt="%s" version="1">
  <rdtvirt:membw unit="percent" value="10" group="instance"/>
  <rdtvirt:monitor enabled="yes"/>
</rdtvirt:rdt>''' % RDT_NS)


class RDTServersTest(base.RDTServersTestBase):

    def setUp(self):
        super().setUp()
        self.start_rdt_compute('ref', 'reference')
        self.start_rdt_compute('cdp', 'cdp',
                               prepare=lambda t: base.add_groups(t, 2))
        self.start_rdt_compute('mbps', 'mba-mbps')
        self.start_rdt_compute('plain', 'none')

    def host_of(self, server):
        return server['OS-EXT-SRV-ATTR:host']

    def test_mem_bw_reference_scenario(self):
        # The noisy neighbours of the reference scenario: throttled to 10%.
        noisy = self.flavor({'hw:mem_bw': '10'})
        server = self.boot(noisy)
        self.assertEqual('ref', self.host_of(server))
        xml = self.domain_xml(server)
        self.assertEqual(compact('''
            <cputune>
              <memorytune vcpus="0-1">
                <node id="0" bandwidth="10"/>
                <node id="1" bandwidth="10"/>
                <monitor vcpus="0-1"/>
              </memorytune>
            </cputune>'''), cputune(xml))
        self.assertEqual(RDT_MB10, rdt_metadata(xml))
        self.assertEqual([server['id']], list(self.claims('ref')))

    def test_mem_bw_rounded_to_the_host(self):
        server = self.boot(self.flavor({'hw:mem_bw': '15'}, vcpu=1))
        xml = self.domain_xml(server)
        self.assertEqual(compact('''
            <cputune>
              <memorytune vcpus="0">
                <node id="0" bandwidth="20"/>
                <node id="1" bandwidth="20"/>
                <monitor vcpus="0"/>
              </memorytune>
            </cputune>'''), cputune(xml))
        self.assertEqual(compact('''
            <rdtvirt:rdt xmlns:rdtvirt="%s" version="1">
              <rdtvirt:membw unit="percent" value="20" requested="15"
                             group="instance"/>
              <rdtvirt:monitor enabled="yes"/>
            </rdtvirt:rdt>''' % RDT_NS), rdt_metadata(xml))

    def test_mem_bw_mbps_only_on_mba_mbps_host(self):
        server = self.boot(self.flavor({'hw:mem_bw_mbps': '2000'}))
        self.assertEqual('mbps', self.host_of(server))
        xml = self.domain_xml(server)
        # libvirt refuses memorytune above 100: rdt-virt-agent applies it.
        self.assertIsNone(cputune(xml))
        self.assertEqual(compact('''
            <rdtvirt:rdt xmlns:rdtvirt="%s" version="1">
              <rdtvirt:membw unit="MBps" value="2000" group="instance"/>
              <rdtvirt:monitor enabled="yes"/>
            </rdtvirt:rdt>''' % RDT_NS), rdt_metadata(xml))

    def test_cache_l3(self):
        # 4 MiB is two ways of 3328 KiB; cache 0 has exactly two free.
        server = self.boot(self.flavor({'hw:cache_l3': '4096',
                                        'hw:rdt_monitor': 'false'}))
        self.assertIn(self.host_of(server), ('ref', 'mbps'))
        self.assertEqual(compact('''
            <cputune>
              <cachetune vcpus="0-1">
                <cache id="0" level="3" type="both" size="6656" unit="KiB"/>
                <cache id="1" level="3" type="both" size="6656" unit="KiB"/>
              </cachetune>
            </cputune>'''), cputune(self.domain_xml(server)))
        # The request beside the two ways held, for the agent to publish.
        expected = compact('''
            <rdtvirt:rdt xmlns:rdtvirt="%s" version="1">
              <rdtvirt:monitor enabled="no"/>
              <rdtvirt:cache level="3" type="both" requested="4096"/>
            </rdtvirt:rdt>''' % RDT_NS)
        self.assertEqual(expected, rdt_metadata(self.domain_xml(server)))

    def test_cache_and_mem_bw_share_the_group_and_its_monitor(self):
        server = self.boot(self.flavor({'hw:cache_l3': '3000',
                                        'hw:mem_bw': '50'}))
        self.assertEqual('ref', self.host_of(server))
        self.assertEqual(compact('''
            <cputune>
              <cachetune vcpus="0-1">
                <cache id="0" level="3" type="both" size="3328" unit="KiB"/>
                <cache id="1" level="3" type="both" size="3328" unit="KiB"/>
                <monitor level="3" vcpus="0-1"/>
              </cachetune>
              <memorytune vcpus="0-1">
                <node id="0" bandwidth="50"/>
                <node id="1" bandwidth="50"/>
                <monitor vcpus="0-1"/>
              </memorytune>
            </cputune>'''), cputune(self.domain_xml(server)))

    def test_cache_l3_code_and_data_only_on_cdp(self):
        server = self.boot(self.flavor({'hw:cache_l3_code': '2048',
                                        'hw:cache_l3_data': '4096'}))
        self.assertEqual('cdp', self.host_of(server))
        self.assertEqual(compact('''
            <cputune>
              <cachetune vcpus="0-1">
                <cache id="0" level="3" type="code" size="3328" unit="KiB"/>
                <cache id="1" level="3" type="code" size="3328" unit="KiB"/>
                <cache id="0" level="3" type="data" size="6656" unit="KiB"/>
                <cache id="1" level="3" type="data" size="6656" unit="KiB"/>
                <monitor level="3" vcpus="0-1"/>
              </cachetune>
            </cputune>'''), cputune(self.domain_xml(server)))

    def test_rdt_monitor(self):
        # Monitoring alone is the agent's job: no monitor-only cachetune.
        server = self.boot(self.flavor({'hw:rdt_monitor': 'true'}))
        self.assertNotEqual('plain', self.host_of(server))
        xml = self.domain_xml(server)
        self.assertIsNone(cputune(xml))
        self.assertEqual(compact('''
            <rdtvirt:rdt xmlns:rdtvirt="%s" version="1">
              <rdtvirt:monitor enabled="yes"/>
            </rdtvirt:rdt>''' % RDT_NS), rdt_metadata(xml))

    def test_plain_flavor_has_no_rdt(self):
        for specs in ({}, {'hw:rdt_monitor': 'false'}):
            server = self.boot(self.flavor(specs))
            xml = self.domain_xml(server)
            if not specs:
                self.assertIsNone(rdt_metadata(xml))
            self.assertIsNone(cputune(xml))

    def test_no_host_has_the_capabilities(self):
        # CDP and mba_MBps are on different hosts: no valid host.
        server = self.boot(self.flavor({'hw:cache_l3_code': '1024',
                                        'hw:cache_l3_data': '1024',
                                        'hw:mem_bw_mbps': '1000'}),
                           expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])
        for host in ('ref', 'cdp', 'mbps', 'plain'):
            self.assertEqual({}, self.claims(host))

    def test_traits(self):
        expected = {
            'ref': {'L3_CAT', 'MBA', 'CMT', 'MBM_TOTAL', 'MBM_LOCAL'},
            'cdp': {'L3_CAT', 'L3_CDP', 'MBA', 'CMT', 'MBM_TOTAL',
                    'MBM_LOCAL'},
            'mbps': {'L3_CAT', 'MBA', 'MBA_MBPS', 'CMT', 'MBM_TOTAL',
                     'MBM_LOCAL'},
            'plain': set(),
        }
        for host, features in expected.items():
            traits = self._get_provider_traits(self.compute_rp_uuids[host])
            self.assertEqual({'CUSTOM_RDT_' + f for f in features},
                             {t for t in traits
                              if t.startswith('CUSTOM_RDT_')}, host)

    def test_stats(self):
        ctxt = nova_context.get_admin_context()
        stats = {}
        for host in ('ref', 'cdp', 'mbps', 'plain'):
            node = objects.ComputeNode.get_by_nodename(ctxt, host)
            stats[host] = hoststats.decode(node.stats)
        self.assertEqual(4, stats['ref'].capacity.free_closids)
        self.assertEqual(2, stats['cdp'].capacity.free_closids)
        self.assertEqual({0: 0xc, 1: 0xf},
                         stats['ref'].capacity.free_masks['L3'])
        self.assertTrue(stats['cdp'].caps.cdp)
        self.assertEqual('MBps', stats['mbps'].caps.mb.unit)
        self.assertFalse(stats['plain'].caps.rdt_enabled)

    def test_resize_to_each_host_kind(self):
        server = self.boot(self.flavor({'hw:mem_bw': '10'}))
        self.assertEqual('ref', self.host_of(server))

        # Only cdp can serve code/data: the new policy is written there.
        cdp_flavor = self.flavor({'hw:cache_l3_code': '2048',
                                  'hw:cache_l3_data': '2048',
                                  'hw:mem_bw': '30'})
        server = self._resize_server(server, cdp_flavor)
        self.assertEqual('cdp', self.host_of(server))
        self.assertIn('<cache id="0" level="3" type="code" size="3328" '
                      'unit="KiB"/>', cputune(self.domain_xml(server)))
        self.assertIn('<node id="0" bandwidth="30"/>',
                      cputune(self.domain_xml(server)))
        # Until confirmed, both hosts hold the instance's resources.
        self.assertIn(server['id'], self.claims('ref'))
        self.assertIn(server['id'], self.claims('cdp'))
        server = self._confirm_resize(server)
        self.assertEqual({}, self.claims('ref'))
        self.assertEqual([server['id']], list(self.claims('cdp')))

        # To an MBps flavor: only mbps.
        server = self._resize_server(
            server, self.flavor({'hw:mem_bw_mbps': '1000'}))
        self.assertEqual('mbps', self.host_of(server))
        self.assertEqual('1000', etree.fromstring(rdt_metadata(
            self.domain_xml(server))).find('{%s}membw' % RDT_NS).get(
                'value'))
        server = self._revert_resize(server)
        self.assertEqual('cdp', self.host_of(server))
        self.assertEqual({}, self.claims('mbps'))
        self.assertEqual([server['id']], list(self.claims('cdp')))

        self._delete_server(server)
        self._wait_until_deleted(server)
        for host in ('ref', 'cdp', 'mbps'):
            self.assertEqual({}, self.claims(host), host)

    def test_cold_migration_writes_the_destination_ids(self):
        server = self.boot(self.flavor({'hw:mem_bw': '40'}))
        self.assertEqual('ref', self.host_of(server))
        server = self._migrate_server(server, host='cdp')
        self.assertEqual('cdp', self.host_of(server))
        self.assertIn('<node id="1" bandwidth="40"/>',
                      cputune(self.domain_xml(server)))
        self._confirm_resize(server)
        self.assertEqual({}, self.claims('ref'))
