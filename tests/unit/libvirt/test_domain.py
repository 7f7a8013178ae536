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
# The owner's project of domain-nova-rdt.xml: a Keystone project id.
PROJECT = '5e0d2f4a6b8c4d1e8f0a2b4c6d8e0f1a'


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
                caches=(config.CacheMetadata(3, 'both', 4096),)),
            project_id=PROJECT)
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

    def test_project_of_novas_owner(self):
        project = ('<n:project uuid="%s">demo</n:project>'
                   % PROJECT)
        user = '<n:user uuid="8c6b1a2e0f2b4b7e9a3c5d7e9f1a3b5c">u</n:user>'
        for owner, expected in [
                ('<n:owner>%s%s</n:owner>' % (user, project),
                 PROJECT),
                # Only the attribute counts, not the project's name.
                ('<n:owner><n:project uuid="p-1"/></n:owner>', 'p-1'),
                # No owner, no project, no or an unusable id.
                ('', None),
                ('<n:owner>%s</n:owner>' % user, None),
                ('<n:owner><n:project>demo</n:project></n:owner>', None),
                ('<n:owner><n:project uuid="">x</n:project></n:owner>',
                 None),
                ('<n:owner><n:project uuid=" %s">x</n:project></n:owner>'
                 % PROJECT, None),
                ('<n:owner><n:project uuid="a&#10;b"/></n:owner>', None),
                ('<n:owner><n:project uuid="a&#x7f;b"/></n:owner>', None),
                ('<n:owner><n:project uuid="%s"/></n:owner>' % ('f' * 256),
                 None),
                # Two answers are none.
                ('<n:owner>%s%s</n:owner>' % (project, project), None),
                ('<n:owner>%s</n:owner><n:owner>%s</n:owner>'
                 % (project, project), None),
                # Another namespace's owner is not Nova's.
                ('<o:owner xmlns:o="http://example.com/o"><o:project '
                 'uuid="p-2"/></o:owner>', None)]:
            for ns in domain.NOVA_NAMESPACES:
                text = _domain('<metadata><n:instance xmlns:n="%s">%s'
                               '</n:instance></metadata>' % (ns, owner))
                dom = domain.DomainRDT.from_xml(text)
                self.assertTrue(dom.nova_owned)
                self.assertEqual(expected, dom.project_id, owner)
        # Not Nova's domain, or two Nova elements: no project.
        self.assertIsNone(domain.DomainRDT.from_xml(_domain(
            '<metadata><o:instance xmlns:o="http://example.com/nova">'
            '<o:owner><o:project uuid="p"/></o:owner></o:instance>'
            '</metadata>')).project_id)
        twice = ''.join('<n:instance xmlns:n="%s"><n:owner><n:project '
                        'uuid="p"/></n:owner></n:instance>' % ns
                        for ns in domain.NOVA_NAMESPACES)
        dom = domain.DomainRDT.from_xml(_domain('<metadata>%s</metadata>'
                                                % twice))
        self.assertEqual((True, None), (dom.nova_owned, dom.project_id))

    def test_project_as_nova_writes_it(self):
        from nova.virt.libvirt import config as vconfig
        owner = vconfig.LibvirtConfigGuestMetaNovaOwner()
        owner.userid, owner.username = 'u-1', 'demo'
        owner.projectid, owner.projectname = PROJECT, 'N/A'
        text = _domain('<metadata><nova:instance xmlns:nova="%s">%s'
                       '</nova:instance></metadata>'
                       % (vconfig.NOVA_NS, owner.to_xml()))
        self.assertEqual(PROJECT, domain.DomainRDT.from_xml(text).project_id)

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
