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

import fractions

from rdt_virt.emulator import telemetry as emulated
from rdt_virt.resctrl import telemetry
from tests import base


class TestParseEvent(base.TestCase):

    def test_fixed_point_exactly(self):
        value = telemetry.parse_event('3.199997\n').value
        self.assertEqual(fractions.Fraction(3199997, 1000000), value)
        # Differences stay exact: no float rounding creeps in.
        later = telemetry.parse_event('12345678.000001').value
        self.assertEqual(fractions.Fraction(12345674800004, 1000000),
                         later - value)

    def test_integers_and_value_dot_zero(self):
        self.assertEqual(4400000000,
                         telemetry.parse_event('4400000000\n').value)
        self.assertEqual(7, telemetry.parse_event('7.0').value)

    def test_sentinels_and_garbage(self):
        for text in ('Unavailable', 'Error', 'Unassigned'):
            self.assertEqual((None, text),
                             tuple(telemetry.parse_event(text + '\n')))
        for text in ('-1.5', '1.', '.5', '1e3', '1.2.3', '', '1,5',
                     '\u0661.0', '1.1234567890'):
            value, reason = telemetry.parse_event(text)
            self.assertIsNone(value, text)
            self.assertIn('unparsable', reason)

    def test_round_trip_with_the_kernel_format(self):
        # What print_event_value() prints parses back to within half a
        # unit of its last digit of the register's value.
        for raw in (0, 1, 2 ** 17, 838860, 2 ** 40 + 12345, 2 ** 62 - 1):
            text = emulated.format_fixed(raw, 18)
            value = telemetry.parse_event(text).value
            self.assertLessEqual(abs(value - fractions.Fraction(raw, 2 ** 18)),
                                 fractions.Fraction(1, 2 * 10 ** 6), text)
