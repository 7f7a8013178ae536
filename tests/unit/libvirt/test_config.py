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

from rdt_virt import exception
from rdt_virt.libvirt import config
from tests.unit.libvirt import xmlassert

KIB = 1024
MIB = 1024 * KIB
NS = config.NAMESPACE

CT = config.CacheTune
CC = config.CacheTuneCache
CM = config.CacheTuneMonitor
MT = config.MemoryTune
MN = config.MemoryTuneNode
MM = config.MemoryTuneMonitor
RM = config.RDTMetadata
MB = config.MemBwMetadata


class TestVcpus(xmlassert.XMLTestCase):

    # text, ids, canonical text
    TABLE = [
        ('0', {0}, '0'),
        ('0-3', {0, 1, 2, 3}, '0-3'),
        ('0-3,5', {0, 1, 2, 3, 5}, '0-3,5'),
        ('5,0-3', {0, 1, 2, 3, 5}, '0-3,5'),
        ('0,1,2', {0, 1, 2}, '0-2'),
        ('0-7,^3', {0, 1, 2, 4, 5, 6, 7}, '0-2,4-7'),
        ('0-7,^2-5', {0, 1, 6, 7}, '0-1,6-7'),
        # Left to right, as libvirt: a later item adds back.
        ('^3,0-4', {0, 1, 2, 3, 4}, '0-4'),
        (' 1 , 3 - 4 ', {1, 3, 4}, '1,3-4'),
        ('2-2', {2}, '2'),
    ]

    def test_table(self):
        for text, ids, formatted in self.TABLE:
            self.assertEqual(frozenset(ids), config.parse_vcpus(text), text)
            self.assertEqual(formatted, config.format_vcpus(ids))

    def test_bad(self):
        for text in ['', ' ', ',', '0,', 'a', '-1', '3-1', '1-', '^',
                     '0-3,^0-3', '1.5', '0x1', '0-99999999', None, 7]:
            self.assertRaises(exception.InvalidXML, config.parse_vcpus,
                              text)
        for ids in [{-1}, {'1'}, {1.0}, {True}]:
            self.assertRaises(exception.InvalidXML, config.format_vcpus,
                              ids)
        self.assertEqual('', config.format_vcpus([]))


class TestSize(xmlassert.XMLTestCase):

    # value, unit, bytes
    PARSE = [
        ('3', 'MiB', 3 * MIB),
        ('3', 'M', 3 * MIB),
        ('3', 'm', 3 * MIB),
        ('3', 'MB', 3 * 1000 ** 2),
        ('3328', 'KiB', 3328 * KIB),
        ('3328', 'k', 3328 * KIB),
        ('2', 'KB', 2000),
        ('1', 'GiB', 1024 ** 3),
        ('1', 'TiB', 1024 ** 4),
        ('512', None, 512),
        ('512', '', 512),
        ('512', 'b', 512),
        ('512', 'bytes', 512),
        (' 7 ', 'KiB', 7 * KIB),
    ]

    # bytes, (value, unit)
    FORMAT = [
        (3 * MIB, (3, 'MiB')),
        (6815744, (6656, 'KiB')),
        (3407872, (3328, 'KiB')),
        (1000, (1000, 'B')),
        (0, (0, 'B')),
        (1024 ** 3, (1, 'GiB')),
        (1024 ** 7, (1024, 'EiB')),
    ]

    def test_parse(self):
        for value, unit, expected in self.PARSE:
            self.assertEqual(expected, config.parse_size(value, unit),
                             (value, unit))

    def test_format(self):
        for size, expected in self.FORMAT:
            self.assertEqual(expected, config.format_size(size))
            self.assertEqual(size, config.parse_size(*expected))

    def test_bad(self):
        for value, unit in [('-1', 'KiB'), ('1.5', 'MiB'), ('x', None),
                            ('3', 'MiBs'), ('3', 'Q'), ('3', 'iB')]:
            self.assertRaises(exception.InvalidXML, config.parse_size,
                              value, unit)


class TestCacheTune(xmlassert.XMLTestCase):

    # object, literal XML (libvirt's own formatting)
    TABLE = [
        (CT('0-1', [CC(0, 3, 'both', 3 * MIB), CC(1, 3, 'both', 3 * MIB)],
            [CM(3, '0-1')]),
         """<cachetune vcpus='0-1'>
              <cache id='0' level='3' type='both' size='3' unit='MiB'/>
              <cache id='1' level='3' type='both' size='3' unit='MiB'/>
              <monitor level='3' vcpus='0-1'/>
            </cachetune>"""),
        (CT({3}, [CC(0, 3, 'both', 2 * 3407872)]),
         """<cachetune vcpus='3'>
              <cache id='0' level='3' type='both' size='6656' unit='KiB'/>
            </cachetune>"""),
        # CDP; caches come out by level, type, id whatever the input order.
        (CT('0-3', [CC(1, 3, 'data', 3407872), CC(0, 3, 'data', 3407872),
                    CC(0, 3, 'code', 3407872)]),
         """<cachetune vcpus='0-3'>
              <cache id='0' level='3' type='code' size='3328' unit='KiB'/>
              <cache id='0' level='3' type='data' size='3328' unit='KiB'/>
              <cache id='1' level='3' type='data' size='3328' unit='KiB'/>
            </cachetune>"""),
        # Monitor only (libvirt makes a monitoring group), live XML id.
        (CT('1', monitors=[CM(3, '1')], id='vcpus_1'),
         """<cachetune vcpus='1' id='vcpus_1'>
              <monitor level='3' vcpus='1'/>
            </cachetune>"""),
        (CT('0-3,^2', [CC(0, 2, 'both', 256 * KIB)],
            [CM(3, [3]), CM(3, [0, 1])]),
         """<cachetune vcpus='0-1,3'>
              <cache id='0' level='2' type='both' size='256' unit='KiB'/>
              <monitor level='3' vcpus='0-1'/>
              <monitor level='3' vcpus='3'/>
            </cachetune>"""),
    ]

    def test_to_xml(self):
        for obj, literal in self.TABLE:
            self.assertXMLEqual(literal, obj.to_xml())
            self.assertXMLEqual(literal, obj.to_xml(pretty_print=True))

    def test_from_xml(self):
        for obj, literal in self.TABLE:
            parsed = CT.from_xml(literal)
            self.assertEqual(obj, parsed)
            self.assertEqual(hash(obj), hash(parsed))
            self.assertEqual(parsed, CT.from_xml(parsed.to_xml()))

    def test_units_on_input(self):
        for size, unit in [('3145728', None), ('3145728', 'b'),
                           ('3072', 'KiB'), ('3072', 'k'), ('3', 'M')]:
            unit_attr = " unit='%s'" % unit if unit else ''
            el = CC.from_xml("<cache id='0' level='3' type='both' "
                             "size='%s'%s/>" % (size, unit_attr))
            self.assertEqual(CC(0, 3, 'both', 3 * MIB), el)
            self.assertXMLEqual("<cache id='0' level='3' type='both' "
                                "size='3' unit='MiB'/>", el.to_xml())

    def test_unknown_children_are_ignored(self):
        obj = CT.from_xml("<cachetune vcpus='0'><future/>"
                          "<cache id='0' level='3' type='both' size='1' "
                          "unit='MiB' extra='x'/></cachetune>")
        self.assertEqual(CT('0', [CC(0, 3, 'both', MIB)]), obj)

    BAD = [
        ("<cachetune><cache id='0' level='3' type='both' size='1'/>"
         "</cachetune>", 'lacks attribute vcpus'),
        ("<cachetune vcpus=''/>", 'empty'),
        ("<cachetune vcpus='0-x'/>", 'bad item'),
        ("<cachetune vcpus='0'><cache level='3' type='both' size='1'/>"
         "</cachetune>", 'lacks attribute id'),
        ("<cachetune vcpus='0'><cache id='-1' level='3' type='both' "
         "size='1'/></cachetune>", 'not a non-negative integer'),
        ("<cachetune vcpus='0'><cache id='0' level='3' type='all' "
         "size='1'/></cachetune>", 'type must be one of'),
        ("<cachetune vcpus='0'><cache id='0' level='0' type='both' "
         "size='1'/></cachetune>", 'level must be'),
        ("<cachetune vcpus='0'><cache id='0' level='3' type='both' "
         "size='1' unit='parsec'/></cachetune>", 'unknown unit'),
        ("<cachetune vcpus='0'>"
         "<cache id='0' level='3' type='both' size='1'/>"
         "<cache id='0' level='3' type='code' size='1'/></cachetune>",
         'colliding types'),
        ("<cachetune vcpus='0'>"
         "<cache id='0' level='3' type='data' size='1'/>"
         "<cache id='0' level='3' type='data' size='2'/></cachetune>",
         'colliding types'),
        ("<cachetune vcpus='0-1'><monitor level='3' vcpus='1-2'/>"
         "</cachetune>", 'not within'),
        ("<cachetune vcpus='0-1'><monitor level='3' vcpus='1'/>"
         "<monitor level='3' vcpus='1'/></cachetune>", 'two monitors'),
        ("<cachetune vcpus='0'><monitor vcpus='0'/></cachetune>",
         'lacks attribute level'),
        ("<memorytune vcpus='0'/>", 'expected element <cachetune>'),
        ("<cachetune vcpus='0'>", 'not well-formed'),
        ("<!DOCTYPE x [<!ENTITY e SYSTEM 'file:///etc/passwd'>]>"
         "<cachetune vcpus='&e;'/>", ''),
    ]

    def test_bad(self):
        for text, reason in self.BAD:
            exc = self.assertRaises(exception.InvalidXML, CT.from_xml, text)
            self.assertIn(reason, str(exc), text)

    def test_bad_objects(self):
        for make in [lambda: CC(0, 3, 'both', -1),
                     lambda: CC('0', 3, 'both', 1),
                     lambda: CC(0, 3, 'both', True),
                     lambda: CM(3, []),
                     lambda: CM(3, None),
                     lambda: CT(set()),
                     lambda: CT('0', [CC(0, 3, 'both', 1),
                                      CC(0, 3, 'both', 2)])]:
            self.assertRaises(exception.InvalidXML, make)

    def test_immutable_and_comparable(self):
        a = CT('0-1', [CC(0, 3, 'both', MIB)])
        self.assertEqual(a, CT([1, 0], (CC(0, 3, 'both', 1024 * KIB),)))
        self.assertNotEqual(a, CT('0-1', [CC(1, 3, 'both', MIB)]))
        self.assertNotEqual(a, CT('0-1', [CC(0, 3, 'both', MIB)], id='x'))
        self.assertEqual(1, len({a, CT.from_xml(a.to_xml())}))
        self.assertRaises(AttributeError, setattr, a, 'vcpus', {2})


class TestMemoryTune(xmlassert.XMLTestCase):

    TABLE = [
        (MT('0-1', [MN(1, 30), MN(0, 20)], [MM('0-1'), MM('0')]),
         """<memorytune vcpus='0-1'>
              <node id='0' bandwidth='20'/>
              <node id='1' bandwidth='30'/>
              <monitor vcpus='0'/>
              <monitor vcpus='0-1'/>
            </memorytune>"""),
        (MT('3', [MN(0, 50)]),
         """<memorytune vcpus='3'>
              <node id='0' bandwidth='50'/>
            </memorytune>"""),
        (MT('2', monitors=[MM('2')], id='vcpus_2'),
         """<memorytune vcpus='2' id='vcpus_2'>
              <monitor vcpus='2'/>
            </memorytune>"""),
        # Values above 100 are libvirt's business to refuse, not ours.
        (MT('0-7', [MN(0, 2048), MN(2, 256)]),
         """<memorytune vcpus='0-7'>
              <node id='0' bandwidth='2048'/>
              <node id='2' bandwidth='256'/>
            </memorytune>"""),
    ]

    def test_round_trip(self):
        for obj, literal in self.TABLE:
            self.assertXMLEqual(literal, obj.to_xml())
            self.assertEqual(obj, MT.from_xml(literal))

    def test_bandwidths(self):
        self.assertEqual({0: 20, 1: 30}, self.TABLE[0][0].bandwidths)

    BAD = [
        ("<memorytune vcpus='0'><node id='0'/></memorytune>",
         'lacks attribute bandwidth'),
        ("<memorytune vcpus='0'><node bandwidth='10'/></memorytune>",
         'lacks attribute id'),
        ("<memorytune vcpus='0'><node id='0' bandwidth='ten'/>"
         "</memorytune>", 'not a non-negative integer'),
        ("<memorytune vcpus='0'><node id='0' bandwidth='10'/>"
         "<node id='0' bandwidth='20'/></memorytune>", 'node ids repeat'),
        ("<memorytune vcpus='0'><monitor vcpus='1'/></memorytune>",
         'not within'),
        ("<memorytune/>", 'lacks attribute vcpus'),
    ]

    def test_bad(self):
        for text, reason in self.BAD:
            exc = self.assertRaises(exception.InvalidXML, MT.from_xml, text)
            self.assertIn(reason, str(exc), text)


class TestMetadata(xmlassert.XMLTestCase):

    TABLE = [
        (RM(MB('percent', 10, 'shared', requested=5), monitor=True),
         """<rdtvirt:rdt xmlns:rdtvirt="%s" version="1">
              <rdtvirt:membw unit="percent" value="10" requested="5"
                             group="shared"/>
              <rdtvirt:monitor enabled="yes"/>
            </rdtvirt:rdt>""" % NS),
        (RM(MB('MBps', 2000, 'instance')),
         """<rdtvirt:rdt xmlns:rdtvirt="%s" version="1">
              <rdtvirt:membw unit="MBps" value="2000" group="instance"/>
            </rdtvirt:rdt>""" % NS),
        (RM(MB('amd', 8, 'instance', requested=1000), monitor=False),
         """<rdtvirt:rdt xmlns:rdtvirt="%s" version="1">
              <rdtvirt:membw unit="amd" value="8" requested="1000"
                             group="instance"/>
              <rdtvirt:monitor enabled="no"/>
            </rdtvirt:rdt>""" % NS),
        (RM(monitor=True),
         """<rdtvirt:rdt xmlns:rdtvirt="%s" version="1">
              <rdtvirt:monitor enabled="yes"/>
            </rdtvirt:rdt>""" % NS),
        (RM(), '<rdtvirt:rdt xmlns:rdtvirt="%s" version="1"/>' % NS),
        (RM(MB('percent', 20, 'shared', requested=15), monitor=True,
            priority='low'),
         """<rdtvirt:rdt xmlns:rdtvirt="%s" version="1">
              <rdtvirt:membw unit="percent" value="20" requested="15"
                             group="shared"/>
              <rdtvirt:monitor enabled="yes"/>
              <rdtvirt:priority class="low"/>
            </rdtvirt:rdt>""" % NS),
        (RM(monitor=True, priority='high'),
         """<rdtvirt:rdt xmlns:rdtvirt="%s" version="1">
              <rdtvirt:monitor enabled="yes"/>
              <rdtvirt:priority class="high"/>
            </rdtvirt:rdt>""" % NS),
        # normal is the default, never written.
        (RM(monitor=True, priority='normal'),
         """<rdtvirt:rdt xmlns:rdtvirt="%s" version="1">
              <rdtvirt:monitor enabled="yes"/>
            </rdtvirt:rdt>""" % NS),
    ]

    def test_priority_default_and_explicit_normal(self):
        self.assertEqual('normal', RM.from_xml(
            '<rdtvirt:rdt xmlns:rdtvirt="%s" version="1"/>' % NS).priority)
        self.assertEqual('normal', RM.from_xml(
            '<rdtvirt:rdt xmlns:rdtvirt="%s" version="1"><rdtvirt:priority '
            'class="normal"/></rdtvirt:rdt>' % NS).priority)

    def test_round_trip(self):
        for obj, literal in self.TABLE:
            self.assertXMLEqual(literal, obj.to_xml())
            self.assertEqual(obj, RM.from_xml(literal))
            self.assertEqual(obj, RM.from_element(obj.to_element()))

    def test_prefix_and_tag(self):
        el = self.TABLE[0][0].to_element()
        self.assertEqual('{%s}rdt' % NS, el.tag)
        self.assertEqual(RM.TAG, el.tag)
        self.assertEqual({'rdtvirt': NS}, el.nsmap)
        self.assertTrue(self.TABLE[0][0].to_xml().startswith(
            '<rdtvirt:rdt xmlns:rdtvirt="%s" version="1">' % NS))

    def test_any_prefix_is_read(self):
        # The namespace counts, not the prefix (libvirt may rewrite it).
        text = ('<r:rdt xmlns:r="%s" version="1"><r:membw unit="percent" '
                'value="30" group="shared"/><r:extra/></r:rdt>' % NS)
        self.assertEqual(RM(MB('percent', 30, 'shared')), RM.from_xml(text))

    BAD = [
        ('<rdtvirt:rdt xmlns:rdtvirt="%s" version="2"/>' % NS,
         'unsupported version'),
        ('<rdtvirt:rdt xmlns:rdtvirt="%s"/>' % NS,
         'lacks attribute version'),
        ('<rdt version="1"/>', 'expected element'),
        ('<rdtvirt:rdt xmlns:rdtvirt="http://example.com/other" '
         'version="1"/>', 'expected element'),
        ('<rdtvirt:rdt xmlns:rdtvirt="%s" version="1"><rdtvirt:membw '
         'unit="GBps" value="1" group="shared"/></rdtvirt:rdt>' % NS,
         'unit must be one of'),
        ('<rdtvirt:rdt xmlns:rdtvirt="%s" version="1"><rdtvirt:membw '
         'unit="percent" value="10" group="mine"/></rdtvirt:rdt>' % NS,
         'group must be one of'),
        ('<rdtvirt:rdt xmlns:rdtvirt="%s" version="1"><rdtvirt:membw '
         'unit="percent" value="0" group="shared"/></rdtvirt:rdt>' % NS,
         'value must be'),
        ('<rdtvirt:rdt xmlns:rdtvirt="%s" version="1"><rdtvirt:membw '
         'unit="percent" group="shared"/></rdtvirt:rdt>' % NS,
         'lacks attribute value'),
        ('<rdtvirt:rdt xmlns:rdtvirt="%s" version="1"><rdtvirt:monitor '
         'enabled="true"/></rdtvirt:rdt>' % NS, 'not yes or no'),
        ('<rdtvirt:rdt xmlns:rdtvirt="%s" version="1">'
         '<rdtvirt:monitor enabled="yes"/><rdtvirt:monitor enabled="no"/>'
         '</rdtvirt:rdt>' % NS, 'may appear once'),
        ('<rdtvirt:rdt xmlns:rdtvirt="%s" version="1">'
         '<rdtvirt:priority class="low"/><rdtvirt:priority class="low"/>'
         '</rdtvirt:rdt>' % NS, 'may appear once'),
        # An unknown class is refused, not read as normal.
        ('<rdtvirt:rdt xmlns:rdtvirt="%s" version="1"><rdtvirt:priority '
         'class="urgent"/></rdtvirt:rdt>' % NS, 'priority must be one of'),
        ('<rdtvirt:rdt xmlns:rdtvirt="%s" version="1"><rdtvirt:priority/>'
         '</rdtvirt:rdt>' % NS, 'lacks attribute class'),
    ]

    def test_bad(self):
        for text, reason in self.BAD:
            exc = self.assertRaises(exception.InvalidXML, RM.from_xml, text)
            self.assertIn(reason, str(exc), text)

    def test_bad_objects(self):
        for make in [lambda: MB('percent', 10, 'shared', requested=0),
                     lambda: MB('percent', '10', 'shared'),
                     lambda: RM(membw={'unit': 'percent'}),
                     lambda: RM(monitor='yes'),
                     lambda: RM(priority='High'),
                     lambda: RM(priority=None)]:
            self.assertRaises(exception.InvalidXML, make)
