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

"""Features the kernel turns off by CPU model, and rdt= overrides."""

from rdt_virt.resctrl import cpu_quirks
from tests import base


def cpuinfo(vendor='GenuineIntel', family=6, model=85, stepping=7):
    fields = (vendor, family, model, stepping)
    return ('processor\t: 0\nvendor_id\t: %s\ncpu family\t: %d\n'
            'model\t\t: %d\nstepping\t: %d\n\n' % fields)


class TestQuirks(base.TestCase):

    def features(self, text, cmdline=''):
        return [q.feature for q in cpu_quirks.disabled(text, cmdline)]

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
        self.assertEqual([], cpu_quirks.notes({'L3_CAT', 'MBA'}, text, ''))
        notes = cpu_quirks.notes({'MBA'}, text, '')
        self.assertEqual(1, len(notes))
        self.assertIn('rdt=l3cat', notes[0])
