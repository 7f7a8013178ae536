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

"""Why RDT features the CPU has are missing from resctrl."""

import os

from rdt_virt.resctrl import quirks
from tests import base

FLAGS = ('fpu sse2 rdt_a cat_l3 cdp_l3 mba cqm cqm_llc cqm_occup_llc '
         'cqm_mbm_total cqm_mbm_local')


def cpuinfo(vendor='GenuineIntel', family=6, model=85, stepping=7,
            flags=FLAGS):
    one = ('processor\t: %%d\nvendor_id\t: %s\ncpu family\t: %d\n'
           'model\t\t: %d\nmodel name\t: Intel(R) Xeon(R) Gold 6252 CPU\n'
           'stepping\t: %d\nflags\t\t: %s\n\n'
           % (vendor, family, model, stepping, flags))
    return (one % 0) + (one % 1)


class QuirksTest(base.TestCase):

    def test_cascade_lake(self):
        cpu = quirks.parse_cpuinfo(cpuinfo())
        self.assertEqual(('GenuineIntel', 6, 0x55, 7), cpu[:4])
        self.assertEqual({'l3cat': 'quirk'},
                         dict(quirks.disabled(cpu, 'ro quiet')))
        text = quirks.explain(cpu, 'ro quiet')
        self.assertEqual(1, len(text))
        self.assertIn('L3 cache allocation', text[0])
        self.assertIn('Cascade Lake', text[0])
        self.assertIn('rdt=l3cat', text[0])
        self.assertEqual([], quirks.explain(cpu, 'ro rdt=l3cat quiet'))

    def test_early_skylake_and_cmdline(self):
        cpu = quirks.parse_cpuinfo(cpuinfo(stepping=4))
        self.assertEqual(['l3cat', 'cmt', 'mbmtotal', 'mbmlocal'],
                         list(quirks.disabled(cpu, '')))
        cpu = quirks.parse_cpuinfo(cpuinfo(model=0x6a, stepping=6))
        self.assertEqual({}, dict(quirks.disabled(cpu, '')))
        self.assertEqual({'mba': 'cmdline'},
                         dict(quirks.disabled(cpu, 'rdt=!mba')))
        self.assertIn('rdt=!mba', quirks.explain(cpu, 'rdt=!mba')[0])
        # A feature the CPU lacks is not "disabled".
        cpu = quirks.parse_cpuinfo(cpuinfo(flags='fpu cat_l3'))
        self.assertEqual(['l3cat'], list(quirks.disabled(cpu, '')))

    def test_amd_and_read_host(self):
        cpu = quirks.parse_cpuinfo(cpuinfo(vendor='AuthenticAMD',
                                           family=0x19))
        self.assertEqual([], quirks.explain(cpu, ''))
        proc = self.useFixture(base.fixtures.TempDir()).path
        with open(os.path.join(proc, 'cpuinfo'), 'w') as f:
            f.write(cpuinfo())
        with open(os.path.join(proc, 'cmdline'), 'w') as f:
            f.write('BOOT_IMAGE=/vmlinuz rdt=l3cat\n')
        cpu, cmdline = quirks.read_host(proc)
        self.assertEqual('BOOT_IMAGE=/vmlinuz rdt=l3cat', cmdline)
        self.assertEqual(7, cpu.stepping)
        self.assertEqual(('', None, None, None), quirks.read_host(
            os.path.join(proc, 'nope'))[0][:4])


class TestNotes(base.TestCase):

    def features(self, text, cmdline=''):
        notes = quirks.notes(set(), text, cmdline)
        return [n for n in quirks.RESCTRL_NAMES.values()
                if any(note.startswith('Linux turns %s off' % n)
                       for note in notes)]

    def test_table(self):
        for info, cmdline, expected in [
                (cpuinfo(stepping=7), '', ['L3_CAT']),        # Cascade
                (cpuinfo(stepping=11), '', ['L3_CAT']),       # Cooper
                (cpuinfo(stepping=4), '',
                 ['L3_CAT', 'CMT', 'MBM_TOTAL', 'MBM_LOCAL']),
                (cpuinfo(stepping=7), 'ro rdt=l3cat', []),
                (cpuinfo(stepping=4), 'rdt=l3cat,cmt',
                 ['MBM_TOTAL', 'MBM_LOCAL']),
                (cpuinfo(stepping=7), 'rdt=!l3cat', ['L3_CAT']),
                (cpuinfo(model=106, stepping=6), '', []),     # Ice Lake
                (cpuinfo('AuthenticAMD', 25, 1, 1), '', []),
                ('garbage', '', [])]:
            self.assertEqual(expected, self.features(info, cmdline),
                             (info, cmdline))

    def test_notes_only_for_missing_features(self):
        text = cpuinfo(stepping=7)
        self.assertEqual([], quirks.notes({'L3_CAT', 'MBA'}, text, ''))
        notes = quirks.notes({'MBA'}, text, '')
        self.assertEqual(1, len(notes))
        self.assertIn('rdt=l3cat', notes[0])
