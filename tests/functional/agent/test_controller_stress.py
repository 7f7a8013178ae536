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

"""The bandwidth controller under stress, on the emulated host.

Host load that no instance owns, a protected guest judged by its demand,
and a host whose CLOSIDs other instances' own groups have taken.
"""

import errno
import os

import fixtures

from rdt_virt.sandbox import hostload
from tests.functional.agent import base
from tests.functional.agent import test_controller

P = base.PREFIX


class TestUnderHostLoad(test_controller.ControllerCase):

    def bandwidth(self, doc, uuid):
        return doc['instances'][uuid].get('mbm_total_bps') or 0.0

    def test_every_effect_in_its_direction(self):
        # A process spinning on a CPU outside any guest for the whole
        # test: the agent neither measures nor moves it.
        load = self.useFixture(_Load())
        hog = load.procs[0].pid
        # The protected guest is booted idle: its vCPU never wants a CPU,
        # it moves nothing, and is not active. The pool is saturated by
        # the low ones, yet nobody is throttled.
        idle = self.boot_classed('high', burn=False)
        lows = [self.boot_classed('low'), self.boot_classed('low')]
        self.agent.tick()
        self.until(lambda d: all(self.bandwidth(d, u) for u in lows),
                   'rates of the low guests')
        # The baseline: a later period in which both have a rate (a tick
        # that re-reads the host may leave a group without one for a
        # period, which is no bandwidth to compare with).
        doc = self.until(lambda d: all(self.bandwidth(d, u) for u in lows),
                         'a period with the rates of both low guests')
        self.assertEqual([None, None], [self.level(doc, u) for u in lows])
        self.assertEqual(0, sum(d['active_high'] for d in doc['host'][
            'controller']['domains'].values()))
        before = {u: self.bandwidth(doc, u) for u in lows}
        # A working protected guest: its demand makes it active, and the
        # low ones go down to the floor.
        high = self.boot_classed('high')
        self.agent.tick()
        doc = self.until(lambda d: all(self.level(d, u) == 10
                                       for u in lows), 'floor')
        for uuid in lows:
            self.assertPlaced(uuid, P + 'mb10')
        self.assertPlaced(high, None)
        self.assertPlaced(idle, None)
        # Demand from the vCPU threads' run and wait times: the working
        # guest wants a CPU, the idle one none, whatever the hog takes.
        demand = doc['host']['controller']['demand']
        self.assertGreater(demand[high], 0.3)
        self.assertLess(demand[idle], 0.05)
        # The throttle lowers what the low guests move, beside the load.
        for _ in range(3):
            doc = self.period()
        for uuid in lows:
            self.assertLess(self.bandwidth(doc, uuid), 0.7 * before[uuid],
                            uuid)
        # Nothing of the host's load is in a group of the agent's.
        self.assertEqual((None, None), self.location(hog))
        self.assertTrue(os.path.exists('/proc/%d' % hog))
        # The working guest stops: the lows are let go, upwards only.
        self.destroy(high)
        self.agent.tick()
        seen = []

        def released(doc):
            seen.append([self.level(doc, u) for u in lows])
            return all(self.level(doc, u) is None for u in lows)
        self.until(released, 'release')
        steps = [max(v or 100 for v in levels) for levels in seen]
        self.assertEqual(sorted(steps), steps)
        self.assertIn('no active high-priority instance', self.logger.output)


class _Load(fixtures.Fixture):
    """One CPU hog (:class:`hostload.HostLoad`) as a fixture."""

    def _setUp(self):
        load = hostload.HostLoad(1).__enter__()
        self.procs = list(load.procs)
        self.addCleanup(load.__exit__, None, None, None)


class TestWithoutAFreeClosid(test_controller.ControllerCase):

    def test_a_level_goes_down_in_place(self):
        # First the floor is 20%: the saturated pool sends the low guests
        # there, into one shared group.
        self.flags(controller_floor=20.0, group='rdt_agent')
        self.agent = self.new_agent()
        guests = [self.boot_classed('high')]
        lows = [self.boot_classed('low') for _ in range(3)]
        # All on one CPU, so in one pool: a low guest measured only where
        # the high one is not would be released there, and its level
        # could not go down in place for the others.
        for uuid in guests + lows:
            for tid in self.host.tids(uuid):
                os.sched_setaffinity(tid, {0})
        self.agent.tick()
        self.until(lambda d: all(self.level(d, u) == 20 for u in lows),
                   'level 20')
        # Other instances take every CLOSID left with groups of their own.
        total = self.agent.sample()['host']['closids_total']
        for _ in range(total - 1 - len(self.groups())):
            self.boot(bw=base.own(50, unit='percent'), vcpus=1, others=0)
        self.agent.tick()
        with self.assertRaises(OSError) as ctx:
            os.mkdir(self.path(P + 'probe'))
        self.assertEqual(errno.ENOSPC, ctx.exception.errno)
        # A restarted agent with the 10% floor: no CLOSID for a new
        # level, so level 20's group takes 10% in place.
        self.flags(controller_floor=10.0, group='rdt_agent')
        self.agent = self.new_agent()
        self.agent.tick()
        doc = self.until(lambda d: all(self.level(d, u) == 10
                                       for u in lows), 'floor')
        self.agent.tick()
        self.assertEqual({0: 10, 1: 10}, self.schemata(P + 'mb20')['MB'])
        for uuid in lows:
            self.assertPlaced(uuid, P + 'mb20')
            self.assertEqual(10, doc['instances'][uuid]['mb_limit'])
        self.assertNotIn(P + 'mb10', self.groups())
        self.assertIn('level 20 changed in place', self.logger.output)
