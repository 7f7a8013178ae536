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

import os

import testscenarios

from rdt_virt import exception
from rdt_virt.resctrl import schemata
from tests import base
from tests.unit.resctrl import variants


class TestParse(base.TestCase):

    # text, expected
    TABLE = [
        ('L3:0=7ff;1=7ff\nMB:0=100;1=100\n',
         {'L3': {0: 0x7ff, 1: 0x7ff}, 'MB': {0: 100, 1: 100}}),
        # Linux < 6.15: names right-aligned, values padded.
        ('    MB:0= 10;1=100\n    L3:0=003;1=7f0\n',
         {'MB': {0: 10, 1: 100}, 'L3': {0: 0x3, 1: 0x7f0}}),
        ('L3DATA:0=00c;1=7f0\nL3CODE:0=003;1=7f0\n',
         {'L3DATA': {0: 0xc, 1: 0x7f0}, 'L3CODE': {0: 0x3, 1: 0x7f0}}),
        ('SMBA:0=2048;2=2048\nMB:0=256;2=2048\nL3:0=f;2=fff0\n',
         {'SMBA': {0: 2048, 2: 2048}, 'MB': {0: 256, 2: 2048},
          'L3': {0: 0xf, 2: 0xfff0}}),
        ('MB:0=4294967295;1=4294967295\n',
         {'MB': {0: 4294967295, 1: 4294967295}}),
        # What users write: spaces, a 0x prefix, one domain, no newline.
        ('L3: 1 = 0x0f0', {'L3': {1: 0xf0}}),
        ('L2:0=ff;1=ff;2=ff;3=ff', {'L2': {0: 0xff, 1: 0xff, 2: 0xff,
                                           3: 0xff}}),
        ('', {}),
        ('\n\n', {}),
    ]

    def test_table(self):
        for text, expected in self.TABLE:
            self.assertEqual(expected, schemata.parse(text), text)

    def test_keeps_file_order(self):
        text = 'SMBA:0=1\nMB:0=2\nL3:0=3\n'
        self.assertEqual(['SMBA', 'MB', 'L3'], list(schemata.parse(text)))

    def test_size_file_is_decimal(self):
        text = '    MB:0=100;1=100\n    L3:0=23855104;1=37486592\n'
        self.assertEqual({'MB': {0: 100, 1: 100},
                          'L3': {0: 23855104, 1: 37486592}},
                         schemata.parse(text, decimal=True))

    BAD = [
        ('L3', "missing 'resource:'"),
        (':0=7ff', "missing 'resource:'"),
        ('L3:', 'no domains'),
        ('L3:;;', 'no domains'),
        ('L3:0', 'bad domain entry'),
        ('L3:0=', 'bad domain entry'),
        ('L3:x=7ff', 'bad domain entry'),
        ('L3:-1=7ff', 'bad domain entry'),
        ('L3:0=xyz', 'bad domain entry'),
        ('L3:0=-7ff', 'bad domain entry'),
        ('L3:0=7_ff', 'bad domain entry'),
        ('MB:0=ff', 'bad domain entry'),
        ('MB:0=-10', 'bad domain entry'),
        ('MB:0=1.5', 'bad domain entry'),
        ('L3:0=7ff;0=3', 'repeated domain entry'),
        ('L3:0=7ff\nL3:1=7ff', 'appears twice'),
    ]

    def test_pseudo_locksetup_group(self):
        # Until its region is locked, such a group shows no values.
        self.assertEqual({}, schemata.parse('L3:uninitialized\n'
                                            'MB:uninitialized\n'))
        self.assertEqual({'L3': {0: 0xf0}}, schemata.parse(
            'L3:0=f0\nMB:uninitialized\n'))

    def test_bad_input(self):
        for text, reason in self.BAD:
            exc = self.assertRaises(exception.InvalidSchemata,
                                    schemata.parse, text)
            self.assertIn(reason, str(exc), text)


class TestFormat(base.TestCase):

    def test_format(self):
        self.assertEqual('MB:0=10;1=100\nL3:0=3;1=7f0\n', schemata.format(
            {'MB': {1: 100, 0: 10}, 'L3': {0: 0x3, 1: 0x7f0}}))
        self.assertEqual('', schemata.format({}))

    def test_format_line(self):
        for res, doms, expected in [
                ('L3', {0: 0x7ff}, 'L3:0=7ff'),
                ('L3CODE', {1: 0x3, 0: 0xf}, 'L3CODE:0=f;1=3'),
                ('MB', {0: 10}, 'MB:0=10'),
                ('SMBA', {6: 2048, 0: 1}, 'SMBA:0=1;6=2048')]:
            self.assertEqual(expected, schemata.format_line(res, doms))

    def test_is_cache_resource(self):
        for name in ('L3', 'L3CODE', 'L3DATA', 'L2', 'L2CODE'):
            self.assertTrue(schemata.is_cache_resource(name))
        for name in ('MB', 'SMBA'):
            self.assertFalse(schemata.is_cache_resource(name))


class TestMerge(base.TestCase):

    BASE = {'MB': {0: 100, 1: 100}, 'L3': {0: 0x7f0, 1: 0x7f0}}

    # update, expected
    TABLE = [
        ({}, BASE),
        ({'MB': {0: 10}},
         {'MB': {0: 10, 1: 100}, 'L3': {0: 0x7f0, 1: 0x7f0}}),
        ({'L3': {1: 0x3}, 'MB': {0: 50, 1: 50}},
         {'MB': {0: 50, 1: 50}, 'L3': {0: 0x7f0, 1: 0x3}}),
        # A resource the base lacks is added (e.g. a first write).
        ({'SMBA': {0: 1024}}, dict(BASE, SMBA={0: 1024})),
    ]

    def test_table(self):
        for update, expected in self.TABLE:
            before = {r: dict(d) for r, d in self.BASE.items()}
            self.assertEqual(expected, schemata.merge(self.BASE, update))
            self.assertEqual(before, self.BASE)

    def test_partial_write_text(self):
        # The text written for a partial update names only what changes.
        merged = schemata.merge(self.BASE, schemata.parse('MB:1=20\n'))
        self.assertEqual('MB:0=100;1=20\nL3:0=7f0;1=7f0\n',
                         schemata.format(merged))


class TestFixtureRoundTrip(testscenarios.WithScenarios, base.TestCase):
    """Every schemata and size file of every fixture tree round-trips."""

    scenarios = variants.scenarios(variants.RDT_VARIANTS)

    def _files(self, name):
        for dirpath, _dirs, files in os.walk(variants.path(self.variant)):
            if name in files:
                with open(os.path.join(dirpath, name)) as f:
                    yield dirpath, f.read()

    def test_schemata(self):
        found = 0
        for where, text in self._files('schemata'):
            found += 1
            parsed = schemata.parse(text)
            formatted = schemata.format(parsed)
            self.assertEqual(parsed, schemata.parse(formatted), where)
            self.assertEqual(list(parsed), list(schemata.parse(formatted)))
            # Newer kernels print what format() writes, with the names
            # right-aligned (every release does that).
            if self.variant not in variants.PADDED:
                self.assertEqual(
                    ''.join(ln.lstrip() + '\n' for ln in text.splitlines()),
                    formatted, where)
            else:
                self.assertNotEqual(text, formatted, where)
        self.assertEqual(len(variants.GROUPS[self.variant]) + 1, found)

    def test_size(self):
        for where, text in self._files('size'):
            parsed = schemata.parse(text, decimal=True)
            for res, doms in parsed.items():
                if not schemata.is_cache_resource(res):
                    continue
                for dom, size in doms.items():
                    # Whole ways of the variant's cache.
                    caps = variants.CAPABILITIES[self.variant]
                    self.assertEqual(0, size % caps.caches[res].way_size(
                        dom), where)

    def test_resources_match_capabilities(self):
        caps = variants.CAPABILITIES[self.variant]
        root = schemata.parse(variants.read(self.variant, 'schemata'))
        self.assertEqual(set(caps.caches) | set(caps.membw), set(root))
        for res in list(caps.caches.values()) + list(caps.membw.values()):
            self.assertEqual(res.domain_ids, tuple(sorted(root[res.name])))
