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

"""The RMID budget and the rotation of monitoring groups."""

from rdt_virt.agent import rotation
from tests import base
from tests.unit.policy import hosts

NAMES = ['u%02d' % i for i in range(10)]


class TestBudget(base.TestCase):

    def test_reserves_an_rmid_per_closid(self):
        # 176 RMIDs, 8 usable CLOSIDs (MB limits them).
        self.assertEqual(168, rotation.rmid_budget(hosts.REFERENCE))
        self.assertEqual(165, rotation.rmid_budget(hosts.REFERENCE, -1, 3))
        self.assertEqual(20, rotation.rmid_budget(hosts.REFERENCE, 20))
        self.assertEqual(168, rotation.rmid_budget(hosts.REFERENCE, 500))
        self.assertEqual(0, rotation.rmid_budget(hosts.REFERENCE, 0))

    def test_monitor_only_host_reserves_the_default_group(self):
        self.assertEqual(175, rotation.rmid_budget(hosts.MONITORING))

    def test_no_monitoring(self):
        self.assertEqual(0, rotation.rmid_budget(hosts.L3_CAT))

    def test_never_negative(self):
        self.assertEqual(0, rotation.rmid_budget(hosts.REFERENCE, -1, 500))


class TestRotation(base.TestCase):

    def test_everyone_fits(self):
        rot = rotation.Rotation(60)
        self.assertEqual(frozenset(NAMES[:5]),
                         rot.update(NAMES[:5], 10, 0))
        self.assertFalse(rot.rotating)
        self.assertEqual(1.0, rot.coverage)
        self.assertEqual(frozenset(NAMES[:5]),
                         rot.update(NAMES[:5], 10, 1000))

    def test_window_stays_between_rotations(self):
        rot = rotation.Rotation(60)
        first = rot.update(NAMES, 4, 0)
        self.assertEqual(4, len(first))
        self.assertTrue(rot.rotating)
        self.assertEqual(0.4, rot.coverage)
        # Converged ticks before the interval change nothing.
        for now in (10, 20, 59):
            self.assertEqual(first, rot.update(NAMES, 4, now))

    def test_rotation_hands_over_a_quarter(self):
        rot = rotation.Rotation(60)
        first = rot.update(NAMES, 8, 0)
        second = rot.update(NAMES, 8, 60)
        self.assertEqual(8, len(second))
        self.assertEqual(2, len(first - second))   # budget // 4

    def test_every_instance_gets_its_turn(self):
        rot = rotation.Rotation(60)
        seen = set()
        for step in range(10):
            seen |= rot.update(NAMES, 4, step * 60)
        self.assertEqual(set(NAMES), seen)

    def test_longest_waiting_come_first(self):
        rot = rotation.Rotation(60)
        rot.update(NAMES, 2, 0)
        out = set(NAMES) - rot.window
        after = rot.update(NAMES, 2, 60)
        # The newcomer never had a turn: it is one of the never-monitored.
        self.assertTrue((after - {'u00', 'u01'}).issubset(out))

    def test_departed_instances_free_their_slot(self):
        rot = rotation.Rotation(60)
        window = rot.update(NAMES, 4, 0)
        gone = sorted(window)[0]
        rest = [n for n in NAMES if n != gone]
        after = rot.update(rest, 4, 1)
        self.assertNotIn(gone, after)
        self.assertEqual(4, len(after))

    def test_budget_shrinks(self):
        rot = rotation.Rotation(60)
        rot.update(NAMES, 6, 0)
        self.assertEqual(3, len(rot.update(NAMES, 3, 1)))

    def test_zero_budget(self):
        rot = rotation.Rotation(60)
        self.assertEqual(frozenset(), rot.update(NAMES, 0, 0))
        self.assertEqual(0.0, rot.coverage)

    def test_admit_for_the_fast_path(self):
        rot = rotation.Rotation(60)
        rot.update(NAMES[:2], 3, 0)
        self.assertIn('new', rot.admit('new', 3, 1))
        self.assertNotIn('late', rot.admit('late', 3, 2))

    def test_forget_frees_the_place(self):
        rot = rotation.Rotation(60)
        rot.update(NAMES[:3], 3, 0)
        self.assertNotIn('late', rot.admit('late', 3, 1))
        rot.forget('u00')
        self.assertIn('late', rot.admit('late', 3, 2))
        self.assertNotIn('u00', rot.window)
