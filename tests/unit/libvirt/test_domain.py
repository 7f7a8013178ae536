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
from rdt_virt.libvirt import config
from rdt_virt.libvirt import domain
from tests.unit.libvirt import xmlassert
from tests.unit.resctrl import variants

KIB = 1024


def _domain(inner, vcpu="<vcpu>2</vcpu>", name='<name>d</name>',
            uuid='<uuid>%s</uuid>' % variants.UUID_C):
    return '<domain type="kvm">%s%s%s%s</domain>' % (name, uuid, vcpu,
                                                     inner)


class TestFixtures(xmlassert.XMLTestCase):

    def test_nova_domain_with_rdt(self):
        dom = domain.DomainRDT.from_xml(
            xmlassert.fixture('domain-nova-rdt.xml'))
        way = variants.REF_WAY
        expected = domain.DomainRDT(
            uuid=variants.UUID_A, name='instance-00000001', vcpus=4,
            current_vcpus=4, nova_owned=True,
            cachetunes=(config.CacheTune(
                '0-3', [config.CacheTuneCache(0, 3, 'both', 2 * way),
                        config.CacheTuneCache(1, 3, 'both', 2 * way)],
                [config.CacheTuneMonitor(3, '0-3')], id='vcpus_0-3'),),
            memorytunes=(config.MemoryTune(
                '0-3', [config.MemoryTuneNode(0, 20),
                        config.MemoryTuneNode(1, 20)],
                [config.MemoryTuneMonitor('0-3')], id='vcpus_0-3'),),
            metadata=config.RDTMetadata(
                config.MemBwMetadata('percent', 20, 'instance', 15),
                monitor=True,
                caches=(config.CacheMetadata(3, 'both', 4096),)))
        self.assertEqual(expected, dom)
        self.assertTrue(dom.has_rdt)
        self.assertEqual(frozenset(range(4)), dom.vcpu_ids)
        self.assertIs(dom.cachetunes[0], dom.cachetune_of(3))
        self.assertIs(dom.memorytunes[0], dom.memorytune_of(0))
        self.assertIsNone(dom.cachetune_of(4))

    def test_tunes_write_back_as_libvirt_printed_them(self):
        text = xmlassert.fixture('domain-nova-rdt.xml')
        root = config.parse_xml(text)
        dom = domain.DomainRDT.from_element(root)
        for tune, el in zip(dom.cachetunes + dom.memorytunes,
                            root.find('cputune')[1:]):
            self.assertXMLEqual(etree.tostring(el, encoding='unicode'),
                                tune.to_xml())
        meta = root.find('metadata').find(config.RDTMetadata.TAG)
        self.assertXMLEqual(etree.tostring(meta, encoding='unicode'),
                            dom.metadata.to_xml())

    def test_nova_domain_in_a_shared_group(self):
        dom = domain.DomainRDT.from_xml(
            xmlassert.fixture('domain-nova-shared.xml'))
        self.assertEqual((variants.UUID_B, 'instance-00000002', 4, 2, True),
                         (dom.uuid, dom.name, dom.vcpus, dom.current_vcpus,
                          dom.nova_owned))
        self.assertEqual((), dom.cachetunes + dom.memorytunes)
        self.assertEqual(config.RDTMetadata(
            config.MemBwMetadata('percent', 10, 'shared'), monitor=True),
            dom.metadata)
        self.assertTrue(dom.has_rdt)
        self.assertIsNone(dom.memorytune_of(0))

    def test_plain_domain(self):
        dom = domain.DomainRDT.from_xml(xmlassert.fixture('domain-plain.xml'))
        self.assertEqual(domain.DomainRDT(
            uuid='9a3c5e7f-1b2d-4e6f-8a0c-2d4f6a8c0e1b', name='builder',
            vcpus=1, current_vcpus=1, nova_owned=False), dom)
        self.assertFalse(dom.has_rdt)


class TestLiteral(xmlassert.XMLTestCase):

    def test_nova_namespaces(self):
        for ns, owned in [(domain.NOVA_NAMESPACE, True),
                          ('http://openstack.org/xmlns/libvirt/nova/1.0',
                           True),
                          ('http://example.com/nova', False)]:
            text = _domain('<metadata><n:instance xmlns:n="%s"/></metadata>'
                           % ns)
            self.assertEqual(owned,
                             domain.DomainRDT.from_xml(text).nova_owned, ns)

    def test_tunes_outside_cputune_are_ignored(self):
        text = _domain("<cachetune vcpus='0'><cache id='0' level='3' "
                       "type='both' size='1' unit='MiB'/></cachetune>"
                       "<cputune><shares>1024</shares></cputune>")
        self.assertEqual((), domain.DomainRDT.from_xml(text).cachetunes)

    def test_several_tunes(self):
        text = _domain(
            "<cputune>"
            "<cachetune vcpus='0'><cache id='0' level='3' type='both' "
            "size='3328' unit='KiB'/></cachetune>"
            "<cachetune vcpus='1'><monitor level='3' vcpus='1'/>"
            "</cachetune>"
            "<memorytune vcpus='0-1'><node id='0' bandwidth='50'/>"
            "</memorytune>"
            "</cputune>")
        dom = domain.DomainRDT.from_xml(text)
        self.assertEqual([{0}, {1}], [t.vcpus for t in dom.cachetunes])
        self.assertEqual(3328 * KIB, dom.cachetune_of(0).caches[0].size)
        self.assertEqual((), dom.cachetune_of(1).caches)
        self.assertEqual({0: 50}, dom.memorytune_of(1).bandwidths)

    BAD = [
        ('<domain/>', 'no <uuid>'),
        (_domain('', name=''), 'no <name>'),
        (_domain('', uuid='<uuid> </uuid>'), 'no <uuid>'),
        (_domain('', vcpu=''), 'no <vcpu> count'),
        (_domain('', vcpu='<vcpu>two</vcpu>'), 'no <vcpu> count'),
        (_domain('', vcpu="<vcpu current='x'>2</vcpu>"),
         'not a non-negative integer'),
        (_domain("<cputune><cachetune vcpus='0'><cache id='0' level='3' "
                 "type='both'/></cachetune></cputune>"),
         'lacks attribute size'),
        (_domain('<metadata><r:rdt xmlns:r="%s" version="1"/>'
                 '<r:rdt xmlns:r="%s" version="1"/></metadata>'
                 % (config.NAMESPACE, config.NAMESPACE)), 'two rdt-virt'),
        (_domain('<metadata><r:rdt xmlns:r="%s" version="9"/></metadata>'
                 % config.NAMESPACE), 'unsupported version'),
        ('<capabilities/>', 'expected element <domain>'),
        ('not xml', 'not well-formed'),
    ]

    def test_bad(self):
        for text, reason in self.BAD:
            exc = self.assertRaises(exception.InvalidXML,
                                    domain.DomainRDT.from_xml, text)
            self.assertIn(reason, str(exc), text)
