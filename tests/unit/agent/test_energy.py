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

"""Per-instance power and energy from package telemetry."""

from rdt_virt.agent import energy
from rdt_virt.agent import sampler
from rdt_virt.resctrl import telemetry
from tests import base


def reading(t, source='m1', **packages):
    """``reading(10, p0=('5.0', '8.0'))``: core_energy, activity texts."""
    values = {}
    for name, (joules, farads) in packages.items():
        values[int(name[1:])] = {
            telemetry.CORE_ENERGY: telemetry.parse_event(joules),
            telemetry.ACTIVITY: telemetry.parse_event(farads)}
    return sampler.Reading(source=source, time=t, values=values)


class TestEnergy(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tracker = energy.EnergyTracker()

    def test_first_reading_is_a_baseline(self):
        # The RMID's previous owner left 1000 J: never this instance's.
        e = self.tracker.update('u', reading(0, p0=('1000.0', '1500.0')))
        self.assertEqual((None, None, energy.R_FIRST),
                         (e.power_watts, e.energy_joules, e.reason))

    def test_power_energy_and_activity(self):
        self.tracker.update('u', reading(0, p0=('1000.0', '1500.0'),
                                         p1=('10.5', '20.0')))
        e = self.tracker.update('u', reading(10, p0=('1030.0', '1550.0'),
                                             p1=('20.5', '30.0')))
        self.assertAlmostEqual(4.0, e.power_watts)
        self.assertEqual(40.0, e.energy_joules)
        self.assertAlmostEqual(6.0, e.activity_fps)
        self.assertIsNone(e.reason)
        e = self.tracker.update('u', reading(20, p0=('1030.000001', '1550.0'),
                                             p1=('20.5', '30.0')))
        self.assertEqual(40.000001, e.energy_joules)

    def test_new_rmid_restarts_the_baseline_but_not_the_counter(self):
        self.tracker.update('u', reading(0, p0=('1.0', '1.0')))
        self.tracker.update('u', reading(10, p0=('11.0', '2.0')))
        # Rotated to another RMID that carries 500 J of someone else's.
        e = self.tracker.update('u', reading(20, 'm2', p0=('500.0', '9.0')))
        self.assertIsNone(e.power_watts)
        self.assertEqual(energy.R_FIRST, e.reason)
        e = self.tracker.update('u', reading(30, 'm2', p0=('505.0', '10.0')))
        self.assertAlmostEqual(0.5, e.power_watts)
        self.assertEqual(15.0, e.energy_joules)

    def test_shrinking_counter_is_a_reset(self):
        self.tracker.update('u', reading(0, p0=('100.0', '1.0')))
        e = self.tracker.update('u', reading(10, p0=('5.0', '2.0')))
        self.assertIsNone(e.power_watts)
        self.assertEqual(energy.R_RESET, e.reason)
        e = self.tracker.update('u', reading(20, p0=('7.0', '3.0')))
        self.assertAlmostEqual(0.2, e.power_watts)

    def test_unavailable_keeps_the_baseline(self):
        self.tracker.update('u', reading(0, p0=('100.0', '1.0'),
                                         p1=('0.0', '0.0')))
        e = self.tracker.update('u', reading(10, p0=('110.0', '2.0'),
                                             p1=('Unavailable', 'Error')))
        self.assertEqual('Unavailable', e.reason)
        self.assertIsNone(e.power_watts)
        # p0's growth is not lost from the counter.
        self.assertEqual(10.0, e.energy_joules)
        e = self.tracker.update('u', reading(20, p0=('120.0', '3.0'),
                                             p1=('40.0', '1.0')))
        # p1 spans both intervals: 40 J over 20 s; p0 10 J over 10 s.
        self.assertAlmostEqual(3.0, e.power_watts)
        self.assertEqual(60.0, e.energy_joules)

    def test_idle_instance_reads_zero(self):
        self.tracker.update('u', reading(0, p0=('5.0', '1.0')))
        e = self.tracker.update('u', reading(10, p0=('5.0', '1.0')))
        self.assertEqual((0.0, 0.0), (e.power_watts, e.energy_joules))

    def test_forget(self):
        self.tracker.update('u', reading(0, p0=('5.0', '1.0')))
        self.tracker.update('u', reading(10, p0=('6.0', '1.0')))
        self.tracker.forget(set())
        e = self.tracker.update('u', reading(20, p0=('7.0', '1.0')))
        self.assertEqual(energy.R_FIRST, e.reason)
        self.assertIsNone(e.energy_joules)
