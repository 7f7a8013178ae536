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

from lxml import etree

from rdt_virt import exception
from rdt_virt.libvirt import elements as xml
from rdt_virt.policy import extra_specs as es
from rdt_virt.policy import fit
from tests import base
from tests.unit.policy import hosts as fakes

NS = 'http://openstack.org/xmlns/libvirt/rdt-virt/1.0'


def tostring(el):
    return etree.tostring(el, encoding='unicode')


def compact(text):
    parser = etree.XMLParser(remove_blank_text=True)
    return tostring(etree.fromstring(text, parser))


def elements(caps=fakes.REFERENCE, strategy='per-instance', vcpus=2,
             monitoring=True, **policy):
    policy = es.RDTPolicy(**policy)
    return xml.elements(policy, fit.fit(policy, caps, strategy, monitoring),
                        vcpus)


class TestElements(base.TestCase):

    def test_no_policy_no_elements(self):
        self.assertIs(xml.NOTHING, elements())

    def test_mem_bw_per_instance(self):
        result = elements(mem_bw=5, vcpus=4)
        self.assertEqual(
            ['<memorytune vcpus="0-3"><node id="0" bandwidth="10"/>'
             '<node id="1" bandwidth="10"/><monitor vcpus="0-3"/>'
             '</memorytune>'],
            [tostring(e) for e in result.cputune])
        self.assertEqual(compact(
            '<rdtvirt:rdt xmlns:rdtvirt="%s" version="1">'
            '<rdtvirt:membw unit="percent" value="10" requested="5" '
            'group="instance"/><rdtvirt:monitor enabled="yes"/>'
            '</rdtvirt:rdt>' % NS), tostring(result.metadata))

    def test_cache_request_in_the_metadata(self):
        # 2048 KiB held as one way of 3328 KiB: the agent shows both.
        result = elements(cache_l3=2048, vcpus=1)
        self.assertIn(
            '<rdtvirt:cache level="3" type="both" requested="2048"/>',
            tostring(result.metadata))

    def test_mem_bw_shared_is_metadata_only(self):
        result = elements(strategy='shared', mem_bw=10)
        self.assertEqual([], result.cputune)
        self.assertIn('group="shared"', tostring(result.metadata))

    def test_shared_with_cache_goes_to_libvirt(self):
        # The instance has its own group for the cache anyway.
        result = elements(strategy='shared', mem_bw=10, cache_l3=1)
        self.assertEqual(['cachetune', 'memorytune'],
                         [e.tag for e in result.cputune])
        self.assertIn('group="instance"', tostring(result.metadata))

    def test_amd_units_are_metadata_only(self):
        result = elements(caps=fakes.AMD, mem_bw_mbps=1000, monitoring=False)
        self.assertEqual([], result.cputune)
        self.assertEqual(compact(
            '<rdtvirt:rdt xmlns:rdtvirt="%s" version="1">'
            '<rdtvirt:membw unit="amd" value="8" requested="1000" '
            'group="instance"/><rdtvirt:monitor enabled="no"/>'
            '</rdtvirt:rdt>' % NS), tostring(result.metadata))

    def test_single_vcpu_and_no_monitor(self):
        result = elements(cache_l3=1, vcpus=1, monitor=False)
        self.assertEqual(
            '<cachetune vcpus="0"><cache id="0" level="3" type="both" '
            'size="3328" unit="KiB"/><cache id="1" level="3" type="both" '
            'size="3328" unit="KiB"/></cachetune>',
            tostring(result.cputune[0]))

    def test_monitor_only_never_writes_a_cachetune(self):
        result = elements(monitor=True)
        self.assertEqual([], result.cputune)
        self.assertEqual(compact(
            '<rdtvirt:rdt xmlns:rdtvirt="%s" version="1">'
            '<rdtvirt:monitor enabled="yes"/></rdtvirt:rdt>' % NS),
            tostring(result.metadata))

    def test_priority_low_goes_to_the_shared_group(self):
        # A low instance's percentage is the agent's to move, even on a
        # per-instance host: no <memorytune>, the class in the metadata.
        result = elements(mem_bw=15, priority='low', monitoring=False)
        self.assertEqual([], result.cputune)
        self.assertEqual(compact(
            '<rdtvirt:rdt xmlns:rdtvirt="%s" version="1">'
            '<rdtvirt:membw unit="percent" value="20" requested="15" '
            'group="shared"/><rdtvirt:monitor enabled="yes"/>'
            '<rdtvirt:priority class="low"/></rdtvirt:rdt>' % NS),
            tostring(result.metadata))

    def test_priority_without_a_cap(self):
        result = xml.for_flavor({'hw:rdt_priority': 'high'}, 2,
                                fakes.REFERENCE)
        self.assertEqual([], result.cputune)
        self.assertEqual(compact(
            '<rdtvirt:rdt xmlns:rdtvirt="%s" version="1">'
            '<rdtvirt:monitor enabled="yes"/>'
            '<rdtvirt:priority class="high"/></rdtvirt:rdt>' % NS),
            tostring(result.metadata))
        # normal writes nothing at all, like a flavor without the key.
        self.assertIs(xml.NOTHING, xml.for_flavor(
            {'hw:rdt_priority': 'normal'}, 2, fakes.REFERENCE))

    def test_priority_high_keeps_libvirt_memorytune(self):
        result = elements(mem_bw=10, priority='high')
        self.assertEqual(['memorytune'], [e.tag for e in result.cputune])
        self.assertIn('class="high"', tostring(result.metadata))

    def test_for_flavor(self):
        self.assertIs(xml.NOTHING, xml.for_flavor({'hw:cpu_policy': 'x'}, 2,
                                                  fakes.REFERENCE))
        result = xml.for_flavor({'hw:mem_bw': '10'}, 2, fakes.REFERENCE)
        self.assertEqual('memorytune', result.cputune[0].tag)
        self.assertRaises(exception.HostCannotServe, xml.for_flavor,
                          {'hw:mem_bw': '10'}, 2, fakes.L3_CAT)
        self.assertRaises(exception.InvalidExtraSpec, xml.for_flavor,
                          {'hw:mem_bw': '0'}, 2, fakes.REFERENCE)


BASE_DOMAIN = '''<domain type="kvm">
  <name>guest</name>
  <uuid>6f1c8a9e-2b7d-4c1e-9a3f-0d5e7b8c9a10</uuid>
  <memory>131072</memory>
  <vcpu>2</vcpu>
  <os><type>hvm</type></os>
</domain>'''


class TestDomainXML(base.TestCase):

    def test_domain_xml_adds_cputune_and_metadata(self):
        text = xml.domain_xml(BASE_DOMAIN, {'hw:cache_l3': '4096',
                                            'hw:mem_bw': '20'},
                              fakes.REFERENCE)
        root = etree.fromstring(text)
        self.assertEqual(['cachetune', 'memorytune'],
                         [e.tag for e in root.find('cputune')])
        self.assertEqual('0-1', root.find('cputune/cachetune').get('vcpus'))
        self.assertIsNotNone(root.find('metadata/{%s}rdt' % NS))

    def test_insert_into_existing_elements(self):
        base_xml = BASE_DOMAIN.replace(
            '<os>', '<metadata><other xmlns="urn:x"/></metadata>'
                    '<cputune><shares>1024</shares></cputune><os>')
        root = etree.fromstring(xml.domain_xml(base_xml, {'hw:mem_bw': '10'},
                                               fakes.REFERENCE))
        self.assertEqual(['shares', 'memorytune'],
                         [e.tag for e in root.find('cputune')])
        self.assertEqual(2, len(root.find('metadata')))

    def test_replace_swaps_the_rdt_elements(self):
        base_xml = BASE_DOMAIN.replace(
            '<os>', '<metadata><other xmlns="urn:x"/></metadata>'
                    '<cputune><shares>1024</shares></cputune><os>')
        first = xml.domain_xml(base_xml, {'hw:mem_bw': '10'},
                               fakes.REFERENCE)
        root = etree.fromstring(xml.replace(first, xml.for_flavor(
            {'hw:mem_bw': '20'}, 2, fakes.REFERENCE)))
        self.assertEqual(['shares', 'memorytune'],
                         [e.tag for e in root.find('cputune')])
        self.assertEqual({'20'}, {n.get('bandwidth') for n in root.iterfind(
            'cputune/memorytune/node')})
        self.assertEqual(2, len(root.find('metadata')))

    def test_plain_flavor_leaves_the_domain_alone(self):
        self.assertEqual(
            compact(BASE_DOMAIN),
            compact(xml.domain_xml(BASE_DOMAIN, {}, fakes.REFERENCE)))

    def test_policy_from_nova_metadata(self):
        domain = BASE_DOMAIN.replace('<os>', '''<metadata>
          <nova:instance
              xmlns:nova="http://openstack.org/xmlns/libvirt/nova/1.1">
            <nova:flavor name="m1.noisy">
              <nova:extraSpecs>
                <nova:extraSpec name="hw:mem_bw">10</nova:extraSpec>
                <nova:extraSpec name="hw:cpu_policy">shared</nova:extraSpec>
              </nova:extraSpecs>
            </nova:flavor>
          </nova:instance></metadata><os>''')
        self.assertEqual({'hw:mem_bw': '10', 'hw:cpu_policy': 'shared'},
                         xml.flavor_extra_specs(domain))
        self.assertEqual(es.RDTPolicy(mem_bw=10),
                         xml.policy_from_domain(domain))
        self.assertIsNone(xml.policy_from_domain(BASE_DOMAIN))

    def test_nova_31_metadata_records_no_extra_specs(self):
        # Nova 31 writes the flavor's name and sizes only: not a flavor
        # without extra specs, but one whose extra specs are unknown here.
        domain = BASE_DOMAIN.replace('<os>', '''<metadata>
          <nova:instance
              xmlns:nova="http://openstack.org/xmlns/libvirt/nova/1.1">
            <nova:flavor name="m1.noisy"><nova:vcpus>2</nova:vcpus>
            </nova:flavor>
          </nova:instance></metadata><os>''')
        self.assertIsNone(xml.flavor_extra_specs(domain))
        self.assertIsNone(xml.policy_from_domain(domain))
        self.assertEqual({}, xml.flavor_extra_specs(domain.replace(
            '</nova:flavor>', '<nova:extraSpecs/></nova:flavor>')))
