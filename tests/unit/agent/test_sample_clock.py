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

"""The agent's loop samples on a fixed clock, however long its work takes.

admin/protection states the time to protect in sampling intervals. The
loop once scheduled each sample an interval after the last one ended, so
on a loaded host every interval grew by a sample and often a tick (3.3 to
4.3 s instead of 3 in the reference scenario beside host load), and the
bounds with them.
"""

import os
import queue
import threading
from unittest import mock

import fixtures

from rdt_virt.agent import carry
from rdt_virt.agent import service
from tests import base

BOOT = 'a1b2c3'


class FakeClock(object):

    def __init__(self, t=100.0):
        self.t = t

    def __call__(self):
        return self.t


class Events(object):
    """An event queue that stays empty; waiting on it lets time pass."""

    def __init__(self, clock):
        self.clock = clock

    def get(self, timeout=None):
        self.clock.t += timeout
        raise queue.Empty

    def get_nowait(self):
        raise queue.Empty


class TestSampleClock(base.TestCase):

    def setUp(self):
        super().setUp()
        self.flags(sample_interval=3.0, tick_interval=2.0,
                   group='rdt_agent')
        self.state_file = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'state.json')
        self.flags(state_file=self.state_file, group='rdt')

    def run_loop(self, samples, sample_cost, tick_cost, decide=False,
                 carried=None):
        """Run the loop until ``samples`` samples; returns what happened.

        ``[('sample', start, slot) or ('tick', start), ...]``; each sample
        takes ``sample_cost`` seconds, each tick ``tick_cost``. With
        ``decide``, every sample asks for a full tick, as a controller
        decision does. ``carried``: the baselines a stopped agent left
        (:mod:`rdt_virt.agent.carry`), as its document.
        """
        from rdt_virt import conf
        clock = FakeClock()
        stop = threading.Event()
        source = mock.Mock()
        source.events = Events(clock)
        procfs = mock.Mock()
        procfs.boot_id.return_value = BOOT
        if carried is not None:
            carry.save(carry.path_for(self.state_file), carried)
        agent = service.Agent(conf.CONF, mock.MagicMock(), source,
                              procfs, mock.Mock(), clock=clock,
                              wall=clock)
        seen = []

        def sample(slot=None):
            seen.append(('sample', clock.t, slot))
            clock.t += sample_cost
            if decide:
                agent.request_full()
            if sum(1 for s in seen if s[0] == 'sample') >= samples:
                stop.set()

        def tick():
            seen.append(('tick', clock.t))
            agent._full_due = None
            clock.t += tick_cost

        agent.sample = sample
        agent.tick = tick
        agent.run(stop)
        return seen

    def test_next_slot(self):
        self.assertEqual(3.0, service.next_slot(0.0, 3.0, 0.8))
        self.assertEqual(3.0, service.next_slot(0.0, 3.0, 2.99))
        # A sample that overran skips the slots it missed: no burst.
        self.assertEqual(6.0, service.next_slot(0.0, 3.0, 3.0))
        self.assertEqual(9.0, service.next_slot(0.0, 3.0, 7.5))

    def test_busy_samples_and_ticks_do_not_stretch_the_interval(self):
        # 0.8 s a sample and 0.5 s a tick: what a loaded two-CPU host
        # costs. Scheduled from the end of the work, 20 intervals took
        # 76 s; on the fixed clock they take 60 s.
        seen = self.run_loop(21, sample_cost=0.8, tick_cost=0.5)
        starts = [s[1] for s in seen if s[0] == 'sample']
        self.assertAlmostEqual(60.0, starts[-1] - starts[0], places=6)
        for k, start in enumerate(starts):
            # Late by at most a tick that was running when it fell due.
            self.assertGreaterEqual(start - (starts[0] + 3.0 * k), -1e-9)
            self.assertLessEqual(start - (starts[0] + 3.0 * k), 0.5 + 1e-9)
        # Each sample is told the slot it stands for (the controller's
        # clock).
        slots = [s[2] for s in seen if s[0] == 'sample']
        self.assertEqual([round(starts[0] + 3.0 * k, 6) for k in range(21)],
                         [round(s, 6) for s in slots])

    def test_an_overrun_skips_slots(self):
        seen = self.run_loop(4, sample_cost=4.0, tick_cost=0.0)
        starts = [s[1] for s in seen if s[0] == 'sample']
        self.assertEqual([0.0, 6.0, 12.0, 18.0],
                         [round(s - starts[0], 9) for s in starts])

    def test_a_decision_is_put_in_force_in_the_same_turn(self):
        # The sample runs first when both are due, and the tick its
        # decision asked for follows at once, without waiting.
        seen = self.run_loop(5, sample_cost=0.3, tick_cost=0.2,
                             decide=True)
        for i, entry in enumerate(seen[:-1]):
            if entry[0] == 'sample':
                self.assertEqual('tick', seen[i + 1][0])
                self.assertAlmostEqual(entry[1] + 0.3, seen[i + 1][1])

    def test_the_first_sample_a_period_after_the_first_tick(self):
        seen = self.run_loop(2, sample_cost=0.1, tick_cost=0.2)
        self.assertEqual(('tick', 100.0), seen[0])
        self.assertEqual([103.0, 106.0],
                         [s[1] for s in seen if s[0] == 'sample'])

    def test_with_carried_baselines_right_after_the_first_tick(self):
        # The last agent's baselines give the first sample its rates: it
        # is taken as soon as the tick has found the groups.
        doc = carry.document({'u': {'source': ['g', 'g', 0],
                                    'counters': [[0, 'mbm_total_bytes', 5,
                                                  90.0]]}}, BOOT, 95.0)
        seen = self.run_loop(3, sample_cost=0.1, tick_cost=0.2,
                             carried=doc)
        self.assertEqual(('tick', 100.0), seen[0])
        starts = [s[1] for s in seen if s[0] == 'sample']
        self.assertAlmostEqual(100.2, starts[0])
        self.assertAlmostEqual(3.0, starts[1] - starts[0])
        # Taken once: the file is gone.
        self.assertFalse(os.path.exists(carry.path_for(self.state_file)))

    def test_baselines_of_another_boot_change_nothing(self):
        doc = carry.document({'u': {'source': ['g', 'g', 0],
                                    'counters': []}}, 'other', 95.0)
        seen = self.run_loop(1, sample_cost=0.1, tick_cost=0.2,
                             carried=doc)
        self.assertEqual([103.0], [s[1] for s in seen if s[0] == 'sample'])
