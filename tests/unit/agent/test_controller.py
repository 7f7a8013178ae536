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

"""The bandwidth controller's control law, as a table of periods."""

import dataclasses

from rdt_virt.agent import controller as ctl
from rdt_virt.agent import model as m
from rdt_virt.agent import protection
from rdt_virt.agent import reconcile
from rdt_virt.agent import sampler
from tests import base
from tests.unit.agent import fakes as f
from tests.unit.policy import hosts

GB = 10 ** 9
CAP = {0: 10 * GB, 1: 10 * GB}
PCT = ctl.Scale('percent', maximum=100, minimum=10, step=10)
MBPS = ctl.Scale('MBps', maximum=2 ** 32 - 1, minimum=1,
                 bytes_per_unit=ctl.MB)
PARAMS = ctl.Params(throttle_dwell=1.0, release_dwell=3.0)
H, L1, L2, N = 'high', 'low-1', 'low-2', 'normal'


def high(gbps, dom=0, uuid=H):
    return ctl.Member(uuid, ctl.HIGH, domains={dom: gbps * GB})


def low(gbps, dom=0, uuid=L1, ceiling=None):
    domains = gbps if isinstance(gbps, dict) else {dom: gbps}
    return ctl.Member(uuid, ctl.LOW, ceiling=ceiling,
                      domains={d: v * GB for d, v in domains.items()})


def unmeasured(uuid, priority=ctl.LOW):
    return ctl.Member(uuid, priority, domains=None)


class Loop(object):
    """Runs decide() period after period, one second apart."""

    def __init__(self, scale=PCT, params=PARAMS, capacities=CAP):
        self.scale = scale
        self.params = params
        self.capacities = capacities
        self.state = ctl.State()
        self.now = 100.0
        self.changes = []

    def run(self, *members):
        decision = ctl.decide(members, self.state, self.scale, self.params,
                              self.now, self.capacities)
        self.state = decision.state
        self.changes.extend(decision.changes)
        self.now += 1.0
        self.last = decision
        return decision

    @property
    def levels(self):
        return dict(self.state.levels)


class TestStepResponse(base.TestCase):

    def test_throttle_heaviest_first_then_floor(self):
        loop = Loop()
        # 2 + 7 + 1 GB/s of 10: pressure 1.0 with a high one active.
        d = loop.run(high(2), low(7), low(1, uuid=L2))
        self.assertEqual({L1: 50}, loop.levels)
        self.assertEqual(ctl.THROTTLE, d.reports[0].decision)
        change = d.changes[0]
        self.assertEqual((L1, 0, None, 50), (change.uuid, change.domain,
                                             change.old, change.new))
        self.assertIn('pressure 1.00 >= high watermark 0.85', change.reason)
        # The neighbours keep pushing: halved again, down to the floor,
        # and only then is the lighter one cut.
        loop.run(high(2), low(7), low(1, uuid=L2))
        self.assertEqual({L1: 20}, loop.levels)
        d = loop.run(high(2), low(7), low(1, uuid=L2))
        self.assertEqual({L1: 10}, loop.levels)
        # One of the two active low instances is at its floor: the other
        # can still give.
        self.assertEqual((2, 1, 0), (d.reports[0].active_low,
                                     d.reports[0].low_at_floor,
                                     d.reports[0].starved_high))
        loop.run(high(2), low(7), low(1, uuid=L2))
        self.assertEqual({L1: 10, L2: 50}, loop.levels)

    def test_excess_covered_by_several(self):
        loop = Loop()
        # Excess 9.5 - 8.5 = 1 GB/s; halving L1 (1.2) gives 0.6, not
        # enough: L2 is cut too, and nobody else.
        loop.run(high(5), low(1.2), low(1.1, uuid=L2),
                 low(0.1, uuid='idle-low'),
                 ctl.Member(N, ctl.NORMAL, domains={0: 2.1 * GB}))
        self.assertEqual({L1: 50, L2: 50}, loop.levels)

    def test_released_in_steps_when_no_high_is_active(self):
        loop = Loop()
        loop.run(high(3), low(7))
        self.assertEqual({L1: 50}, loop.levels)
        # The high one goes idle; releases wait for the release dwell.
        loop.run(high(0), low(3.5))
        loop.run(high(0), low(3.5))
        self.assertEqual({L1: 50}, loop.levels)
        self.assertIn('dwelling', loop.last.reports[0].reason)
        seen = []
        for _ in range(20):
            loop.run(high(0), low(3.5))
            seen.append(loop.levels.get(L1))
        # +10 points every release dwell, then let go.
        self.assertEqual([60, 70, 80, 90, None],
                         sorted(set(seen), key=lambda v: v or 1000))
        self.assertIsNone(loop.changes[-1].new)
        self.assertEqual('no active high-priority instance',
                         loop.changes[-1].reason)

    def test_saturated_every_active_low_to_the_floor(self):
        loop = Loop()
        # 3 + 5 + 4 GB/s of 10: more than the domain moves, so how much
        # more they want is unknown. The idle low one is left alone.
        d = loop.run(high(3), low(5), low(4, uuid=L2),
                     low(0.01, uuid='idle-low'))
        self.assertEqual({L1: 10, L2: 10}, loop.levels)
        self.assertEqual(ctl.THROTTLE, d.reports[0].decision)
        self.assertEqual('pressure 1.20: saturated with 1 active high, '
                         'every active low to the floor',
                         d.changes[0].reason)
        # Both active low instances at their floor (the idle one is no
        # active low).
        self.assertEqual((2, 2), (d.reports[0].active_low,
                                  d.reports[0].low_at_floor))
        # At the floor: nothing left to cut, whatever the pressure.
        d = loop.run(high(3), low(5), low(4, uuid=L2))
        self.assertEqual(2, len(loop.changes))
        self.assertIn('no step left', d.reports[0].reason)
        self.assertEqual((2, 2), (d.reports[0].active_low,
                                  d.reports[0].low_at_floor))

    def test_saturated_respects_the_static_cap_and_mbps_floor(self):
        loop = Loop()
        loop.run(high(3), low(8, ceiling=40))
        self.assertEqual({L1: 10}, loop.levels)
        loop = Loop(scale=MBPS)
        d = loop.run(high(3), low(8))
        # 10% of the domain's 10 GB/s, in MiB/s.
        self.assertEqual({L1: -(-GB // ctl.MB)}, loop.levels)
        self.assertEqual(1, d.reports[0].low_at_floor)

    def test_a_resumed_high_is_protected_within_two_periods(self):
        # The pool reads far below the high watermark (as on a host whose
        # other work takes what the instances share): only starvation
        # throttles, and it needs 90% of the peak's demand over a period.
        # So the decision comes at the first period the resumed instance
        # fills by 90%: within 1.9 periods of the resume, whatever the
        # phase of the resume in the period (admin/protection).
        def busy(gbps, demand):
            return ctl.Member(H, ctl.HIGH, domains={0: gbps * GB},
                              demand=demand)

        lows = (low(1.5), low(1.5, uuid=L2))
        for tenth in range(1, 11):
            covered = tenth / 10.0      # of the period it resumed in
            loop = Loop()
            for _ in range(3):
                loop.run(busy(4, 1.0))          # its peak
            for _ in range(5):
                loop.run(busy(0, 0.0), *lows)   # suspended
            self.assertEqual({}, loop.levels)
            resumed = loop.now - covered
            d = loop.run(busy(1.2 * covered, covered), *lows)
            decided = loop.now - 1.0    # run() moves on by a period
            while not d.changes:
                self.assertLess(decided - resumed, 3.0)
                d = loop.run(busy(1.2, 1.0), *lows)
                decided = loop.now - 1.0
            self.assertLessEqual(decided - resumed, 1.9 + 1e-9, covered)
            self.assertEqual({L1: 10, L2: 10}, loop.levels)
            self.assertLess(d.reports[0].pressure, PARAMS.high_watermark)

    def test_a_static_cap_below_the_floor_is_at_the_floor(self):
        # hw:mem_bw=10 with a floor of 20: nothing to take from it.
        loop = Loop(params=dataclasses.replace(PARAMS, floor=20.0))
        d = loop.run(high(3), low(8, ceiling=10))
        self.assertEqual({}, loop.levels)
        self.assertEqual((1, 1), (d.reports[0].active_low,
                                  d.reports[0].low_at_floor))

    def test_squeezed_high_sends_every_active_low_to_the_floor(self):
        loop = Loop()
        for _ in range(3):
            loop.run(high(4))           # its peak: 4 GB/s sustained
        # Down to 1.5 with the pool at 0.85: what it lost is demand the
        # total does not show.
        d = loop.run(high(1.5), low(4), low(3, uuid=L2))
        self.assertEqual({L1: 10, L2: 10}, loop.levels)
        self.assertEqual('pressure 0.85: high below half its peak with 1 '
                         'active high, every active low to the floor',
                         d.changes[0].reason)
        self.assertEqual(4 * GB, loop.state.peaks[H].learned)

    def test_a_high_below_its_peak_is_no_pressure_by_itself(self):
        loop = Loop()
        for _ in range(3):
            loop.run(high(4))
        # Idle-ish and the pool far from its watermark: nothing to do.
        loop.run(high(1), low(3))
        self.assertEqual({}, loop.levels)
        # Above the watermark but not below half its peak: in proportion.
        loop.run(high(2.5), low(6.5))
        self.assertEqual({L1: 50}, loop.levels)
        # It leaves: its peak is forgotten.
        loop.run(low(1))
        self.assertEqual({}, dict(loop.state.peaks))

    def test_normal_instances_never_touched(self):
        loop = Loop()
        loop.run(high(2), ctl.Member(N, ctl.NORMAL, domains={0: 8 * GB}))
        self.assertEqual({}, loop.levels)
        self.assertIn('no active low', loop.last.reports[0].reason)


class TestHysteresis(base.TestCase):

    def test_steady_inside_the_band_never_changes(self):
        loop = Loop()
        loop.run(high(3), low(7))
        # At 50% the low one uses 3.5: pressure 0.65, inside the band.
        for _ in range(60):
            loop.run(high(3), low(3.5))
        self.assertEqual(1, len(loop.changes))
        self.assertEqual(ctl.HOLD, loop.last.reports[0].decision)
        self.assertEqual('between the watermarks',
                         loop.last.reports[0].reason)

    def test_below_low_watermark_releases_then_holds(self):
        loop = Loop()
        loop.run(high(3), low(7))
        for _ in range(3):
            loop.run(high(2), low(3))      # 0.5: below 0.6
        self.assertEqual({L1: 60}, loop.levels)
        for _ in range(10):
            loop.run(high(2), low(4.5))    # 0.65: hold
        self.assertEqual({L1: 60}, loop.levels)

    def test_release_held_when_the_step_would_throttle_again(self):
        def at_floor():
            loop = Loop()
            for _ in range(3):
                loop.run(high(3), low(7))    # 100 -> 50 -> 30 -> 10
            self.assertEqual({L1: 10}, loop.levels)
            return loop, len(loop.changes)

        # Pressure 0.6, at the low watermark: 10 -> 20 may double the low
        # one's 1.5 GB/s, to 0.75: released.
        loop, changes = at_floor()
        for _ in range(4):
            loop.run(high(4.5), low(1.5))
        self.assertEqual({L1: 20}, loop.levels)
        # The same pressure with 3 GB/s from the low one: the step may add
        # 3 GB/s, to 0.9, and would only be throttled again: held.
        loop, changes = at_floor()
        for _ in range(60):
            loop.run(high(3), low(3))
        self.assertEqual(changes, len(loop.changes))
        self.assertIn('could bring it back', loop.last.reports[0].reason)

    def test_high_split_over_two_domains_is_active(self):
        loop = Loop()
        # 30 MiB/s on each domain: below the threshold on each, above it
        # in sum; the low one fills both domains.
        split = ctl.Member(H, ctl.HIGH, domains={0: 30 * ctl.MB,
                                                 1: 30 * ctl.MB})
        d = loop.run(split, low({0: 9.9, 1: 9.9}))
        self.assertEqual({L1: 50}, loop.levels)
        self.assertEqual(1, d.reports[0].active_high)

    def test_throttle_dwell(self):
        loop = Loop(params=dataclasses.replace(PARAMS, throttle_dwell=5.0))
        loop.run(high(3), low(7))
        for _ in range(4):
            loop.run(high(3), low(7))
        self.assertEqual({L1: 50}, loop.levels)
        self.assertIn('dwelling', loop.last.reports[0].reason)
        loop.run(high(3), low(7))
        self.assertEqual({L1: 20}, loop.levels)


class TestLimits(base.TestCase):

    def test_static_cap_is_the_ceiling(self):
        loop = Loop()
        loop.run(high(3), low(7, ceiling=40))
        self.assertEqual({L1: 20}, loop.levels)
        for _ in range(10):
            loop.run(high(0), low(1, ceiling=40))
        # Released up to its cap, then no longer held at all.
        self.assertEqual({}, loop.levels)
        self.assertEqual([(None, 20), (20, 30), (30, None)],
                         [(c.old, c.new) for c in loop.changes])

    def test_lowered_static_cap_drops_the_level(self):
        loop = Loop()
        loop.run(high(3), low(7))
        loop.run(high(3), low(3.5, ceiling=30))
        self.assertEqual({}, loop.levels)

    def test_host_minimum_is_the_floor(self):
        scale = dataclasses.replace(PCT, minimum=30)
        loop = Loop(scale=scale)
        for _ in range(5):
            loop.run(high(3), low(7))
        self.assertEqual({L1: 30}, loop.levels)

    def test_configured_floor(self):
        loop = Loop(params=dataclasses.replace(PARAMS, floor=40.0))
        for _ in range(5):
            loop.run(high(3), low(7))
        self.assertEqual({L1: 40}, loop.levels)

    def test_levels_bounded_by_free_closids(self):
        scale = dataclasses.replace(PCT, max_levels=1)
        loop = Loop(scale=scale)
        # Excess 1.5 GB/s: halving L1 gives 1.45, so L2 is cut too.
        loop.run(high(4.4), low(2.9), low(2.7, uuid=L2))
        self.assertEqual({L1: 50, L2: 50}, loop.levels)
        # No CLOSID for a second level: both stay at the one in use.
        d = loop.run(high(4.4), low(2.9), low(2.7, uuid=L2))
        self.assertEqual({L1: 50, L2: 50}, loop.levels)
        self.assertIn('no free CLOSID', d.reports[0].reason)


class TestMissingMeasurements(base.TestCase):

    def test_unmeasured_low_is_not_throttled(self):
        loop = Loop()
        loop.run(high(3), unmeasured(L1), low(6.5, uuid=L2))
        self.assertEqual({L2: 50}, loop.levels)

    def test_unmeasured_throttled_is_not_released(self):
        loop = Loop()
        loop.run(high(3), low(7))
        for _ in range(10):
            loop.run(high(0), unmeasured(L1))
        self.assertEqual({L1: 50}, loop.levels)

    def test_unmeasured_neighbour_holds_releases_of_its_domain(self):
        loop = Loop()
        loop.run(high(3), low(6), low(1, uuid=L2))
        self.assertEqual({L1: 50}, loop.levels)
        # L2 (seen on domain 0) reads Unavailable: the total of domain 0
        # may miss it, so L1 stays throttled.
        for _ in range(10):
            loop.run(high(2), low(1), unmeasured(L2))
        self.assertEqual({L1: 50}, loop.levels)
        self.assertIn('was not measured', loop.last.reports[0].reason)
        loop.run(high(2), low(1), low(0.5, uuid=L2))
        self.assertEqual({L1: 60}, loop.levels)

    def test_unmeasured_high_keeps_its_peak_and_squeezes_nothing(self):
        loop = Loop()
        for _ in range(3):
            loop.run(high(4))
        # Its counter reads Unavailable (no rate): not squeezed, and its
        # peak is neither lowered nor forgotten.
        for _ in range(5):
            loop.run(unmeasured(H, ctl.HIGH), low(9))
        self.assertEqual({}, loop.levels)
        self.assertEqual(4 * GB, loop.state.peaks[H].learned)

    def test_unmeasured_high_does_not_release(self):
        loop = Loop()
        loop.run(high(3), low(7))
        for _ in range(10):
            loop.run(unmeasured(H, ctl.HIGH), low(3.5))
        self.assertEqual({L1: 50}, loop.levels)


class TestRestart(base.TestCase):

    def test_resume_without_a_burst_of_releases(self):
        loop = Loop()
        loop.run(high(3), low(7), low(5, uuid=L2))
        before = loop.levels
        self.assertEqual({L1: 10, L2: 10}, before)
        # A new agent: only the levels come back, the dwell starts anew.
        restarted = Loop()
        restarted.now = loop.now + 600
        restarted.state = ctl.State(
            before, {0: ctl.Domain(last_change=restarted.now)})
        for _ in range(3):
            restarted.run(high(0), low(1), low(1, uuid=L2))
        self.assertEqual(before, restarted.levels)
        restarted.run(high(0), low(1), low(1, uuid=L2))
        self.assertEqual({L1: 20, L2: 20}, restarted.levels)

    def test_gone_instance_forgotten(self):
        loop = Loop()
        loop.run(high(3), low(7))
        loop.run(high(3))
        self.assertEqual({}, loop.levels)
        self.assertEqual({H}, set(loop.state.seen))


class TestDomains(base.TestCase):

    def test_each_domain_on_its_own(self):
        loop = Loop()
        d = loop.run(high(3, dom=0), low(7, dom=0),
                     low(9, dom=1, uuid=L2))
        # Domain 1 is saturated too but protects nobody.
        self.assertEqual({L1: 50}, loop.levels)
        self.assertEqual(ctl.THROTTLE, d.reports[0].decision)
        self.assertEqual(ctl.HOLD, d.reports[1].decision)
        self.assertEqual(1, d.reports[0].throttled)
        self.assertEqual(0, d.reports[1].throttled)
        self.assertEqual(1, d.reports[0].active_high)

    def test_release_needs_every_domain_where_it_is_active(self):
        loop = Loop()
        loop.run(high(3, dom=0), low({0: 7, 1: 1}))
        self.assertEqual({L1: 50}, loop.levels)
        # Domain 0 would release; domain 1 has an active high one and
        # holds (pressure 0.75, inside the band).
        for _ in range(10):
            loop.run(high(6.5, dom=1), low({0: 3, 1: 1}))
        self.assertEqual({L1: 50}, loop.levels)
        self.assertEqual(ctl.RELEASE, loop.last.reports[0].decision)
        self.assertEqual(ctl.HOLD, loop.last.reports[1].decision)

    def test_a_guest_moving_between_domains_keeps_its_level(self):
        # Its vCPU runs on domain 0 beside the high one, then on domain 1,
        # where nobody is protected, then on domain 0 again: domain 1 alone
        # must not release what domain 0 throttled.
        loop = Loop()
        loop.run(high(3, dom=0), low(7, dom=0))
        self.assertEqual({L1: 50}, loop.levels)
        # Domain 0 stays inside the band (0.75) with a normal neighbour.
        busy = ctl.Member(N, ctl.NORMAL, domains={0: 4.5 * GB})
        for _ in range(5):
            d = loop.run(high(3, dom=0), busy, low(3.5, dom=1))
            self.assertEqual({L1: 50}, loop.levels)
        self.assertEqual(1, d.reports[0].throttled)
        self.assertEqual(frozenset({0, 1}), loop.state.held_on[L1])
        # Once the high one is gone, every domain agrees and it is let go
        # in steps.
        for _ in range(20):
            loop.run(low(3.5, dom=1))
        self.assertEqual({}, loop.levels)
        self.assertEqual({}, dict(loop.state.held_on))

    def test_learned_capacity(self):
        loop = Loop(capacities={})
        d = loop.run(high(3), low(5))
        self.assertIsNone(d.reports[0].capacity)
        self.assertIsNone(d.reports[0].pressure)
        self.assertEqual('capacity unknown yet', d.reports[0].reason)
        self.assertEqual({}, loop.levels)
        loop.run(low(9))
        d = loop.run(low(8.5))
        # The lowest of the last three totals: what was sustained.
        self.assertEqual(8 * GB, d.reports[0].capacity)
        self.assertEqual(ctl.LEARNED, d.reports[0].capacity_source)
        # A one-period burst does not raise it beyond what held.
        loop.run(low(20))
        d = loop.run(high(3), low(5))
        self.assertEqual(8.5 * GB, d.reports[0].capacity)
        self.assertEqual({L1: 50}, loop.levels)

    def test_configured_capacity_wins(self):
        loop = Loop()
        d = loop.run(low(20))
        self.assertEqual((10 * GB, ctl.CONFIGURED),
                         (d.reports[0].capacity,
                          d.reports[0].capacity_source))


class TestMBps(base.TestCase):

    def test_absolute_levels(self):
        loop = Loop(scale=MBPS)
        loop.run(high(3), low(7))
        # Halved from what it uses now (7 GB/s), in MiB/s.
        self.assertEqual({L1: int(7 * GB / ctl.MB * 0.5)}, loop.levels)
        for _ in range(10):
            loop.run(high(3), low(7))
        # Floor: 10% of the domain's capacity.
        self.assertEqual({L1: -(-GB // ctl.MB)}, loop.levels)

    def test_released_by_tenths_of_capacity_then_let_go(self):
        loop = Loop(scale=MBPS)
        loop.run(high(3), low(7))
        for _ in range(40):
            loop.run(high(0), low(3))
        self.assertEqual({}, loop.levels)
        steps = [c.new - c.old for c in loop.changes[1:-1]]
        self.assertTrue(steps)
        self.assertEqual({-(-GB // ctl.MB)}, set(steps))

    def test_static_mbps_cap_is_the_ceiling(self):
        loop = Loop(scale=MBPS)
        loop.run(high(3), low(7, ceiling=2000))
        self.assertEqual({L1: 1000}, loop.levels)


class TestMechanism(base.TestCase):
    """Levels become groups through the planner, and nothing else moves."""

    def low_inst(self, bw=None, uuid=f.U1, allocs=()):
        return dataclasses.replace(f.inst(uuid=uuid, bw=bw, allocs=allocs),
                                   priority=ctl.LOW)

    def test_percent_level_joins_the_shared_group(self):
        inst = self.low_inst()
        planned = reconcile.controlled({f.U1: inst}, {f.U1: 30},
                                       hosts.REFERENCE)
        self.assertEqual(f.shared(30), planned[f.U1].bandwidth)
        self.assertEqual({f.P + 'mb30'}, reconcile.groups_of(
            planned[f.U1], hosts.REFERENCE, reconcile.Settings()))
        result = reconcile.plan(planned, {f.U1: f.threads()},
                                f.snap(root=f.ROOT_SCH), hosts.REFERENCE,
                                reconcile.Settings())
        self.assertIn(m.CreateGroup(f.P + 'mb30'), result.actions)
        self.assertEqual(f.P + 'mb30', result.placements[f.U1].group)

    def test_level_above_the_static_cap_changes_nothing(self):
        inst = self.low_inst(f.shared(20))
        planned = reconcile.controlled({f.U1: inst}, {f.U1: 50},
                                       hosts.REFERENCE)
        self.assertIs(inst, planned[f.U1])

    def test_level_below_the_static_cap_wins(self):
        inst = self.low_inst(f.shared(60))
        planned = reconcile.controlled({f.U1: inst}, {f.U1: 20},
                                       hosts.REFERENCE)
        self.assertEqual(20, planned[f.U1].bandwidth.value)
        self.assertEqual(60, planned[f.U1].bandwidth.requested)

    def test_mbps_level_in_the_instances_own_group(self):
        inst = self.low_inst()
        planned = reconcile.controlled({f.U1: inst}, {f.U1: 700},
                                       hosts.MBPS)
        self.assertEqual(f.mbps(700), planned[f.U1].bandwidth)
        self.assertEqual({f.I1}, reconcile.groups_of(
            planned[f.U1], hosts.MBPS, reconcile.Settings()))

    def test_never_libvirt_normal_or_high(self):
        cases = [
            self.low_inst(f.libvirt_bw(50)),
            self.low_inst(allocs=[f.alloc()]),
            f.inst(),
            dataclasses.replace(f.inst(), priority=ctl.HIGH),
        ]
        for inst in cases:
            planned = reconcile.controlled({f.U1: inst}, {f.U1: 10},
                                           hosts.REFERENCE)
            self.assertIs(inst, planned[f.U1])


class TestProtection(base.TestCase):

    def setUp(self):
        super().setUp()
        from rdt_virt import conf
        self.conf = conf.CONF
        self.now = [1000.0]
        self.prot = protection.Protection(self.conf.rdt_agent,
                                          lambda: self.now[0])

    def test_defaults_follow_the_sampling_period(self):
        period = self.conf.rdt_agent.sample_interval
        self.assertEqual(period, self.prot.period)
        self.assertEqual(period, self.prot.params.throttle_dwell)
        self.assertEqual(3 * period, self.prot.params.release_dwell)

    def test_resume_from_the_state_document(self):
        doc = {'instances': {
            f.U1: {'priority': 'low', 'level': 30},
            f.U2: {'priority': 'normal', 'level': 30},
            'x': {'priority': 'low', 'level': None},
            'y': {'priority': 'low', 'level': True}},
            'host': {'controller': {'domains': {
                '0': {'learned_bps': 5e9}, 'bad': {}, '1': 'x'}}}}
        self.prot.resume(doc)
        self.assertEqual({f.U1: 30}, dict(self.prot.levels))
        self.assertEqual(ctl.Domain(last_change=1000.0, learned=5e9),
                         self.prot.state.domains[0])
        self.assertEqual(ctl.Domain(last_change=1000.0),
                         self.prot.state.domains[1])

    def test_resume_without_domains_still_dwells(self):
        inst_low = dataclasses.replace(f.inst(uuid=f.U1), priority=ctl.LOW)
        self.prot.resume({'instances': {f.U1: {'priority': 'low',
                                               'level': 30}}})
        idle = {f.U1: sampler.Rates(1e6, total_by_domain={0: 1e6})}
        release = self.prot.params.release_dwell
        self.now[0] += release / 2
        self.assertEqual((), self.prot.step(hosts.REFERENCE,
                                            {f.U1: inst_low}, idle))
        self.assertEqual({f.U1: 30}, dict(self.prot.levels))
        self.now[0] += release
        changes = self.prot.step(hosts.REFERENCE, {f.U1: inst_low}, idle)
        self.assertEqual([(30, 40)], [(c.old, c.new) for c in changes])

    def test_resume_ignores_garbage(self):
        for doc in (None, {}, {'instances': {}, 'host': {'controller': 3}},
                    {'host': {'controller': {'domains': []}}}):
            self.prot.resume(doc)
            self.assertEqual({}, dict(self.prot.levels))

    def _pair(self, low_domain=1):
        """A 7 GB/s low guest and a 3 GB/s high one on domain 0; 10 GB/s."""
        inst_low = dataclasses.replace(f.inst(uuid=f.U1), priority=ctl.LOW)
        inst_high = dataclasses.replace(f.inst(uuid=f.U2),
                                        priority=ctl.HIGH)
        self.flags(memory_bandwidth_capacity=10, group='rdt_agent')
        prot = protection.Protection(self.conf.rdt_agent,
                                     lambda: self.now[0])
        rates = {f.U1: sampler.Rates(7e9, total_by_domain={low_domain: 7e9}),
                 f.U2: sampler.Rates(3e9, total_by_domain={0: 3e9})}
        return prot, {f.U1: inst_low, f.U2: inst_high}, rates

    def test_step_throttles_and_reports(self):
        prot, instances, rates = self._pair(low_domain=0)
        with self.assertLogs('rdt_virt.agent.protection', 'INFO') as logs:
            changes = prot.step(hosts.REFERENCE, instances, rates)
        self.assertEqual([(f.U1, None, 50)],
                         [(c.uuid, c.old, c.new) for c in changes])
        # Readers get the value in force of the low instance only.
        self.assertEqual({f.U1: 50}, prot.limits)
        self.assertIn('domain 0, pressure 1.00, capacity 10.0 GB/s '
                      '(configured): instance %s level static -> 50%%'
                      % f.U1, logs.output[0])
        doc = prot.host_doc()
        self.assertEqual('percent', doc['unit'])
        self.assertEqual(0.85, doc['high_watermark'])
        self.assertEqual({'pressure': 1.0, 'capacity_bps': 1e10,
                          'capacity_source': 'configured', 'throttled': 1,
                          'active_high': 1, 'active_low': 1,
                          'low_at_floor': 0, 'starved_high': 0,
                          'decision': 'throttle'},
                         {k: v for k, v in doc['domains']['0'].items()
                          if k in ('pressure', 'capacity_bps', 'throttled',
                                   'capacity_source', 'active_high',
                                   'active_low', 'low_at_floor',
                                   'starved_high', 'decision')})
        # Not due again before a period has passed.
        self.assertEqual((), prot.step(hosts.REFERENCE, {}, {}))

    def test_a_late_sample_costs_no_decision(self):
        # Samples start on the agent's fixed clock (service.next_slot):
        # one that starts 0.5 s late, behind a tick, is followed by one
        # 2.5 s later. Counted on the slots the two are a period apart;
        # on the agent's clock the second would fall short of the
        # period's 10% slack and skip its decision.
        prot, instances, rates = self._pair(low_domain=0)
        start = self.now[0]
        for k, late in enumerate((0.0, 0.5, 0.0)):
            self.now[0] = start + k * prot.period + late
            changes = prot.step(hosts.REFERENCE, instances, rates,
                                slot=start + k * prot.period)
            self.assertEqual(1, len(changes), k)

    def test_a_pool_throttles_a_neighbour_on_another_domain(self):
        # Both domains draw on one node's memory (pools.from_capabilities).
        prot, instances, rates = self._pair()
        prot.set_pools({0: 0, 1: 0})
        changes = prot.step(hosts.REFERENCE, instances, rates)
        self.assertEqual([(f.U1, None, 50)],
                         [(c.uuid, c.old, c.new) for c in changes])
        doc = prot.host_doc()
        self.assertEqual(['0'], list(doc['domains']))
        self.assertEqual([0, 1], doc['domains']['0']['members'])
        self.assertEqual(1.0, doc['domains']['0']['pressure'])

    def test_separate_memory_protects_nothing_across_domains(self):
        for pool_of in (None, {0: 0, 1: 1}):
            prot, instances, rates = self._pair()
            prot.set_pools(pool_of)
            self.assertEqual((), prot.step(hosts.REFERENCE, instances,
                                           rates))
            doc = prot.host_doc()
            self.assertEqual({'0': [0], '1': [1]},
                             {k: v['members']
                              for k, v in doc['domains'].items()})

    def test_pools_off_by_option(self):
        self.flags(controller_pools='domain', group='rdt_agent')
        prot, instances, rates = self._pair()
        prot.set_pools({0: 0, 1: 0})
        self.assertEqual((), prot.step(hosts.REFERENCE, instances, rates))

    def test_new_pools_start_afresh(self):
        prot, instances, rates = self._pair()
        idle = {u: sampler.Rates(0.0, total_by_domain={0: 0.0, 1: 0.0})
                for u in rates}
        prot.step(hosts.REFERENCE, instances, idle)
        self.assertEqual(float('-inf'), prot.state.domains[0].last_change)
        # The topology arrives: pool 0 now covers both domains, so what
        # it learned and when it last changed start again, as after a
        # restart; nothing throttles during that dwell.
        prot.set_pools({0: 0, 1: 0})
        self.now[0] += prot.period
        with self.assertLogs('rdt_virt.agent.protection', 'INFO') as logs:
            self.assertEqual((), prot.step(hosts.REFERENCE, instances,
                                           rates))
        self.assertIn('pools: 0: domains 0,1', logs.output[0])
        self.assertEqual([0], list(prot.state.domains))
        self.assertEqual(self.now[0], prot.state.domains[0].last_change)

    def test_resume_keeps_what_a_pool_learned_only_for_its_domains(self):
        doc = {'instances': {},
               'host': {'controller': {'domains': {
                   '0': {'learned_bps': 5e9, 'members': [0, 1]}}}}}
        for pool_of, learned in (({0: 0, 1: 0}, 5e9), (None, 0.0)):
            prot, instances, rates = self._pair()
            prot.resume(doc)
            prot.set_pools(pool_of)
            prot.step(hosts.REFERENCE, {}, {})
            self.assertEqual(learned, prot.state.domains[0].learned)

    def test_roles_follow_the_instance_and_the_host(self):
        # Protection keeps each instance's role while its Instance and
        # the host's capabilities are the same objects: any new one
        # counts at once.
        capped = dataclasses.replace(f.inst(uuid=f.U1, bw=f.shared(60)),
                                     priority=ctl.LOW)
        rates = {f.U1: sampler.Rates(1e6, total_by_domain={0: 1e6})}
        steps = [
            (capped, hosts.REFERENCE, {f.U1: 60}),
            (capped, hosts.REFERENCE, {f.U1: 60}),
            # Normal now: no limit to show.
            (dataclasses.replace(capped, priority=ctl.NORMAL),
             hosts.REFERENCE, {}),
            (capped, hosts.REFERENCE, {f.U1: 60}),
            # Its percentage means nothing on an MBps host: not
            # controllable there, so not low to the controller.
            (capped, hosts.MBPS, {}),
            (capped, hosts.REFERENCE, {f.U1: 60}),
            (dataclasses.replace(capped, bandwidth=f.shared(40)),
             hosts.REFERENCE, {f.U1: 40}),
        ]
        for inst, caps, limits in steps:
            self.prot.step(caps, {f.U1: inst}, rates)
            self.assertEqual(limits, self.prot.limits)
            self.now[0] += self.prot.period

    def test_disabled_drops_levels(self):
        self.prot.resume({'instances': {f.U1: {'priority': 'low',
                                               'level': 30}}})
        self.flags(controller_enabled=False, group='rdt_agent')
        self.assertEqual({}, dict(self.prot.levels))
        inst_low = dataclasses.replace(f.inst(uuid=f.U1), priority=ctl.LOW)
        self.prot.step(hosts.REFERENCE, {f.U1: inst_low},
                       {f.U1: sampler.Rates(1e6, total_by_domain={0: 1e6})})
        self.assertEqual({}, self.prot.limits)

    def test_limits_are_the_ceiling_when_not_held(self):
        capped = dataclasses.replace(
            f.inst(uuid=f.U1, bw=f.shared(60)), priority=ctl.LOW)
        free = dataclasses.replace(f.inst(uuid=f.U2), priority=ctl.LOW)
        idle = sampler.Rates(1e6, total_by_domain={0: 1e6})
        self.prot.step(hosts.REFERENCE, {f.U1: capped, f.U2: free},
                       {f.U1: idle, f.U2: idle})
        self.assertEqual({f.U1: 60, f.U2: 100}, self.prot.limits)
