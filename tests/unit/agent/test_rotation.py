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

    def test_aet_budget_from_the_smallest_pool(self):
        # L3_MON says 1024, PERF_PKG_MON 576: the kernel hands out 576, and
        # 16 of them stay for control groups.
        self.assertEqual(560, rotation.rmid_budget(hosts.AET))
        self.assertEqual(557, rotation.rmid_budget(hosts.AET, -1, 3))

    def test_mpam_budget_is_per_control_group(self):
        # 2 PMGs per CLOSID: each control group holds one monitoring group.
        self.assertEqual(1, rotation.rmid_budget(hosts.MPAM, parents=1))
        self.assertEqual(3, rotation.rmid_budget(hosts.MPAM, parents=3))
        self.assertEqual(2, rotation.rmid_budget(hosts.MPAM, -1, 1,
                                                 parents=3))
        # Without knowing the groups: one per CLOSID at most.
        self.assertEqual(16, rotation.rmid_budget(hosts.MPAM))


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
        self.assertEqual(2, len(first - second))   # budget // 4
        # Their RMIDs stay theirs until they drain.
        self.assertEqual(6, len(second))
        self.assertEqual(second, rot.update(NAMES, 8, 70, held=2))
        third = rot.update(NAMES, 8, 80, held=0)
        self.assertEqual(8, len(third))
        self.assertEqual(2, len(third - second))

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
        # Once its RMID has left limbo.
        self.assertEqual(3, len(after))
        self.assertEqual(4, len(rot.update(rest, 4, 30, held=0)))

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
        rot.forget('u00', 2)
        self.assertNotIn('u00', rot.window)
        # Its RMID is in limbo first.
        self.assertNotIn('late', rot.admit('late', 3, 3))
        self.assertIn('late', rot.admit('late', 3, 62))


class KernelRMIDs(object):
    """The kernel's RMID allocator with occupancy-driven limbo.

    A removed group's RMID is free once its cache occupancy is below the
    threshold (checked every second); mkdir takes a free RMID or fails
    with EBUSY (some in limbo) or ENOSPC.
    """

    def __init__(self, num_rmids, used):
        self.num_rmids = num_rmids
        self.used = used
        self.limbo = []         # when each drains

    def free(self, now):
        self.limbo = [t for t in self.limbo if t > now]
        return self.num_rmids - self.used - len(self.limbo)

    def mkdir(self, now):
        if self.free(now) > 0:
            self.used += 1
            return 'ok'
        return 'EBUSY' if self.limbo else 'ENOSPC'

    def rmdir(self, now, drains_at):
        self.used -= 1
        self.limbo.append(max(drains_at, now + 1))


class TestLimbo(base.TestCase):
    """Rotation never takes the RMIDs kept for control groups."""

    def run_host(self, drain, seconds=3600, tick=10):
        """An agent rotating 60 instances; occupancy takes ``drain`` s.

        It keeps a group that left the window until its occupancy reads
        below the threshold, as the agent does, then removes it.
        """
        # 32 RMIDs, 8 CLOSIDs; 3 control groups exist besides the default.
        num_rmids, num_closids, ctrl = 32, 8, 3
        reserve = num_closids - 1 - ctrl
        budget = num_rmids - num_closids
        kernel = KernelRMIDs(num_rmids, 1 + ctrl)
        rot = rotation.Rotation(60)
        names = ['u%02d' % i for i in range(60)]
        window = frozenset()
        held = {}               # uuid -> when its threads left
        low_free = num_rmids
        seen = set()
        for now in range(0, seconds, tick):
            new = rot.update(names, budget, now, held=len(held))
            for uuid in window - new:
                held[uuid] = now
            for uuid, left in list(held.items()):
                if uuid in new:
                    del held[uuid]          # back before it drained
                elif now - left >= drain:   # occupancy below threshold
                    kernel.rmdir(now, now + 1)
                    del held[uuid]
            for uuid in sorted(new - window - set(held)):
                answer = kernel.mkdir(now)
                self.assertEqual('ok', answer, 'at %ds' % now)
            window = frozenset(new)
            seen |= window
            low_free = min(low_free, kernel.free(now))
        return low_free, reserve, seen, names, rot

    def test_slow_limbo_never_eats_the_reserve(self):
        for drain in (0, 5, 60, 90, 300, 900):
            low_free, reserve, seen, names, _rot = self.run_host(drain)
            # A control group (a <cachetune> at boot) always finds one.
            self.assertGreaterEqual(low_free, reserve, 'drain %s' % drain)
            # And monitoring still goes round.
            self.assertEqual(set(names), seen, 'drain %s' % drain)

    def test_released_rmids_count_until_drained(self):
        rot = rotation.Rotation(60)
        names = ['u%d' % i for i in range(6)]
        self.assertEqual(4, len(rot.update(names, 4, 0)))
        rot.forget('u0', 1)
        rot.released(1, 2)      # libvirt removed two groups
        self.assertEqual(3, len(rot.update(names[1:4], 4, 2)))
        self.assertEqual(3, rot.in_limbo(2))
        self.assertNotIn('x', rot.admit('x', 4, 3))
        self.assertEqual(0, rot.in_limbo(61))
        self.assertIn('x', rot.admit('x', 4, 61))

    def test_ebusy_slows_the_pace(self):
        rot = rotation.Rotation(60)
        rot.update(['a', 'b'], 4, 0)
        rot.forget('a', 10)
        self.assertEqual(1, rot.in_limbo(69))
        rot.busy(70)
        self.assertEqual(120, rot.drain_time)
        self.assertEqual(1, rot.in_limbo(100))
        self.assertEqual(0, rot.in_limbo(200))
        # A long quiet spell brings it back down.
        rot.update(['b'], 4, 70 + 4 * 120)
        self.assertEqual(60, rot.drain_time)

    def test_restart_adopts_existing_groups(self):
        rot = rotation.Rotation(60)
        rot.adopt({'u2', 'u3'}, 2, 0)
        self.assertEqual({'u2', 'u3'}, set(rot.update(
            ['u1', 'u2', 'u3'], 2, 0)))


class TestSteadyRotation(base.TestCase):
    """Rotation every tick with a budget of 2 and 6 instances."""

    def run_ticks(self, may_go, ticks=12, spare=10):
        rot = rotation.Rotation(1)
        sizes = []
        held = 0
        for now in range(ticks):
            window = rot.update(NAMES[:6], 2, now, held=held, may_go=may_go,
                                spare=spare)
            sizes.append(len(window))
            # What left and cannot go yet holds an RMID next tick.
            held = 0 if may_go is None or may_go('any') else 1
        return sizes

    def test_drained_leavers_are_replaced_in_the_same_tick(self):
        sizes = self.run_ticks(lambda uuid: True)
        self.assertEqual([2] * 12, sizes)

    def test_without_a_drain_reading_the_leaver_holds_its_rmid(self):
        # What real 6.12 showed: [2, 1, 1, ...], half the budget.
        sizes = self.run_ticks(None)
        self.assertEqual(2, sizes[0])
        self.assertEqual([1] * 11, sizes[1:])

    def test_no_spare_rmid_no_same_tick_handover(self):
        # The automatic budget: the removed group's RMID is free only at
        # the kernel's next limbo check, so its successor waits a tick.
        sizes = self.run_ticks(lambda uuid: True, spare=0)
        self.assertEqual([1] * 11, sizes[1:])

    def test_every_instance_gets_its_turn(self):
        rot = rotation.Rotation(1)
        seen = set()
        for now in range(6):
            seen |= rot.update(NAMES[:6], 2, now, may_go=lambda u: True,
                               spare=1)
        self.assertEqual(set(NAMES[:6]), seen)
