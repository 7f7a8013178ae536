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

"""The control law under stress: demand, kept share, late starts, CLOSIDs.

Each period is one second; the domains move 10 GB/s (see
:mod:`tests.unit.agent.test_controller`).
"""

import dataclasses

from rdt_virt.agent import controller as ctl
from rdt_virt.agent import keeping
from rdt_virt.agent import protection
from rdt_virt.agent import sampler
from tests import base
from tests.unit.agent import fakes as f
from tests.unit.agent import test_controller
from tests.unit.agent.test_controller import GB
from tests.unit.agent.test_controller import H
from tests.unit.agent.test_controller import L1
from tests.unit.agent.test_controller import L2
from tests.unit.agent.test_controller import Loop
from tests.unit.agent.test_controller import low
from tests.unit.agent.test_controller import PCT
from tests.unit.agent.test_controller import unmeasured
from tests.unit.policy import hosts

L3 = 'low-3'


def hi(gbps, demand=1.0, dom=0):
    """The high instance moving ``gbps`` with ``demand`` CPUs runnable."""
    return ctl.Member(H, ctl.HIGH, domains={dom: gbps * GB}, demand=demand)


def protect(loop, *lows):
    """Saturate the pool with the lows: every one to the floor."""
    loop.run(hi(3), *lows)
    return loop.levels


class TestActivity(base.TestCase):

    def test_squeezed_but_active_high_is_protected(self):
        loop = Loop()
        # 20 MiB/s, below the 50 MiB/s threshold: its neighbours leave it
        # nothing, but its vCPU was runnable all the time.
        squeezed = ctl.Member(H, ctl.HIGH, domains={0: 20 * ctl.MB},
                              demand=1.0)
        d = loop.run(squeezed, low(6), low(5, uuid=L2))
        self.assertEqual({L1: 10, L2: 10}, loop.levels)
        self.assertEqual(1, d.reports[0].active_high)
        # Squeezed to nothing at all on this interval: still active, where
        # it was active before.
        nothing = ctl.Member(H, ctl.HIGH, domains={0: 0.0}, demand=1.0)
        for _ in range(5):
            d = loop.run(nothing, low(0.5), low(0.5, uuid=L2))
        self.assertEqual(1, d.reports[0].active_high)
        self.assertNotIn('no active high', d.reports[0].reason)

    def test_an_idle_high_is_inactive_whatever_it_moved_before(self):
        loop = Loop()
        protect(loop, low(6), low(5, uuid=L2))
        # Suspended: its vCPU is never runnable and it moves nothing.
        idle = ctl.Member(H, ctl.HIGH, domains={0: 0.0}, demand=0.0)
        for _ in range(4):
            d = loop.run(idle, low(1), low(1, uuid=L2))
        self.assertEqual(0, d.reports[0].active_high)
        self.assertEqual({L1: 20, L2: 20}, loop.levels)
        self.assertEqual('no active high-priority instance',
                         loop.changes[-1].reason)

    def test_starved_below_the_watermark_is_protected(self):
        # Other work on the host: the pool reads 0.55 of a capacity it
        # had when idle, yet the high guest, wanting as much CPU as when
        # it sustained 4 GB/s, gets 1.5.
        loop = Loop()
        for _ in range(3):
            loop.run(hi(4))
        d = loop.run(hi(1.5), low(2), low(2, uuid=L2))
        self.assertEqual({L1: 10, L2: 10}, loop.levels)
        self.assertEqual('pressure 0.55: %s below half its peak at its '
                         'demand with 1 active high, every active low to the '
                         'floor' % H, d.changes[0].reason)
        # And no release while it stays starved.
        for _ in range(10):
            d = loop.run(hi(1.5), low(0.2), low(0.2, uuid=L2))
        self.assertEqual({L1: 10, L2: 10}, loop.levels)
        self.assertIn('starved, no step left', d.reports[0].reason)
        self.assertEqual((1, 2, 2), (d.reports[0].starved_high,
                                     d.reports[0].active_low,
                                     d.reports[0].low_at_floor))

    def test_wanting_less_is_not_starved(self):
        loop = Loop()
        for _ in range(3):
            loop.run(hi(4))
        # A third of the CPU it wanted at its peak: its own doing.
        loop.run(hi(1.5, demand=0.3), low(2), low(2, uuid=L2))
        self.assertEqual({}, loop.levels)

    def test_resumed_within_the_interval_is_starved_at_once(self):
        # Paused while its neighbours run, then runnable for 64% of the
        # interval it resumes in: it wants 64/90 of its peak of 4 GB/s
        # and gets 0.6. The pool reads 0.76, below the high watermark:
        # starvation alone throttles, at this first interval.
        loop = Loop()
        for _ in range(3):
            loop.run(hi(4))
        for _ in range(3):
            loop.run(hi(0, demand=0.0), low(4), low(3, uuid=L2))
        self.assertEqual({}, loop.levels)
        d = loop.run(hi(0.6, demand=0.64), low(4), low(3, uuid=L2))
        self.assertEqual({L1: 10, L2: 10}, loop.levels)
        self.assertEqual(1, d.reports[0].starved_high)
        self.assertIn('below half its peak at its demand', d.changes[0].reason)

    def test_working_part_of_the_time_at_its_pace_is_not_starved(self):
        loop = Loop()
        for _ in range(3):
            loop.run(hi(4))
        # 40% of the CPU and 1.6 GB/s: the pace of its peak, for part of
        # the time.
        d = loop.run(hi(1.6, demand=0.4), low(3), low(1, uuid=L2))
        self.assertEqual({}, loop.levels)
        self.assertEqual(0, d.reports[0].starved_high)

    def test_what_it_wants(self):
        peak = keeping.Peak(learned=4 * GB, demand=1.0)
        self.assertEqual(4 * GB, keeping.wants(hi(1, demand=0.95), peak))
        self.assertEqual(4 * GB, keeping.wants(hi(1, demand=0.9), peak))
        self.assertAlmostEqual(2 * GB, keeping.wants(hi(1, demand=0.45),
                                                     peak))
        self.assertIsNone(keeping.wants(hi(1, demand=None), peak))
        self.assertIsNone(keeping.wants(hi(1), keeping.Peak(4 * GB)))
        self.assertEqual(4 * GB, keeping.wants(
            hi(1, demand=0.1), keeping.Peak(4 * GB, demand=0.0)))
        # Too little demand to judge.
        self.assertFalse(keeping.starved(hi(0, demand=0.01), 0.0, peak,
                                         ctl.SQUEEZED))
        self.assertTrue(keeping.starved(hi(0, demand=0.05), 0.0, peak,
                                        ctl.SQUEEZED))

    def test_demand_threshold(self):
        self.assertTrue(keeping.demand_active(hi(0, demand=0.05)))
        self.assertFalse(keeping.demand_active(hi(0, demand=0.01)))
        self.assertFalse(keeping.demand_active(hi(0, demand=None)))


class TestKeptShare(base.TestCase):

    def released_once(self):
        loop = Loop()
        self.assertEqual({L1: 10}, protect(loop, low(8)))
        # Protected, it moves 4 GB/s; the pool is at 0.5. After the
        # release dwell, one step.
        for _ in range(3):
            loop.run(hi(4), low(1))
        self.assertEqual({L1: 20}, loop.levels)
        return loop

    def test_release_that_costs_the_protected_its_share_is_undone(self):
        loop = self.released_once()
        changes = len(loop.changes)
        # The step took it to 3 GB/s while it wants as much CPU as before:
        # the step is undone at once and releases stop, although the pool
        # is below the low watermark.
        d = loop.run(hi(3), low(2))
        self.assertEqual({L1: 10}, loop.levels)
        self.assertEqual(ctl.THROTTLE, d.reports[0].decision)
        self.assertEqual('%s moves 75%% of what protection gave it, wanting '
                         'as much: the last release undone, no release '
                         'while it is active' % H, d.changes[0].reason)
        for _ in range(30):
            d = loop.run(hi(4), low(1))
        self.assertEqual(changes + 1, len(loop.changes))
        self.assertIn('cost a high instance its share', d.reports[0].reason)
        # It goes idle: the pool is released again, in steps.
        for _ in range(30):
            loop.run(hi(0, demand=0.0), low(1))
        self.assertEqual({}, loop.levels)
        self.assertFalse(loop.state.domains[0].stopped)
        self.assertEqual({}, dict(loop.state.domains[0].given))

    def test_cut_again_after_a_release_stops_the_releases(self):
        # Under host load the release step starves the protected instance
        # (below half its peak, wanting as much) before the kept-share
        # check can see it: the starved rule cuts, and no release follows
        # while it is active, rather than a cycle of release and cut.
        loop = self.released_once()
        d = loop.run(hi(1.5), low(2))
        self.assertEqual({L1: 10}, loop.levels)
        self.assertEqual(ctl.THROTTLE, d.reports[0].decision)
        self.assertTrue(loop.state.domains[0].stopped)
        changes = len(loop.changes)
        for _ in range(30):
            d = loop.run(hi(4), low(1))
        self.assertEqual(changes, len(loop.changes))
        self.assertIn('cost a high instance its share', d.reports[0].reason)
        for _ in range(30):
            loop.run(hi(0, demand=0.0), low(1))
        self.assertEqual({}, loop.levels)

    def test_less_demand_is_no_loss(self):
        loop = self.released_once()
        # It moves less because it wants less (half the CPU): not the
        # release's doing; releases go on.
        for _ in range(3):
            loop.run(hi(2, demand=0.5), low(2))
        self.assertEqual({L1: 30}, loop.levels)
        self.assertFalse(loop.state.domains[0].stopped)

    def test_without_demand_the_rate_decides(self):
        loop = self.released_once()
        d = loop.run(hi(3, demand=None), low(2))
        self.assertEqual({L1: 10}, loop.levels)
        self.assertIn('the last release undone', d.changes[0].reason)

    def test_releases_keep_going_while_the_share_is_kept(self):
        loop = self.released_once()
        self.assertEqual((4 * GB, 1.0), loop.state.domains[0].given[H])
        for _ in range(30):
            loop.run(hi(4.1), low(1))
        self.assertEqual({}, loop.levels)


class TestLateMeasured(base.TestCase):

    def test_a_late_low_starts_where_the_others_are(self):
        loop = Loop()
        self.assertEqual({L1: 10, L2: 10},
                         protect(loop, low(4), low(4, uuid=L2)))
        # The third one has its first rate now; the pool is inside the
        # band (0.68), where the law would otherwise hold.
        d = loop.run(hi(3), low(0.4), low(0.4, uuid=L2), low(3, uuid=L3))
        self.assertEqual({L1: 10, L2: 10, L3: 10}, loop.levels)
        self.assertIn('late-measured: starts where the other low instances '
                      'are', d.changes[0].reason)

    def test_not_without_an_active_high(self):
        loop = Loop()
        protect(loop, low(4), low(4, uuid=L2))
        loop.run(hi(0, demand=0.0), low(0.4), low(0.4, uuid=L2),
                 low(3, uuid=L3))
        self.assertNotIn(L3, loop.levels)

    def test_a_new_low_starts_there_before_its_first_rate(self):
        loop = Loop()
        protect(loop, low(4), low(4, uuid=L2))
        # No rate yet for the third; the pool is quiet (0.38), the high
        # instance not starved: it still starts where the others are.
        d = loop.run(hi(3), low(0.4), low(0.4, uuid=L2), unmeasured(L3))
        self.assertEqual({L1: 10, L2: 10, L3: 10}, loop.levels)
        self.assertIn('not measured yet: starts where the other low '
                      'instances are', d.changes[0].reason)
        # Not beside an idle high instance, nor beside a low one that
        # runs free.
        loop = Loop()
        protect(loop, low(4), low(4, uuid=L2))
        loop.run(hi(0, demand=0.0), low(0.4), low(0.4, uuid=L2),
                 unmeasured(L3))
        self.assertNotIn(L3, loop.levels)
        loop = Loop()
        free = low(1, uuid=L2, ceiling=10)
        protect(loop, low(8), free)
        loop.run(hi(3), low(0.4), free, unmeasured(L3))
        self.assertNotIn(L3, loop.levels)

    def test_not_while_another_low_runs_free(self):
        loop = Loop()
        # L2 is active and held by nobody (its static cap is the floor):
        # the low instances are not all where the others are.
        free = low(1, uuid=L2, ceiling=10)
        self.assertEqual({L1: 10}, protect(loop, low(8), free))
        loop.run(hi(3), low(0.4), free, low(2, uuid=L3))
        self.assertEqual({L1: 10}, loop.levels)


class TestNewBesideStarved(base.TestCase):
    """Low instances without a first rate yet, while a high one starves."""

    def starving(self):
        loop = Loop()
        for _ in range(3):
            loop.run(hi(4))
        return loop

    def test_to_the_floor_before_their_first_rate(self):
        loop = self.starving()
        d = loop.run(hi(1.5), unmeasured(L1), unmeasured(L2))
        self.assertEqual({L1: 10, L2: 10}, loop.levels)
        self.assertEqual(ctl.THROTTLE, d.reports[0].decision)
        self.assertEqual('%s starved, with 2 low instance(s) not measured '
                         'yet: those to the floor' % H, d.changes[0].reason)

    def test_released_in_steps_once_measured_idle(self):
        loop = self.starving()
        loop.run(hi(1.5), unmeasured(L1))
        self.assertEqual({L1: 10}, loop.levels)
        for _ in range(40):
            loop.run(hi(4), low(0.05))
        self.assertEqual({}, loop.levels)

    def test_not_while_the_high_instance_gets_its_share(self):
        loop = self.starving()
        loop.run(hi(4), unmeasured(L1))
        self.assertEqual({}, loop.levels)

    def test_not_one_measured_before(self):
        # Measured idle once, then unmeasured (no rate this interval):
        # not new; the law waits for its rate.
        loop = self.starving()
        loop.run(hi(4), low(0.05))
        loop.run(hi(1.5), unmeasured(L1))
        self.assertEqual({}, loop.levels)

    def test_not_one_the_agent_does_not_monitor(self):
        loop = self.starving()
        blind = ctl.Member(L1, ctl.LOW, domains=None, monitored=False)
        loop.run(hi(1.5), blind)
        self.assertEqual({}, loop.levels)

    def test_not_in_the_first_period_after_a_restart(self):
        loop = self.starving()
        loop.state = dataclasses.replace(loop.state, seen={})
        loop.run(hi(1.5), unmeasured(L1))
        self.assertEqual({}, loop.levels)


class TestNoFreeClosid(base.TestCase):

    def test_a_whole_level_goes_down_in_place(self):
        # Three lows at 20%, and the host's other CLOSIDs are taken: the
        # pool is saturated, and the level's group takes the floor.
        scale = dataclasses.replace(PCT, max_levels=1)
        loop = Loop(scale=scale)
        loop.state = ctl.State({L1: 20, L2: 20, L3: 20})
        d = loop.run(hi(3), low(3), low(3, uuid=L2), low(3, uuid=L3))
        self.assertEqual({L1: 10, L2: 10, L3: 10}, loop.levels)
        self.assertIn('no free CLOSID for a new level: level 20 changed in '
                      'place', d.changes[0].reason)

    def test_not_in_place_when_a_member_stays(self):
        scale = dataclasses.replace(PCT, max_levels=1)
        loop = Loop(scale=scale)
        loop.state = ctl.State({L1: 20, L2: 20})
        # L2 is idle: it does not go down, so level 20 cannot change.
        d = loop.run(hi(3), low(9), low(0.01, uuid=L2))
        self.assertEqual({L1: 20, L2: 20}, loop.levels)
        self.assertEqual(ctl.HOLD, d.reports[0].decision)
        self.assertIn('no free CLOSID', d.reports[0].reason)

    def test_into_the_lowest_existing_level(self):
        scale = dataclasses.replace(PCT, max_levels=2)
        loop = Loop(scale=scale)
        loop.state = ctl.State({L1: 50, L2: 20})
        loop.run(hi(3), low(6), low(3, uuid=L2))
        # L1 joins 20, so 20 cannot change in place for L2.
        self.assertEqual({L1: 20, L2: 20}, loop.levels)

    def test_a_static_group_is_a_level_there_is(self):
        # The shared group of hw:mem_bw=10 instances exists: joining it
        # takes no CLOSID.
        scale = dataclasses.replace(PCT, max_levels=0,
                                    existing=frozenset({10}))
        loop = Loop(scale=scale)
        loop.run(hi(3), low(9))
        self.assertEqual({L1: 10}, loop.levels)
        # Only a 20% group: the lowest level there is, no new one.
        scale = dataclasses.replace(scale, existing=frozenset({20}))
        loop = Loop(scale=scale)
        loop.run(hi(3), low(9))
        self.assertEqual({L1: 20}, loop.levels)

    def _apart(self, scale, params=None):
        """L1, L2 and L3 held at 20%, L1 active on domain 1 only.

        No high instance is active there: domain 1 releases L1, while
        domain 0 holds L2 and L3.
        """
        loop = Loop(scale=scale, params=params or test_controller.PARAMS)
        loop.state = ctl.State({L1: 20, L2: 20, L3: 20}, held_on={
            L1: frozenset({1}), L2: frozenset({0}), L3: frozenset({0})})
        # Domain 0: 3 + 2 + 2 of 10 GB/s, between the watermarks.
        return loop, loop.run(hi(3), low(3, dom=1), low(2, uuid=L2),
                              low(2, uuid=L3))

    def test_a_release_opens_no_level_without_a_closid(self):
        # 30% would need a group of its own, and no CLOSID is free: the
        # planner would have sent L1's threads to the default group, and
        # level 20 could no longer go down in place for L2 and L3.
        loop, d = self._apart(dataclasses.replace(PCT, max_levels=1))
        self.assertEqual({L1: 20, L2: 20, L3: 20}, loop.levels)
        self.assertEqual(0, len(d.changes))
        self.assertEqual(ctl.HOLD, d.reports[1].decision)
        self.assertIn('no free CLOSID for a higher level',
                      d.reports[1].reason)
        # With one free, it goes.
        loop, d = self._apart(dataclasses.replace(PCT, max_levels=2))
        self.assertEqual({L1: 30, L2: 20, L3: 20}, loop.levels)
        self.assertEqual(ctl.RELEASE, d.reports[1].decision)

    def test_a_release_stops_at_a_level_there_is(self):
        scale = dataclasses.replace(PCT, max_levels=1,
                                    existing=frozenset({30}))
        params = dataclasses.replace(test_controller.PARAMS, increase=20.0)
        loop, d = self._apart(scale, params)
        self.assertEqual({L1: 30, L2: 20, L3: 20}, loop.levels)
        self.assertEqual((20, 30), (d.changes[0].old, d.changes[0].new))

    def test_a_whole_level_goes_up_in_place(self):
        # Every holder of level 20 goes to 30: its group takes the new
        # value, no CLOSID needed.
        loop = Loop(scale=dataclasses.replace(PCT, max_levels=1))
        loop.state = ctl.State({L1: 20, L2: 20})
        d = loop.run(low(3), low(2, uuid=L2))
        self.assertEqual({L1: 30, L2: 30}, loop.levels)
        self.assertEqual(ctl.RELEASE, d.reports[0].decision)


class TestDemand(base.TestCase):

    def test_runnable_time_over_the_interval(self):
        demand = protection.Demand()
        self.assertEqual({H: None}, demand.update({H: {1: 10 ** 9}}, 10.0))
        # Thread 1 ran or waited 1.5 s of 2; thread 2 is new: not counted.
        self.assertEqual({H: 0.75}, demand.update(
            {H: {1: 2.5 * 10 ** 9, 2: 5}}, 12.0))
        # Gone, or no figures: unknown, never zero.
        self.assertEqual({H: None}, demand.update({H: {3: 1}}, 13.0))
        self.assertEqual({H: None}, demand.update({H: {3: None}}, 14.0))
        self.assertEqual({}, demand.update({}, 15.0))

    def test_static_levels_take_no_closid(self):
        caps = hosts.REFERENCE
        instances = {f.U1: f.inst(uuid=f.U1, bw=f.shared(20)),
                     f.U2: f.inst(uuid=f.U2, bw=f.shared(60))}
        self.assertEqual(frozenset({20, 60}),
                         protection.static_levels(instances, {}, caps))
        # A held instance's static group may be gone.
        self.assertEqual(frozenset({60}),
                         protection.static_levels(instances, {f.U1: 10},
                                                  caps))


class TestNeverRan(base.TestCase):

    def test_a_guest_that_never_ran_moved_nothing(self):
        from rdt_virt import conf
        now = [1000.0]
        prot = protection.Protection(conf.CONF.rdt_agent, lambda: now[0])
        prot.resume({'instances': {f.U1: {'priority': 'low', 'level': 30}}})
        instances = {
            f.U1: dataclasses.replace(f.inst(uuid=f.U1), priority=ctl.LOW),
            f.U2: dataclasses.replace(f.inst(uuid=f.U2),
                                      priority=ctl.HIGH)}
        # The high guest was paused from its boot: its counters read
        # Unavailable everywhere ("no traffic yet"). That holds no
        # release: it is no instance the totals could be missing.
        rates = {f.U1: sampler.Rates(1e6, total_by_domain={0: 1e6}),
                 f.U2: sampler.Rates(reason=sampler.R_NO_TRAFFIC)}
        changes = []
        for _ in range(5):
            now[0] += prot.params.release_dwell
            changes += prot.step(hosts.REFERENCE, instances, rates)
        self.assertEqual([(30, 40), (40, 50)],
                         [(c.old, c.new) for c in changes][:2])


class TestRestartMidCycle(base.TestCase):
    """A restart after a release stopped: the cycle does not begin again."""

    def setUp(self):
        super().setUp()
        from rdt_virt import conf
        self.flags(memory_bandwidth_capacity=10, group='rdt_agent')
        self.opts = conf.CONF.rdt_agent
        self.now = [1000.0]
        self.ns = 0
        self.instances = {
            f.U1: dataclasses.replace(f.inst(uuid=f.U1), priority=ctl.LOW),
            f.U2: dataclasses.replace(f.inst(uuid=f.U2),
                                      priority=ctl.HIGH)}

    def agent(self):
        return protection.Protection(self.opts, lambda: self.now[0])

    def period(self, prot, high_gbps, low_gbps):
        """One period; the high guest's vCPU is runnable all of it."""
        self.now[0] += prot.period
        self.ns += int(prot.period * 10 ** 9)
        rates = {f.U1: sampler.Rates(low_gbps * GB, total_by_domain={
                     0: low_gbps * GB}),
                 f.U2: sampler.Rates(high_gbps * GB, total_by_domain={
                     0: high_gbps * GB})}
        return prot.step(hosts.REFERENCE, self.instances, rates,
                         runnable={f.U2: {4321: self.ns}})

    def test_restart_after_a_costly_release(self):
        prot = self.agent()
        self.period(prot, 3, 8)
        self.assertEqual({f.U1: 10}, dict(prot.levels))
        for _ in range(3):
            self.period(prot, 4, 1)
        self.assertEqual({f.U1: 20}, dict(prot.levels))
        changes = self.period(prot, 3, 2)
        self.assertEqual([(20, 10)], [(c.old, c.new) for c in changes])
        doc = {'instances': {f.U1: {'priority': 'low', 'level': 10}},
               'host': {'controller': prot.host_doc()}}
        self.assertTrue(doc['host']['controller']['domains']['0'][
            'stopped'])
        # A new agent in the middle of that cycle: it neither releases
        # again into the loss nor lets the neighbour go.
        prot = self.agent()
        prot.resume(doc)
        for _ in range(20):
            self.assertEqual((), self.period(prot, 4, 1))
        self.assertEqual({f.U1: 10}, dict(prot.levels))
        self.assertIn('cost a high instance its share',
                      prot.host_doc()['domains']['0']['reason'])
        # The protected guest stops: its vCPU no longer runs or waits.
        released = []
        for _ in range(40):
            self.ns -= int(prot.period * 10 ** 9)
            released += self.period(prot, 0, 1)
        self.assertEqual({}, dict(prot.levels))
        self.assertIsNone(released[-1].new)
