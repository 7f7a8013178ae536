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

"""Rates from cumulative counters: resets, sentinels, re-creation."""

from rdt_virt.agent import sampler
from rdt_virt.resctrl import fs
from tests import base

V = fs.MonValue
TOTAL = 'mbm_total_bytes'
LOCAL = 'mbm_local_bytes'
OCC = 'llc_occupancy'


def reading(t, total, local=None, occ=0, source='g', doms=(0, 1)):
    """Counters at time ``t``; values per domain (int, or a sentinel)."""
    def value(v):
        return V(None, v) if isinstance(v, str) else V(v, None)

    local = total if local is None else local
    values = {}
    for i, dom in enumerate(doms):
        pick = (lambda x: x[i] if isinstance(x, (list, tuple)) else x)
        values[dom] = {TOTAL: value(pick(total)), LOCAL: value(pick(local)),
                       OCC: value(pick(occ))}
    return sampler.Reading(source, t, values)


class TestRateTracker(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tracker = sampler.RateTracker()

    def feed(self, *readings, key='i1'):
        return [self.tracker.update(key, r) for r in readings]

    def test_first_sample_has_no_rate(self):
        rates, = self.feed(reading(0, 1000, occ=4096))
        self.assertIsNone(rates.mbm_total_bps)
        self.assertEqual(sampler.R_FIRST, rates.reason)
        # Occupancy is a gauge: it has a value at once.
        self.assertEqual(8192, rates.llc_occupancy_bytes)

    def test_rate_sums_domains(self):
        _first, rates = self.feed(reading(10, [0, 100]),
                                  reading(12, [2000, 4100], [1000, 100]))
        self.assertEqual((2000 + 4000) / 2.0, rates.mbm_total_bps)
        self.assertEqual(1000 / 2.0, rates.mbm_local_bps)
        self.assertIsNone(rates.reason)

    def test_counter_reset_restarts_the_baseline(self):
        out = self.feed(reading(0, 10000), reading(1, 20000),
                        reading(2, 500), reading(3, 10500))
        self.assertEqual(20000.0, out[1].mbm_total_bps)
        # The decrease gives no rate, never a negative or a huge one.
        self.assertIsNone(out[2].mbm_total_bps)
        self.assertEqual(sampler.R_RESET, out[2].reason)
        self.assertEqual(20000.0, out[3].mbm_total_bps)

    def test_reset_on_one_domain_only(self):
        out = self.feed(reading(0, [100, 100]), reading(1, [200, 50]),
                        reading(2, [300, 150]))
        self.assertIsNone(out[1].mbm_total_bps)
        self.assertEqual(200.0, out[2].mbm_total_bps)

    def test_sentinel_gives_no_value_and_the_reason(self):
        out = self.feed(reading(0, 0), reading(1, ['Unavailable', 100]),
                        reading(2, 400))
        self.assertIsNone(out[1].mbm_total_bps)
        self.assertEqual('Unavailable', out[1].reason)
        # The baseline survived the gap: the average over two seconds
        # on domain 0 plus one second on domain 1.
        self.assertEqual(400 / 2.0 + 300 / 1.0, out[2].mbm_total_bps)

    def test_idle_new_group_has_no_traffic_yet(self):
        # A new group whose threads have not run reads Unavailable in
        # every file: no rate, no error, and no kernel word either.
        idle = reading(0, 'Unavailable', occ='Unavailable')
        out = self.feed(idle, reading(1, 'Unavailable', occ='Unavailable'))
        for rates in out:
            self.assertFalse(rates.has_values)
            self.assertEqual(sampler.R_NO_TRAFFIC, rates.reason)
        # Then it runs: a first sample, then rates.
        out = self.feed(reading(2, 100, occ=64), reading(3, 300, occ=64))
        self.assertEqual(sampler.R_FIRST, out[0].reason)
        self.assertEqual(400.0, out[1].mbm_total_bps)
        # Unavailable after a value is the kernel's error again.
        rates, = self.feed(reading(4, 'Unavailable', occ=64))
        self.assertEqual('Unavailable', rates.reason)

    def test_domain_never_run_on_adds_nothing(self):
        # The instance runs on domain 1 only; domain 0 stays Unavailable.
        out = self.feed(reading(0, ['Unavailable', 100],
                                occ=['Unavailable', 4096]),
                        reading(2, ['Unavailable', 500],
                                occ=['Unavailable', 4096]))
        self.assertEqual(4096, out[0].llc_occupancy_bytes)
        self.assertEqual(200.0, out[1].mbm_total_bps)
        self.assertIsNone(out[1].reason)

    def test_sentinel_on_occupancy(self):
        rates, = self.feed(reading(0, 0, occ=['Error', 5]))
        self.assertIsNone(rates.llc_occupancy_bytes)
        self.assertEqual('Error', rates.reason)

    def test_sentinel_at_first_reading(self):
        out = self.feed(reading(0, 'Unassigned'), reading(1, 100),
                        reading(2, 300))
        self.assertEqual('Unassigned', out[0].reason)
        self.assertIsNone(out[1].mbm_total_bps)
        self.assertEqual(400.0, out[2].mbm_total_bps)

    def test_new_source_restarts(self):
        # The group was re-created (or a new monitoring group): counters
        # start again, possibly already above the old value.
        out = self.feed(reading(0, 1000, source=('mon', 'm', 1)),
                        reading(1, 2000, source=('mon', 'm', 1)),
                        reading(2, 5000, source=('mon', 'm', 2)),
                        reading(3, 6000, source=('mon', 'm', 2)))
        self.assertEqual(2000.0, out[1].mbm_total_bps)
        self.assertIsNone(out[2].mbm_total_bps)
        self.assertEqual(sampler.R_FIRST, out[2].reason)
        self.assertEqual(2000.0, out[3].mbm_total_bps)

    def test_same_time_gives_no_rate(self):
        out = self.feed(reading(5, 0), reading(5, 100))
        self.assertIsNone(out[1].mbm_total_bps)

    def test_missing_event_is_not_an_error(self):
        # An AMD or CMT-only host has no mbm_local_bytes.
        values = {0: {TOTAL: V(0, None)}}
        self.tracker.update('i', sampler.Reading('g', 0, values))
        values = {0: {TOTAL: V(50, None)}}
        rates = self.tracker.update('i', sampler.Reading('g', 1, values))
        self.assertEqual(50.0, rates.mbm_total_bps)
        self.assertIsNone(rates.mbm_local_bps)
        self.assertIsNone(rates.llc_occupancy_bytes)
        self.assertIsNone(rates.reason)

    def test_forget(self):
        self.feed(reading(0, 0))
        self.tracker.forget(set())
        rates, = self.feed(reading(1, 100))
        self.assertEqual(sampler.R_FIRST, rates.reason)

    def test_amd_reset_jump_is_a_reset_not_a_rate(self):
        # AMD without counter assignment: the hardware resets the counter,
        # reads say Unavailable, then the kernel adds a 44-bit wrap.
        tracker = sampler.RateTracker(ceiling=400e9)
        jump = 2 ** 44 * 64
        out = [tracker.update('i', r) for r in (
            reading(0, 1000), reading(10, 'Unavailable'),
            reading(20, 1000 + jump + 50000),
            reading(30, 1000 + jump + 150000))]
        self.assertEqual('Unavailable', out[1].reason)
        self.assertIsNone(out[2].mbm_total_bps)
        self.assertEqual(sampler.R_JUMP, out[2].reason)
        # Resynchronised: the next interval is a normal rate again.
        self.assertEqual(2 * 100000 / 10.0, out[3].mbm_total_bps)
        self.assertEqual(4, tracker.jumps)       # two events, two domains

    def test_no_rate_above_the_ceiling(self):
        tracker = sampler.RateTracker(ceiling=1000.0)
        out = [tracker.update('i', r) for r in (
            reading(0, 0), reading(1, [400, 400]), reading(2, [1000, 1000]),
            reading(3, [3000, 1100]))]
        self.assertEqual(800.0, out[1].mbm_total_bps)
        # 600 + 600 per domain is plausible, their sum is not.
        self.assertIsNone(out[2].mbm_total_bps)
        self.assertIsNone(out[3].mbm_total_bps)
        for rates in out:
            for value in (rates.mbm_total_bps, rates.mbm_local_bps):
                self.assertTrue(value is None or value <= 1000.0)

    def test_host_totals(self):
        totals = sampler.host_totals([
            sampler.Rates(10.0, 5.0, 100),
            sampler.Rates(None, None, None, 'first sample'),
            sampler.Rates(30.0, 1.0, None)])
        self.assertEqual({'mbm_total_bps': 40.0, 'mbm_local_bps': 6.0,
                          'llc_occupancy_bytes': 100.0}, totals)
